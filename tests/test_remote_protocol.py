"""The team server's frames: what a peer may send, and the clear error for everything else."""

from __future__ import annotations

import asyncio
import struct

import msgpack  # type: ignore[import-untyped]
import pytest

from dice_lsp.remote.protocol import MAX_FRAME, VERSION, ProtocolError, check_request, encode, read_frame


def stream(data: bytes) -> asyncio.StreamReader:
    reader = asyncio.StreamReader()
    reader.feed_data(data)
    reader.feed_eof()
    return reader


def frames(*data: bytes) -> list[object]:
    async def read_all() -> list[object]:
        reader, found = stream(b"".join(data)), []
        while (message := await read_frame(reader)) is not None:
            found.append(message)
        return found

    return asyncio.run(read_all())


def raw(value: object) -> bytes:
    body = msgpack.packb(value, use_bin_type=True)
    return struct.pack(">I", len(body)) + body


def test_requests_round_trip_in_order() -> None:
    first = {"id": 1, "method": "complete", "params": {"text": "__global__ void k() {\n}\n", "line": 1}}
    second = {"id": 2, "method": "cancel", "params": {"target": 1}}
    assert frames(encode(first), encode(second)) == [{"v": VERSION, **first}, {"v": VERSION, **second}]
    assert check_request({"v": VERSION, **first}) == (1, "complete", first["params"])


@pytest.mark.parametrize(("data", "code"), [
    (struct.pack(">I", MAX_FRAME + 1), "too_large"),
    (struct.pack(">I", 3) + b"\xc1\xc1\xc1", "malformed"),  # 0xc1 is never used in msgpack
    (raw([1, 2, 3]), "malformed"),
    (raw({"v": 99, "id": 1, "method": "status"}), "version"),
    (raw({"v": VERSION, "method": "status"}), "malformed"),
    (struct.pack(">I", 100) + b"\x80", "malformed"),  # the stream ends inside the frame
    (b"\x00\x00", "malformed"),  # inside the header
])
def test_what_is_not_a_frame_is_a_protocol_error_with_a_code(data: bytes, code: str) -> None:
    with pytest.raises(ProtocolError) as caught:
        frames(data)
    assert caught.value.code == code and str(caught.value)


def test_unknown_methods_and_bad_params_are_refused_by_name() -> None:
    with pytest.raises(ProtocolError, match="unknown method 'shutdown'"):
        check_request({"v": VERSION, "id": 3, "method": "shutdown"})
    with pytest.raises(ProtocolError, match="params must be a map"):
        check_request({"v": VERSION, "id": 4, "method": "status", "params": [1]})


def test_an_oversized_message_is_refused_before_it_is_sent() -> None:
    with pytest.raises(ProtocolError) as caught:
        encode({"id": 5, "method": "fill", "params": {"text": "x" * (MAX_FRAME + 1)}})
    assert caught.value.code == "too_large"
