"""The team service on Ray Serve: model replicas on one or many GPU hosts behind one msgpack/TCP gateway.

`DiceReplica` holds a whole `Service` (model, nvcc, harness) per replica; Ray Serve routes each request
to the replica with the shortest queue and adds or removes replicas as the load asks. `Gateway` speaks the
same protocol as `dice-lsp serve` (editors and the CLI cannot tell them apart) and forwards every request
to the replicas as a stream: progress first, then the result. The two ends of that hop live in
`remote.relay` (tested without Ray): the replica answers through `Service.call`, as `dice-lsp serve` does,
and the gateway's `RelayBackend` is the `Backend` its listener serves. Concurrent completions that reach the
same replica share its denoising batches, as on a single server.

Deployed with `serve run server/configs/<config>.yaml` (docs in server/README.md). The app's args take the
limits of `dice-lsp serve` by the same names: `RequestLimits` fields (`max_candidates`, `max_tokens`, ...)
go to every replica, which checks each request; `ConnectionLimits` fields (`handshake_timeout`,
`max_connections_per_peer`, ...) go to the gateway, which admits the connections.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, cast

from ray import serve
from ray.serve.handle import DeploymentHandle

from dice_lsp import sandbox
from dice_lsp.address import Address
from dice_lsp.errors import DiceError
from dice_lsp.remote.relay import Event, EventStream, GatewayArgs, RelayBackend, ReplicaArgs, answer, app_args
from dice_lsp.remote.server import TokenFile, check_bind, confine, listen
from dice_lsp.remote.service import Service, ServiceConfig


@serve.deployment(max_ongoing_requests=64, ray_actor_options={"num_cpus": 1})
class DiceReplica:
    """One copy of the service; the model loads on construction (Ray waits for it before routing here)."""

    def __init__(self, args: ReplicaArgs) -> None:
        confine(args.unsafe_no_sandbox, args.settings.nvcc, None)  # each compile and run of user code, as `serve`
        sandbox.announce()
        self.service = Service(ServiceConfig(args.settings, max_batch_rows=args.max_batch_rows, limits=args.limits))
        self.service.start()
        if self.service.host.status.state != "ready":
            raise DiceError(f"the model did not load: {self.service.host.status.message}")

    async def call(self, method: str, params: dict[str, Any]) -> AsyncIterator[Event]:
        """Progress events, then one `Answered` or `Failed` (`relay.answer` over the service)."""
        async with contextlib.aclosing(answer(self.service, method, params)) as events:
            async for event in events:
                yield event

    def check_health(self) -> None:
        """Ray Serve restarts a replica whose model thread is gone."""
        if self.service.host.status.state != "ready":
            raise DiceError(f"model not ready: {self.service.host.status.to_json()}")


@serve.deployment(num_replicas=1, ray_actor_options={"num_cpus": 0.5})
class Gateway:
    """Listens for editors on `host:port` (a thread with its own event loop) and forwards to the replicas."""

    def __init__(self, replicas: DeploymentHandle[Any], args: GatewayArgs) -> None:
        address, tokens = Address(args.host, args.port), TokenFile(Path(args.token_file) if args.token_file else None)
        check_bind(address, tokens)
        streams = replicas.options(stream=True)
        backend = RelayBackend(lambda method, params: cast(EventStream, streams.call.remote(method, params)))
        ready, failed = threading.Event(), []
        self.where = str(address)

        async def run() -> None:
            try:
                server, self.where = await listen(backend, address, tokens, args.limits)
            except DiceError as exc:
                failed.append(exc)
                return
            finally:
                ready.set()
            async with server:
                await server.serve_forever()

        self.thread = threading.Thread(target=asyncio.run, args=(run(),), name="dice-gateway", daemon=True)
        self.thread.start()
        ready.wait()
        if failed:
            raise failed[0]

    def address(self) -> str:
        """Where editors reach the gateway (`tcp://host:port`, with the port the OS chose for a config's port 0)."""
        return self.where

    def check_health(self) -> None:
        if not self.thread.is_alive():
            raise DiceError(f"the gateway on {self.where} stopped")


def build_app(args: dict[str, Any]) -> serve.Application:
    """The application `serve run` builds from a config's `args` (see server/configs/; `relay.app_args`)."""
    replica_args, gateway_args = app_args(args)
    replicas = DiceReplica.bind(replica_args)  # type: ignore[attr-defined]
    app: serve.Application = Gateway.bind(replicas, gateway_args)  # type: ignore[attr-defined]
    return app
