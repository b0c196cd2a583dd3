"""How clients reach the language server: stdio, TCP or WebSocket; on sockets, only once admitted.

Why not pygls's `start_io` / `start_tcp` / `start_ws`: their framing (see `dice_lsp.lsp.framing`), and
their socket servers let anyone who connects talk to the one language server: every connection gets the
same protocol object (a second one takes over the first one's replies), and the end of any connection,
even one that sent nothing, shuts the server down. Here:
- A socket connection reaches pygls only once admitted by its first message, an `initialize` request
  that carries the server's token: `initializationOptions.authToken` (taken out before
  the settings see it), or for WebSocket an `Authorization: Bearer TOKEN` header on the upgrade request
  (a wrong header is refused with HTTP 401). Anything else first gets ServerNotInitialized (-32002), a
  missing or wrong token RequestFailed (-32803), and the connection is closed. Before admission a
  connection has `ADMISSION_SECONDS` and `ADMISSION_BYTES`, at most `MAX_WAITING` wait at once, and a
  wrong token is answered after a back-off that doubles per failure from the same host.
- One admitted session at a time: the server holds one workspace and one model. A second client that
  would be admitted is told so and closed. The session's end ends the process, as pygls's did; the end
  of any other connection changes nothing.
- Every socket needs a token, loopback too: any local user can connect to a loopback port, and an
  admitted client names the programs the server runs (`dice.nvcc`). The token is the operator's
  `--token-file`, or else one made for this run (`made_token`: a random token in a 0600 file inside a
  fresh 0700 folder, removed when the server exits), whose path the listening line names. `TokenFile`
  (constant-time comparison, re-read when the file changes) is `dice-lsp serve`'s, and so is `check_bind`:
  beyond loopback only with `--token-file`, since a token made for this run reaches no other machine.
- A WebSocket upgrade that carries an `Origin` header comes from a web page in a browser (editors and
  other programs send none): it is refused with HTTP 403 before any token is looked at, unless the origin
  is one the operator allowed (`--allow-origin`, an exact `scheme://host[:port]`). A page must not reach
  the language server just because the user's browser runs on the same machine.
- Every message goes through one `deliver`: framing problems and JSON values that are not JSON-RPC
  messages are answered (Parse error -32700 / Invalid Request -32600, id null unless known), as are
  requests whose params do not fit their method (-32602); pygls 2.1.1 only logs those, and the client
  waits for ever. Requests before `initialize` or after `shutdown` are answered as the LSP specification
  says (`Lifecycle`).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import json
import logging
import os
import re
import secrets
import shutil
import sys
import tempfile
import threading
from collections.abc import Awaitable, Callable, Collection, Iterator
from dataclasses import dataclass
from http import HTTPStatus
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from pygls.exceptions import JsonRpcException
from pygls.protocol import JsonRPCProtocol
from pygls.server import JsonRPCServer

from dice_lsp.address import Address
from dice_lsp.errors import DiceError
from dice_lsp.lifetime import stop_all, terminated
from dice_lsp.lsp.framing import (
    INVALID_REQUEST,
    MAX_MESSAGE_BYTES,
    PARSE_ERROR,
    Framer,
    Message,
    Problem,
    parse_json,
    request_id,
)
from dice_lsp.remote.server import TokenFile, WrongTokens, check_bind

if TYPE_CHECKING:
    from websockets.asyncio.server import ServerConnection
    from websockets.http11 import Request, Response

LOG = logging.getLogger("dice_lsp.transport")
T = TypeVar("T")
AUTH_TOKEN_KEY = "authToken"  # in initializationOptions
ADMISSION_BYTES = 256 * 1024  # VS Code's client capabilities are 4.7 KB of JSON (pytest-lsp's capture)
ADMISSION_SECONDS = 10.0
MAX_WAITING = 32
BACKOFF_FIRST_S, BACKOFF_MAX_S = 0.1, 5.0
CHUNK = 64 * 1024
INVALID_PARAMS = -32602
SERVER_NOT_INITIALIZED = -32002  # LSP: a request before initialize
REQUEST_FAILED = -32803  # LSP: a well-formed request that failed; the message says why
ORIGIN = re.compile(r"[a-z][a-z0-9+.-]*://[^/?#@\s]+")  # an origin as browsers send it: scheme://host[:port]


def error_response(msg_id: int | str | None, code: int, message: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": msg_id, "error": {"code": code, "message": message}}


def check_message(value: Any) -> Problem | None:
    """Why a parsed JSON value is not a JSON-RPC 2.0 request, notification or response, if it is not."""
    if isinstance(value, list):
        return Problem(INVALID_REQUEST, "LSP has no batches: one message per Content-Length")
    if not isinstance(value, dict):
        return Problem(INVALID_REQUEST, "a message must be a JSON object")
    msg_id = request_id(value)
    if value.get("jsonrpc") != "2.0":
        return Problem(INVALID_REQUEST, 'a message needs "jsonrpc": "2.0"', msg_id)
    if "id" in value and msg_id is None and not (value["id"] is None and "method" not in value):
        return Problem(INVALID_REQUEST, "an id must be a number or a string")
    if "method" in value:
        return None if isinstance(value["method"], str) else Problem(INVALID_REQUEST, "a method must be a string",
                                                                     msg_id)
    if "id" in value and ("result" in value or "error" in value):
        return None  # a response to one of the server's requests
    return Problem(INVALID_REQUEST, "neither a request, a notification nor a response")


class Outlet(Protocol):
    """Where one connection's own replies go (pygls writes its replies through the same object)."""

    def send(self, message: dict[str, Any]) -> None: ...


