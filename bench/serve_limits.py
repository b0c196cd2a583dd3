"""The team server under the attacks its limits answer: prints one table row per attack.

    python bench/serve_limits.py [--checkout DIR]

Starts `dice-lsp serve` from DIR (default: this checkout; pass an older checkout to compare) with its
default limits and a token, then, one after the other: 40 unauthenticated connections each holding a
partial frame of 16 MiB - 1 (the server's RSS before and while they are held); 40, then 256 (from 8
loopback addresses), holding the largest partial frame allowed before authentication (4 KiB - 1); a silent
connection and one sending a byte every 0.8 s before authentication (how long each is held, up to 10 s);
wrong tokens from one address for 5 s (how many answered); connections from one address (how many of 64
admitted); 300k pipelined `status` requests whose replies are never read (RSS growth, whether the server
cut the client off); and whether a 1-character token file is accepted. Speaks the wire format by hand (a
token on the first request, which old and new servers both accept), so it measures either version alike.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgpack  # type: ignore[import-untyped]

TOKEN = "bench-secret-token"
MIB = 1024 * 1024


def frame(message: dict[str, Any]) -> bytes:
    body = msgpack.packb({"v": 1, **message}, use_bin_type=True)
    return struct.pack(">I", len(body)) + body


def receive(sock: socket.socket) -> dict[str, Any] | None:
    """One frame (None when the server closed the connection)."""
    data = b""
    with contextlib.suppress(OSError):
        while len(data) < 4 or len(data) < 4 + struct.unpack(">I", data[:4])[0]:
            chunk = sock.recv(65536)
            if not chunk:
                return None
            data += chunk
        return dict(msgpack.unpackb(data[4:4 + struct.unpack(">I", data[:4])[0]], raw=False))
    return None


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


@contextlib.contextmanager
def serving(checkout: Path, token: str, folder: Path) -> Iterator[tuple[int, subprocess.Popen[str]]]:
    tokens = folder / "token"
    tokens.write_text(token + "\n")
    tokens.chmod(0o600)  # the server refuses a token file others can read
    env = {**os.environ, "PYTHONPATH": str(checkout), "HF_HUB_OFFLINE": "1"}
    with (folder / "serve.log").open("w") as log:
        process = subprocess.Popen([sys.executable, "-m", "dice_lsp.cli", "serve", "--json", "--port", "0",
                                    "--token-file", str(tokens)], stdout=subprocess.PIPE, stderr=log, text=True,
                                   env=env, cwd=checkout)
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        if not line:
            raise SystemExit(f"the server did not start: {(folder / 'serve.log').read_text()[-500:]}")
        port = int(json.loads(line)["listening"].rsplit(":", 1)[1])
        while status(port)["state"] == "loading":
            time.sleep(0.2)
        yield port, process
    finally:
        process.terminate()
        process.wait(timeout=60)


def connect(port: int, timeout: float = 10.0) -> socket.socket:
    return socket.create_connection(("127.0.0.1", port), timeout=timeout)


def status(port: int, timeout: float = 10.0) -> dict[str, Any]:
    with connect(port, timeout) as sock:
        sock.sendall(frame({"id": 1, "method": "status", "params": {}, "token": TOKEN}))
        reply = receive(sock)
    assert reply is not None and "result" in reply, reply
    return dict(reply["result"])


def partial_frames(port: int, pid: int) -> str:
    before = rss_mib(pid)
    held = []
    for _ in range(40):
        sock = connect(port, timeout=5)
        held.append(sock)
        with contextlib.suppress(OSError):
            sock.sendall(struct.pack(">I", 16 * MIB - 1) + b"\0" * (16 * MIB - 2))
    time.sleep(1.0)
    during = rss_mib(pid)
    for sock in held:
        sock.close()
    return f"{before:.0f} -> {during:.0f} MiB (+{during - before:.0f})"


def small_partial_frames(port: int, pid: int, count: int) -> str:
    """`count` connections from 127.0.0.2... (32 per source address), each holding a frame of 4 KiB - 1
    (the most a frame may be before authentication) short of its last byte."""
    before = rss_mib(pid)
    held, refused = [], 0
    for index in range(count):
        source = (f"127.0.0.{2 + index // 32}", 0)
        sock = socket.create_connection(("127.0.0.1", port), timeout=5, source_address=source)
        held.append(sock)
        with contextlib.suppress(OSError):
            sock.sendall(struct.pack(">I", 4095) + b"\0" * 4094)
    time.sleep(1.0)
    during = rss_mib(pid)
    for sock in held:
        sock.setblocking(False)
        with contextlib.suppress(OSError):
            refused += sock.recv(65536) != b""  # an error frame: refused at once
        sock.close()
    return f"{before:.0f} -> {during:.0f} MiB (+{during - before:.0f}); {refused} answered at once (refused)"


def held_for(port: int, trickle: bool) -> str:
    sock = connect(port, timeout=0.2)
    started = time.monotonic()
    closed = None
    dribble = iter(struct.pack(">I", 1000) + b"a" * 1000)  # a frame announced whole, sent a byte at a time
    while time.monotonic() - started < 10 and closed is None:
        try:
            if trickle:
                sock.send(bytes([next(dribble)]))
            if sock.recv(65536) == b"":
                closed = time.monotonic() - started
        except TimeoutError:
            continue
        except OSError:
            closed = time.monotonic() - started
        if trickle:
            time.sleep(0.8)
    sock.close()
    return "held 10 s (still open)" if closed is None else f"closed after {closed:.1f} s"


def wrong_tokens(port: int) -> str:
    answered, started = 0, time.monotonic()
    while time.monotonic() - started < 5:
        with connect(port, timeout=35) as sock:
            sock.sendall(frame({"id": 1, "method": "auth", "params": {}, "token": "wrong-token-guess"}))
            if receive(sock) is not None:
                answered += 1
    took = time.monotonic() - started
    status(port)  # a right token: the address starts over
    return f"{answered} answered in {took:.1f} s ({answered / took:.1f}/s)"


def connections_per_peer(port: int) -> str:
    admitted, held = 0, []
    for _ in range(64):
        sock = connect(port)
        held.append(sock)
        sock.sendall(frame({"id": 1, "method": "status", "params": {}, "token": TOKEN}))
        reply = receive(sock)
        admitted += reply is not None and "result" in reply
    for sock in held:
        sock.close()
    return f"{admitted} of 64 admitted"


def pipelined(port: int, pid: int, log: Path) -> str:
    answered = log.read_text().count(" status #")
    before = rss_mib(pid)
    peak = [before]
    done = threading.Event()

    def sample() -> None:
        while not done.wait(0.05):
            peak.append(rss_mib(pid))

    sampler = threading.Thread(target=sample)
    sampler.start()
    sock = connect(port, timeout=60)
    sock.sendall(frame({"id": 1, "method": "status", "params": {}, "token": TOKEN}))

    def chunk(thousand: int) -> bytes:  # 1000 requests, each with an id of its own
        return b"".join(frame({"id": 2 + thousand * 1000 + n, "method": "status", "params": {}}) for n in range(1000))

    sent, outcome, started = 0, "", time.monotonic()
    try:
        while sent < 300:
            sock.sendall(chunk(sent))
            sent += 1
        outcome = f"all 300k sent in {time.monotonic() - started:.1f} s"
        while time.monotonic() - started < 60 and (len(peak) < 60 or peak[-1] > peak[-60]):
            time.sleep(0.5)  # until the server has read them all: RSS flat for 3 s
        outcome += f", RSS flat after {time.monotonic() - started:.0f} s"
    except TimeoutError:
        outcome = f"blocked after {sent}k for 60 s"
    except OSError:
        outcome = f"cut off after {sent}k, {time.monotonic() - started:.1f} s"
    done.set()
    sampler.join()
    sock.close()
    answered = log.read_text().count(" status #") - answered - 1
    return f"{outcome}; RSS +{max(peak) - before:.0f} MiB (peak); {answered} status requests answered"


def short_token(checkout: Path, folder: Path) -> str:
    tokens = folder / "short"
    tokens.write_text("x\n")
    tokens.chmod(0o600)
    env = {**os.environ, "PYTHONPATH": str(checkout), "HF_HUB_OFFLINE": "1"}
    process = subprocess.Popen([sys.executable, "-m", "dice_lsp.cli", "serve", "--json", "--port", "0",
                                "--token-file", str(tokens)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True, env=env, cwd=checkout)
    try:
        _, err = process.communicate(timeout=40)
        return f"refused (exit {process.returncode}): {err.strip()[-140:]}"
    except subprocess.TimeoutExpired:
        process.terminate()
        process.wait(timeout=60)
        return "accepted (the server started)"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkout", type=Path, default=Path(__file__).resolve().parents[1])
    args = parser.parse_args()
    checkout = args.checkout.resolve()
    print(f"| attack ({checkout}) | result |\n|---|---|", flush=True)

    def row(name: str, value: str) -> None:
        print(f"| {name} | {value} |", flush=True)

    with tempfile.TemporaryDirectory() as folder, serving(checkout, TOKEN, Path(folder)) as (port, process):
        row("40 unauthenticated 16 MiB-1 partial frames: server RSS", partial_frames(port, process.pid))
        row("40 unauthenticated 4 KiB-1 partial frames: server RSS", small_partial_frames(port, process.pid, 40))
        time.sleep(6)  # past the handshake deadline: they are gone
        row("256 of them from 8 addresses", small_partial_frames(port, process.pid, 256))
        time.sleep(6)
        row("silent connection before auth", held_for(port, trickle=False))
        row("1 byte every 0.8 s before auth", held_for(port, trickle=True))
        row("wrong tokens from one address, 5 s", wrong_tokens(port))
        row("connections from one address", connections_per_peer(port))
        row("300k pipelined status, replies never read", pipelined(port, process.pid, Path(folder) / "serve.log"))
        try:
            started = time.monotonic()
            state = status(port, 120)["state"]
            alive = f"status answered {time.monotonic() - started:.1f} s later: {state}"
        except (AssertionError, OSError) as exc:
            alive = f"no status answer ({exc!r})"
        row("the server afterwards", alive)
        row("1-character token file", short_token(checkout, Path(folder)))

if __name__ == "__main__":
    main()
