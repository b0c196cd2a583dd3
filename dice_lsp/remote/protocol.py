"""Frames of the team server's RPC: a 4-byte big-endian length, then one msgpack map.

Requests: `{"v": 1, "id": int, "method": str, "params": map, "token"?: str}`. Replies carry the request's id:
`{"v": 1, "id", "result": ...}` or `{"v": 1, "id", "error": {"code": str, "message": str}}`; long requests
also send `{"v": 1, "id", "progress": {...}}` before their reply. A frame over the size limit, bytes that are
not msgpack, or a map without the fields its kind needs is a `ProtocolError`: the peer gets one error frame
and the connection is closed, since the stream can no longer be trusted to be in step. Errors about the
connection rather than one request (a broken frame, a timeout, a refused connection) carry id 0.

A connection starts with `auth`: `{"id", "method": "auth", "params": {}, "token"?}` as its first frame, small
enough for the server's pre-authentication limit (a few KiB), so the token never rides on a frame as large as
a source file; the reply says who answers and the connection's limits. A server without a token answers it
too. (The token may also ride on the first request, as before `auth` existed, when that request is small.)

A server also bounds what a frame may unpack into (`read_frame`'s `max_objects`): msgpack spends one byte
on an empty array that costs Python 64, so 16 MiB of them cost a GiB. Before unpacking, `count_values` walks
the frame's headers (skipping string bodies by their length) and refuses one with more values than that.
"""

from __future__ import annotations

import asyncio
import struct
from typing import Any

import msgpack  # type: ignore[import-untyped]

from dice_lsp.errors import DiceError

VERSION = 1
MAX_FRAME = 16 * 1024 * 1024  # bytes of one frame's body: a whole source file and its context fit easily
METHODS = frozenset({"auth", "complete", "fill", "optimize", "repair", "check", "bench", "status", "cancel"})
_LENGTH = struct.Struct(">I")


