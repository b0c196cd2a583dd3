"""Run one function in a child process with a wall-clock timeout and a memory limit.

Model-written kernels hang, crash and corrupt their CUDA context; none of that may reach the caller. The
child is `python -m dice_lsp.harness.child`, started in its own process group; it imports `module:function`,
calls it with a JSON payload and writes the JSON result to a file (stdout is left to the kernels' printf).
The parent kills the whole group when the time is up or when the group's resident memory passes the
limit (an address-space limit would break CUDA, which reserves far more than it uses).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

POLL_SECONDS = 0.05
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
                 env: dict[str, str] | None = None) -> Outcome:
    """`module:function(payload)` in a child process; never raises for anything the child does."""
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="dice-child-") as scratch:
        job, result, log = Path(scratch) / "job.json", Path(scratch) / "result.json", Path(scratch) / "output.txt"
        job.write_text(json.dumps({"call": call, "payload": payload, "result": str(result)}))
        with log.open("wb") as output:
            child = subprocess.Popen([sys.executable, "-m", "dice_lsp.harness.child", str(job)], stdout=output,
                                     stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True,
                                     env={**os.environ, **(env or {})})
            failure = _watch(child, started + timeout, memory_mb << 20)
        elapsed = time.monotonic() - started
        tail = log.read_text(errors="replace")[-4000:]
        if failure is None and child.returncode != 0:
            failure = _exit_reason(child.returncode, tail)
        if failure is not None:
            return Outcome(None, failure.replace("{timeout}", f"{timeout:g}"), tail, elapsed)
        try:
            answer = json.loads(result.read_text())
        except (OSError, ValueError):
            return Outcome(None, "the child process exited without a result", tail, elapsed)
        if "error" in answer:
            return Outcome(None, answer["error"], tail, elapsed)
        return Outcome(answer["value"], None, tail, elapsed)


def _watch(child: subprocess.Popen[bytes], deadline: float, limit: int) -> str | None:
    """Wait for the child; kill its group and say why when it runs out of time or memory."""
    while child.poll() is None:
        if time.monotonic() > deadline:
            _kill(child)
            return "timed out after {timeout} s (killed)"
        used = _group_rss(child.pid)
        if used > limit:
            _kill(child)
            return f"used {used >> 20} MiB of memory, over the {limit >> 20} MiB limit (killed)"
        time.sleep(POLL_SECONDS)
    return None


def _kill(child: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(child.pid, signal.SIGKILL)
    child.wait()


def _group_rss(group: int) -> int:
    """Resident bytes of every process in the process group `group` (the child and anything it started)."""
    total = 0
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            fields = Path(entry.path, "stat").read_text().rsplit(")", 1)[1].split()
            if int(fields[2]) == group:  # field 5 of stat: the process group
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
