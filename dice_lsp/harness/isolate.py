"""Run one function in a child process with a wall-clock timeout and a memory limit.

Model-written kernels hang, crash and corrupt their CUDA context; none of that may reach the caller. The
child is `python -m dice_lsp.harness.child`, started in its own process group; it imports `module:function`,
calls it with a JSON payload and writes the JSON result to a file (stdout is left to the kernels' printf).
The parent kills the whole group when the time is up or when the group's resident memory passes the
limit (an address-space limit would break CUDA, which reserves far more than it uses).

On the team server the child runs in the sandbox (`dice_lsp.sandbox`: a client's torch extension and its
KernelBench reference are code from the network): it sees its scratch folder (writable), the folders the
caller names (`readable`: the request's files, a cached build; `writable`: a build folder), the system,
the toolkit, the Python runtime and the GPU's device nodes, and nothing else of the host. There the
resident memory counted is that of the sandbox's whole PID namespace, so a process that left the group
(`setsid`) is counted too, and dies with the sandbox.
"""

from __future__ import annotations

import json
import os
import signal
import stat
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dice_lsp.sandbox import Jail, Process, child_quota, spawn
from dice_lsp.toolchain.scratch import run_folder

POLL_SECONDS = 0.05
MAX_RESULT = 64 << 20  # bytes of result JSON read back
_PAGE = os.sysconf("SC_PAGE_SIZE")


@dataclass(frozen=True)
class Outcome:
    """What came back: `value` when the function returned, else `failure` (one line) and the output tail."""
    value: dict[str, Any] | None
    failure: str | None = None
    output: str = ""
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return self.failure is None


def run_isolated(call: str, payload: dict[str, Any], timeout: float, memory_mb: int,
                 env: dict[str, str] | None = None, readable: Sequence[Path] = (),
                 writable: Sequence[Path] = (), wrapper: Sequence[str] = ()) -> Outcome:
    """`module:function(payload)` in a child process; never raises for anything the child does. Confined,
    it reads only `readable` and its scratch folder and writes only `writable` and its scratch folder.
    `wrapper` is a tool's argv that runs the child (compute-sanitizer)."""
    started = time.monotonic()
    with run_folder("child") as scratch, run_folder("log") as logs:
        job, result, log = Path(scratch) / "job.json", Path(scratch) / "result.json", Path(logs) / "output.txt"
        job.write_text(json.dumps({"call": call, "payload": payload, "result": str(result)}))
        jail = Jail(child_quota(timeout), (Path(scratch), *writable), tuple(readable), gpu=True)
        with log.open("wb") as output:
            argv = [*wrapper, sys.executable, "-m", "dice_lsp.harness.child", str(job)]
            child = spawn(argv, Path(scratch), jail, output, output, env)
            failure = _watch(child, started + timeout, memory_mb << 20)
        elapsed = time.monotonic() - started
        tail = _tail(log)
        returncode = child.popen.returncode
        if failure is None and returncode != 0:
            failure = _exit_reason(returncode, tail)
        if failure is not None:
            return Outcome(None, failure.replace("{timeout}", f"{timeout:g}"), tail, elapsed)
        try:
            answer = json.loads(_read_plain(result))
        except (OSError, ValueError):
            answer = None
        if not isinstance(answer, dict) or not ("error" in answer or "value" in answer):
            return Outcome(None, "the child process exited without a result", tail, elapsed)
        if "error" in answer:
            return Outcome(None, answer["error"], tail, elapsed)
        return Outcome(answer["value"], None, tail, elapsed)


def _read_plain(path: Path) -> bytes:
    """The result file the child wrote: never a link it left there to a file of the host, nor a FIFO that
    would block the server, nor more than a result needs."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    with os.fdopen(fd, "rb") as file:
        status = os.fstat(file.fileno())
        if not stat.S_ISREG(status.st_mode) or status.st_size > MAX_RESULT:
            raise ValueError("not a plain result file")
        return file.read(MAX_RESULT)


def _tail(path: Path, size: int = 4000) -> str:
    """The last `size` characters of the child's output (which may have written gigabytes)."""
    with path.open("rb") as file:
        file.seek(max(0, path.stat().st_size - 4 * size))
        return file.read().decode(errors="replace")[-size:]


def _watch(child: Process, deadline: float, limit: int) -> str | None:
    """Wait for the child; kill its group and say why when it runs out of time or memory."""
    while child.popen.poll() is None:
        if time.monotonic() > deadline:
            _kill(child)
            return "timed out after {timeout} s (killed)"
        used = _rss(child.members())
        if used > limit:
            _kill(child)
            return f"used {used >> 20} MiB of memory, over the {limit >> 20} MiB limit (killed)"
        time.sleep(POLL_SECONDS)
    return None


def _kill(child: Process) -> None:
    child.kill()
    child.popen.wait()


def _rss(pids: list[int]) -> int:
    """Resident bytes of the processes `pids` (the child and anything it started)."""
    total = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            total += int(fields[21]) * _PAGE  # field 24: resident pages
        except (OSError, IndexError, ValueError):
            continue
    return total


def _exit_reason(code: int, output: str) -> str:
    if code < 0:
        name = signal.Signals(-code).name if -code in signal.Signals._value2member_map_ else str(-code)
        return f"the child process crashed ({name})"
    last = [line for line in output.strip().splitlines() if line.strip()][-1:] or [""]
    return f"the child process exited with code {code}: {last[0][:300]}"