class RemoteError(DiceError):
    """An error that travels as `{"code", "message"}`: raised by the service to answer a request, and by the
    client for an error reply, a lost connection or a server it cannot reach."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


class ProtocolError(RemoteError):
    """The peer sent something that is not a frame of this protocol."""


def encode(message: dict[str, Any]) -> bytes:
    body: bytes = msgpack.packb({"v": VERSION, **message}, use_bin_type=True)
    if len(body) > MAX_FRAME:
        raise ProtocolError("too_large", f"frame of {len(body)} bytes exceeds the limit of {MAX_FRAME}")
    return _LENGTH.pack(len(body)) + body


class TooManyValues(ProtocolError):
    """A frame that would unpack into more values than its reader allows."""


# after a type byte: the bytes of value that follow (fixed), or the bytes of its length (then the value's bytes)
_FIXED = {0xc0: 0, 0xc2: 0, 0xc3: 0, 0xca: 4, 0xcb: 8, 0xcc: 1, 0xcd: 2, 0xce: 4, 0xcf: 8, 0xd0: 1, 0xd1: 2,
          0xd2: 4, 0xd3: 8, 0xd4: 2, 0xd5: 3, 0xd6: 5, 0xd7: 9, 0xd8: 17}  # nil, bools, numbers, fixext (type + data)
_SIZED = {0xc4: 1, 0xc5: 2, 0xc6: 4, 0xd9: 1, 0xda: 2, 0xdb: 4}  # bin, str
_EXT = {0xc7: 1, 0xc8: 2, 0xc9: 4}  # ext: length, a type byte, data
_ARRAY = {0xdc: 2, 0xdd: 4}
_MAP = {0xde: 2, 0xdf: 4}


def count_values(body: bytes, most: int) -> int:
    """How many values (strings, numbers, arrays, maps, each key) the msgpack value at the start of `body`
    holds, without unpacking it: TooManyValues past `most` (after at most `most` steps, whatever the frame
    announces), and a `malformed` ProtocolError where containers announce more values than bytes remain
    (each takes at least one). Bytes that are not msgpack are left to the unpacker to refuse."""
    at, pending, seen, end = 0, 1, 0, len(body)
    while pending and at < end:
        pending -= 1
        seen += 1
        if seen > most:
            raise TooManyValues("too_large", f"frame of more than {most} values (strings, numbers, arrays, maps "
                                             f"and their keys) exceeds the limit of {most}")
        kind = body[at]
        at += 1
        if kind <= 0x7f or kind >= 0xe0:  # fixint
            continue
        if kind <= 0x8f:  # fixmap
            pending += 2 * (kind & 0x0f)
        elif kind <= 0x9f:  # fixarray
            pending += kind & 0x0f
        elif kind <= 0xbf:  # fixstr
            at += kind & 0x1f
        elif kind in _FIXED:
            at += _FIXED[kind]
        elif kind in _SIZED or kind in _EXT:
            width = _SIZED.get(kind) or _EXT[kind]
            at += width + int.from_bytes(body[at:at + width], "big") + (kind in _EXT)
        elif kind in _ARRAY or kind in _MAP:
            width = _ARRAY.get(kind) or _MAP[kind]
            pending += int.from_bytes(body[at:at + width], "big") * (2 if kind in _MAP else 1)
            at += width
        else:  # 0xc1 is never msgpack
            break
        if pending > end - at:
            raise ProtocolError("malformed", f"a frame announces {pending} more values than its bytes can hold")
    return seen


def decode(body: bytes, max_objects: int | None = None) -> dict[str, Any]:
    """One frame's body as a message; checks the version and the fields every message has. With
    `max_objects`, a frame holding more values than that is refused before it is unpacked."""
    bounds: dict[str, int] = {}
    if max_objects is not None:
        count_values(body, max_objects)
        bounds = {"max_array_len": max_objects, "max_map_len": max_objects}
    try:
        message = msgpack.unpackb(body, raw=False, strict_map_key=True, **bounds)
    except (ValueError, msgpack.UnpackException) as exc:
        raise ProtocolError("malformed", f"not a msgpack frame ({exc})") from exc
    if not isinstance(message, dict):
        raise ProtocolError("malformed", "a frame must be a map")
    if message.get("v") != VERSION:
        raise ProtocolError("version", f"protocol version {message.get('v')!r} is not supported (this is {VERSION})")
    if not isinstance(message.get("id"), int) or isinstance(message.get("id"), bool):
        raise ProtocolError("malformed", "a frame needs an integer id")
    return message


def check_request(message: dict[str, Any]) -> tuple[int, str, dict[str, Any]]:
    """(id, method, params) of a request, or a ProtocolError saying what is wrong with it."""
    method, params = message.get("method"), message.get("params", {})
    if method not in METHODS:
        raise ProtocolError("unknown_method", f"unknown method {method!r} (known: {', '.join(sorted(METHODS))})")
    if not isinstance(params, dict):
        raise ProtocolError("malformed", "params must be a map")
    return message["id"], method, params


async def read_frame(reader: asyncio.StreamReader, limit: int = MAX_FRAME, wait: float | None = None,
                     deadline: float | None = None, max_objects: int | None = None) -> dict[str, Any] | None:
    """The next message, or None at a clean end of the stream (between frames). A frame whose header announces
    more than `limit` bytes is refused before its body is read. `wait`: seconds to wait for a frame to begin
    (a TimeoutError after them, with nothing read); `deadline`: seconds the whole frame may then take to
    arrive (a `too_slow` ProtocolError: a sender that trickles bytes holds nothing for long); `max_objects`:
    the most values the frame may unpack into (`decode`)."""
    try:
        async with asyncio.timeout(wait):
            first = await reader.readexactly(1)
    except asyncio.IncompleteReadError:
        return None
    try:
        async with asyncio.timeout(deadline):
            return await _rest_of_frame(reader, first, limit, max_objects)
    except TimeoutError as exc:
        raise ProtocolError("too_slow", f"a frame took more than {deadline:g} s to arrive") from exc


async def _rest_of_frame(reader: asyncio.StreamReader, first: bytes, limit: int,
                         max_objects: int | None) -> dict[str, Any]:
    try:
        header = first + await reader.readexactly(_LENGTH.size - 1)
    except asyncio.IncompleteReadError as exc:
        raise ProtocolError("malformed", "the stream ended inside a frame header") from exc
    (length,) = _LENGTH.unpack(header)
    if length > limit:
        raise ProtocolError("too_large", f"frame of {length} bytes exceeds the limit of {limit}")
    try:
        body = await reader.readexactly(length)
    except asyncio.IncompleteReadError as exc:
        short = length - len(exc.partial)
        raise ProtocolError("malformed", f"the stream ended {short} bytes short of a frame") from exc
    return decode(body, max_objects)


def error(request_id: int, code: str, message: str) -> dict[str, Any]:
    return {"id": request_id, "error": {"code": code, "message": message}}
