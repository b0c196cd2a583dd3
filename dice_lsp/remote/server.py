"""`dice-lsp serve`: the team server's listener, on TCP or a Unix socket, speaking `dice_lsp.remote.protocol`.

Each connection reads frames in order and runs every request as its own task, so a long optimization
never holds up a completion on the same connection; `cancel {id}` stops one of them. A connection is
admitted by the first request that carries the right token (when the server has one); a wrong token gets
one `unauthorized` error and the connection is closed. A frame that breaks the protocol gets one error
frame and a closed connection: the server itself never goes down for a client's bytes.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import ipaddress
import logging
import os
import signal
import socket
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from dice_lsp.errors import DiceError
from dice_lsp.jobs.model_host import Ticket
from dice_lsp.remote.client import Address, read_token_file
from dice_lsp.remote.protocol import ProtocolError, RemoteError, check_request, encode, error, read_frame
from dice_lsp.remote.service import Progress, Service

LOG = logging.getLogger("dice_lsp.serve")


class Backend(Protocol):
    """What answers requests: a `Service` here, or the replicas of a Ray Serve deployment."""

    async def call(self, method: str, params: dict[str, Any], ticket: Ticket, progress: Progress) -> Any: ...


class TokenFile:
    """The shared secret, read from a file and read again whenever the file changes (rotation without a
    restart: connections already admitted stay; new ones need the new token)."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self._stamp: float | None = None
        self._token = ""
        if path is not None:
            self._read()

    @property
    def required(self) -> bool:
        return self.path is not None

    def _read(self) -> None:
        assert self.path is not None
        try:
            stamp = self.path.stat().st_mtime
        except OSError as exc:
            raise DiceError(f"token file {self.path}: {exc.strerror or exc}") from exc
        self._stamp, self._token = stamp, read_token_file(self.path)

    def accepts(self, offered: Any) -> bool:
        if self.path is None:
            return True
        with contextlib.suppress(DiceError):  # a half-written new file: keep the old token until it is whole
            if self.path.stat().st_mtime != self._stamp:
                self._read()
        return isinstance(offered, str) and hmac.compare_digest(offered.encode(), self._token.encode())


def confine(unsafe_no_sandbox: bool, nvcc: str | None, token_file: Path | None) -> None:
    """Every compile and every run of a client's code in the sandbox from here on, in this process
    (`dice_lsp.sandbox`); a DiceError (one line) where it cannot be made, unless the operator chose
    --unsafe-no-sandbox. The token file must not lie where sandboxed code can read it."""
    from dice_lsp import sandbox
    from dice_lsp.toolchain.nvcc import find_nvcc

    try:
        found: Path | None = find_nvcc(nvcc)
    except DiceError:
        found = None  # requests that compile say so; completions need no nvcc
    sandbox.switch_on(unsafe_no_sandbox, found)
    if token_file is not None and sandbox.active() is not None and sandbox.visible(token_file):
        raise DiceError(f"token file {token_file}: sandboxed code could read it there (the system, the Python "
                        "runtime or the CUDA toolkit); keep it elsewhere")


def is_loopback(host: str) -> bool:
    """Whether every address `host` resolves to is a loopback address."""
    try:
        infos = socket.getaddrinfo(host, None)
    except OSError as exc:
        raise DiceError(f"cannot resolve {host!r}: {exc.strerror or exc}") from exc
    return all(ipaddress.ip_address(str(info[4][0]).split("%")[0]).is_loopback for info in infos)


def check_bind(address: Address, tokens: TokenFile) -> None:
    """Refuse to listen beyond this machine without a token."""
    if address.socket is None and not tokens.required and not is_loopback(address.host):
        raise DiceError(f"refusing to listen on {address.host} without a token: pass --token-file "
                        "(anyone who can reach the port could run code on this GPU host)")