@dataclass
class Lifecycle:
    """Where one session is between `initialize` and `shutdown`, as the LSP specification rules it (pygls
    2.1.1 does not: it answers `shutdown` before `initialize`, then drops everything after it, `initialize`
    too, and the client waits for ever).

    Before `initialize`, a request gets ServerNotInitialized (-32002) and a notification is dropped, except
    `exit`. After `shutdown`, a request gets InvalidRequest (-32600) and a notification is dropped, except
    `exit`. Responses to the server's own requests always pass.
    """

    initialized: bool = False
    shut_down: bool = False

    def refusal(self, value: dict[str, Any]) -> Problem | None:
        """Why `value` (a checked JSON-RPC message) is not handled now; its id None when it is a
        notification to drop without a word."""
        method = value.get("method")
        if method is None or method == "exit" or (self.initialized and not self.shut_down):
            return None
        if not self.initialized and method != "initialize":
            return Problem(SERVER_NOT_INITIALIZED, f"{method} before initialize: send initialize first",
                           request_id(value))
        if self.shut_down:
            return Problem(INVALID_REQUEST, f"{method} after shutdown: only exit is handled now", request_id(value))
        return None

    def handled(self, method: str | None) -> None:
        """A message of `method` was handed to the server."""
        self.initialized = self.initialized or method == "initialize"
        self.shut_down = self.shut_down or method == "shutdown"


def deliver(protocol: JsonRPCProtocol, event: Message | Problem, outlet: Outlet, peer: str,
            session: Lifecycle) -> None:
    """Hand one message to pygls, or answer why it cannot be handled (or drop a notification that comes
    before `initialize` or after `shutdown`)."""
    problem = event if isinstance(event, Problem) else check_message(event.value)
    if problem is None:
        assert isinstance(event, Message)
        problem = session.refusal(event.value)
        if problem is not None and problem.id is None:
            LOG.warning("%s: dropped: %s", peer, problem.reason)
            return
    if problem is None:
        assert isinstance(event, Message)
        value: dict[str, Any] = event.value
        if "method" in value and "params" not in value:
            value = {**value, "params": None}  # JSON-RPC lets a request omit them; pygls's own class does not
        try:
            message = protocol.structure_message(value)
        except JsonRpcException as exc:
            method, msg_id = value.get("method"), request_id(value)
            if method is None and msg_id is not None:
                _fail_response(protocol, msg_id, peer)
                return
            if msg_id is None:  # notifications are never answered
                LOG.warning("%s: dropped a %s that does not fit its type", peer, method)
                return
            problem = (Problem(INVALID_PARAMS, f"{method}: the params do not fit the method", msg_id)
                       if exc.code == INVALID_PARAMS else Problem(INVALID_REQUEST, f"not a valid {method} request",
                                                                  msg_id))
        else:
            session.handled(value.get("method"))
            protocol.handle_message(message)
            return
    LOG.warning("%s: %s", peer, problem.reason)
    outlet.send(error_response(problem.id, problem.code, problem.reason))


def _fail_response(protocol: JsonRPCProtocol, msg_id: int | str, peer: str) -> None:
    """The client answered one of the server's requests with a result that does not fit it: the handler
    that waits for that answer gets an error instead (dropping it would leave that handler waiting for ever)."""
    LOG.info("%s: the reply to request %s does not fit its type; taken as an error", peer, msg_id)
    reason = "the client's reply does not fit the request"
    protocol.handle_message(protocol.structure_message(error_response(msg_id, INVALID_PARAMS, reason)))


