"""The team service on Ray Serve: model replicas on one or many GPU hosts behind one msgpack/TCP gateway.

`DiceReplica` holds a whole `Service` (model, nvcc, harness) per replica; Ray Serve routes each request
to the replica with the shortest queue and adds or removes replicas as the load asks. `Gateway` speaks the
same protocol as `dice-lsp serve` (editors and the CLI cannot tell them apart) and forwards every request
to the replicas as a stream: progress first, then the result. Concurrent completions that reach the same
replica share its denoising batches, as on a single server.

Deployed with `serve run server/configs/<config>.yaml` (docs in server/README.md). The app's args take the
limits of `dice-lsp serve` by the same names: `RequestLimits` fields (`max_candidates`, `max_tokens`, ...)
go to every replica, which checks each request; `ConnectionLimits` fields (`handshake_timeout`,
`max_connections_per_peer`, ...) go to the gateway, which admits the connections.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator
from dataclasses import fields
from pathlib import Path
from typing import Any, cast

from ray import serve
from ray.serve.handle import DeploymentHandle, DeploymentResponseGenerator

from dice_lsp import sandbox
from dice_lsp.errors import DiceError
from dice_lsp.jobs import MAX_BATCH_ROWS
from dice_lsp.jobs.model_host import Ticket
from dice_lsp.remote.client import DEFAULT_HOST, DEFAULT_PORT, Address
from dice_lsp.remote.limits import ConnectionLimits, RequestLimits, limits_from
from dice_lsp.remote.protocol import RemoteError
from dice_lsp.remote.server import TokenFile, check_bind, confine, listen
from dice_lsp.remote.service import Service, ServiceConfig
from dice_lsp.settings import Settings
from dice_lsp.wording import Said


@serve.deployment(max_ongoing_requests=64, ray_actor_options={"num_cpus": 1})
class DiceReplica:
    """One copy of the service; the model loads on construction (Ray waits for it before routing here)."""

    def __init__(self, model: str | None = None, device: str = "auto", dtype: str = "auto",
                 max_batch_rows: int = MAX_BATCH_ROWS, limits: dict[str, Any] | None = None,
                 unsafe_no_sandbox: bool = False) -> None:
        settings, errors = Settings().updated({"model": model, "device": device, "dtype": dtype})
        if errors:
            raise DiceError(errors[0])
        confine(unsafe_no_sandbox, settings.nvcc, None)  # every compile and run of user code, as `dice-lsp serve`
        sandbox.announce()
        caps = limits_from(RequestLimits, limits or {})
        self.service = Service(ServiceConfig(settings, max_batch_rows=max_batch_rows, limits=caps))
        self.service.start()
        if self.service.host.status.get("state") != "ready":
            raise DiceError(f"the model did not load: {self.service.host.status.get('message')}")

    async def call(self, method: str, params: dict[str, Any]) -> AsyncIterator[dict[str, Any]]:
        """Progress events, then one `result` or `error` event."""
        loop = asyncio.get_running_loop()
        events: asyncio.Queue[dict[str, Any] | None] = asyncio.Queue()
        ticket = Ticket()

        def progress(message: str) -> None:
            loop.call_soon_threadsafe(events.put_nowait, {"progress": {"message": message}})

        task = asyncio.ensure_future(self.service.call(method, params, ticket, progress))
        task.add_done_callback(lambda _done: events.put_nowait(None))
        try:
            while (event := await events.get()) is not None:
                yield event
            try:
                yield {"result": task.result()}
            except RemoteError as exc:
                yield {"error": {"code": exc.code, "message": str(exc)}}
            except DiceError as exc:
                yield {"error": {"code": "failed", "message": str(exc)}}
        finally:
            if not task.done():  # the gateway cancelled: stop the work between two denoising steps
                ticket.cancel()
                task.cancel()

    def check_health(self) -> None:
        """Ray Serve restarts a replica whose model thread is gone."""
        if self.service.host.status.get("state") != "ready":
            raise DiceError(f"model not ready: {self.service.host.status}")


class ReplicaBackend:
    """The gateway's stand-in for a `Service`: the same `call`, answered by the replicas."""

    def __init__(self, replicas: DeploymentHandle[Any]) -> None:
        self.replicas = replicas.options(stream=True)

    async def call(self, method: str, params: dict[str, Any], ticket: Ticket, progress: Said) -> Any:
        stream = cast(DeploymentResponseGenerator[dict[str, Any]], self.replicas.call.remote(method, params))
        try:
            async for event in stream:
                if "progress" in event:
                    progress(event["progress"]["message"])
                elif "error" in event:
                    raise RemoteError(event["error"]["code"], event["error"]["message"])
                else:
                    return event["result"]
        except asyncio.CancelledError:
            ticket.cancel()
            stream.cancel()  # type: ignore[no-untyped-call]
            raise
        raise RemoteError("failed", f"{method}: the replica ended without an answer")


@serve.deployment(num_replicas=1, ray_actor_options={"num_cpus": 0.5})
class Gateway:
    """Listens for editors on `host:port` (a thread with its own event loop) and forwards to the replicas."""

    def __init__(self, replicas: DeploymentHandle[Any], host: str = DEFAULT_HOST, port: int = DEFAULT_PORT,
                 token_file: str | None = None, limits: dict[str, Any] | None = None) -> None:
        address, tokens = Address(host, port), TokenFile(Path(token_file) if token_file else None)
        connection_limits = limits_from(ConnectionLimits, limits or {})
        check_bind(address, tokens)
        backend = ReplicaBackend(replicas)
        ready, failed = threading.Event(), []
        self.where = str(address)

        async def run() -> None:
            try:
                server, self.where = await listen(backend, address, tokens, connection_limits)
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

    def check_health(self) -> None:
        if not self.thread.is_alive():
            raise DiceError(f"the gateway on {self.where} stopped")


def build_app(args: dict[str, Any]) -> serve.Application:
    """The application `serve run` builds from a config's `args` (see server/configs/)."""
    request_keys = {f.name for f in fields(RequestLimits)}
    connection_keys = {f.name for f in fields(ConnectionLimits)}
    replica_keys = ("model", "device", "dtype", "max_batch_rows", "unsafe_no_sandbox")
    unknown = set(args) - request_keys - connection_keys - {*replica_keys, "host", "port", "token_file"}
    if unknown:
        raise DiceError(f"unknown args in the serve config: {', '.join(sorted(unknown))}")
    replica_options = {key: args[key] for key in replica_keys if key in args}
    replica_limits = {key: args[key] for key in request_keys if key in args}
    gateway_limits = {key: args[key] for key in connection_keys if key in args}
    limits_from(RequestLimits, replica_limits)  # a bad value fails `serve run` at once, not in a replica
    limits_from(ConnectionLimits, gateway_limits)
    replicas = DiceReplica.bind(limits=replica_limits, **replica_options)  # type: ignore[attr-defined]
    gateway_options = {key: args[key] for key in ("host", "port", "token_file") if key in args}
    app: serve.Application = Gateway.bind(replicas, limits=gateway_limits, **gateway_options)  # type: ignore[attr-defined]
    return app
