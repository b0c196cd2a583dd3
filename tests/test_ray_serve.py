"""The Ray Serve application started locally on CPU, one cluster for the module (a Ray driver process deploying
`server/configs/cpu-local.yaml` with a token file, tests/ray_serve_driver.py): a replica with the embedded model
behind the gateway, answering an editor's completion over the same protocol as `dice-lsp serve`; then
`dice-lsp serve status` against it, ready while it runs, one line and a non-zero exit once Serve or Ray is gone,
Ray's token found where Ray writes it (Ray 2.59 and later require it on every local cluster). That last test
takes the cluster down, so it comes last."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from dice_lsp.complete import complete_at
from dice_lsp.engine import load_model
from dice_lsp.remote.protocol import RemoteError
from dice_lsp.settings import Settings
from dice_lsp.textdoc import Position

from .cli_runs import finished
from .lsp_client import LOOP_HEADER
from .remote_server import ask as ask_once
from .remote_server import free_port, token_file

pytest.importorskip("ray.serve", reason="Ray Serve is not installed (pip install 'dice-lsp[serve]')")
SOURCE = (Path(__file__).resolve().parents[1] / "examples" / "vector_add.cu").read_text()
TOKEN = "ray-secret"
DRIVER = Path(__file__).resolve().parent / "ray_serve_driver.py"


class Driver:
    """The Ray driver process of tests/ray_serve_driver.py: a local cluster serving the `dice` application."""

    def __init__(self, home: Path, log: Path, tokens: Path) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
        env.update({"HOME": str(home), "HF_HUB_OFFLINE": "1"})  # Ray writes its token to HOME/.ray/auth_token
        self.log = log  # Ray's own output (a pipe nobody reads could fill up and stop the driver)
        with log.open("w") as sink:
            self.process = subprocess.Popen([sys.executable, str(DRIVER), str(free_port()), str(tokens)],
                                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=sink, text=True,
                                            env=env)

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


@dataclass
class Cluster:
    driver: Driver
    home: Path  # the driver's HOME, where Ray writes its token
    dashboard: str  # the Ray dashboard's URL
    gateway: str  # the gateway's address (dice-lsp serve's protocol)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    folder = tmp_path_factory.mktemp("ray")
    home = folder / "home"
    home.mkdir()
    started = Driver(home, folder / "ray.log", token_file(folder, TOKEN))
    try:
        word, dashboard, gateway = started.said().split()
        assert word == "ready"
        yield Cluster(started, home, dashboard, gateway)
    finally:
        started.stop()


async def ask(url: str, method: str, params: dict[str, Any], token: str | None = TOKEN) -> Any:
    return await ask_once(url, method, params, token)


@pytest.mark.slow
def test_a_replica_answers_a_completion_through_the_gateway(cluster: Cluster) -> None:
    gateway = cluster.gateway
    settings = Settings(max_canvas=24, steps=4, min_confidence=0.0)  # dice-tiny's checked fill, whatever its P
    answer = asyncio.run(ask(gateway, "complete", {"text": LOOP_HEADER, "line": 2, "character": 29,
                                                    "settings": settings.per_request()}))
    local = complete_at(load_model(None, device="cpu"), LOOP_HEADER, Position(2, 29), settings)
    assert [item["text"] for item in answer["items"]] == local.texts and local.texts
    assert answer["model"] == "dice-tiny"


def test_the_gateway_keeps_the_token_and_the_replicas_errors(cluster: Cluster) -> None:
    gateway = cluster.gateway
    with pytest.raises(RemoteError) as refused:
        asyncio.run(ask(gateway, "status", {}, token="wrong"))
    assert refused.value.code == "unauthorized"
    with pytest.raises(RemoteError, match="chosen by the server") as bad:
        asyncio.run(ask(gateway, "check", {"text": "x", "settings": {"model": "/elsewhere"}}))
    assert bad.value.code == "bad_params"
    status = asyncio.run(ask(gateway, "status", {}))
    assert status["state"] == "ready" and status["sandbox"] == "bubblewrap", "replicas compile in the sandbox"


@pytest.mark.parametrize("config", sorted((Path(__file__).resolve().parents[1] / "server" / "configs").glob("*.yaml")),
                         ids=lambda path: path.name)
def test_each_example_config_is_a_valid_serve_config_of_this_app(config: Path) -> None:
    import yaml  # type: ignore[import-untyped]
    from ray.serve.config import AutoscalingConfig
    from ray.serve.schema import ServeDeploySchema

    from dice_lsp.remote import ray_serve

    schema = ServeDeploySchema.model_validate(yaml.safe_load(config.read_text()))
    [app] = schema.applications
    module, builder = app.import_path.split(":")
    assert module == ray_serve.__name__ and callable(getattr(ray_serve, builder))
    assert {d.name for d in app.deployments} <= {"DiceReplica", "Gateway"}
    for deployment in app.deployments:
        scaling = deployment.autoscaling_config if isinstance(deployment.autoscaling_config, dict) else {}
        assert set(scaling) <= set(AutoscalingConfig.model_fields), f"unknown autoscaling keys in {config.name}"
        AutoscalingConfig(**scaling)
    assert set(app.args) <= {"model", "device", "dtype", "max_batch_rows", "host", "port", "token_file"}
    if app.args.get("host", "127.0.0.1") not in ("127.0.0.1", "localhost"):
        assert app.args.get("token_file"), "beyond loopback a token is required"


def status(address: str, *more: str, home: Path, token: str | None = None) -> subprocess.Popen[str]:
    """`dice-lsp serve status --address ADDRESS MORE` started with HOME=home (where it looks for
    ~/.ray/auth_token) and RAY_AUTH_TOKEN=token where given."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RAY_AUTH_", "RAY_DASHBOARD_"))}
    env.update({"HOME": str(home), **({"RAY_AUTH_TOKEN": token} if token else {})})
    return subprocess.Popen([sys.executable, "-m", "dice_lsp.cli", "serve", "status", "--address", address, *more],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


def results(*runs: subprocess.Popen[str]) -> list[subprocess.CompletedProcess[str]]:
    return [finished(run, 60) for run in runs]


@pytest.mark.slow
def test_serve_status_follows_the_deployment_from_ready_to_gone(cluster: Cluster, tmp_path: Path) -> None:
    """Last in the module: it takes Serve, then Ray, down."""
    ray, home, url = cluster.driver, cluster.home, cluster.dashboard
    nobody = tmp_path / "nobody"  # a user without Ray's token
    nobody.mkdir()
    ray_token = home / ".ray" / "auth_token"  # where Ray 2.59+ writes the token of a cluster it starts
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
        assert ray_token.exists(), "Ray 2.59+ starts a local cluster with token authentication"
    if ray_token.exists():  # a cluster with token authentication: Ray's own `serve status` fails here
        token = ray_token.read_text().strip()
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
