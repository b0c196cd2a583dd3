"""`dice-lsp serve status` against a real Ray Serve deployment of the team service (CPU, the embedded model):
ready while it runs, one line and a non-zero exit once Serve or Ray is gone; Ray's token found where Ray
writes it (Ray 2.59 and later require it on every local cluster)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from dice_lsp.errors import DiceError
from dice_lsp.remote import ray_status

from .cli_runs import finished
from .remote_server import free_port

DRIVER = Path(__file__).resolve().parent / "ray_serve_driver.py"
STARTUP_TIMEOUT_S = 180


def status(address: str, *more: str, home: Path, token: str | None = None) -> subprocess.Popen[str]:
    """`dice-lsp serve status --address ADDRESS MORE` started with HOME=home (where it looks for
    ~/.ray/auth_token) and RAY_AUTH_TOKEN=token where given."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RAY_AUTH_", "RAY_DASHBOARD_"))}
    env.update({"HOME": str(home), **({"RAY_AUTH_TOKEN": token} if token else {})})
    return subprocess.Popen([sys.executable, "-m", "dice_lsp.cli", "serve", "status", "--address", address, *more],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


def results(*runs: subprocess.Popen[str]) -> list[subprocess.CompletedProcess[str]]:
    return [finished(run, 60) for run in runs]


class Driver:
    """The Ray driver process of tests/ray_serve_driver.py: a local cluster serving the `dice` application."""

    def __init__(self, home: Path, log: Path) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
        env.update({"HOME": str(home), "HF_HUB_OFFLINE": "1"})  # Ray writes its token to HOME/.ray/auth_token
        self.log = log  # Ray's own output (a pipe nobody reads could fill up and stop the driver)
        with log.open("w") as sink:
            self.process = subprocess.Popen([sys.executable, str(DRIVER), str(free_port())], stdin=subprocess.PIPE,
                                            stdout=subprocess.PIPE, stderr=sink, text=True, env=env)

    def said(self) -> str:
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        if not line:
            self.process.wait(timeout=60)
            raise AssertionError(f"the Ray driver stopped: {self.log.read_text()[-3000:]}")
        return line.strip()

    def tell(self, line: str) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(line + "\n")
        self.process.stdin.flush()

    def stop(self) -> None:
        """End of input: the driver shuts Ray down and exits."""
        if self.process.poll() is None:
            assert self.process.stdin is not None
            self.process.stdin.close()
            try:
                self.process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


@pytest.fixture
def driver(tmp_path: Path) -> Iterator[tuple[Driver, Path]]:
    pytest.importorskip("ray.serve", reason="Ray Serve is not installed (pip install 'dice-lsp[serve]')")
    home = tmp_path / "home"
    home.mkdir()
    started = Driver(home, tmp_path / "ray.log")
    try:
        yield started, home
    finally:
        started.stop()


@pytest.mark.slow
def test_serve_status_follows_the_deployment_from_ready_to_gone(driver: tuple[Driver, Path], tmp_path: Path) -> None:
    ray, home = driver
    word, url = ray.said().split()
    assert word == "ready"
    nobody = tmp_path / "nobody"  # a user without Ray's token
    nobody.mkdir()
    token_file = home / ".ray" / "auth_token"  # where Ray 2.59+ writes the token of a cluster it starts
    ready, as_json, elsewhere = results(status(url, home=home), status(url, "--json", home=home),
                                        status(url, "--app", "elsewhere", home=home))
    assert (ready.returncode, ready.stderr) == (0, "")
    assert ready.stdout == (f"dice at {url}: RUNNING; DiceReplica HEALTHY (1 of 1 replicas running), "
                            "Gateway HEALTHY (1 of 1 replicas running)\n")
    health = json.loads(as_json.stdout)
    assert as_json.returncode == 0 and health["healthy"] is True and health["status"] == "RUNNING"
    assert {name: d["status"] for name, d in health["deployments"].items()} == {"DiceReplica": "HEALTHY",
                                                                                 "Gateway": "HEALTHY"}
    assert elsewhere.returncode == 2 and elsewhere.stdout == ""
    assert elsewhere.stderr == f"dice-lsp: error: Ray Serve at {url} has no application named elsewhere " \
                               "(applications: dice)\n"

    from importlib.metadata import version

    from packaging.version import Version

    if Version(version("ray")) >= Version("2.59"):
        assert token_file.exists(), "Ray 2.59+ starts a local cluster with token authentication"
    if token_file.exists():  # a cluster with token authentication: Ray's own `serve status` fails here
        token = token_file.read_text().strip()
        missing, wrong, by_env = results(status(url, home=nobody), status(url, home=nobody, token="not-the-token"),
                                         status(url, home=nobody, token=token))
        assert missing.returncode == 2 and missing.stderr.count("\n") == 1
        assert f"the Ray dashboard at {url} requires Ray's token and none was found" in missing.stderr
        assert wrong.returncode == 2 and wrong.stderr == (f"dice-lsp: error: the Ray dashboard at {url} refused the "
                                                          "token from RAY_AUTH_TOKEN: it is not this cluster's token\n")
        assert by_env.returncode == 0 and by_env.stdout == ready.stdout

    ray.tell("serve down")
    assert ray.said() == "serve down"
    [serve_gone] = results(status(url, home=home))
    assert serve_gone.returncode == 2 and serve_gone.stdout == ""
    assert serve_gone.stderr == (f"dice-lsp: error: Ray Serve is not running on the Ray cluster at {url} "
                                 "(`serve run` or `serve deploy` starts it)\n")

    ray.stop()
    [ray_gone] = results(status(url, "--json", home=home))
    assert ray_gone.returncode == 2 and ray_gone.stdout == ""
    assert ray_gone.stderr == (f"dice-lsp: error: no Ray dashboard answers at {url} (Connection refused): is the "
                               "Ray cluster up? (--address or RAY_DASHBOARD_ADDRESS names another)\n")


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
