"""Compilers never outlive their request: timeouts, cancellation and shutdown kill nvcc's whole process group,
a hung nvcc cannot starve the language server, and output is read capped.

A fake `nvcc` (a shell script in tmp_path) records its pid and starts a long-sleeping child, as nvcc
starts cicc; a test asserts both are gone.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from dice_lsp import lifetime
from dice_lsp.lifetime import Stopped
from dice_lsp.sandbox import TOOL_OUTPUT_KEPT, run_tool
from dice_lsp.toolchain.flags import DEFAULT_FLAGS
from dice_lsp.toolchain.nvcc import compile_source

WAIT_S = 30.0  # generous bound for something that happens at once
HANG = 'sleep 600 &\necho $! >> "$HERE/children"\nwait'


def fake_nvcc(folder: Path, body: str) -> Path:
    """An `nvcc` that answers --version and otherwise records its pid in `started` and runs `body`."""
    script = folder / "bin" / "nvcc"
    script.parent.mkdir(parents=True, exist_ok=True)
    script.write_text(f'#!/bin/sh\nHERE={folder}\ncase "$1" in --version) echo "fake nvcc 1.0"; exit 0;; esac\n'
                      f'echo $$ >> "$HERE/started"\n{body}\n')
    script.chmod(0o755)
    return script


def pids(folder: Path, name: str) -> list[int]:
    path = folder / name
    return [int(line) for line in path.read_text().split()] if path.is_file() else []


def alive(pid: int) -> bool:
    """Running (a zombie waiting for a reaper that is not us counts as gone)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state != "Z"


def wait_for(condition: Callable[[], bool], what: str, timeout: float = WAIT_S) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"not within {timeout} s: {what}"
        time.sleep(0.05)


def all_gone(folder: Path) -> bool:
    return not any(alive(pid) for pid in pids(folder, "started") + pids(folder, "children"))


@pytest.fixture
def scratch_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A temporary folder of the test's own (scratch folders must be gone from it afterwards) and a cache."""
    root = tmp_path / "tmp"
    root.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(root))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    return root


def test_a_timed_out_compile_kills_nvcc_and_its_children_and_is_transient(tmp_path: Path, scratch_root: Path) -> None:
    nvcc = fake_nvcc(tmp_path, HANG)
    result = compile_source("int x;\n", timeout=1, nvcc=nvcc)
    assert (result.ok, result.output, result.transient) == (False, "nvcc timed out after 1 s", True)
    assert pids(tmp_path, "children"), "the fake nvcc started its child"
    wait_for(lambda: all_gone(tmp_path), "nvcc and its child killed")
    assert list(scratch_root.iterdir()) == []


def test_a_cancelled_compile_kills_its_process_group_at_once(tmp_path: Path, scratch_root: Path) -> None:
    nvcc = fake_nvcc(tmp_path, HANG)
    cancel = threading.Event()
    outcome: list[BaseException | None] = []

    def compile_it() -> None:
        try:
            compile_source("int x;\n", timeout=600, nvcc=nvcc, cancel=cancel)
            outcome.append(None)
        except BaseException as exc:  # handed to the test thread
            outcome.append(exc)

    worker = threading.Thread(target=compile_it)
    worker.start()
    wait_for(lambda: bool(pids(tmp_path, "children")), "the fake nvcc started")
    cancel.set()
    worker.join(WAIT_S)
    assert not worker.is_alive(), "the compile returned long before its timeout"
    assert isinstance(outcome[0], Stopped)
    wait_for(lambda: all_gone(tmp_path), "nvcc and its child killed")
    assert list(scratch_root.iterdir()) == []


