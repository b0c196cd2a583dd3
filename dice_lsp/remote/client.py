"""The client side of the team server: what the language server and the CLI use when `dice.server.url` is set.

One connection, opened on first use and again after it drops (a server restart costs the requests in
flight, not the session). Each connection starts with `auth` (the token, in a frame small enough for the
server's pre-authentication limit) and waits for its answer, so a wrong token is the error of the request
that opened the connection. Requests are multiplexed by id; cancelling the awaiting task sends `cancel`.
A server that cannot be reached is a `RemoteError` with code `unreachable` within the connect timeout,
never a hang. A connection the server closed as idle is opened again for the requests it had not read.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from dice_lsp.address import Address
from dice_lsp.errors import DiceError
from dice_lsp.remote.protocol import ProtocolError, RemoteError, encode, read_frame

CONNECT_TIMEOUT_S = 5.0
AUTH_TIMEOUT_S = 60.0  # a wrong token is answered after the server's back-off (at most 30 s by default)
ProgressListener = Callable[[dict[str, Any]], None]


def read_token_file(path: Path) -> str:
    """The token a file holds (surrounding whitespace dropped); a DiceError if it is missing or empty."""
    try:
        text = path.expanduser().read_text(encoding="utf-8").strip()
    except OSError as exc:
        raise DiceError(f"token file {path}: {exc.strerror or exc}") from exc
    if not text:
        raise DiceError(f"token file {path} is empty")
    return text


def read_token(token: str | None, token_file: str | None) -> str | None:
    """The token to present: given directly, or the content of a file (which wins, as it can be rotated)."""
    return read_token_file(Path(token_file)) if token_file else token or None


def file_request(path: Path, text: str, ref: Path | None = None) -> dict[str, Any]:
    """The file part of a request to a team server: `text` as `path`'s name, the local headers it
    includes, and the reference it is measured against (sent among the files, named by `ref`)."""
    files = local_headers(path, text)
    request: dict[str, Any] = {"text": text, "path": path.name, "files": files}
    if ref is not None:
        files[ref.name] = ref.read_text(encoding="utf-8")
        request["ref"] = ref.name
    return request


def local_headers(path: Path, text: str, seen: set[Path] | None = None) -> dict[str, str]:
    """The quoted includes of `text` that live in `path`'s folder or below, recursively, by relative path:
    what a server needs besides the file to compile it as it compiles here."""
    seen = seen if seen is not None else {path.resolve()}
    root = path.parent.resolve()
    found: dict[str, str] = {}
    for name in re.findall(r'^\s*#\s*include\s*"([^"]+)"', text, flags=re.MULTILINE):
        header = (root / name).resolve()
        if header in seen or not header.is_file() or not header.is_relative_to(root):
            continue
        seen.add(header)
        content = header.read_text(encoding="utf-8", errors="replace")
        found[header.relative_to(root).as_posix()] = content
        nested = local_headers(header, content, seen)
        folder = header.parent.relative_to(root)
        found.update({(folder / inner).as_posix(): body for inner, body in nested.items()})
    return found


class ClosedIdle(RemoteError):
    """The server closed the connection as idle: it had not read the requests still waiting, so they can be
    sent again on a new connection."""


class RemoteClient:
    """`credentials` gives the token for each new connection (read again, so a rotated token file is seen)."""

    def __init__(self, address: Address, credentials: Callable[[], str | None] = lambda: None,
                 connect_timeout: float = CONNECT_TIMEOUT_S) -> None:
        self.address, self.credentials, self.connect_timeout = address, credentials, connect_timeout
        self._ids = itertools.count(1)
        self._waiting: dict[int, tuple[asyncio.Future[Any], ProgressListener | None]] = {}
        self._writer: asyncio.StreamWriter | None = None
        self._reader_task: asyncio.Task[None] | None = None
        self._connecting = asyncio.Lock()

    async def call(self, method: str, params: dict[str, Any] | None = None,
                   progress: ProgressListener | None = None) -> Any:
        """The request's result; RemoteError for an error reply, a lost connection or an unreachable server.
        Cancelling the awaiting task cancels the request on the server."""
        try:
            return await self._request(await self._connect(), method, params or {}, progress)
        except ClosedIdle:  # never read by the server: send it again, once
            return await self._request(await self._connect(), method, params or {}, progress)

    async def _request(self, writer: asyncio.StreamWriter, method: str, params: dict[str, Any],
                       progress: ProgressListener | None = None, token: str | None = None) -> Any:
        request_id = next(self._ids)
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._waiting[request_id] = (future, progress)
        message: dict[str, Any] = {"id": request_id, "method": method, "params": params}
        if token is not None:
            message["token"] = token
        try:
            writer.write(encode(message))
            await writer.drain()
            return await future
        except asyncio.CancelledError:
            if not writer.is_closing() and method != "auth":
                with contextlib.suppress(ConnectionError, ProtocolError):
                    writer.write(encode({"id": next(self._ids), "method": "cancel", "params": {"id": request_id}}))
            raise
        except ConnectionError as exc:
            self._drop(f"connection to {self.address} lost ({exc})")
            raise RemoteError("connection_lost", f"connection to {self.address} lost ({exc})") from exc
        finally:
            self._waiting.pop(request_id, None)

    async def _connect(self) -> asyncio.StreamWriter:
        async with self._connecting:
            if self._writer is not None and not self._writer.is_closing():
                return self._writer
            token = self.credentials()
            try:
                if self.address.socket is not None:
                    opening = asyncio.open_unix_connection(self.address.socket)
                else:
                    opening = asyncio.open_connection(self.address.host, self.address.port)
                reader, writer = await asyncio.wait_for(opening, self.connect_timeout)
            except (OSError, TimeoutError) as exc:
                errno = getattr(exc, "errno", None)
                reason = os.strerror(errno) if errno else (str(exc) or f"no answer in {self.connect_timeout:g} s")
                raise RemoteError("unreachable", f"cannot reach the dice server at {self.address}: {reason}") from exc
            self._writer = writer
            self._reader_task = asyncio.create_task(self._read(reader, writer))
            await self._authenticate(writer, token)
            return writer

    async def _authenticate(self, writer: asyncio.StreamWriter, token: str | None) -> None:
        """`auth` first; a server older than `auth` answers `unknown_method` but has admitted the token."""
        try:
            await asyncio.wait_for(self._request(writer, "auth", {}, token=token), AUTH_TIMEOUT_S)
        except TimeoutError as exc:
            self._drop(f"no answer to auth in {AUTH_TIMEOUT_S:g} s")
            raise RemoteError("unreachable", f"the dice server at {self.address} did not answer auth in "
                              f"{AUTH_TIMEOUT_S:g} s") from exc
        except RemoteError as exc:
            if exc.code == "unknown_method":
                return
            if self._writer is writer:
                self._drop(str(exc))
            raise
        except asyncio.CancelledError:  # not known to be admitted: the next call starts a new connection
            if self._writer is writer:
                self._drop("cancelled before the server answered auth")
            raise

    async def _read(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        reason, idle = f"the dice server at {self.address} closed the connection", False
        try:
            while (message := await read_frame(reader)) is not None:
                waiting = self._waiting.get(message["id"])
                if message["id"] == 0 and "error" in message:  # about the connection, not one request
                    reason = f"{message['error']['code']}: {message['error']['message']}"
                    idle = message["error"]["code"] == "idle"
                if waiting is None:
                    continue
                future, listener = waiting
                if "progress" in message:
                    if listener is not None:
                        listener(message["progress"])
                elif "error" in message and not future.done():
                    future.set_exception(RemoteError(message["error"]["code"], message["error"]["message"]))
                elif not future.done():
                    future.set_result(message.get("result"))
        except (ProtocolError, ConnectionError) as exc:
            reason = f"connection to {self.address} lost ({exc})"
        if self._writer is writer:
            self._drop(reason, idle)

    def _drop(self, reason: str, idle: bool = False) -> None:
        """Fail every request in flight; the next call connects again."""
        if self._writer is not None:
            self._writer.close()
            self._writer = None
        for future, _ in self._waiting.values():
            if not future.done():
                future.set_exception((ClosedIdle if idle else RemoteError)("connection_lost", reason))

    async def close(self) -> None:
        if self._reader_task is not None:
            self._reader_task.cancel()
        if self._writer is not None:
            self._writer.close()
            with contextlib.suppress(ConnectionError):
                await self._writer.wait_closed()
            self._writer = None
