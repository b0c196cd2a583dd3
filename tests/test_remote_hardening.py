"""The team server against a security review's findings, black box: real `dice-lsp serve` processes.

Silent connections from many addresses once filled every place for unauthenticated connections (a client
with the token was refused 7 times of 7); a 16 MiB frame of empty arrays cost the server 1.1 GiB to unpack;
`--socket FILE` deleted a regular file there; long or odd file names were `internal` errors; a token file
readable by everyone was accepted without a word.
"""

from __future__ import annotations

import asyncio
import os
import socket
import stat
import struct
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from dice_lsp.remote.protocol import MAX_FRAME, RemoteError

from .remote_server import Raw, free_port, port_of, serving, token_file
from .remote_server import ask as ask_once
from .test_remote_limits import TOKEN, refusal, rss_mib, run_cli
from .test_remote_limits import serving as serving_logged

SOURCE = "__global__ void k(float* x) { x[threadIdx.x] = 1.0f; }\n"


@pytest.fixture(scope="module")
def hardened(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, subprocess.Popen[str], Path]]:
    """A server with the default limits, but a minute to authenticate: silent connections stay for the test."""
    with serving_logged(tmp_path_factory.mktemp("hardened"), "--handshake-timeout", "60") as started:
        yield started


def ask(url: str, method: str, params: dict[str, Any] | None = None, token: str | None = TOKEN) -> Any:
    return asyncio.run(asyncio.wait_for(ask_once(url, method, params, token), 60))


class From(Raw):
    """A raw connection from a loopback address of our choosing (127.0.0.2, …)."""

    def __init__(self, url: str, source: str, timeout: float = 30.0) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port_of(url)), timeout=timeout, source_address=(source, 0))
        self.buffer = b""


# --- 1. silent connections cannot keep out a client that authenticates --------------------------------------

def authenticates(url: str, source: str | None = None) -> bool:
    """Whether a client (the real one from 127.0.0.1, by hand from `source`) authenticates and gets `status`."""
    if source is None:
        try:
            return bool(ask(url, "status")["state"] == "ready")
        except RemoteError:
            return False
    raw = From(url, source, timeout=10)
    try:
        if (reply := raw.auth(TOKEN)) is None or "result" not in reply:
            return False
        raw.send({"id": 2, "method": "status", "params": {}})
        return (reply := raw.receive()) is not None and reply.get("result", {}).get("state") == "ready"
    except OSError:  # refused and closed by the server
        return False
    finally:
        raw.close()


def test_silent_connections_from_eight_addresses_cannot_keep_out_a_client(
        hardened: tuple[str, Any, Path]) -> None:
    """8 addresses x 33 connections that never send a frame (264: more than the 256 unauthenticated places),
    then clients with the token, from another address and from one of the eight: each is let in."""
    url = hardened[0]
    silent: list[From] = []
    try:
        for host in range(2, 10):
            silent.extend(From(url, f"127.0.0.{host}") for _ in range(33))
        time.sleep(1.0)  # all of them accepted by the server
        elsewhere = [authenticates(url) for _ in range(7)]
        among_them = [authenticates(url, "127.0.0.2") for _ in range(7)]
        print(f"clients let in: {sum(elsewhere)}/7 from 127.0.0.1, {sum(among_them)}/7 from 127.0.0.2")
        assert sum(elsewhere) == 7 and sum(among_them) == 7, (elsewhere, among_them)
        census = ask(url, "status")["connections"]
        oldest = silent[0].receive()
    finally:
        for raw in silent:
            raw.close()
    assert census["unauthenticated"] <= 8 * census["max_unauthenticated_per_peer"]
    assert oldest is not None and oldest["error"]["code"] == "too_many_connections"
    assert "waited longest to authenticate" in oldest["error"]["message"]


# --- 2. a frame may unpack into a bounded number of values ----------------------------------------------------

def hwm_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmHWM")


def test_a_frame_of_16_mib_of_empty_arrays_is_refused_before_it_is_unpacked(hardened: tuple[str, Any, Path]) -> None:
    url, process, _ = hardened
    raw = Raw(url, timeout=120)
    assert (reply := raw.auth(TOKEN)) is not None and "result" in reply
    count = MAX_FRAME - 5
    body = b"\xdd" + struct.pack(">I", count) + b"\x90" * count  # an array of 16 Mi empty arrays
    before, peak_before = rss_mib(process.pid), hwm_mib(process.pid)
    peak = [before]
    sampling = threading.Event()

    def sample() -> None:
        while not sampling.wait(0.02):
            peak.append(rss_mib(process.pid))

    sampler = threading.Thread(target=sample)
    sampler.start()
    try:
        raw.sock.sendall(struct.pack(">I", len(body)) + body)
        reply = raw.receive()
        closed = raw.receive() is None
    finally:
        sampling.set()
        sampler.join()
        raw.close()
    grown, peak_grown = max(peak) - before, hwm_mib(process.pid) - peak_before
    print(f"the server grew by {grown:.0f} MiB (VmHWM by {peak_grown:.0f} MiB); reply {reply}")
    assert grown < 100 and peak_grown < 100, f"{grown:.0f} MiB, VmHWM {peak_grown:.0f} MiB"
    assert reply is not None and reply["id"] == 0 and reply["error"]["code"] == "too_large", reply
    message = reply["error"]["message"]
    assert "more than 65536 values" in message and "--max-frame-objects" in message and "\n" not in message
    assert closed, "the connection is closed, as for any frame the server refuses"
    assert ask(url, "status")["state"] == "ready"


