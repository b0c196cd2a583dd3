"""The team server's frames: what a peer may send, and the clear error for everything else."""

from __future__ import annotations

import asyncio
import struct
import time

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


def values(value: object) -> int:
    """Values as `count_values` counts them: each string, number, array, map, key."""
    if isinstance(value, dict):
        return 1 + sum(values(k) + values(v) for k, v in value.items())
    if isinstance(value, list):
        return 1 + sum(values(item) for item in value)
    return 1


@pytest.mark.parametrize("value", [
    {"v": 1, "id": 7, "method": "check", "params": {"text": "x" * 70_000,
                                                    "files": {f"h{n}.cuh": "" for n in range(256)},
                                                    "settings": {"defines": ["A=1"] * 20, "temperature": 0.5}}},
    [None, True, False, -1, -33, 255, 65_536, -(2**40), 2**64 - 1, 1.5, b"x" * 300, "é" * 70_000, [], {}],
    [msgpack.ExtType(3, b"z" * n) for n in (1, 2, 3, 4, 8, 16, 17, 300, 70_000)],
])
def test_values_are_counted_from_the_headers_alone(value: object) -> None:
    from dice_lsp.remote.protocol import count_values

    body = msgpack.packb(value, use_bin_type=True)
    expected = len(value) + 1 if isinstance(value, list) and isinstance(value[0], msgpack.ExtType) else values(value)
    assert count_values(body, 10**6) == expected


def test_a_frame_of_many_small_values_is_refused_before_it_is_unpacked() -> None:
    """16 Mi empty arrays (1.1 GiB once unpacked), 5 Mi two-letter strings: refused in well under a second of
    this thread's CPU (its CPU time, not the wall clock, which a busy machine stretches)."""
    from dice_lsp.remote.protocol import TooManyValues, decode

    count = MAX_FRAME - 5
    for body in (b"\xdd" + struct.pack(">I", count) + b"\x90" * count,
                 b"\xdd" + struct.pack(">I", 5 << 20) + b"\xa2ab" * (5 << 20)):
        started = time.thread_time()
        with pytest.raises(TooManyValues, match="frame of more than 65536 values") as caught:
            decode(body, 65536)
        assert caught.value.code == "too_large" and time.thread_time() - started < 1.0
    request = {"v": VERSION, "id": 1, "method": "fill", "params": {"prefix": "x" * 100}}
    assert decode(msgpack.packb(request), 65536) == request
    assert decode(msgpack.packb({"v": VERSION, "id": 1, "l": [0] * 65_000}))["id"] == 1  # no bound: as before
    with pytest.raises(ProtocolError, match="announces 4294967295 more values than its bytes can hold"):
        decode(b"\xdd" + struct.pack(">I", 2**32 - 1) + b"\x90" * 10, 65536)
