"""LSP base-protocol framing: bytes in, JSON values (or why some bytes were not a message) out.

Why our own reader instead of pygls 2.1.1's loop (`pygls.io_.run_async`): that loop trusts every header.
It looks for `Content-Length` only while it has none, so a header it cannot match, a missing one or a
bad line leaves it waiting for a blank line that never counts, deaf to every later message; a length
longer than the body makes it swallow the next message into this one; and `Content-Length: 10**12`
makes it try to read (and allocate) that many bytes. The stream is one client's, so the answer to a
framing mistake is to say so, as JSON-RPC asks for bytes that are not a message (Parse error -32700, or
Invalid Request -32600 for a message whose length was wrong, with its id when it has one so the client
stops waiting for an answer), and to find the next message: the next `Content-Length:` in the stream.

Rules, from the LSP specification's base protocol, with two leniencies that cost nothing:
- A header block is `Name: value` lines and a blank line. Lines may end in CRLF (the spec) or LF alone;
  blank lines before a block are skipped. Only `Content-Length` matters (its name in any case); a block
  without one, a line that is not a header, a length that is not a plain decimal, two lengths, a length
  over `max_bytes` (64 MiB; smaller before a socket client is admitted) or a block over 8 KiB is one
  problem, and the reader then scans for the next `Content-Length:` (spelled as the spec spells it).
- A body is exactly Content-Length bytes of UTF-8 JSON. One that does not parse is one problem and the
  scan starts at the body's first byte, so a message that a too-long length pulled into it is found.
- A length longer than the body it carries: the client then waits for an answer and we for bytes. So
  while a body is incomplete, a `Content-Length:` inside it that follows a complete JSON object or array
  means the length was wrong: that JSON is answered as a problem and reading goes on from the header.
  (Inside a real body that text sits in a string, where what precedes it is never complete JSON.)
Memory is bounded: a body is held only up to `max_bytes`, a header block up to 8 KiB, a scan keeps 14
bytes. Nothing here does I/O or knows pygls; `dice_lsp.lsp.transport` feeds it and answers problems.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

MAX_MESSAGE_BYTES = 64 * 1024 * 1024
MAX_HEADER_BYTES = 8 * 1024
PARSE_ERROR = -32700
INVALID_REQUEST = -32600
MARKER = b"Content-Length:"
_HEADER = re.compile(rb"([!#$%&'*+.^_`|~0-9A-Za-z-]+):[ \t]*(.*?)[ \t]*")
_HEADERS, _BODY, _SCAN = "headers", "body", "scan"
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")  # in the raw body: a message that may hold one
_SURROGATE = re.compile("[\ud800-\udfff]")


@dataclass(frozen=True)
class Message:
    """One body, parsed: a JSON value (not yet known to be a JSON-RPC message)."""

    value: Any


@dataclass(frozen=True)
class Problem:
    """Bytes that were not a message: the JSON-RPC error to answer with, and the request's id if known."""

    code: int
    reason: str
    id: int | str | None = None


def parse_json(body: bytes) -> tuple[Any, str | None]:
    """A body's JSON value, or None and why it is not UTF-8 JSON.

    JSON may spell a lone UTF-16 surrogate (`"\\ud800"`), which is no Unicode text: such a string could
    not be encoded for the tokenizer, tree-sitter or a file. Each one becomes U+FFFD, which is one code
    point and one UTF-16 unit like the surrogate, so LSP positions in the text stay where they were.
    """
    try:
        value = json.loads(body.decode("utf-8"))
    except UnicodeDecodeError as exc:
        return None, f"not UTF-8 ({exc.reason} at byte {exc.start})"
    except RecursionError:
        return None, "nested too deeply"
    except ValueError as exc:
        return None, f"not JSON ({exc})"
    return (_without_surrogates(value) if _SURROGATE_ESCAPE.search(body) else value), None


def _without_surrogates(value: Any) -> Any:
    """`value` with every surrogate code point left in its strings replaced by U+FFFD (a pair of escapes
    that makes one character was already joined by the JSON parser)."""
    if isinstance(value, str):
        return _SURROGATE.sub("\ufffd", value)
    if isinstance(value, list):
        return [_without_surrogates(item) for item in value]
    if isinstance(value, dict):
        return {_without_surrogates(key): _without_surrogates(item) for key, item in value.items()}
    return value


def request_id(value: Any) -> int | str | None:
    """The id of a parsed message, when it has a usable one."""
    found = value.get("id") if isinstance(value, dict) else None
    return found if isinstance(found, (int, str)) and not isinstance(found, bool) else None


def _show(data: bytes) -> str:
    text = data[:40].decode("utf-8", "replace")
    return repr(text + "..." if len(data) > 40 else text)