class FramedWriter:
    """An LSP byte stream's writer (stdout or a socket): pygls writes framed replies, we send dicts."""

    def __init__(self, write: Callable[[bytes], object], close: Callable[[], object]) -> None:
        self._write, self._close = write, close

    def write(self, data: bytes) -> None:
        self._write(data)

    def close(self) -> None:
        self._close()

    def send(self, message: dict[str, Any]) -> None:
        body = json.dumps(message).encode()
        self._write(b"Content-Length: %d\r\n\r\n%s" % (len(body), body))


class WebSocketWriter:
    """One message per WebSocket message, no headers; sends run as tasks (pygls schedules its own)."""

    def __init__(self, ws: ServerConnection) -> None:
        self._ws = ws
        self._sending: set[asyncio.Future[None]] = set()

    def write(self, data: bytes) -> Awaitable[None]:
        return self._ws.send(data)

    def close(self) -> Awaitable[None]:
        return self._ws.close()

    def send(self, message: dict[str, Any]) -> None:
        task = asyncio.ensure_future(self._ws.send(json.dumps(message)))
        self._sending.add(task)
        task.add_done_callback(self._sending.discard)

    async def flush(self) -> None:
        with contextlib.suppress(Exception):
            await asyncio.gather(*self._sending)


class ByteSource(Protocol):
    async def read(self) -> bytes:
        """Some bytes; b"" at the end of the stream."""
        ...


class StreamSource:
    def __init__(self, reader: asyncio.StreamReader) -> None:
        self.reader = reader

    async def read(self) -> bytes:
        try:
            return await self.reader.read(CHUNK)
        except ConnectionError:
            return b""


