"""What dice-lsp starts dies with dice-lsp, even when dice-lsp is killed with SIGKILL (`dice_lsp.reaper`).

A real Python process stands in for the language server: it starts a compile through `sandbox.run_tool` and a
harness-like child through `sandbox.spawn`, each a shell that leaves a `sleep` grandchild in its process group,
as nvcc leaves cicc. The test kills that process with SIGKILL and asserts that all of them are gone within
seconds, and that the reaper itself never outlives the process it watches.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from dice_lsp import reaper

from .test_compiler_lifetimes import alive

ROOT = Path(__file__).resolve().parents[1]
# how soon the groups of a killed server must be gone: the reaper acts on its pipe's end at once, so the bound only
# tells "never" from "at once", with room for a loaded machine (5 s failed at a load average of 4 on 2 cores)
GONE_WITHIN_S = 60.0  # a bound on a poll, not a speed claim: generous for a loaded machine
WAIT_S = 60.0  # generous bound for the stand-in server to get going on a loaded machine

# The stand-in server: a compile (run_tool, in a thread) and a harness child (spawn), each a shell leaving a
# grandchild in its group; a forked helper that keeps running (as a multiprocessing worker would) must not keep the
# reaper's pipe open. It writes the pids it knows to FOLDER/pids and then waits to be killed.
SERVER = textwrap.dedent("""
    import os, subprocess, sys, threading, time
    from pathlib import Path
    from dice_lsp import lifetime
    from dice_lsp.sandbox import Jail, child_quota, run_tool, spawn

    folder = Path(sys.argv[1])
    mode = sys.argv[2]
    hang = 'sleep 120 & echo $! > "$0"; echo $$ > "$0.leader"; wait'
    if mode == "quick":
        run_tool(["true"], folder, 30)
    else:
        threading.Thread(target=run_tool, args=(["sh", "-c", hang, str(folder / "compile")], folder, 600),
                         daemon=True).start()
        spawn(["sh", "-c", hang, str(folder / "child")], folder, Jail(child_quota(600), (folder,)),
              subprocess.DEVNULL, subprocess.DEVNULL)
        while not all((folder / name).is_file() and (folder / name).read_text().strip()
                      for name in ("compile", "compile.leader", "child", "child.leader")):
            time.sleep(0.02)
    helper = os.fork() if mode == "forked" else 0
    if helper == 0 and mode == "forked":
        time.sleep(120)
        os._exit(0)
    reaper = getattr(lifetime, "reaper_pid", lambda: None)()
    (folder / "pids").write_text(f"{reaper or 0} {helper}\\n")
    if mode == "quick":
        sys.exit(0)
    time.sleep(600)
""")


def wait_for(condition: Callable[[], bool], what: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"not within {timeout} s: {what}"
        time.sleep(0.05)


def read_pid(path: Path) -> int:
    return int(path.read_text().split()[0])


@contextlib.contextmanager
def server(folder: Path, mode: str) -> Iterator[subprocess.Popen[bytes]]:
    """The stand-in server, running until it has written its pids; whatever it started is killed afterwards."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    process = subprocess.Popen([sys.executable, "-c", SERVER, str(folder), mode], env=env, cwd=folder)
    leaders: list[int] = []
    try:
        wait_for(lambda: (folder / "pids").is_file() or process.poll() is not None, "the server started", WAIT_S)
        assert (folder / "pids").is_file(), f"the stand-in server failed (exit code {process.returncode})"
        leaders = [read_pid(folder / f"{name}.leader") for name in ("compile", "child")
                   if (folder / f"{name}.leader").is_file()]
        yield process
    finally:
        with contextlib.suppress(ProcessLookupError):
            process.kill()
        process.wait()
        for pid in leaders:  # as they were before the fix: left running
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, signal.SIGKILL)
        helper = int((folder / "pids").read_text().split()[1]) if (folder / "pids").is_file() else 0
        if helper:
            with contextlib.suppress(ProcessLookupError):
                os.kill(helper, signal.SIGKILL)


@pytest.mark.parametrize("mode", ["plain", "forked"])
def test_a_server_killed_with_sigkill_takes_its_compilers_and_children_with_it(tmp_path: Path, mode: str) -> None:
    with server(tmp_path, mode) as process:
        started = {name: read_pid(tmp_path / name) for name in ("compile", "compile.leader", "child", "child.leader")}
        reaper_pid, helper = (int(p) for p in (tmp_path / "pids").read_text().split())
        assert all(alive(pid) for pid in started.values())
        process.send_signal(signal.SIGKILL)
        process.wait()
        wait_for(lambda: not any(alive(pid) for pid in started.values()),
                 f"the compile's and the child's groups killed ({started})", GONE_WITHIN_S)
        assert reaper_pid, "the server started a reaper"
        wait_for(lambda: not alive(reaper_pid), "the reaper exited", GONE_WITHIN_S)
        if helper:
            assert alive(helper), "the forked helper is still running, and did not hold the reaper up"


def test_a_clean_exit_leaves_no_reaper(tmp_path: Path) -> None:
    with server(tmp_path, "quick") as process:
        assert process.wait(WAIT_S) == 0
        reaper_pid = read_pid(tmp_path / "pids")
        assert reaper_pid, "the server started a reaper"
        assert not alive(reaper_pid), "the reaper was gone by the time the server had exited"


def test_the_reaper_kills_a_group_only_while_its_leader_is_the_one_registered() -> None:
    """A process group's id is a pid the system may give to another process once the group is gone."""
    sleeper = subprocess.Popen(["sleep", "120"], start_new_session=True)
    try:
        started = reaper.start_time(sleeper.pid)
        assert started is not None
        reaper.kill_group(sleeper.pid, started + 1)  # another process that had the same pid
        assert sleeper.poll() is None
        reaper.kill_group(sleeper.pid, started)
        assert sleeper.wait(GONE_WITHIN_S) == -signal.SIGKILL
    finally:
        sleeper.kill()
        sleeper.wait()


def test_the_reaper_kills_what_is_registered_when_its_pipe_ends() -> None:
    kept = subprocess.Popen(["sleep", "120"], start_new_session=True)
    ended = subprocess.Popen(["sleep", "120"], start_new_session=True)
    read, write = os.pipe()
    process = subprocess.Popen([sys.executable, "-I", "-S", reaper.__file__], stdin=read)
    os.close(read)
    try:
        os.write(write, f"+{kept.pid}\n+{ended.pid}\n-{ended.pid}\n+1\nnonsense\n".encode())
        time.sleep(0.2)
        assert kept.poll() is None and process.poll() is None
        os.close(write)
        assert process.wait(GONE_WITHIN_S) == 0
        assert kept.wait(GONE_WITHIN_S) == -signal.SIGKILL
        assert ended.poll() is None, "a group told as reaped is not killed"
    finally:
        for sleeper in (kept, ended):
            sleeper.kill()
            sleeper.wait()