class Framer:
    """Turns a byte stream into messages and problems; `feed` bytes, then `next` until it says None."""

    def __init__(self, max_bytes: int = MAX_MESSAGE_BYTES) -> None:
        self.max_bytes = max_bytes
        self._buffer = bytearray()
        self._state = _HEADERS
        self._length = 0  # the body's announced length, in _BODY
        self._searched = 0  # how far the pending body was searched for a following header
        self._scan_from = 0  # where the scan for the next header starts, in _SCAN

    @property
    def buffered(self) -> int:
        """Bytes held, waiting to become a message (bounded: see the module's docstring)."""
        return len(self._buffer)

    def feed(self, data: bytes) -> None:
        self._buffer += data

    def next(self) -> Message | Problem | None:
        """The next message or problem that the bytes fed so far hold; None when more bytes are needed."""
        while True:
            if self._state == _SCAN and not self._scan():
                return None
            if self._state == _HEADERS:
                header = self._headers()
                if header is None:
                    return None
                if isinstance(header, Problem):
                    self._resync(1)  # past this block's first byte: its own header is not found again
                    return header
                self._state, self._length, self._searched = _BODY, header, 0
            if self._state == _BODY:
                return self._body()

    def finish(self) -> Problem | None:
        """At the end of the stream: the message it cut off, if any."""
        if self._state == _BODY:
            return Problem(PARSE_ERROR, f"the stream ended {len(self._buffer)} bytes into a "
                                        f"{self._length}-byte message")
        if self._state == _HEADERS and self._buffer.strip():
            return Problem(PARSE_ERROR, "the stream ended inside a message's headers")
        return None

    def _resync(self, start: int) -> None:
        self._state, self._scan_from = _SCAN, start

    def _scan(self) -> bool:
        """Drop bytes up to the next `Content-Length:`; False while none has arrived."""
        found = self._buffer.find(MARKER, self._scan_from)
        if found >= 0:
            del self._buffer[:found]
            self._state = _HEADERS
            return True
        dropped = max(0, len(self._buffer) - (len(MARKER) - 1))  # keep what may be a header's start
        del self._buffer[:dropped]
        self._scan_from = max(0, self._scan_from - dropped)
        return False

    def _headers(self) -> int | Problem | None:
        """The Content-Length of the header block at the buffer's start (consumed), a problem, or None
        while the block is incomplete."""
        length: int | None = None
        position = 0
        seen = False  # a header line in this block
        while True:
            end = self._buffer.find(b"\n", position, MAX_HEADER_BYTES + 1)
            if end < 0:
                if len(self._buffer) > MAX_HEADER_BYTES:
                    return Problem(PARSE_ERROR, f"a header block longer than {MAX_HEADER_BYTES} bytes")
                return None
            line = bytes(self._buffer[position:end])
            line = line[:-1] if line.endswith(b"\r") else line
            position = end + 1
            if not line and not seen:
                del self._buffer[:position]  # a stray blank line before a block
                position = 0
                continue
            if not line:
                if length is None:
                    return Problem(PARSE_ERROR, "a message without a Content-Length header")
                del self._buffer[:position]
                return length
            match = _HEADER.fullmatch(line)
            if match is None:
                return Problem(PARSE_ERROR, f"{_show(line)} is not a header")
            seen = True
            if match.group(1).lower() != b"content-length":
                continue
            value = match.group(2)
            if length is not None:
                return Problem(PARSE_ERROR, "two Content-Length headers")
            if not (value.isdigit() and len(value) <= 20):
                return Problem(PARSE_ERROR, f"Content-Length {_show(value)} is not a number of bytes")
            length = int(value)
            if length > self.max_bytes:
                return Problem(PARSE_ERROR, f"a message of {length} bytes is over the limit of {self.max_bytes}")

    def _body(self) -> Message | Problem | None:
        cut = self._cut_short()
        if cut is not None:
            return cut
        if len(self._buffer) < self._length:
            return None
        value, error = parse_json(bytes(self._buffer[:self._length]))
        if error is not None:
            self._resync(0)
            return Problem(PARSE_ERROR, f"the {self._length}-byte body is {error}")
        del self._buffer[:self._length]
        self._state = _HEADERS
        return Message(value)

    def _cut_short(self) -> Problem | None:
        """A complete JSON object or array followed by a header inside the pending body: the length
        was too long. Answer that JSON as a problem and go on from the header."""
        limit = min(len(self._buffer), self._length)
        while (found := self._buffer.find(MARKER, self._searched, limit)) >= 0:
            self._searched = found + 1
            end = found
            while end > 0 and self._buffer[end - 1] in b" \t\r\n":
                end -= 1
            if end == 0 or self._buffer[end - 1] not in b"}]":
                continue
            head = bytes(self._buffer[:end])
            value, error = parse_json(head)
            if error is None:
                del self._buffer[:found]
                self._state = _HEADERS
                return Problem(INVALID_REQUEST, f"Content-Length announced {self._length} bytes but the "
                                                f"message ended after {len(head)}", request_id(value))
        self._searched = max(self._searched, limit - len(MARKER) + 1)
        return None