class Connection:
    def __init__(self, backend: Backend, tokens: TokenFile, reader: asyncio.StreamReader,
                 writer: asyncio.StreamWriter) -> None:
        self.backend, self.tokens, self.reader, self.writer = backend, tokens, reader, writer
        self.admitted = not tokens.required
        self.tasks: dict[int, tuple[asyncio.Task[None], Ticket]] = {}
        self.peer = str(writer.get_extra_info("peername") or "unix socket")
        self.loop = asyncio.get_running_loop()

    def send(self, message: dict[str, Any]) -> None:
        if self.writer.is_closing():
            return
        try:
            frame = encode(message)
        except ProtocolError as exc:
            frame = encode(error(message.get("id", 0), exc.code, f"the reply is too large to send: {exc}"))
        self.writer.write(frame)

    async def run(self) -> None:
        try:
            while (message := await read_frame(self.reader)) is not None:
                if not self.admit(message):
                    break
                self.dispatch(message)
        except ProtocolError as exc:
            LOG.warning("%s: %s (closing the connection)", self.peer, exc)
            self.send(error(0, exc.code, str(exc)))
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            for task, ticket in self.tasks.values():
                ticket.cancel()
                task.cancel()
            with contextlib.suppress(ConnectionError):
                await self.writer.drain()
            self.writer.close()

    def admit(self, message: dict[str, Any]) -> bool:
        if self.admitted and "token" not in message:
            return True
        if self.tokens.accepts(message.get("token")):
            self.admitted = True
            return True
        reason = "a token is required" if "token" not in message else "wrong token"
        LOG.warning("%s: %s (closing the connection)", self.peer, reason)
        self.send(error(message["id"], "unauthorized", f"{reason}: set dice.server.token or dice.server.tokenFile"))
        return False

    def dispatch(self, message: dict[str, Any]) -> None:
        try:
            request_id, method, params = check_request(message)
        except ProtocolError as exc:  # a whole, readable frame: the stream is still in step
            self.send(error(message["id"], exc.code, str(exc)))
            return
        if method == "cancel":
            self.cancel(request_id, params.get("id"))
        elif request_id in self.tasks:
            self.send(error(request_id, "duplicate_id", f"request {request_id} is still running"))
        else:
            ticket = Ticket()
            task = asyncio.create_task(self.answer(request_id, method, params, ticket))
            task.add_done_callback(lambda done: self.finished(request_id, method, done))
            self.tasks[request_id] = (task, ticket)

    def finished(self, request_id: int, method: str, task: asyncio.Task[None]) -> None:
        """Every request gets a reply: a task cancelled (even before it started) answers `cancelled`."""
        self.tasks.pop(request_id, None)
        if task.cancelled():
            self.send(error(request_id, "cancelled", f"{method} cancelled"))
            LOG.info("%s %s #%d cancelled", self.peer, method, request_id)

    def cancel(self, request_id: int, target: Any) -> None:
        running = self.tasks.get(target) if isinstance(target, int) else None
        if running is not None:
            running[1].cancel()
            running[0].cancel()
        self.send({"id": request_id, "result": {"cancelled": running is not None}})

    async def answer(self, request_id: int, method: str, params: dict[str, Any], ticket: Ticket) -> None:
        started = time.perf_counter()

        def progress(message: str) -> None:
            self.loop.call_soon_threadsafe(self.send, {"id": request_id, "progress": {"message": message}})

        outcome = "ok"
        try:
            result = await self.backend.call(method, params, ticket, progress)
            self.send({"id": request_id, "result": result})
        except RemoteError as exc:
            outcome = exc.code
            self.send(error(request_id, exc.code, str(exc)))
        except DiceError as exc:
            outcome = "failed"
            self.send(error(request_id, "failed", str(exc)))
        except Exception as exc:  # a bug must reach the client as an error, not kill the connection
            LOG.exception("%s: %s failed", self.peer, method)
            outcome = "internal"
            self.send(error(request_id, "internal", f"{method} failed on the server: {exc!r}"))
        LOG.info("%s %s #%d %s %.0f ms", self.peer, method, request_id, outcome, (time.perf_counter() - started) * 1000)
        with contextlib.suppress(ConnectionError):
            await self.writer.drain()


async def listen(backend: Backend, address: Address, tokens: TokenFile) -> tuple[asyncio.Server, str]:
    """Start accepting connections on `address`; returns the server and where it listens (the real port)."""
    check_bind(address, tokens)

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await Connection(backend, tokens, reader, writer).run()

    if address.socket is not None:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(address.socket)
        listener = await asyncio.start_unix_server(handle, path=address.socket)
        os.chmod(address.socket, 0o600)  # the socket's permissions are its access control
        return listener, f"unix://{address.socket}"
    try:
        listener = await asyncio.start_server(handle, address.host, address.port)
    except OSError as exc:
        reason = os.strerror(exc.errno) if exc.errno else str(exc)
        raise DiceError(f"cannot listen on {address.host}:{address.port}: {reason}") from exc
    return listener, f"tcp://{address.host}:{listener.sockets[0].getsockname()[1]}"


async def serve(service: Service, address: Address, tokens: TokenFile,
                on_ready: Callable[[str], None] = lambda _where: None) -> None:
    """Listen until SIGINT/SIGTERM; the model loads while the first clients connect."""
    listener, where = await listen(service, address, tokens)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    loading = service.load()
    on_ready(where)
    try:
        async with listener:
            await stop.wait()
    finally:
        loading.cancel()
        service.close()
        if address.socket is not None:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(address.socket)
