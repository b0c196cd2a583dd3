"""The team server's limits, black box: real `dice-lsp serve` processes, real sockets, hostile clients.

Before authentication a connection may send one small frame, soon, and a wrong token waits longer each
time; after it, a connection may not idle, trickle, pile up requests or leave its replies unread for long;
and every request is checked against the operator's limits before any work starts.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import os
import socket
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from dice_lsp.address import parse_address
from dice_lsp.remote.client import RemoteClient
from dice_lsp.remote.protocol import RemoteError, encode
from dice_lsp.settings import Settings, check_value

from .lsp_client import LOOP_HEADER
from .remote_server import Raw, port_of, token_file, wait_loaded

TOKEN = "limits-secret-token"
SOURCE = (Path(__file__).resolve().parents[1] / "examples" / "vector_add.cu").read_text()
LONG = {"prefix": "__global__ void k(float* x) {\n", "max_tokens": 256, "settings": {"steps": 64}}
SHORT_LIMITS = ("--handshake-timeout", "1", "--idle-timeout", "1", "--frame-timeout", "1", "--stall-timeout", "2",
                "--max-connections-per-peer", "5", "--max-unauthenticated", "3", "--max-in-flight", "2")


@contextmanager
def serving(folder: Path, *args: str) -> Iterator[tuple[str, subprocess.Popen[str], Path]]:
    """`dice-lsp serve --json --port 0 --token-file ... ARGS` with its log in a file (a pipe nobody reads
    would fill up and stall the server); yields its address, process and token file."""
    tokens = token_file(folder, TOKEN)
    log = folder / "serve.log"
    with log.open("w") as errors:
        process = subprocess.Popen([sys.executable, "-m", "dice_lsp.cli", "serve", "--json", "--port", "0",
                                    "--token-file", str(tokens), *args], stdout=subprocess.PIPE, stderr=errors,
                                   text=True, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        assert line, f"dice-lsp serve did not start: {log.read_text()}"
        url = json.loads(line)["listening"]
        wait_loaded(url, TOKEN)
        yield url, process, tokens
    finally:
        process.terminate()
        process.wait(timeout=30)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, subprocess.Popen[str], Path]]:
    """A server with the default limits."""
    with serving(tmp_path_factory.mktemp("limits")) as started:
        yield started


@pytest.fixture(scope="module")
def strict(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, subprocess.Popen[str], Path]]:
    """A server with second-long timeouts and small caps, so that each one shows within a test."""
    with serving(tmp_path_factory.mktemp("strict"), *SHORT_LIMITS) as started:
        yield started


def ask(url: str, method: str, params: dict[str, Any] | None = None, token: str = TOKEN,
        timeout: float = 60.0) -> Any:
    async def once() -> Any:
        client = RemoteClient(parse_address(url), lambda: token)
        try:
            return await asyncio.wait_for(client.call(method, params), timeout)
        finally:
            await client.close()

    return asyncio.run(once())


def refusal(url: str, method: str, params: dict[str, Any]) -> str:
    """The one-line reason of a `bad_params` answer (within 30 s: a request that runs instead fails here)."""
    with pytest.raises(RemoteError) as refused:
        ask(url, method, params, timeout=30.0)
    assert refused.value.code == "bad_params", str(refused.value)
    assert "\n" not in str(refused.value)
    return str(refused.value)


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


def run_cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "dice_lsp.cli", *args], capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, "HF_HUB_OFFLINE": "1"})


# --- before authentication ---------------------------------------------------------------------------------

def test_a_frame_over_a_few_kib_before_auth_is_refused_from_its_header(server: tuple[str, Any, Path]) -> None:
    raw = Raw(server[0], timeout=10)
    raw.sock.sendall(struct.pack(">I", 8192))  # a whole source file's worth, before any token
    reply = raw.receive()
    assert reply is not None and reply["id"] == 0 and reply["error"]["code"] == "too_large"
    assert "before authentication" in reply["error"]["message"]
    assert raw.receive() is None, "the connection is closed"
    assert ask(server[0], "status")["state"] == "ready"


def test_forty_unauthenticated_partial_frames_hold_little_memory(server: tuple[str, Any, Path]) -> None:
    """Each announces a frame of 16 MiB - 1 and sends 1 MiB of it: the server reads the header only."""
    process = server[1]
    before = rss_mib(process.pid)
    body = b"\0" * (1 << 20)
    connections = []
    for _ in range(40):
        sock = socket.create_connection(("127.0.0.1", port_of(server[0])), timeout=5)
        connections.append(sock)
        with contextlib.suppress(OSError):  # closed by the server after the header
            sock.sendall(struct.pack(">I", 16 * 1024 * 1024 - 1) + body)
    time.sleep(0.5)
    grown = rss_mib(process.pid) - before
    for sock in connections:
        sock.close()
    assert grown < 16, f"40 unauthenticated connections grew the server by {grown:.0f} MiB"
    assert ask(server[0], "status")["state"] == "ready"


def test_wrong_tokens_wait_longer_each_time_and_a_right_one_does_not(server: tuple[str, Any, Path]) -> None:
    url = server[0]
    assert ask(url, "status")["state"] == "ready"  # a right token: no wrong ones remembered for this address

    def timed(token: str) -> tuple[float, dict[str, Any] | None]:
        raw = Raw(url, timeout=30)
        started = time.monotonic()
        reply = raw.auth(token)
        took = time.monotonic() - started
        if reply is not None and "error" in reply:
            assert raw.receive() is None, "a wrong token closes the connection"
        raw.close()
        return took, reply

    # Times from below are what the server waited at least, whatever the machine's load. Times from above only
    # tell the waits apart from the next one of the schedule (4 s: a right token made to wait, a back-off not
    # started over) with room for a busy machine; the schedule itself (0.5, 1, 2, ... s) is asserted exactly
    # on the class that keeps it, test_the_back_off_doubles_per_address_and_a_right_token_starts_it_over.
    delays = []
    for _ in range(3):
        took, reply = timed("not-the-token")
        assert reply is not None and reply["error"]["code"] == "unauthorized"
        delays.append(took)
    assert all(took >= expected - 0.05 for took, expected in zip(delays, (0.5, 1.0, 2.0), strict=True)), delays
    took, reply = timed(TOKEN)
    assert reply is not None and reply["result"]["server"] == "dice-lsp" and took < 2.0
    took, reply = timed("not-the-token")
    assert 0.45 <= took < 3.0, "a right token starts the back-off over"


def test_the_back_off_doubles_per_address_and_a_right_token_starts_it_over() -> None:
    from dice_lsp.remote.limits import ConnectionLimits
    from dice_lsp.remote.server import WrongTokens

    limits = ConnectionLimits()
    wrong = WrongTokens(limits.backoff, limits.backoff_max)
    assert [wrong.delay("10.0.0.1") for _ in range(8)] == [0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 30.0, 30.0]
    assert wrong.delay("10.0.0.2") == 0.5, "per address"
    wrong.forget("10.0.0.1")  # what a right token from the address does (Gate.admit)
    assert wrong.delay("10.0.0.1") == 0.5


def test_a_token_file_shorter_than_8_characters_stops_the_server(tmp_path: Path) -> None:
    short = token_file(tmp_path, "abc1234")
    try:
        result = run_cli("serve", "--port", "0", "--token-file", str(short), timeout=30)
    except subprocess.TimeoutExpired:
        pytest.fail("the server started with a 7-character token")
    assert result.returncode == 2 and result.stderr.count("\n") == 1
    assert "7 characters, fewer than the 8" in result.stderr


def test_a_rotation_to_a_short_token_is_refused_logged_and_the_old_one_stays(server: tuple[str, Any, Path]) -> None:
    url, _, tokens = server
    stamp = tokens.stat().st_mtime
    tokens.write_text("x\n")
    os.utime(tokens, (stamp + 5, stamp + 5))
    try:
        with pytest.raises(RemoteError, match="wrong token"):
            ask(url, "status", token="x")
        assert ask(url, "status")["state"] == "ready", "the previous token stays"
    finally:
        tokens.write_text(TOKEN + "\n")
        os.utime(tokens, (stamp + 10, stamp + 10))
    log = (tokens.parent / "serve.log").read_text()
    assert log.count("rotation refused, the previous token stays") == 1, "logged once"


def test_a_connection_that_does_not_authenticate_in_time_is_closed(strict: tuple[str, Any, Path]) -> None:
    silent, trickling = Raw(strict[0]), Raw(strict[0])
    frame = encode({"id": 1, "method": "auth", "params": {}, "token": TOKEN})
    started = time.monotonic()
    for byte in frame[:3]:  # a byte every 0.3 s: the whole frame would take longer than the 1 s allowed
        trickling.sock.sendall(bytes([byte]))
        time.sleep(0.3)
    for raw in (silent, trickling):
        reply = raw.receive()
        assert reply is not None and reply["error"]["code"] == "handshake_timeout"
        assert raw.receive() is None
        raw.close()
    assert time.monotonic() - started < 30, "closed by the server's 1 s deadline, long before the client's 60 s"


def test_connections_per_address_are_capped(strict: tuple[str, Any, Path]) -> None:
    held: list[Raw] = []
    try:
        for _ in range(5):  # one at a time: at most 3 may wait to authenticate
            held.append(Raw(strict[0]))
            assert (reply := held[-1].auth(TOKEN)) is not None and "result" in reply
        extra = Raw(strict[0])
        reply = extra.receive()
        assert reply is not None and reply["error"]["code"] == "too_many_connections"
        assert "5 per address" in reply["error"]["message"]
        assert extra.receive() is None
        held.pop().close()
        time.sleep(0.2)
        again = Raw(strict[0])
        assert (reply := again.auth(TOKEN)) is not None and "result" in reply, "a freed place is taken again"
        held.append(again)
    finally:
        for raw in held:
            raw.close()
    time.sleep(0.2)


def test_a_full_unauthenticated_pool_closes_its_oldest_for_a_newcomer(strict: tuple[str, Any, Path]) -> None:
    """3 connections wait to authenticate (the cap): a fourth is let in, and the oldest is closed with the reason."""
    waiting = [Raw(strict[0]) for _ in range(3)]
    time.sleep(0.2)
    newcomer = Raw(strict[0])
    assert (reply := newcomer.auth(TOKEN)) is not None and "result" in reply, reply
    oldest = waiting[0].receive()
    assert oldest is not None and oldest["id"] == 0 and oldest["error"]["code"] == "too_many_connections"
    assert oldest["error"]["message"].startswith("too many connections waiting to authenticate (3); this connection "
                                                 "waited longest to authenticate, so it was closed to make room")
    assert waiting[0].receive() is None
    for raw in waiting[1:]:  # the others keep their places
        assert (reply := raw.auth(TOKEN)) is not None and "result" in reply, reply
    for raw in (*waiting, newcomer):
        raw.close()
    time.sleep(0.2)
    assert ask(strict[0], "status")["state"] == "ready"


# --- after authentication ----------------------------------------------------------------------------------

def test_an_idle_connection_is_closed_but_not_while_a_request_runs(strict: tuple[str, Any, Path]) -> None:
    raw = Raw(strict[0])
    assert (reply := raw.auth(TOKEN)) is not None and "result" in reply
    raw.send({"id": 2, "method": "fill", "params": LONG})
    time.sleep(1.5)  # longer than the idle timeout, with the fill in flight
    raw.send({"id": 3, "method": "cancel", "params": {"id": 2}})
    replies = {reply["id"]: reply for reply in (raw.receive(), raw.receive()) if reply is not None}
    assert replies[3]["result"] == {"cancelled": True} and replies[2]["error"]["code"] == "cancelled"
    started = time.monotonic()
    reply = raw.receive()
    assert reply is not None and reply["id"] == 0 and reply["error"]["code"] == "idle"
    assert 0.5 < time.monotonic() - started < 30, "idle for its 1 s once the fill ended, not before"
    assert raw.receive() is None
    raw.close()


def test_a_client_whose_connection_was_closed_as_idle_reconnects(strict: tuple[str, Any, Path]) -> None:
    async def scenario() -> list[str]:
        client = RemoteClient(parse_address(strict[0]), lambda: TOKEN)
        states = [(await client.call("status"))["state"]]
        await asyncio.sleep(1.5)
        states.append((await client.call("status"))["state"])
        await client.close()
        return states

    assert asyncio.run(scenario()) == ["ready", "ready"]


def test_a_frame_trickled_slowly_is_cut_off(strict: tuple[str, Any, Path]) -> None:
    raw = Raw(strict[0])
    assert (reply := raw.auth(TOKEN)) is not None and "result" in reply
    frame = encode({"id": 2, "method": "status", "params": {}})
    for byte in frame[:3]:  # 0.9 s for 3 bytes of a 1 s deadline: cut off before the header is whole
        raw.sock.sendall(bytes([byte]))
        time.sleep(0.3)
    reply = raw.receive()
    assert reply is not None and reply["error"]["code"] == "too_slow"
    assert raw.receive() is None
    raw.close()


def test_requests_in_flight_per_connection_are_capped(strict: tuple[str, Any, Path]) -> None:
    raw = Raw(strict[0])
    assert (reply := raw.auth(TOKEN)) is not None and "result" in reply
    for request_id in (2, 3, 4):
        raw.send({"id": request_id, "method": "fill", "params": LONG})
    reply = raw.receive()
    assert reply is not None and reply["id"] == 4 and reply["error"]["code"] == "busy"
    assert "--max-in-flight" in reply["error"]["message"]
    for request_id in (2, 3):
        raw.send({"id": 10 + request_id, "method": "cancel", "params": {"id": request_id}})
    codes = {reply["id"]: reply.get("error", {}).get("code") for reply in (raw.receive() for _ in range(4)) if reply}
    assert codes[2] == codes[3] == "cancelled"
    raw.close()


def test_a_client_that_never_reads_its_replies_is_held_to_a_bound(strict: tuple[str, Any, Path]) -> None:
    """300k pipelined requests, no reply read: once the unread replies pass the bound the server stops
    reading, stays small, and cuts the client off when they have stayed unread for the stall timeout."""
    process = strict[1]
    before = rss_mib(process.pid)
    peak = [before]
    sampling = threading.Event()

    def sample() -> None:
        while not sampling.wait(0.05):
            peak.append(rss_mib(process.pid))

    sampler = threading.Thread(target=sample)
    sampler.start()
    raw = Raw(strict[0], timeout=30)
    assert (reply := raw.auth(TOKEN)) is not None and "result" in reply

    def chunk(thousand: int) -> bytes:  # 1000 requests, each with an id of its own
        return b"".join(encode({"id": 2 + thousand * 1000 + n, "method": "status", "params": {}}) for n in range(1000))

    sent, cut_off = 0, False
    started = time.monotonic()
    try:
        while sent < 300 and time.monotonic() - started < 60:
            raw.sock.sendall(chunk(sent))
            sent += 1
    except ConnectionError:
        cut_off = True
    finally:
        sampling.set()
        sampler.join()
        raw.close()
    grown = max(peak) - before
    assert cut_off, f"the server read all {sent}k requests and kept the connection"
    assert grown < 64, f"the server grew by {grown:.0f} MiB"
    assert "bytes of replies left unread for 2 s" in (strict[2].parent / "serve.log").read_text()
    assert ask(strict[0], "status")["state"] == "ready"


# --- per request -------------------------------------------------------------------------------------------

LINE = Settings(max_canvas=24).per_request()
CASES = [
    ("complete", {"text": SOURCE, "line": 7, "character": 4, "settings": {"candidates": 512}},
     "dice.candidates 512 exceeds the server's limit of 16 (--max-candidates)"),
    ("complete", {"text": SOURCE, "line": 7, "character": 4, "settings": {"candidates": 2048}},
     "dice.candidates: must be at most 1024"),  # absurd for everyone (settings), before the server's own limit
    ("fill", {"prefix": "x", "max_tokens": 2**64 - 1},
     "max_tokens 18446744073709551615 exceeds the server's limit of 1024 (--max-tokens)"),
    ("fill", {"prefix": "x", "settings": {"maxCanvas": 4096}},
     "dice.maxCanvas 4096 exceeds the server's limit of 1024"),
    ("fill", {"prefix": "x", "max_tokens": 32, "settings": {"steps": 1000}},
     "over the server's limit of 64 (--max-steps)"),
    ("fill", {"prefix": "x", "max_tokens": 32, "settings": {"steps": 64, "blockLength": 1}},
     "dice.steps 64 with dice.blockLength 1 is 2048 model calls per 32 tokens"),
    ("check", {"text": "x" * (5 << 20)}, "over the server's limit of 4194304 (--max-request-bytes)"),
    ("check", {"text": "x", "files": {f"h{n}.cuh": "" for n in range(300)}},
     "files 300 exceeds the server's limit of 256 (--max-files)"),
    ("bench", {"text": "x", "trials": 1000}, "trials 1000 exceeds the server's limit of 20 (--max-trials)"),
    ("bench", {"text": "x", "timeout": 3600}, "timeout 3600 exceeds the server's limit of 300 (--max-timeout)"),
    ("repair", {"text": "x", "candidates": 100}, "candidates 100 exceeds the server's limit of 16"),
    ("repair", {"text": "x", "settings": {"repairRounds": 50}},
     "dice.repairRounds 50 exceeds the server's limit of 10"),
    ("optimize", {"text": "x", "kernel": "k", "settings": {"optimizeCandidates": 512}},
     "dice.optimizeCandidates 512 exceeds the server's limit of 16"),
]


@pytest.mark.parametrize(("method", "params", "reason"), CASES,
                         ids=[" ".join(reason.split(" ")[:2]) for _, _, reason in CASES])
def test_requests_over_the_limits_are_refused_by_name(server: tuple[str, Any, Path], method: str,
                                                      params: dict[str, Any], reason: str) -> None:
    assert reason in refusal(server[0], method, params)


WRONG = [
    ("complete", {"text": SOURCE, "line": 7, "character": 4, "settings": {**LINE, "temperature": 1e308}},
     "dice.temperature: must be at most 10"),
    ("complete", {"text": SOURCE, "line": 7, "character": 4, "settings": {**LINE, "temperature": math.nan}},
     "dice.temperature: must be a finite non-negative number"),
    ("fill", {"prefix": "x", "settings": {"threshold": math.inf}}, "dice.threshold: must be a finite"),
    ("bench", {"text": "x", "timeout": math.nan}, "bench: timeout must be a positive number of seconds"),
    ("bench", {"text": "x", "timeout": -1}, "bench: timeout must be a positive number of seconds"),
    ("optimize", {"text": "x", "kernel": "k", "timeout": math.inf}, "optimize: timeout must be a positive number"),
    ("bench", {"text": "x", "trials": 1.5}, "bench: trials must be an integer"),
    ("complete", {"text": SOURCE, "line": -1, "character": 4}, "complete: line must be at least 0"),
    ("complete", {"text": SOURCE, "line": "7", "character": 4}, "complete: line must be an integer"),
    ("complete", {"text": SOURCE, "line": 7, "character": 4, "selection": [[7, 0]]}, "complete: selection must be"),
    ("fill", {"prefix": "x", "max_tokens": True}, "fill: max_tokens must be an integer"),
    ("fill", {"prefix": 5}, "fill: prefix must be a string"),
    ("optimize", {"text": "x"}, "optimize: missing parameter kernel"),
    ("check", {"text": "x", "files": {"a.cuh": 1}}, "check: files['a.cuh'] must be text"),
    ("check", {"text": "x", "path": "a\0b.cu"}, "check: path 'a\\x00b.cu' holds a control character"),
    ("check", {"text": "x", "path": ""}, "check: path must be a non-empty relative path"),
]


@pytest.mark.parametrize(("method", "params", "reason"), WRONG, ids=[reason for _, _, reason in WRONG])
def test_every_parameter_is_checked_with_a_one_line_reason(server: tuple[str, Any, Path], method: str,
                                                           params: dict[str, Any], reason: str) -> None:
    assert reason in refusal(server[0], method, params)


def test_status_says_the_limits(server: tuple[str, Any, Path]) -> None:
    status = ask(server[0], "status")
    assert status["limits"] == {"max_candidates": 16, "max_tokens": 1024, "max_steps": 64, "max_rounds": 10,
                                "max_request_bytes": 4 << 20, "max_files": 256, "max_trials": 20,
                                "max_timeout": 300.0}
    connections = status["connections"]
    assert connections["open"] >= 1 and connections["preauth_frame"] == 4096
    assert connections["max_connections_per_peer"] == 32 and connections["handshake_timeout"] == 5.0


def test_requests_within_the_limits_still_work(server: tuple[str, Any, Path]) -> None:
    settings = Settings(max_canvas=24, steps=4, min_confidence=0.0).per_request()  # dice-tiny's checked fill
    result = ask(server[0], "complete", {"text": LOOP_HEADER, "line": 2, "character": 29, "settings": settings})
    assert result["hole"] == "line" and [item["text"] for item in result["items"]] == ["i++) {"]


# --- settings, CLI, client ---------------------------------------------------------------------------------

@pytest.mark.parametrize(("name", "value"), [("temperature", math.nan), ("temperature", math.inf),
                                             ("temperature", 1e308), ("temperature", 11), ("threshold", math.nan),
                                             ("steps", 2**64), ("candidates", 10**6), ("max_canvas", 2**40),
                                             ("seed", 2**64), ("repair_rounds", 10**9), ("threshold", 10**400),
                                             ("temperature", 10**400)])
def test_settings_refuse_non_finite_and_absurd_numbers(name: str, value: float) -> None:
    assert check_value(name, value)[1] is not None
    kept, errors = Settings().updated({name: value})
    assert kept == Settings() and len(errors) == 1


def test_an_ipv6_host_counts_as_one_address_and_a_mapped_ipv4_as_itself() -> None:
    from dice_lsp.remote.server import peer_key

    assert peer_key(("2001:db8::1", 7077, 0, 0)) == peer_key(("2001:db8::ffff:2", 7077, 0, 0)) == "2001:db8::/64"
    assert peer_key(("2001:db8:0:1::1", 7077, 0, 0)) != peer_key(("2001:db8::1", 7077, 0, 0))
    assert peer_key(("::ffff:10.0.0.7", 7077, 0, 0)) == peer_key(("10.0.0.7", 7077)) == "10.0.0.7"
    assert peer_key("") == "unix"


def test_the_cli_refuses_a_nan_temperature_in_one_line() -> None:
    path = Path(__file__).resolve().parents[1] / "examples" / "vector_add.cu"
    result = run_cli("complete", str(path), "--line", "7", "--character", "4", "--temperature", "nan")
    assert result.returncode == 2 and result.stderr.count("\n") == 1 and "temperature" in result.stderr


@pytest.mark.parametrize("flag", ["--idle-timeout=nan", "--preauth-frame=16", "--max-frame-objects=10"])
def test_serve_refuses_a_bad_limit_in_one_line(flag: str) -> None:
    result = run_cli("serve", "--port", "0", flag, timeout=30)
    assert result.returncode == 2 and result.stderr.count("\n") == 1


def test_the_client_sends_its_token_in_a_small_auth_frame_first() -> None:
    """What reaches a server: `auth` with the token, then the request (without it), however large."""
    async def scenario() -> list[dict[str, Any]]:
        seen: list[dict[str, Any]] = []

        async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            from dice_lsp.remote.protocol import read_frame

            while (message := await read_frame(reader)) is not None:
                seen.append({**message, "size": len(encode({k: v for k, v in message.items() if k != "v"}))})
                writer.write(encode({"id": message["id"], "result": {"ok": True}}))

        listener = await asyncio.start_server(handle, "127.0.0.1", 0)
        port = listener.sockets[0].getsockname()[1]
        client = RemoteClient(parse_address(f"tcp://127.0.0.1:{port}"), lambda: TOKEN)
        await client.call("check", {"text": "x" * 100_000})
        await client.close()
        listener.close()
        return seen

    auth, request = asyncio.run(scenario())
    assert auth["method"] == "auth" and auth["token"] == TOKEN and auth["size"] < 256
    assert request["method"] == "check" and "token" not in request


def test_an_unauthorized_auth_is_the_error_of_the_call(server: tuple[str, Any, Path]) -> None:
    with pytest.raises(RemoteError, match="wrong token") as refused:
        ask(server[0], "status", token="not-the-token")
    assert refused.value.code == "unauthorized"


def test_the_ray_app_takes_the_limits_and_refuses_unknown_args() -> None:
    pytest.importorskip("ray.serve", reason="Ray Serve is not installed")
    from dice_lsp.errors import DiceError
    from dice_lsp.remote.ray_serve import build_app

    build_app({"max_candidates": 8, "handshake_timeout": 2.5, "device": "cpu"})
    with pytest.raises(DiceError, match="max_candidates: must be a positive integer"):
        build_app({"max_candidates": 0})
    with pytest.raises(DiceError, match="unknown args in the serve config: max_candidate"):
        build_app({"max_candidate": 8})


LONG_OR_SEVERAL = "complete: a proposal's text must be one non-empty line of at most 400 characters"


@pytest.mark.parametrize(("proposals", "message"), [
    ("x", "complete: proposals must be a list of at most 6 candidates"),
    ([{"text": "a;", "score": 0.5}] * 7, "complete: proposals must be a list of at most 6 candidates"),
    ([{"text": "a;", "score": 0.5, "path": "/etc/passwd"}],
     "complete: a proposal is a map of text, score, files and rivals"),
    ([{"text": "a;\nb;", "score": 0.5}], LONG_OR_SEVERAL),
    ([{"text": "x" * 401, "score": 0.5}], LONG_OR_SEVERAL),
    ([{"text": "a;", "score": 2}], "complete: a proposal's score must be a number in [0, 1]"),
    ([{"text": "a;", "score": float("nan")}], "complete: a proposal's score must be a number in [0, 1]"),
    ([{"text": "a;", "score": 0.5, "files": -1}], "complete: a proposal's files must be an integer in [0, 1048576]"),
    ([{"text": "a;", "score": 0.5, "rivals": True}],
     "complete: a proposal's rivals must be an integer in [0, 1048576]"),
])
def test_a_completions_proposals_are_checked_in_one_line(proposals: object, message: str) -> None:
    from dice_lsp.remote.limits import RequestLimits, check_params

    with pytest.raises(RemoteError) as raised:
        check_params("complete", {"text": "k", "line": 0, "character": 0, "proposals": proposals}, RequestLimits())
    assert (raised.value.code, str(raised.value)) == ("bad_params", message)