def test_a_request_with_its_files_is_far_below_the_value_limit(hardened: tuple[str, Any, Path]) -> None:
    """256 files (the most a request may carry) and settings: a few hundred values, read as ever."""
    files = {f"h{n}.cuh": f"#define H{n} {n}\n" for n in range(256)}
    text = '#include "h7.cuh"\n' + SOURCE.replace("1.0f", "H7")
    report = ask(hardened[0], "check", {"text": text, "path": "k.cu", "files": files, "settings": {"std": "c++17"}})
    assert not [d for d in report["diagnostics"] if d["severity"] == "error"], report["diagnostics"]


# --- 3. --socket replaces a stale socket only ---------------------------------------------------------------

def serve_socket(path: Path) -> subprocess.CompletedProcess[str]:
    """`dice-lsp serve --socket PATH`, expected to refuse at once (one that starts is killed after 60 s)."""
    return run_cli("serve", "--socket", str(path), timeout=60)


@pytest.mark.parametrize("kind", ["file", "folder", "link"])
def test_serve_socket_leaves_anything_but_a_socket_untouched(tmp_path: Path, kind: str) -> None:
    path, target = tmp_path / "dice.sock", tmp_path / "precious"
    target.write_text("keep me\n")
    if kind == "file":
        path.write_text("keep me\n")
    elif kind == "folder":
        path.mkdir()
        (path / "inside").write_text("keep me\n")
    else:
        path.symlink_to(target)
    result = serve_socket(path)
    described = {"file": "a regular file", "folder": "a directory", "link": "a symbolic link"}[kind]
    assert result.returncode == 2 and result.stderr.count("\n") == 1, result.stderr
    assert result.stderr == (f"dice-lsp: error: --socket {path}: {described} is there, not a socket; left untouched "
                             "(remove it or choose another path)\n")
    assert target.read_text() == "keep me\n"
    if kind == "file":
        assert path.read_text() == "keep me\n"
    elif kind == "folder":
        assert (path / "inside").read_text() == "keep me\n"
    else:
        assert path.is_symlink() and os.readlink(path) == str(target)


def test_serve_socket_refuses_a_socket_a_server_listens_on(tmp_path: Path) -> None:
    path = tmp_path / "dice.sock"
    with socket.socket(socket.AF_UNIX) as live:
        live.bind(str(path))
        live.listen()
        result = serve_socket(path)
        assert result.returncode == 2 and result.stderr.count("\n") == 1
        assert "a server is listening there already" in result.stderr
        with socket.socket(socket.AF_UNIX) as client:
            client.connect(str(path))  # still the first server's


def test_serve_socket_replaces_a_stale_socket(tmp_path: Path) -> None:
    path = tmp_path / "dice.sock"
    with socket.socket(socket.AF_UNIX) as dead:
        dead.bind(str(path))  # closed without unlinking: what a killed server leaves
    assert stat.S_ISSOCK(path.lstat().st_mode)
    with serving("--socket", str(path)) as (url, _):
        assert asyncio.run(ask_once(url, "status"))["state"] == "ready"
    assert not path.exists()


# --- 4. file names: bad_params naming the limit, never internal ---------------------------------------------

NAMES = [
    ({"path": "a" * 253 + ".cu"}, "has a component of 256 bytes, over the limit of 255"),
    ({"path": "/".join(["d" * 200] * 21) + "/k.cu"}, "is 4225 bytes, over the limit of 1024 for a file name"),
    ({"path": "é" * 512 + "/k.cu"}, "is 1029 bytes, over the limit of 1024"),
    ({"path": "k.cu", "files": {"inc/" + "h" * 300 + ".cuh": ""}}, "a component of 304 bytes, over the limit of 255"),
    ({"path": "a\0b.cu"}, "path 'a\\x00b.cu' holds a control character"),
    ({"path": "a\nb.cu"}, "path 'a\\nb.cu' holds a control character"),
    ({"path": "k.cu", "files": {"\x1b[31mred.cuh": ""}}, "holds a control character"),
    ({"path": "k.cu", "files": {"del\x7f.cuh": ""}}, "holds a control character"),
    ({"path": "k.cu", "ref": "r\tef.py", "files": {"r\tef.py": ""}}, "holds a control character"),
    ({"path": "."}, "path '.' names a folder, not a file"),
    ({"path": "k.cu", "files": {"inc/": ""}}, "'inc/' names a folder, not a file"),
    ({"path": "k.cu", "files": {"inc/.": ""}}, "names a folder, not a file"),
    ({"path": "/etc/passwd"}, "must be a relative path inside the request's folder"),
    ({"path": "k.cu", "files": {"../up.cuh": ""}}, "must be a relative path inside the request's folder"),
    ({"path": "k.cu", "files": {"a": "", "a/b.cuh": ""}}, "'a' is a file, so 'a/b.cuh' cannot lie in it"),
    ({"path": "k.cu", "files": {"k.cu/b.cuh": ""}}, "'k.cu' is a file, so 'k.cu/b.cuh' cannot lie in it"),
    ({"path": "./sub/k.cu", "files": {"sub/k.cu/x.h": ""}}, "'./sub/k.cu' is a file, so 'sub/k.cu/x.h'"),
]


