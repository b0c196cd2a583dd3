"""The language server's link to a team server (`dice.server.url`): requests, and what the status bar says.

A newer request for the same key (a document's completion) cancels the older one on the server; the older
`ask` then raises `Cancelled` (as a fill cancelled on this machine's model does), while an `ask` whose own
task is cancelled re-raises `asyncio.CancelledError`. A server
that cannot be reached or refuses the token turns the status to `error` with the reason, once; the next
request that succeeds turns it back to `ready`. The client reconnects by itself.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from dice_lsp.address import parse_address
from dice_lsp.errors import Cancelled, DiceError
from dice_lsp.jobs.status import ModelStatus
from dice_lsp.remote.client import ProgressListener, RemoteClient, read_token
from dice_lsp.remote.protocol import RemoteError
from dice_lsp.settings import Settings

LINK_FAILURES = ("unreachable", "connection_lost", "unauthorized")


class TeamServer:
    def __init__(self, settings: Settings, on_status: Callable[[ModelStatus, RemoteError | None], None]) -> None:
        assert settings.server_url is not None
        self.client = RemoteClient(parse_address(settings.server_url),
                                   lambda: read_token(settings.server_token, settings.server_token_file))
        self.settings = settings
        self.on_status = on_status
        self.state: str | None = None  # the last state told
        self.calls: dict[str, asyncio.Future[Any]] = {}  # the request in flight per key
        self.superseded: set[asyncio.Future[Any]] = set()  # calls cancelled by a newer one for their key

    async def check(self, failure: RemoteError | None = None) -> None:
        """Ask the server how it is (unless `failure` already says) and tell a change of state."""
        address = str(self.client.address)
        status: ModelStatus
        if failure is None:
            try:
                found = await self.client.call("status")
                status = ModelStatus.ready(found.get("model"), found.get("device"), found.get("dtype"), address)
            except DiceError as exc:
                failure = exc if isinstance(exc, RemoteError) else RemoteError("unreachable", str(exc))
        if failure is not None:
            status = ModelStatus.failed(address, str(failure), failure.code)
        if status.state != self.state:
            self.state = status.state
            self.on_status(status, failure)

    async def ask(self, key: str, method: str, params: dict[str, Any],
                  progress: ProgressListener | None = None) -> Any:
        """`method` on the server with this editor's per-request settings; a newer `ask` for `key` cancels it."""
        previous = self.calls.pop(key, None)
        if previous is not None:
            self.superseded.add(previous)
            previous.cancel()
        call = asyncio.ensure_future(self.client.call(method, {**params, "settings": self.settings.per_request()},
                                                      progress))
        self.calls[key] = call
        try:
            result = await call
        except RemoteError as exc:
            if exc.code in LINK_FAILURES:
                await self.check(exc)
            raise
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if call in self.superseded and (task is None or not task.cancelling()):
                raise Cancelled(f"{method}: replaced by a newer request") from None
            raise
        finally:
            self.superseded.discard(call)
            if self.calls.get(key) is call:
                del self.calls[key]
        if self.state != "ready":
            await self.check()
        return result

    async def close(self) -> None:
        for call in self.calls.values():
            call.cancel()
        await self.client.close()
