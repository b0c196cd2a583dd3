"""The Ray Serve application started locally on CPU: a replica with the embedded model behind the gateway,
answering an editor's completion over the same protocol as `dice-lsp serve`."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from dice_lsp.complete import complete_at
from dice_lsp.engine import load_model
from dice_lsp.remote.protocol import RemoteError
from dice_lsp.settings import Settings
from dice_lsp.textdoc import Position

from .lsp_client import LOOP_HEADER
from .remote_server import ask as ask_once
from .remote_server import token_file

serve = pytest.importorskip("ray.serve", reason="Ray Serve is not installed (pip install 'dice-lsp[serve]')")
SOURCE = (Path(__file__).resolve().parents[1] / "examples" / "vector_add.cu").read_text()
TOKEN = "ray-secret"


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    import ray

    from dice_lsp.remote.ray_serve import build_app

    tokens = token_file(tmp_path_factory.mktemp("ray"), TOKEN)
    ray.init(num_cpus=4, include_dashboard=False, log_to_driver=False,
             runtime_env={"env_vars": {"HF_HUB_OFFLINE": "1"}})
    try:
        serve.start(proxy_location="Disabled")
        # port 0: the OS picks a free one when the gateway binds (a port probed free beforehand can be taken by
        # another test's server before the gateway starts)
        handle = serve.run(build_app({"port": 0, "token_file": str(tokens), "device": "cpu"}), name="dice",
                           route_prefix=None)
        yield handle.address.remote().result()
    finally:
        serve.shutdown()
        ray.shutdown()


async def ask(url: str, method: str, params: dict[str, Any], token: str | None = TOKEN) -> Any:
    return await ask_once(url, method, params, token)


@pytest.mark.slow
def test_a_replica_answers_a_completion_through_the_gateway(gateway: str) -> None:
    settings = Settings(max_canvas=24, steps=4, min_confidence=0.0)  # dice-tiny's checked fill, whatever its P
    answer = asyncio.run(ask(gateway, "complete", {"text": LOOP_HEADER, "line": 1, "character": 63,
                                                    "settings": settings.per_request()}))
    local = complete_at(load_model(None, device="cpu"), LOOP_HEADER, Position(1, 63), settings)
    assert [item["text"] for item in answer["items"]] == local.texts and local.texts
    assert answer["model"] == "dice-tiny"


def test_the_gateway_keeps_the_token_and_the_replicas_errors(gateway: str) -> None:
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
