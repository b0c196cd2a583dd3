"""`dice-lsp serve`: the team server's listener, on TCP or a Unix socket, speaking `dice_lsp.remote.protocol`.

Each connection reads frames in order and runs every request as its own task, so a long optimization
never holds up a completion on the same connection; `cancel {id}` stops one of them. A frame that breaks
the protocol gets one error frame and a closed connection: the server itself never goes down for a
client's bytes.

Admission: when the server has a token, a connection's first frame must carry it (the `auth` frame), must
fit in a few KiB and must arrive within seconds of connecting; until then the connection holds little
memory and counts against caps on unauthenticated connections, per address and overall. Where a cap is
reached, the newcomer is let in and the oldest connection still waiting to authenticate (from the same
address where that address's cap is the one reached) is closed: connections that stay silent cannot keep
out a client that authenticates at once. A wrong token is answered only after a delay that doubles with
each wrong token from the same address (reset by a right one), and the connection is closed; so guessing
runs at a few tries a second per address at most, while a right token is answered at once. Every address
(an IPv6 /64 counts as one) may hold a bounded number of connections; where all of them are authenticated
a newcomer is refused.

Once admitted, a connection is closed when it stays idle (nothing in flight, no frame) too long or trickles
a frame too slowly; it may have a bounded number of requests in flight (more are answered `busy`), and
when its unsent replies pass a bound the server stops reading its frames (backpressure) and closes it if
the client still does not read. A frame may unpack into a bounded number of values (`--max-frame-objects`).
The limits are `dice_lsp.remote.limits.ConnectionLimits`.

The token file must be readable by the server's user only (group or others: the server does not start);
`--socket FILE` replaces only a stale socket there (no server answers on it), never another file.
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
import stat
import time
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from dice_lsp import __version__
from dice_lsp.address import Address
from dice_lsp.errors import DiceError
from dice_lsp.jobs.model_host import Ticket
from dice_lsp.lifetime import stop_all
from dice_lsp.remote.client import read_token_file
from dice_lsp.remote.limits import ConnectionLimits
from dice_lsp.remote.protocol import (
    MAX_FRAME,
    ProtocolError,
    RemoteError,
    TooManyValues,
    check_request,
    encode,
    error,
    read_frame,
)
from dice_lsp.remote.service import Service
from dice_lsp.wording import Said, counted

LOG = logging.getLogger("dice_lsp.serve")
MIN_TOKEN_LENGTH = 8  # characters of a token file; `openssl rand -hex 32` gives 64
CLOSE_GRACE_S = 5.0  # a closed connection's unsent bytes wait this long for the client, then are dropped
FORGET_S = 900.0  # an address's wrong tokens are forgotten after this long without another
TRACKED = 16384  # addresses whose wrong tokens (or log lines) are remembered; the oldest go first
LOG_EVERY_S = 10.0  # at most one refusal line per address in this time (a flood must not fill the disk)


class Backend(Protocol):
    """What answers the wire's requests, by method name and wire parameters: a `Service` here (which runs each
    job through `jobs.api.Jobs`), or the replicas of a Ray Serve deployment (`relay.RelayBackend` passes the
    request on to one, unread)."""

    async def call(self, method: str, params: dict[str, Any], ticket: Ticket, progress: Said) -> Any: ...


class ShortToken(DiceError):
    """A token file whose token is too short to resist guessing."""


class ExposedToken(DiceError):
    """A token file that other users can read (or write)."""


def check_private(path: Path, mode: int) -> None:
    """ExposedToken unless only the owner can read and write the token file (`mode`: its stat's)."""
    bits = stat.S_IMODE(mode)
    exposed = "readable" if bits & 0o044 else "writable" if bits & 0o022 else None
    if exposed is not None:
        raise ExposedToken(f"token file {path} is {exposed} by other users (mode {bits:04o}): chmod 600 {path}")


Stamp = tuple[int, int, int, int]


def stamp_of(found: os.stat_result) -> Stamp:
    """What changes when a token file is rewritten, replaced (`mv`) or has its mode changed (`chmod 600` after
    a refused rotation)."""
    return found.st_mtime_ns, found.st_ctime_ns, found.st_ino, found.st_mode


class TokenFile:
    """The shared secret, read from a file and read again whenever the file changes (rotation without a
    restart: connections already admitted stay; new ones need the new token). A token shorter than
    MIN_TOKEN_LENGTH, or a file that group or others may read or write, is refused: at start (the server
    does not start), and on rotation (logged once; the previous token stays)."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self._stamp: Stamp | None = None
        self._refused: Stamp | None = None  # the file as it was when a rotation was refused (too short, exposed)
        self._token = ""
        if path is not None:
            self._read()

    @property
    def required(self) -> bool:
        return self.path is not None

    def _read(self) -> None:
        assert self.path is not None
        try:
            found = self.path.stat()
        except OSError as exc:
            raise DiceError(f"token file {self.path}: {exc.strerror or exc}") from exc
        check_private(self.path, found.st_mode)
        stamp = stamp_of(found)
        token = read_token_file(self.path)
        if len(token) < MIN_TOKEN_LENGTH:
            count = f"{len(token)} character{'s' * (len(token) != 1)}"
            raise ShortToken(f"token file {self.path} holds {count}, fewer than the {MIN_TOKEN_LENGTH} a token "
                             "needs (make one with: openssl rand -hex 32)")
        self._stamp, self._token = stamp, token

    def _reread(self) -> None:
        """The file again if it changed; a half-written or too short new token leaves the old one in force."""
        assert self.path is not None
        try:
            stamp = stamp_of(self.path.stat())
        except OSError:
            return
        if stamp in (self._stamp, self._refused):
            return
        try:
            self._read()
        except (ShortToken, ExposedToken) as exc:
            self._refused = stamp
            LOG.warning("%s: rotation refused, the previous token stays", exc)
        except DiceError:
            pass  # empty or unreadable for a moment: read again on the next connection

    def accepts(self, offered: Any) -> bool:
        if self.path is None:
            return True
        self._reread()
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


def peer_key(peername: Any) -> str:
    """Who a connection counts against: its IPv4 address, its IPv6 /64 (one host usually owns a whole
    /64), or `unix` for the Unix socket."""
    if not isinstance(peername, tuple) or not peername:
        return "unix"
    try:
        ip = ipaddress.ip_address(str(peername[0]).split("%")[0])
    except ValueError:
        return str(peername[0])
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return str(ip.ipv4_mapped)
        return str(ipaddress.IPv6Network((ip, 64), strict=False))
    return str(ip)


class WrongTokens:
    """Wrong tokens per address, for the back-off of both listeners (`serve`, `lsp --tcp/--ws`): the wait
    before answering the next one doubles from `first` up to `most`; an address is forgotten after FORGET_S
    without one, or once it gives the right token."""

    def __init__(self, first: float, most: float) -> None:
        self.first, self.most = first, most
        self.counts: OrderedDict[str, tuple[int, float]] = OrderedDict()  # address -> (wrong tokens, last)

    def delay(self, key: str) -> float:
        """Count a wrong token from `key`; returns how long to wait before answering it."""
        now = time.monotonic()
        count, last = self.counts.pop(key, (0, now))
        count = 1 if now - last > FORGET_S else count + 1
        self.counts[key] = (count, now)
        while len(self.counts) > TRACKED:
            self.counts.popitem(last=False)
        return min(self.most, self.first * 2.0 ** min(count - 1, 62))

    def forget(self, key: str) -> None:
        self.counts.pop(key, None)


class Gate:
    """The listener's bookkeeping across connections: connections per address, those waiting to
    authenticate (per address and overall, oldest first), wrong tokens per address (for the back-off), and
    which refusals were logged lately."""

    def __init__(self, limits: ConnectionLimits) -> None:
        self.limits = limits
        self.open: dict[str, int] = {}
        self.waiting: OrderedDict[Connection, None] = OrderedDict()  # not yet authenticated, oldest first
        self.waiting_from: dict[str, OrderedDict[Connection, None]] = {}  # the same, per address
        self.wrong = WrongTokens(limits.backoff, limits.backoff_max)
        self.logged: OrderedDict[str, tuple[float, int]] = OrderedDict()  # address -> (last line, suppressed)

    @property
    def unauthenticated(self) -> int:
        return len(self.waiting)

    def enter(self, connection: Connection) -> str | None:
        """Count a new connection in, or say why it is refused. Where a cap is reached, the oldest connection
        still waiting to authenticate makes room (its address's where the cap is the address's): only an
        address whose connections have all authenticated turns a newcomer away."""
        key, limits = connection.key, self.limits
        mine = self.waiting_from.get(key)
        if self.open.get(key, 0) >= limits.max_connections_per_peer:
            if not mine:
                return (f"too many connections from {key} (the server allows "
                        f"{limits.max_connections_per_peer} per address)")
            self.evict(next(iter(mine)), f"too many connections from {key} "
                                         f"({limits.max_connections_per_peer} per address)")
        if not connection.admitted:
            if mine and len(mine) >= limits.max_unauthenticated_per_peer:
                self.evict(next(iter(mine)), f"too many connections from {key} waiting to authenticate "
                                             f"({limits.max_unauthenticated_per_peer} per address)")
            elif len(self.waiting) >= limits.max_unauthenticated:
                self.evict(next(iter(self.waiting)), "too many connections waiting to authenticate "
                                                     f"({limits.max_unauthenticated})")
            self.waiting[connection] = None
            self.waiting_from.setdefault(key, OrderedDict())[connection] = None
        self.open[key] = self.open.get(key, 0) + 1
        connection.counted = True
        return None

    def evict(self, connection: Connection, reason: str) -> None:
        """Close a connection that has not authenticated, to make room for a newer one."""
        self.leave(connection)
        self.warn(connection.key, f"{connection.peer}: {reason}: closed the oldest waiting to authenticate")
        connection.evict(f"{reason}; this connection waited longest to authenticate, so it was closed to make room "
                         "(send auth first, at once)")

    def leave(self, connection: Connection) -> None:
        """Count a connection out (once, however often it is called)."""
        if not connection.counted:
            return
        connection.counted = False
        key = connection.key
        self.open[key] -= 1
        if not self.open[key]:
            del self.open[key]
        self._unwait(connection)

    def _unwait(self, connection: Connection) -> None:
        if connection not in self.waiting:
            return
        del self.waiting[connection]
        mine = self.waiting_from[connection.key]
        del mine[connection]
        if not mine:
            del self.waiting_from[connection.key]

    def admit(self, connection: Connection) -> None:
        """A connection gave the right token: it no longer waits to authenticate, and its address's wrong
        tokens are forgotten."""
        self._unwait(connection)
        self.wrong.forget(connection.key)

    def warn(self, key: str, message: str) -> None:
        """Log a refusal, at most one line per address every LOG_EVERY_S (saying how many were left out)."""
        now = time.monotonic()
        last, suppressed = self.logged.pop(key, (-LOG_EVERY_S, 0))
        if now - last < LOG_EVERY_S:
            self.logged[key] = (last, suppressed + 1)
        else:
            more = f" ({suppressed} more from this address not logged)" if suppressed else ""
            LOG.warning("%s: %s%s", key, message, more)
            self.logged[key] = (now, 0)
        while len(self.logged) > TRACKED:
            self.logged.popitem(last=False)

    def census(self) -> dict[str, Any]:
        """What `status` says about connections: how many are open, and the limits."""
        return {"open": sum(self.open.values()), "unauthenticated": self.unauthenticated, **self.limits.to_json()}


class Closing(RemoteError):
    """The server closes a connection for a reason of its own (a timeout, a client that does not read)."""


class Connection:
    def __init__(self, backend: Backend, tokens: TokenFile, gate: Gate, key: str, reader: asyncio.StreamReader,
                 writer: asyncio.StreamWriter) -> None:
        self.backend, self.tokens, self.gate, self.key = backend, tokens, gate, key
        self.reader, self.writer = reader, writer
        self.limits = gate.limits
        self.admitted = not tokens.required
        self.counted = False  # whether the gate counts it (Gate.enter, until Gate.leave)
        self.evicted = False  # closed by the gate to make room (Gate.evict)
        self.tasks: dict[int, tuple[asyncio.Task[None], Ticket]] = {}
        self.peer = str(writer.get_extra_info("peername") or "unix socket")
        self.loop = asyncio.get_running_loop()
        self.connected = self.last_active = self.loop.time()
        writer.transport.set_write_buffer_limits(high=self.limits.reply_buffer)

    def unsent(self) -> int:
        return self.writer.transport.get_write_buffer_size()

    def send(self, message: dict[str, Any], optional: bool = False) -> None:
        """Queue one frame; an `optional` one (progress) is dropped while the client leaves its replies unread."""
        if self.writer.is_closing() or (optional and self.unsent() > self.limits.reply_buffer):
            return
        try:
            frame = encode(message)
        except ProtocolError as exc:
            frame = encode(error(message.get("id", 0), exc.code, f"the reply is too large to send: {exc}"))
        self.writer.write(frame)

    async def run(self) -> None:
        abort = False
        try:
            while (message := await self.next_message()) is not None:
                self.last_active = self.loop.time()
                if not await self.admit(message):
                    break
                self.dispatch(message)
                await asyncio.sleep(0)  # the requests just started run before more frames are read
        except ProtocolError as exc:
            if not self.evicted:  # an evicted one was told why; its stream ended where the server closed it
                if isinstance(exc, TooManyValues):
                    exc = ProtocolError(exc.code, f"{exc} (--max-frame-objects)")
                elif exc.code == "too_large" and not self.admitted:
                    exc = ProtocolError("too_large", f"{exc} bytes before authentication: send auth with the token "
                                                     "first")
                self.refused(f"{exc} (closing the connection)")
                self.send(error(0, exc.code, str(exc)))
        except Closing as exc:
            self.refused(f"{exc} (closing the connection)")
            abort = exc.code == "stalled"
            self.send(error(0, exc.code, str(exc)))
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            for task, ticket in self.tasks.values():
                ticket.cancel()
                task.cancel()
            self.close(abort)

    def refused(self, message: str) -> None:
        """A line in the log: throttled per address before admission (where a flood would come from)."""
        if self.admitted:
            LOG.warning("%s: %s", self.peer, message)
        else:
            self.gate.warn(self.key, f"{self.peer}: {message}")

    def evict(self, reason: str) -> None:
        """Closed by the gate before authenticating, to make room for a newer connection."""
        self.evicted = True
        self.send(error(0, "too_many_connections", reason))
        self.close(False)

    def close(self, abort: bool) -> None:
        """Close now; replies the client has not read are dropped after CLOSE_GRACE_S (or at once on `abort`)."""
        transport = self.writer.transport
        if abort:
            transport.abort()
            return
        self.writer.close()
        if self.unsent():
            self.loop.call_later(CLOSE_GRACE_S, transport.abort)

    async def next_message(self) -> dict[str, Any] | None:
        """The next frame within the limits that apply now: before admission the first frame must be small
        and come soon; after it, a connection may not idle long, trickle a frame, or leave replies unread."""
        if not self.admitted:
            try:
                async with asyncio.timeout_at(self.connected + self.limits.handshake_timeout):
                    return await read_frame(self.reader, self.limits.preauth_frame,
                                            max_objects=self.limits.max_frame_objects)
            except TimeoutError:
                raise Closing("handshake_timeout", "no auth frame within "
                              f"{self.limits.handshake_timeout:g} s of connecting") from None
        await self.writable()
        while True:
            idle_for = self.loop.time() - self.last_active
            wait = self.limits.idle_timeout if self.tasks else max(0.0, self.limits.idle_timeout - idle_for)
            try:
                return await read_frame(self.reader, MAX_FRAME, wait, self.limits.frame_timeout,
                                        self.limits.max_frame_objects)
            except TimeoutError:
                if not self.tasks and self.loop.time() - self.last_active >= self.limits.idle_timeout:
                    raise Closing("idle", f"closed after {self.limits.idle_timeout:g} s without a request "
                                  "(the client reconnects when it needs to)") from None

    async def writable(self) -> None:
        """Wait while the client's unread replies exceed the bound; close it if that lasts too long."""
        try:
            async with asyncio.timeout(self.limits.stall_timeout):
                while self.unsent() > self.limits.reply_buffer:
                    await self.writer.drain()  # paused writing resumes once the buffer is down to a quarter
                    if self.unsent() > self.limits.reply_buffer:
                        await asyncio.sleep(0.05)
        except TimeoutError:
            raise Closing("stalled", f"{self.unsent()} bytes of replies left unread for "
                          f"{self.limits.stall_timeout:g} s") from None

    async def admit(self, message: dict[str, Any]) -> bool:
        offered = message.get("token")
        if offered is None and self.admitted:
            return True
        if offered is not None and self.tokens.accepts(offered):
            if not self.admitted:
                self.admitted = True
                self.gate.admit(self)
            return True
        if offered is None:
            reason = "a token is required"
        else:
            delay = self.gate.wrong.delay(self.key)
            reason = "wrong token"
            self.refused(f"wrong token (answered after {delay:g} s; closing the connection)")
            await asyncio.sleep(delay)
        if offered is None:
            self.refused(f"{reason} (closing the connection)")
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
        elif method == "auth":
            self.send({"id": request_id, "result": {"server": "dice-lsp", "version": __version__,
                                                    "limits": self.limits.to_json()}})
        elif request_id in self.tasks:
            self.send(error(request_id, "duplicate_id", f"request {request_id} is still running"))
        elif len(self.tasks) >= self.limits.max_in_flight:
            self.send(error(request_id, "busy", f"{counted(len(self.tasks), 'request')} of this connection in flight, "
                            f"the server's limit per connection (--max-in-flight); try again"))
        else:
            ticket = Ticket()
            task = asyncio.create_task(self.answer(request_id, method, params, ticket))
            task.add_done_callback(lambda done: self.finished(request_id, method, done))
            self.tasks[request_id] = (task, ticket)

    def finished(self, request_id: int, method: str, task: asyncio.Task[None]) -> None:
        """Every request gets a reply: a task cancelled (even before it started) answers `cancelled`."""
        self.tasks.pop(request_id, None)
        self.last_active = self.loop.time()
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
            self.loop.call_soon_threadsafe(lambda: self.send({"id": request_id, "progress": {"message": message}},
                                                             optional=True))

        outcome = "ok"
        try:
            result = await self.backend.call(method, params, ticket, progress)
            if method == "status" and isinstance(result, dict):
                result = {**result, "connections": self.gate.census()}
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
            await self.writer.drain()  # the request stays in flight until the client takes its reply


_KINDS = ((stat.S_ISREG, "a regular file"), (stat.S_ISDIR, "a directory"), (stat.S_ISLNK, "a symbolic link"),
          (stat.S_ISFIFO, "a named pipe"), (stat.S_ISCHR, "a device"), (stat.S_ISBLK, "a device"))


def claim_socket(path: str) -> None:
    """Make way for a Unix socket at `path`: nothing there, or a stale socket (left by a server that died:
    nothing answers on it), which is removed. Anything else stays as it is and is a DiceError: a file,
    folder or link (never deleted), or a socket a server still answers on."""
    try:
        found = os.lstat(path)
    except FileNotFoundError:
        return
    except OSError as exc:
        raise DiceError(f"--socket {path}: {exc.strerror or exc}") from exc
    if not stat.S_ISSOCK(found.st_mode):
        kind = next((name for test, name in _KINDS if test(found.st_mode)), "a file")
        raise DiceError(f"--socket {path}: {kind} is there, not a socket; left untouched (remove it or choose "
                        "another path)")
    with socket.socket(socket.AF_UNIX) as probe:
        probe.settimeout(2.0)
        try:
            probe.connect(path)
        except ConnectionRefusedError:
            pass  # stale: nothing listens there
        except OSError as exc:
            raise DiceError(f"--socket {path}: {exc.strerror or exc}") from exc
        else:
            raise DiceError(f"--socket {path}: a server is listening there already")
    os.unlink(path)


def socket_identity(path: str) -> tuple[int, int] | None:
    try:
        found = os.lstat(path)
    except OSError:
        return None
    return found.st_dev, found.st_ino


async def listen(backend: Backend, address: Address, tokens: TokenFile,
                 limits: ConnectionLimits | None = None) -> tuple[asyncio.Server, str]:
    """Start accepting connections on `address`; returns the server and where it listens (the real port)."""
    check_bind(address, tokens)
    gate = Gate(limits or ConnectionLimits())

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        key = peer_key(writer.get_extra_info("peername"))
        connection = Connection(backend, tokens, gate, key, reader, writer)
        refusal = gate.enter(connection)
        if refusal is not None:
            gate.warn(key, f"{refusal} (connection refused)")
            writer.write(encode(error(0, "too_many_connections", refusal)))
            writer.close()
            asyncio.get_running_loop().call_later(CLOSE_GRACE_S, writer.transport.abort)
            return
        try:
            await connection.run()
        finally:
            gate.leave(connection)

    if address.socket is not None:
        claim_socket(address.socket)
        try:
            listener = await asyncio.start_unix_server(handle, path=address.socket)
        except OSError as exc:
            raise DiceError(f"cannot listen on {address.socket}: {exc.strerror or exc}") from exc
        os.chmod(address.socket, 0o600)  # the socket's permissions are its access control
        return listener, f"unix://{address.socket}"
    try:
        listener = await asyncio.start_server(handle, address.host, address.port)
    except OSError as exc:
        reason = os.strerror(exc.errno) if exc.errno else str(exc)
        raise DiceError(f"cannot listen on {address.host}:{address.port}: {reason}") from exc
    return listener, f"tcp://{address.host}:{listener.sockets[0].getsockname()[1]}"


async def serve(service: Service, address: Address, tokens: TokenFile,
                on_ready: Callable[[str], None] = lambda _where: None, limits: ConnectionLimits | None = None) -> None:
    """Listen until SIGINT/SIGTERM; the model loads while the first clients connect. On the way out every
    running compiler and harness child is killed (`lifetime.stop_all`) and the service closed."""
    listener, where = await listen(service, address, tokens, limits)
    ours = socket_identity(address.socket) if address.socket is not None else None
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
        stop_all()
        service.close()
        if address.socket is not None and ours is not None and socket_identity(address.socket) == ours:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(address.socket)  # only the socket this server made: something since put there stays