class PipeSource:
    """A blocking file descriptor (stdin) read on a daemon thread, one chunk ahead at most: a blocked
    read must not keep the process from exiting (pygls's executor threads are joined at exit)."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self._queue: asyncio.Queue[bytes] | None = None

    async def read(self) -> bytes:
        if self._queue is None:
            self._queue = asyncio.Queue(maxsize=1)
            threading.Thread(target=self._pump, args=(asyncio.get_running_loop(), self._queue),
                             name="dice-stdin", daemon=True).start()
        return await self._queue.get()

    def _pump(self, loop: asyncio.AbstractEventLoop, queue: asyncio.Queue[bytes]) -> None:
        chunk = b"-"
        while chunk:
            try:
                chunk = os.read(self.fd, CHUNK)
            except OSError:
                chunk = b""
            try:
                asyncio.run_coroutine_threadsafe(queue.put(chunk), loop).result()
            except (RuntimeError, concurrent.futures.CancelledError):  # the loop is gone
                return


class MessageStream:
    """A byte source through a framer: `next` gives messages and problems, None at the end (when
    `cut_off` says what the end cut off, if anything)."""

    def __init__(self, source: ByteSource, framer: Framer) -> None:
        self.source, self.framer = source, framer
        self.cut_off: Problem | None = None
        self._ended = False

    async def next(self) -> Message | Problem | None:
        while (event := self.framer.next()) is None:
            if self._ended:
                return None
            chunk = await self.source.read()
            if not chunk:
                self._ended = True
                self.cut_off = self.framer.finish()
                return None
            self.framer.feed(chunk)
        return event


def _quiet_pygls() -> None:
    """pygls logs a traceback for params that do not fit their method; `deliver` answers and logs a line."""
    logging.getLogger("pygls.protocol.json_rpc").addFilter(
        lambda record: not record.getMessage().startswith("Unable to deserialize message"))


def serve_stdio(server: JsonRPCServer) -> int:
    """Serve the client on stdin/stdout until it closes stdin, sends `exit` or SIGTERM arrives; the exit
    code. Running compilers and harness children are killed on the way out (`lifetime.stop_all`)."""
    _quiet_pygls()
    stdout = sys.stdout.buffer

    def write(data: bytes) -> None:
        if stdout.closed:  # after `exit`: what work still in flight says has no reader any more
            return
        stdout.write(data)
        stdout.flush()

    out = FramedWriter(write, stdout.close)
    server.protocol.set_writer(out)
    stream = MessageStream(PipeSource(sys.stdin.fileno()), Framer())
    try:
        code = asyncio.run(stopping(terminated(serve_messages(server.protocol, stream.next, out, "stdio"))))
    except BrokenPipeError:
        LOG.error("the client closed stdout; stopping")
        return 1
    finally:
        stop_all()  # no compiler outlives the server; their threads finish and remove their scratch folders
        server.shutdown()  # type: ignore[no-untyped-call]
    if code is not None:
        return code
    if stream.cut_off is not None:
        LOG.error("stdin ended inside a message (%s); stopping", stream.cut_off.reason)
        return 1
    return 0


async def stopping(work: Awaitable[T]) -> T:
    """`work`, then `stop_all` while the event loop still runs: `asyncio.run` joins the threads of its default
    executor before it returns, and one of them may be waiting on a compiler (the precompiled preamble that
    opening a file started, seconds at a low CPU priority), which the server would otherwise wait for at exit
    only to kill what is left afterwards."""
    try:
        return await work
    finally:
        stop_all()


async def serve_messages(protocol: JsonRPCProtocol, receive: Callable[[], Awaitable[Message | Problem | None]],
                         outlet: Outlet, peer: str, first: Message | None = None) -> int | None:
    """Deliver what `receive` gives (after `first`) until it ends (None) or the client sends `exit`
    (its exit code: pygls's handler raises SystemExit, which must not escape a socket's task)."""
    session = Lifecycle()
    event = first if first is not None else await receive()
    while event is not None:
        try:
            deliver(protocol, event, outlet, peer, session)
        except SystemExit as exc:
            return exit_code(exc)
        except ConnectionError:  # the client is gone (stdio: BrokenPipeError)
            raise
        except Exception:  # a bug must not end the session; the next message may well be fine
            LOG.exception("%s: a message could not be handled", peer)
        event = await receive()
    return None


def exit_code(exc: SystemExit) -> int:
    return exc.code if isinstance(exc.code, int) else 0 if exc.code is None else 1


@dataclass(frozen=True)
class Admission:
    """A socket client's first message: the initialize request to deliver, or the error to close with
    (None: close without a word, when it sent nothing whole)."""

    message: dict[str, Any] | None
    refusal: dict[str, Any] | None = None


class LspGate:
    """Who may talk to the language server over a socket (see the module's docstring)."""

    def __init__(self, tokens: TokenFile) -> None:
        if not tokens.required:
            raise ValueError("a language server on a socket needs a token file")
        self.tokens = tokens
        self.waiting = 0
        self.session = False
        self.wrong = WrongTokens(BACKOFF_FIRST_S, BACKOFF_MAX_S)

    async def admit(self, first: Callable[[], Awaitable[Message | Problem | None]], host: str,
                    bearer: bool = False) -> Admission:
        """Read the first message (`bearer`: the token came in a header) and decide."""
        if self.waiting >= MAX_WAITING:
            LOG.warning("%s: %d connections already wait for admission; closing", host, MAX_WAITING)
            return Admission(None)
        self.waiting += 1
        try:
            try:
                event = await asyncio.wait_for(first(), ADMISSION_SECONDS)
            except TimeoutError:
                LOG.warning("%s: no initialize request within %.0f s; closing", host, ADMISSION_SECONDS)
                return Admission(None)
            if event is None:
                return Admission(None)
            problem = await self._refusal(event, host, bearer)
            if problem is not None:
                LOG.warning("%s: %s (closing the connection)", host, problem.reason)
                return Admission(None, error_response(problem.id, problem.code, problem.reason))
            assert isinstance(event, Message)
            self.session = True
            self.wrong.forget(host)
            return Admission(event.value)
        finally:
            self.waiting -= 1

    async def _refusal(self, event: Message | Problem, host: str, bearer: bool) -> Problem | None:
        problem = event if isinstance(event, Problem) else check_message(event.value)
        if problem is not None:
            return problem
        assert isinstance(event, Message)
        value: dict[str, Any] = event.value
        msg_id = request_id(value)
        needs_token = not bearer
        if value.get("method") != "initialize" or msg_id is None:
            carrying = f" carrying initializationOptions.{AUTH_TOKEN_KEY}" if needs_token else ""
            return Problem(SERVER_NOT_INITIALIZED, f"the first message must be an initialize request{carrying}",
                           msg_id)
        params = value.get("params")
        options = params.get("initializationOptions") if isinstance(params, dict) else None
        offered = options.pop(AUTH_TOKEN_KEY, None) if isinstance(options, dict) else None
        if needs_token and not self.tokens.accepts(offered):
            await asyncio.sleep(self.backoff(host))
            reason = "wrong token" if offered is not None else "a token is required"
            return Problem(REQUEST_FAILED, f"unauthorized: {reason} (initializationOptions.{AUTH_TOKEN_KEY})",
                           msg_id)
        if self.session:
            return Problem(REQUEST_FAILED, "another client is using this language server (one at a time)", msg_id)
        return None

    def backoff(self, host: str) -> float:
        """Seconds to wait before answering a wrong token from `host`."""
        return self.wrong.delay(host)


class SocketServer:
    """The language server on TCP or WebSocket: connections, admission, the one session."""

    def __init__(self, protocol: JsonRPCProtocol, tokens: TokenFile, origins: Collection[str] = ()) -> None:
        self.protocol = protocol
        self.tokens = tokens
        self.origins = frozenset(origins)  # the browser origins whose pages may open a WebSocket
        self.gate = LspGate(tokens)
        self.ended = asyncio.Event()
        self.exit_code: int | None = None  # from the session's `exit`
        self._bearers: set[ServerConnection] = set()  # upgrade requests that carried the right token

    async def tcp_connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        host = _host(writer.get_extra_info("peername"))
        out = FramedWriter(writer.write, writer.close)
        stream = MessageStream(StreamSource(reader), Framer(ADMISSION_BYTES))
        admission = await self.gate.admit(stream.next, host)
        if admission.message is None:
            if admission.refusal is not None:
                out.send(admission.refusal)
            await _close_after_reply(reader, writer)
            return
        stream.framer.max_bytes = MAX_MESSAGE_BYTES
        self.protocol.set_writer(out)
        await self._session(Message(admission.message), stream.next, out, host)

    async def ws_handshake(self, connection: ServerConnection, request: Request) -> Response | None:
        """Refuse an upgrade from a browser page whose origin is not allowed (403), before anything else;
        then an `Authorization: Bearer TOKEN` header admits by itself, and a wrong one is refused (401)."""
        host = _host(connection.remote_address)
        origins = request.headers.get_all("Origin")
        if any(origin not in self.origins for origin in origins):
            LOG.warning("%s: WebSocket upgrade from origin %s refused (not an --allow-origin)", host,
                        ", ".join(origins))
            return connection.respond(HTTPStatus.FORBIDDEN, "origin not allowed\n")
        headers = request.headers.get_all("Authorization")
        if not headers:
            return None
        scheme, _, offered = headers[0].partition(" ")
        if len(headers) == 1 and scheme.lower() == "bearer" and self.tokens.accepts(offered.strip()):
            self._bearers.add(connection)
            return None
        await asyncio.sleep(self.gate.backoff(host))
        LOG.warning("%s: wrong Authorization header (refused)", host)
        return connection.respond(HTTPStatus.UNAUTHORIZED, "wrong token\n")

    async def ws_connection(self, ws: ServerConnection) -> None:
        host = _host(ws.remote_address)
        out = WebSocketWriter(ws)
        bearer = ws in self._bearers
        self._bearers.discard(ws)
        admission = await self.gate.admit(lambda: _ws_next(ws), host, bearer)
        if admission.message is None:
            if admission.refusal is not None:
                out.send(admission.refusal)
                await out.flush()
            await ws.close()
            return
        ws.protocol.max_message_size = MAX_MESSAGE_BYTES
        self.protocol.set_writer(out, include_headers=False)
        await self._session(Message(admission.message), lambda: _ws_next(ws), out, host)

    async def _session(self, first: Message, receive: Callable[[], Awaitable[Message | Problem | None]],
                       out: Outlet, host: str) -> None:
        LOG.info("%s: admitted", host)
        try:
            self.exit_code = await serve_messages(self.protocol, receive, out, host, first)
        except ConnectionError:
            pass
        finally:
            LOG.info("%s: the session ended; stopping", host)
            self.ended.set()


async def _close_after_reply(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Send what is written, then close. Closing a socket with unread input resets it, which can lose
    the reply on its way: so stop writing, and read (and drop) what the client still sends, briefly."""
    with contextlib.suppress(ConnectionError, OSError):
        await writer.drain()
        if writer.can_write_eof():
            writer.write_eof()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(1.0):
                for _ in range(ADMISSION_BYTES // CHUNK):
                    if not await reader.read(CHUNK):
                        break
    writer.close()


async def _ws_next(ws: ServerConnection) -> Message | Problem | None:
    from websockets.exceptions import ConnectionClosed

    try:
        data = await ws.recv(decode=False)
    except ConnectionClosed as exc:
        if exc.rcvd is not None and exc.rcvd.code == 1009:  # the client's message was over the limit
            LOG.warning("a WebSocket message over the size limit; closing")
        return None
    value, error = parse_json(data if isinstance(data, bytes) else data.encode())
    return Message(value) if error is None else Problem(PARSE_ERROR, f"the message is {error}")


def _host(peername: Any) -> str:
    return str(peername[0]) if isinstance(peername, tuple) and peername else str(peername or "?")


def allowed_origins(origins: Collection[str]) -> frozenset[str]:
    """The `--allow-origin` values, each checked to be an origin as a browser sends it (`scheme://host[:port]`,
    no path, no trailing slash: it is compared exactly); a DiceError names the first that is not."""
    for origin in origins:
        if not ORIGIN.fullmatch(origin):
            raise DiceError(f"--allow-origin {origin!r}: expected scheme://host[:port], as a browser sends it "
                            "(e.g. https://example.com)")
    return frozenset(origins)


@contextlib.contextmanager
def made_token() -> Iterator[Path]:
    """A random token for one run of the server: the file `token` (0600) in a fresh folder (0700) under
    $XDG_RUNTIME_DIR when that is a directory, else the system's temporary folder; the folder is removed
    when the block ends. Only the server's user can read it, and it does not outlive the server."""
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    parent = runtime if runtime and os.path.isdir(runtime) else None
    try:
        folder = Path(tempfile.mkdtemp(prefix="dice-lsp-", dir=parent))
    except OSError as exc:
        raise DiceError(f"cannot make a folder for the token in {parent or tempfile.gettempdir()}: "
                        f"{exc.strerror or exc}") from exc
    try:
        folder.chmod(0o700)
        path = folder / "token"
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as out:
            out.write(secrets.token_hex(32) + "\n")
        yield path
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def serve_socket(server: JsonRPCServer, kind: str, host: str, port: int, token_file: Path | None,
                 origins: Collection[str] = ()) -> int:
    """Serve one client session over `kind` ("tcp" or "ws") at host:port; the exit code. A client needs the
    token of `token_file`, or without one the token made for this run (`made_token`); `origins`: the browser
    origins allowed to open a WebSocket. A DiceError (before anything listens) for an unreadable token file,
    an address beyond loopback without `token_file`, or one that cannot be bound."""
    given = TokenFile(token_file)
    check_bind(Address(host, port), given)
    _quiet_pygls()
    with contextlib.ExitStack() as cleanup:
        tokens = given if given.required else TokenFile(cleanup.enter_context(made_token()))
        try:
            return asyncio.run(stopping(terminated(_listen(server.protocol, kind, host, port, tokens, origins)))) or 0
        except SystemExit as exc:  # `exit` over WebSocket: pygls exits once the socket has closed
            return exit_code(exc)
        finally:
            stop_all()
            server.shutdown()  # type: ignore[no-untyped-call]


def listening_line(kind: str, host: str, port: int, token: Path) -> str:
    """What the server says once it listens: where, and which file holds the token a client must send."""
    where = f"[{host}]" if ":" in host else host
    how = f"initializationOptions.{AUTH_TOKEN_KEY}" + (" or an Authorization: Bearer header" if kind == "ws" else "")
    return f"language server on {kind}://{where}:{port}; token in {token} (send it as {how})"


async def _listen(protocol: JsonRPCProtocol, kind: str, host: str, port: int, tokens: TokenFile,
                  origins: Collection[str]) -> int:
    sockets = SocketServer(protocol, tokens, origins)
    listener: Any
    try:
        if kind == "tcp":
            listener = await asyncio.start_server(sockets.tcp_connection, host, port)
        else:
            from websockets.asyncio.server import serve

            listener = await serve(sockets.ws_connection, host, port, process_request=sockets.ws_handshake,
                                   max_size=ADMISSION_BYTES, max_queue=4)
    except OSError as exc:
        reason = os.strerror(exc.errno) if exc.errno else str(exc)
        raise DiceError(f"cannot listen on {host}:{port}: {reason}") from exc
    assert tokens.path is not None
    LOG.info("%s", listening_line(kind, host, listener.sockets[0].getsockname()[1], tokens.path))
    async with listener:
        await sockets.ended.wait()
    return sockets.exit_code or 0
