"""How `dice-lsp serve status` finds Ray's token and dashboard and reads an application's health. Its run against a
real Ray Serve deployment (ready while it runs, one line and a non-zero exit once Serve or Ray is gone) is in
tests/test_ray_serve.py, on that module's cluster."""

from __future__ import annotations

from pathlib import Path

import pytest

from dice_lsp.errors import DiceError
from dice_lsp.remote import ray_status


def test_rays_token_is_looked_up_in_rays_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    assert ray_status.ray_token() is None
    default = tmp_path / ".ray" / "auth_token"
    default.parent.mkdir()
    default.write_text("from-home\n")
    assert ray_status.ray_token() == ("from-home", str(default))
    named = tmp_path / "token"
    named.write_text("from-path")
    monkeypatch.setenv("RAY_AUTH_TOKEN_PATH", str(named))
    assert ray_status.ray_token() == ("from-path", str(named))
    monkeypatch.setenv("RAY_AUTH_TOKEN", "from-env")
    assert ray_status.ray_token() == ("from-env", "RAY_AUTH_TOKEN")
    monkeypatch.delenv("RAY_AUTH_TOKEN")
    named.write_text("")
    with pytest.raises(DiceError, match=f"^RAY_AUTH_TOKEN_PATH names {named}, which holds no token$"):
        ray_status.ray_token()


@pytest.mark.parametrize(("address", "url"), [(None, "http://127.0.0.1:8265"), ("10.0.0.5:8265", "http://10.0.0.5:8265"),
                                              ("https://ray.example:443/", "https://ray.example:443")])
def test_the_dashboards_address(address: str | None, url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RAY_DASHBOARD_ADDRESS", raising=False)
    assert ray_status.dashboard_url(address) == url
    monkeypatch.setenv("RAY_DASHBOARD_ADDRESS", "http://head:8265")
    assert ray_status.dashboard_url(address) == (url if address else "http://head:8265")


def test_a_deploying_or_failed_application_is_not_healthy() -> None:
    replica = ray_status.DeploymentHealth("DiceReplica", "UNHEALTHY", "Traceback ...\nDiceError: model not ready\n",
                                          0, 1)
    gateway = ray_status.DeploymentHealth("Gateway", "HEALTHY", "", 1, 1)
    failed = ray_status.ServeHealth("http://h:8265", "dice", "DEPLOY_FAILED", "", (replica, gateway))
    assert not failed.healthy
    assert failed.line() == ("dice at http://h:8265: DEPLOY_FAILED; DiceReplica UNHEALTHY (0 of 1 replicas running): "
                             "DiceError: model not ready, Gateway HEALTHY (1 of 1 replicas running)")
    assert ray_status.ServeHealth("u", "dice", "RUNNING", "", (gateway,)).healthy
    assert not ray_status.ServeHealth("u", "dice", "DEPLOYING", "", (gateway,)).healthy