@pytest.mark.parametrize(("params", "reason"), NAMES, ids=[str(n) for n in range(len(NAMES))])
def test_an_odd_file_name_is_bad_params_naming_the_limit(hardened: tuple[str, Any, Path], params: dict[str, Any],
                                                         reason: str) -> None:
    said = refusal(hardened[0], "check", {"text": SOURCE, **params})
    assert reason in said and len(said) < 400, said


def test_names_at_the_limits_compile(hardened: tuple[str, Any, Path]) -> None:
    """A component of 255 bytes, a name of 1024: as far as a name may go, and the file compiles there."""
    folder = "/".join(["d" * 200] * 3) + "/" + "e" * (1024 - 603 - 255 - 1)
    path = folder + "/" + "k" * 252 + ".cu"
    assert len(path.encode()) == 1024
    report = ask(hardened[0], "check", {"text": '#include "h.cuh"\n' + SOURCE.replace("1.0f", "H"), "path": path,
                                        "files": {folder + "/h.cuh": "#define H 2.0f\n"}})
    assert not [d for d in report["diagnostics"] if d["severity"] == "error"], report["diagnostics"]
    assert report["kernels"][0]["name"] == "k(float*)"


# --- 5. a token file others can read stops the server ---------------------------------------------------------

@pytest.mark.parametrize("mode", [0o644, 0o640, 0o604], ids=["0644", "0640", "0604"])
def test_a_token_file_others_can_read_stops_serve_and_lsp(tmp_path: Path, mode: int) -> None:
    tokens = token_file(tmp_path, TOKEN)
    tokens.chmod(mode)
    serve = run_cli("serve", "--port", "0", "--token-file", str(tokens))
    lsp = run_cli("lsp", "--tcp", f"127.0.0.1:{free_port()}", "--token-file", str(tokens))
    expected = (f"dice-lsp: error: token file {tokens} is readable by other users (mode {mode:04o}): "
                f"chmod 600 {tokens}\n")
    assert (serve.returncode, serve.stderr) == (2, expected)
    assert (lsp.returncode, lsp.stderr) == (2, expected)
    assert tokens.read_text() == TOKEN + "\n" and stat.S_IMODE(tokens.stat().st_mode) == mode


def test_a_token_file_others_can_write_stops_the_server(tmp_path: Path) -> None:
    tokens = token_file(tmp_path, TOKEN)
    tokens.chmod(0o620)
    serve = run_cli("serve", "--port", "0", "--token-file", str(tokens))
    assert serve.returncode == 2 and serve.stderr.count("\n") == 1
    assert f"is writable by other users (mode 0620): chmod 600 {tokens}" in serve.stderr


def test_a_rotation_to_a_file_others_can_read_is_refused_until_it_is_private(hardened: tuple[str, Any, Path]) -> None:
    """`mv` of a file written with the usual umask (0644) over the token file: refused, logged once, the old token
    stays; `chmod 600` then puts the new one in force."""
    url, _, tokens = hardened
    rotated = tokens.parent / "token.new"
    rotated.write_text("rotated-secret-token\n")
    rotated.chmod(0o644)
    os.replace(rotated, tokens)
    try:
        with pytest.raises(RemoteError, match="wrong token"):
            ask(url, "status", token="rotated-secret-token")
        assert ask(url, "status")["state"] == "ready", "the previous token stays"
        tokens.chmod(0o600)
        assert ask(url, "status", token="rotated-secret-token")["state"] == "ready"
    finally:
        tokens.chmod(0o600)
        tokens.write_text(TOKEN + "\n")
        stamp = tokens.stat().st_mtime
        os.utime(tokens, (stamp + 5, stamp + 5))
    assert ask(url, "status")["state"] == "ready"
    log = (tokens.parent / "serve.log").read_text()
    assert log.count("is readable by other users (mode 0644)") == 1, "logged once"