def test_stopping_kills_running_compiles_and_refuses_new_ones(tmp_path: Path, scratch_root: Path) -> None:
    nvcc = fake_nvcc(tmp_path, HANG)
    outcome: list[BaseException | None] = []

    def compile_it() -> None:
        try:
            compile_source("int x;\n", timeout=600, nvcc=nvcc)
            outcome.append(None)
        except BaseException as exc:  # handed to the test thread
            outcome.append(exc)

    worker = threading.Thread(target=compile_it)
    worker.start()
    wait_for(lambda: bool(pids(tmp_path, "children")), "the fake nvcc started")
    try:
        lifetime.stop_all()
        worker.join(WAIT_S)
        assert not worker.is_alive() and isinstance(outcome[0], Stopped)
        wait_for(lambda: all_gone(tmp_path), "nvcc and its child killed")
        assert list(scratch_root.iterdir()) == [], "the scratch folder is removed"
        with pytest.raises(Stopped):
            compile_source("int x;\n", timeout=600, nvcc=nvcc)
        assert len(pids(tmp_path, "started")) == 1, "no compile starts once shutting down"
    finally:
        lifetime.reset()


def test_a_tool_writing_megabytes_is_read_capped(tmp_path: Path) -> None:
    flood = 64 << 20
    proc = run_tool(["sh", "-c", f"yes 'source.cu(1): error: boom' | head -c {flood} >&2; echo done"], tmp_path, 120)
    assert proc.returncode == 0 and proc.stdout == "done\n"
    kept, _, note = proc.stderr.rpartition("[dice-lsp: ")
    assert kept.endswith("boom\n") and len(kept) <= TOOL_OUTPUT_KEPT
    assert note == f"{flood - len(kept)} more bytes of output not kept]\n"


def test_replaced_compiles_are_killed_and_never_starve_the_language_server(tmp_path: Path,
                                                                          scratch_root: Path) -> None:
    """Edits while nvcc hangs, in more documents than the default thread pool has threads: each replaced
    compile is killed at once, and work on the default pool (repair, optimize) still runs."""
    from dice_lsp.lsp.compile_checks import CheckRequest, CompileChecks

    nvcc = fake_nvcc(tmp_path, HANG)
    documents = min(32, (os.cpu_count() or 1) + 4) + 1  # ThreadPoolExecutor's default size, and one more

    async def edit() -> None:
        checks = CompileChecks(lambda _uri, _diagnostics: None)
        requests = [CheckRequest(f"file:///k{n}.cu", tmp_path / f"k{n}.cu", f"int x{n};\n", DEFAULT_FLAGS, None, nvcc)
                    for n in range(documents)]
        checks.schedule(requests[0])
        await wait_async(lambda: len(pids(tmp_path, "children")) == 1, "the first compile started")
        first = pids(tmp_path, "started")
        checks.schedule(CheckRequest(requests[0].uri, requests[0].path, "int y;\n", DEFAULT_FLAGS, None, nvcc))
        await wait_async(lambda: not any(alive(pid) for pid in first), "the replaced compile killed")
        for request in requests[1:]:
            checks.schedule(request)
        assert await asyncio.wait_for(asyncio.to_thread(lambda: "answered"), WAIT_S) == "answered"
        for request in requests:
            checks.forget(request.uri)
        await wait_async(lambda: all_gone(tmp_path), "every compile killed once its document closed")

    asyncio.run(edit())
    wait_for(lambda: list(scratch_root.iterdir()) == [], "scratch folders removed")


