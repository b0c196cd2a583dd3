"""LSP framing on stdio: every bad header or body is answered, and the next good message still is.

One real `dice-lsp lsp` process serves the whole module (each test ends with a good `initialize`, so
the stream is back in step for the next); the model never loads (no `initialized` is sent).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from dice_lsp.lsp.framing import Framer, Message, Problem, parse_json

from .lsp_wire import LspProcess, frame, initialize

PARSE_ERROR, INVALID_REQUEST, INVALID_PARAMS = -32700, -32600, -32602


@pytest.fixture(scope="module")
def lsp(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LspProcess]:
    process = LspProcess(tmp_path_factory.mktemp("framing"))
    try:
        yield process
    finally:
        process.close()


def body(message: dict[str, Any]) -> bytes:
    return json.dumps(message).encode()


def assert_initialized(reply: dict[str, Any] | None, msg_id: int) -> None:
    assert reply is not None, "the server closed its output"
    assert reply["id"] == msg_id and "error" not in reply, reply
    assert reply["result"]["serverInfo"]["name"] == "dice-lsp"
    assert "inlineCompletionProvider" in reply["result"]["capabilities"]


def assert_error(reply: dict[str, Any] | None, code: int, message: str, msg_id: int | None = None) -> None:
    """The reply is exactly this JSON-RPC error (`message`: its message's start)."""
    assert reply is not None, "the server closed its output"
    assert set(reply) == {"jsonrpc", "id", "error"} and reply["jsonrpc"] == "2.0", reply
    assert reply["id"] == msg_id and reply["error"]["code"] == code, reply
    assert reply["error"]["message"].startswith(message), reply


def test_a_good_message_is_answered(lsp: LspProcess) -> None:
    lsp.send(frame(initialize(1)))
    assert_initialized(lsp.replies.next(60), 1)  # the first reply waits for the server's start-up


def test_a_short_content_length_is_a_parse_error_and_the_next_message_is_answered(lsp: LspProcess) -> None:
    data = body(initialize(2))
    lsp.send(frame(data, len(data) - 5) + frame(initialize(3)))
    assert_error(lsp.replies.next(), PARSE_ERROR, f"the {len(data) - 5}-byte body is not JSON (")
    assert_initialized(lsp.replies.next(), 3)


def test_a_long_content_length_does_not_swallow_the_next_message(lsp: LspProcess) -> None:
    data = body(initialize(4))
    lsp.send(frame(data, len(data) + 40))  # the client now waits for a reply, the server for 40 bytes
    time.sleep(0.2)
    lsp.send(frame(initialize(5)))
    assert_error(lsp.replies.next(), INVALID_REQUEST,
                 f"Content-Length announced {len(data) + 40} bytes but the message ended after {len(data)}", 4)
    assert_initialized(lsp.replies.next(), 5)


def test_a_message_without_content_length_is_skipped(lsp: LspProcess) -> None:
    lsp.send(b"Content-Type: application/vscode-jsonrpc; charset=utf-8\r\n\r\n" + body(initialize(6))
             + frame(initialize(7)))
    assert_error(lsp.replies.next(), PARSE_ERROR, "a message without a Content-Length header")
    assert_initialized(lsp.replies.next(), 7)


def test_a_negative_content_length_is_skipped(lsp: LspProcess) -> None:
    data = body(initialize(8))
    lsp.send(b"Content-Length: -5\r\n\r\n" + data + frame(initialize(9)))
    assert_error(lsp.replies.next(), PARSE_ERROR, "Content-Length '-5' is not a number of bytes")
    assert_initialized(lsp.replies.next(), 9)


def test_lf_only_headers_are_accepted(lsp: LspProcess) -> None:
    data = body(initialize(10))
    lsp.send(b"Content-Length: %d\n\n%s" % (len(data), data) + frame(initialize(11)))
    assert_initialized(lsp.replies.next(), 10)
    assert_initialized(lsp.replies.next(), 11)


def test_a_terabyte_content_length_is_refused_without_allocating_it(lsp: LspProcess) -> None:
    data = body(initialize(12))
    lsp.send(b"Content-Length: 1000000000000\r\n\r\n" + data + frame(initialize(13)))
    assert_error(lsp.replies.next(), PARSE_ERROR,
                 "a message of 1000000000000 bytes is over the limit of 67108864")
    assert_initialized(lsp.replies.next(), 13)
    assert lsp.process.poll() is None


def test_json_that_is_not_a_message_is_an_invalid_request(lsp: LspProcess) -> None:
    lsp.send(frame(b"[1, 2]") + frame({"jsonrpc": "2.0", "id": 14, "method": "initialize",
                                        "params": {"capabilities": {}, "processId": "x"}}) + frame(initialize(15)))
    assert_error(lsp.replies.next(), INVALID_REQUEST, "LSP has no batches")
    assert_error(lsp.replies.next(), INVALID_PARAMS, "initialize: the params do not fit the method", 14)
    assert_initialized(lsp.replies.next(), 15)


def test_closing_stdin_ends_the_server(lsp: LspProcess) -> None:
    lsp.stdin.close()
    assert lsp.process.wait(timeout=20) == 0
    assert "Traceback" not in lsp.stderr()


def test_stdin_ending_inside_a_message_is_one_line_and_exit_1(tmp_path: Path) -> None:
    lsp = LspProcess(tmp_path)
    try:
        lsp.send(b'Content-Length: 100\r\n\r\n{"jsonrpc": "2.0", "id": 1')
        lsp.stdin.close()
        assert lsp.process.wait(timeout=60) == 1
        lines = lsp.stderr().strip().splitlines()
        assert lines[-1].endswith("dice-lsp stdin ended inside a message (the stream ended 26 bytes into a "
                                  "100-byte message); stopping"), lines
        assert "Traceback" not in lsp.stderr()
    finally:
        lsp.close()


GOOD = {"jsonrpc": "2.0", "id": 1, "method": "shutdown"}
STREAMS = {  # each bad message is followed by a good one
    "short": frame(body(GOOD), len(body(GOOD)) - 5) + frame(GOOD),
    "long": frame(body(GOOD), len(body(GOOD)) + 50) + frame(GOOD),
    "missing": b"Content-Type: x\r\n\r\n" + body(GOOD) + frame(GOOD),
    "negative": b"Content-Length: -5\r\n\r\n" + body(GOOD) + frame(GOOD),
    "huge": b"Content-Length: 1000000000000\r\n\r\n" + body(GOOD) + frame(GOOD),
    "not a header": b"hello\r\n\r\n" + frame(GOOD),
    "not json": frame(b"{nope}") + frame(GOOD),
}


def framed(data: bytes, chunk: int) -> list[Message | Problem]:
    framer, found = Framer(), []
    for start in range(0, len(data), chunk):
        framer.feed(data[start:start + chunk])
        while (event := framer.next()) is not None:
            found.append(event)
    return found


@pytest.mark.parametrize("name", STREAMS)
def test_the_framer_finds_the_good_message_however_the_bytes_arrive(name: str) -> None:
    whole = framed(STREAMS[name], len(STREAMS[name]))
    assert [type(e) for e in whole] == [Problem, Message] and whole[1] == Message(GOOD)
    assert all(framed(STREAMS[name], chunk) == whole for chunk in (1, 2, 3, 7, 64))


def test_the_framer_holds_little_while_it_looks_for_a_header() -> None:
    framer = Framer()
    framer.feed(b"Content-Length: 1000000000000\r\n\r\n")
    assert isinstance(framer.next(), Problem)
    for _ in range(100):  # 100 MiB of a body it refused
        framer.feed(b"x" * (1 << 20))
        assert framer.next() is None
    assert framer.buffered < len(b"Content-Length:")
    framer.feed(frame(GOOD))
    assert framer.next() == Message(GOOD)


def test_a_lone_surrogate_becomes_the_replacement_character_in_place() -> None:
    value, error = parse_json(b'{"text": "a\\ud800b\\udc00", "pair": "\\ud83d\\ude00", "\\udfff": "\\\\ud800"}')
    assert error is None
    assert value == {"text": "a\ufffdb\ufffd", "pair": "\U0001F600", "\ufffd": "\\ud800"}
    value["text"].encode("utf-8")  # text that every later step can encode
