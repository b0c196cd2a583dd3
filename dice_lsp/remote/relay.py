"""The hop between the Ray Serve gateway and its replicas, kept free of Ray so it can be tested without it.

A replica answers each request through `Backend.call`: the `Service.call` that `dice-lsp serve` answers
with, so a request is checked, queued and run by the same code whatever carries it. `answer` turns that one
call into a stream of typed events (each progress message, then the result or the error) for Ray to carry.
On the gateway, `RelayBackend` is itself a `Backend` (what `remote.server.listen` serves): it reads the
stream back into what `Service.call` would have done here (progress calls, then a return or a
`RemoteError`), so the listener cannot tell a replica from a local service.

The events are the hop's typed values: Ray pickles them, neither side reads keys. A request's parameters and
its reply stay wire JSON through the gateway: the replica decodes and checks them (it holds the request
limits and the server's settings), and the reply goes back to the editor unread.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any, Protocol

from dice_lsp.address import DEFAULT_HOST, DEFAULT_PORT
from dice_lsp.errors import DiceError
from dice_lsp.jobs import MAX_BATCH_ROWS
from dice_lsp.jobs.model_host import Ticket
from dice_lsp.remote.limits import ConnectionLimits, RequestLimits, limits_from
from dice_lsp.remote.protocol import RemoteError
from dice_lsp.settings import MODEL_KEYS, Settings
from dice_lsp.wording import Said

if TYPE_CHECKING:
    from dice_lsp.remote.server import Backend


@dataclass(frozen=True)
class Progressed:
    """A progress message of the request (`$/progress` in the editor)."""

    message: str


@dataclass(frozen=True)
class Answered:
    """The request's reply, as the wire carries it to the editor."""

    result: Any


@dataclass(frozen=True)
class Failed:
    """The request's error: a `RemoteError`'s code (`failed` for any other `DiceError`) and its line."""

    code: str
    message: str


Event = Progressed | Answered | Failed


async def answer(backend: Backend, method: str, params: dict[str, Any]) -> AsyncGenerator[Event, None]:
    """On a replica: `backend.call(method, params)` as events: progress first, then one `Answered` or `Failed`.
    Closing the stream early (the gateway cancelled) cancels the call between two denoising steps."""
    loop = asyncio.get_running_loop()
    events: asyncio.Queue[Event | None] = asyncio.Queue()
    ticket = Ticket()

    def progress(message: str) -> None:
        loop.call_soon_threadsafe(events.put_nowait, Progressed(message))

    task = asyncio.ensure_future(backend.call(method, params, ticket, progress))
    task.add_done_callback(lambda _done: events.put_nowait(None))
    try:
        while (event := await events.get()) is not None:
            yield event
        yield outcome(task)
    finally:
        if not task.done():
            ticket.cancel()
            task.cancel()


def outcome(task: asyncio.Future[Any]) -> Answered | Failed:
    """A finished call's result or error as the last event."""
    try:
        return Answered(task.result())
    except RemoteError as exc:
        return Failed(exc.code, str(exc))
    except DiceError as exc:
        return Failed("failed", str(exc))


class EventStream(Protocol):
    """A replica's events as the gateway receives them (Ray's response generator); `cancel` stops the call."""

    def __aiter__(self) -> AsyncIterator[Event]: ...

    def cancel(self) -> None: ...


class RelayBackend:
    """The gateway's `Backend`: each call answered by a replica's `answer` stream (`ask` starts one)."""

    def __init__(self, ask: Callable[[str, dict[str, Any]], EventStream]) -> None:
        self.ask = ask

    async def call(self, method: str, params: dict[str, Any], ticket: Ticket, progress: Said) -> Any:
        stream = self.ask(method, params)
        try:
            async for event in stream:
                if isinstance(event, Progressed):
                    progress(event.message)
                elif isinstance(event, Failed):
                    raise RemoteError(event.code, event.message)
                else:
                    return event.result
        except asyncio.CancelledError:
            ticket.cancel()
            stream.cancel()
            raise
        raise RemoteError("failed", f"{method}: the replica ended without an answer")


@dataclass(frozen=True)
class ReplicaArgs:
    """What each `DiceReplica` is built with: the server's model (the model keys of its settings) and the
    request limits it checks."""

    settings: Settings = field(default_factory=Settings)
    max_batch_rows: int = MAX_BATCH_ROWS
    unsafe_no_sandbox: bool = False
    limits: RequestLimits = field(default_factory=RequestLimits)


@dataclass(frozen=True)
class GatewayArgs:
    """What the `Gateway` is built with: where it listens, its token file and the connection limits."""

    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT
    token_file: str | None = None
    limits: ConnectionLimits = field(default_factory=ConnectionLimits)


_REPLICA_KEYS = ("max_batch_rows", "unsafe_no_sandbox")
_GATEWAY_KEYS = ("host", "port", "token_file")


def app_args(args: dict[str, Any]) -> tuple[ReplicaArgs, GatewayArgs]:
    """A serve config's `args` (the settings boundary of the Ray app) split between the replicas and the
    gateway; an unknown arg or a bad limit is a DiceError, so `serve run` fails at once, not in a replica."""
    request_keys = {f.name for f in fields(RequestLimits)}
    connection_keys = {f.name for f in fields(ConnectionLimits)}
    unknown = set(args) - request_keys - connection_keys - {*MODEL_KEYS, *_REPLICA_KEYS, *_GATEWAY_KEYS}
    if unknown:
        raise DiceError(f"unknown args in the serve config: {', '.join(sorted(unknown))}")
    settings, errors = Settings().updated({key: args[key] for key in MODEL_KEYS if key in args})
    if errors:
        raise DiceError(errors[0])
    replica_limits = limits_from(RequestLimits, {key: args[key] for key in request_keys if key in args})
    gateway_limits = limits_from(ConnectionLimits, {key: args[key] for key in connection_keys if key in args})
    replica = ReplicaArgs(settings, **{key: args[key] for key in _REPLICA_KEYS if key in args}, limits=replica_limits)
    gateway = GatewayArgs(**{key: args[key] for key in _GATEWAY_KEYS if key in args}, limits=gateway_limits)
    return replica, gateway


__all__ = ["Answered", "Event", "EventStream", "Failed", "GatewayArgs", "Progressed", "RelayBackend", "ReplicaArgs",
           "answer", "app_args", "outcome"]