async def wait_async(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while not condition():
        assert time.monotonic() < deadline, f"not within {WAIT_S} s: {what}"
        await asyncio.sleep(0.05)


def test_a_sigterm_to_the_language_server_leaves_no_compiler_and_no_scratch_folder(tmp_path: Path) -> None:
    from tests.lsp_wire import frame, initialize, lsp_command, read_message

    nvcc = fake_nvcc(tmp_path, HANG)
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TMPDIR": str(scratch), "XDG_CACHE_HOME": str(tmp_path / "cache")}
    source = tmp_path / "k.cu"
    source.write_text("int x;\n")
    with (tmp_path / "stderr.log").open("wb") as log:
        server = subprocess.Popen(lsp_command(), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log, env=env)
    assert server.stdin is not None and server.stdout is not None
    try:
        server.stdin.write(frame(initialize(1, diagnostics=True, nvcc=str(nvcc))))
        server.stdin.flush()
        assert read_message(server.stdout) is not None
        server.stdin.write(frame({"jsonrpc": "2.0", "method": "initialized", "params": {}}))
        server.stdin.write(frame({"jsonrpc": "2.0", "method": "textDocument/didOpen", "params": {"textDocument": {
            "uri": source.as_uri(), "languageId": "cuda", "version": 1, "text": source.read_text()}}}))
        server.stdin.flush()
        wait_for(lambda: bool(pids(tmp_path, "children")), "the background compile started")
        assert ours(scratch), "nvcc's scratch folder exists while it runs"
        server.send_signal(signal.SIGTERM)
        server.wait(WAIT_S)
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()
    wait_for(lambda: all_gone(tmp_path), "nvcc and its child killed with the server")
    assert ours(scratch) == [], "no scratch folder left behind"


def test_a_sigterm_to_the_team_server_leaves_no_compiler_and_no_scratch_folder(tmp_path: Path) -> None:
    from tests.remote_server import ask, wait_loaded

    nvcc = fake_nvcc(tmp_path, HANG)
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    server = team_server(tmp_path, nvcc, scratch)
    try:
        url = read_address(server)
        wait_loaded(url, None)
        asking = threading.Thread(target=lambda: _quietly(lambda: asyncio.run(
            ask(url, "check", {"text": "int x;\n", "path": "k.cu"}))), daemon=True)
        asking.start()
        wait_for(lambda: bool(pids(tmp_path, "children")), "the team server's compile started")
        server.send_signal(signal.SIGTERM)
        server.wait(WAIT_S)
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()
    wait_for(lambda: all_gone(tmp_path), "nvcc and its child killed with the server")
    assert ours(scratch) == [], "no scratch folder left behind"


def test_an_oom_killed_team_server_leaves_no_completion_worker_behind(tmp_path: Path) -> None:
    from tests.remote_server import wait_loaded

    scratch = tmp_path / "tmp"
    scratch.mkdir()
    server = team_server(tmp_path, fake_nvcc(tmp_path, HANG), scratch)
    try:
        from dice_lsp.remote.completers import WORKERS

        wait_loaded(read_address(server), None)
        wait_for(lambda: len(workers(server.pid)) == WORKERS, "the server runs its completion workers")
        children = workers(server.pid)
        server.send_signal(signal.SIGKILL)
        server.wait(WAIT_S)
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()
    wait_for(lambda: not any(alive(pid) for pid in children), "the completion workers exit with their server")


def team_server(tmp_path: Path, nvcc: Path, scratch: Path) -> subprocess.Popen[str]:
    """`dice-lsp serve` unconfined on a free port, with `nvcc` first on PATH and its own temporary folder."""
    env = {key: value for key, value in os.environ.items() if key not in ("CUDA_HOME", "CUDA_PATH")}
    env.update({"HF_HUB_OFFLINE": "1", "TMPDIR": str(scratch), "XDG_CACHE_HOME": str(tmp_path / "cache"),
                "PATH": f"{nvcc.parent}{os.pathsep}{env.get('PATH', '')}"})
    return subprocess.Popen([sys.executable, "-m", "dice_lsp.cli", "serve", "--json", "--port", "0",
                             "--unsafe-no-sandbox"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                            env=env)


def ours(scratch: Path) -> list[str]:
    """dice-lsp's scratch folders in `scratch` (torch keeps a cache of its own there)."""
    return [entry.name for entry in scratch.iterdir() if entry.name.startswith("dice-")]


def read_address(server: subprocess.Popen[str]) -> str:
    import json

    assert server.stdout is not None
    line = server.stdout.readline()
    assert line, "dice-lsp serve did not start"
    return str(json.loads(line)["listening"])


def _quietly(call: Callable[[], object]) -> None:
    with contextlib.suppress(Exception):  # the server went away mid-request, as the test intends
        call()


def workers(server: int) -> list[int]:
    """The processes `server` started through multiprocessing's spawn."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit() and _parent(int(entry)) == server:
            try:
                if b"spawn_main" in Path(f"/proc/{entry}/cmdline").read_bytes():
                    found.append(int(entry))
            except OSError:
                continue
    return found


def _parent(pid: int) -> int | None:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return None
