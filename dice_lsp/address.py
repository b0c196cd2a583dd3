"""Where a team server listens: `tcp://HOST[:PORT]` or `unix:///PATH`, parsed once for the settings (which check a
user's `dice.server.url`), the client that connects and the server that listens."""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlsplit

from dice_lsp.errors import DiceError

DEFAULT_HOST = "127.0.0.1"  # loopback: a team server listens, and a client connects, here unless told otherwise
DEFAULT_PORT = 7077


@dataclass(frozen=True)
class Address:
    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT
    socket: str | None = None  # a Unix socket path instead of host:port

    def __str__(self) -> str:
        return f"unix://{self.socket}" if self.socket is not None else f"tcp://{self.host}:{self.port}"


def parse_address(url: str) -> Address:
    """`tcp://HOST[:PORT]` or `unix:///PATH`."""
    parts = urlsplit(url)
    if parts.scheme == "unix" and parts.path:
        return Address(socket=parts.path)
    try:
        port = parts.port
    except ValueError:
        port = -1
    if parts.scheme != "tcp" or not parts.hostname or port == -1:
        raise DiceError(f"server address {url!r}: expected tcp://HOST:PORT or unix:///PATH")
    return Address(parts.hostname, port or DEFAULT_PORT)
