"""Run one function in a child process with a wall-clock timeout and a memory limit.

Model-written kernels hang, crash and corrupt their CUDA context; none of that may reach the caller. The
child is `python -m dice_lsp.harness.child`, started in its own process group; it imports `module:function`,
calls it with a JSON payload and writes the JSON result to a file (stdout is left to the kernels' printf).
The parent kills the whole group when the time is up, when the group's memory passes the limit (resident
memory: an address-space limit would break CUDA, which reserves far more than it uses; plus the files it
keeps in memory: its private /tmp, a tmpfs, and memfds), or when what it wrote to disk passes the disk limit
(`Limits.disk_mb`: the folders it may write and its output log, counted about ten times a second and once
more after it exits: RLIMIT_FSIZE caps one file, not how many).

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
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from dice_lsp.harness.limits import Limits
from dice_lsp.sandbox import Jail, Process, child_quota, spawn
from dice_lsp.toolchain.scratch import run_folder

POLL_SECONDS = 0.05
DISK_POLL_SECONDS = 0.1  # the folders' walk: at most this often, and at most a tenth of the watch's time
MAX_RESULT = 64 << 20  # bytes of result JSON read back
ENTRY_BYTES = 4096  # what each file or folder counts at least: a million empty files are not free
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
                 writable: Sequence[Path] = (), wrapper: Sequence[str] = (), disk_mb: int = Limits.disk_mb) -> Outcome:
    """`module:function(payload)` in a child process; never raises for anything the child does. Confined,
    it reads only `readable` and its scratch folder and writes only `writable` and its scratch folder.
    `wrapper` is a tool's argv that runs the child (compute-sanitizer). `disk_mb`: what its scratch folder,
    `writable` and its output log may hold together."""
    started = time.monotonic()
    with run_folder("child") as scratch, run_folder("log") as logs:
        job, result, log = Path(scratch) / "job.json", Path(scratch) / "result.json", Path(logs) / "output.txt"
        job.write_text(json.dumps({"call": call, "payload": payload, "result": str(result)}))
        quota = child_quota(timeout)
        quota = replace(quota, tmp_mb=min(quota.tmp_mb, memory_mb))  # its /tmp is memory too: never more than all of it
        jail = Jail(quota, (Path(scratch), *writable), tuple(readable), gpu=True)
        with log.open("wb") as output:
            argv = [*wrapper, sys.executable, "-m", "dice_lsp.harness.child", str(job)]
            child = spawn(argv, Path(scratch), jail, output, output, env)
            tmp = jail.quota.tmp_mb << 20 if child.pid_namespace is not None else None
            disk = _Disk((Path(scratch), *writable, log), disk_mb << 20)
            failure = _watch(child, started + timeout, memory_mb << 20, tmp, disk)
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


def _watch(child: Process, deadline: float, limit: int, tmp: int | None, disk: _Disk) -> str | None:
    """Wait for the child; kill its group and say why when it runs out of time, memory or disk. `tmp`: the size
    of a confined child's private /tmp (None: unconfined, its /tmp is the host's)."""
    in_memory = 0  # bytes of memfds, from the last look at its open files
    next_look = 0.0
    while child.popen.poll() is None:
        now = time.monotonic()
        if now > deadline:
            _kill(child)
            return "timed out after {timeout} s (killed)"
        members = child.members()
        files = _private_tmp(members, tmp) + in_memory
        used = _rss(members) + files
        if used > limit:
            _kill(child)
            held = f" ({files >> 20} MiB of it in files)" if files >> 20 else ""
            return f"used {used >> 20} MiB of memory{held}, over the {limit >> 20} MiB limit (killed)"
        if now >= next_look:
            written, in_memory = disk.used(members)
            if written > disk.limit:
                _kill(child)
                return disk.over(written, killed=True)
            next_look = time.monotonic() + max(DISK_POLL_SECONDS, 10 * (time.monotonic() - now))
        time.sleep(POLL_SECONDS)
    written, _ = disk.used([])
    return disk.over(written, killed=False) if written > disk.limit else None


@dataclass(frozen=True)
class _Disk:
    """What a run may leave on disk: its writable folders and its output log, `limit` bytes together."""

    paths: tuple[Path, ...]
    limit: int

    def over(self, written: int, killed: bool) -> str:
        return (f"wrote {written >> 20} MiB to disk, over the {self.limit >> 20} MiB limit"
                + (" (killed)" if killed else ""))

    def used(self, members: list[int]) -> tuple[int, int]:
        """Bytes on disk under the paths (every entry at least ENTRY_BYTES; a file of several names once), with
        the files the run deleted but keeps open there; and bytes of the memfds it keeps open. The walk stops
        once it is over the limit."""
        seen: set[tuple[int, int]] = set()
        devices: set[int] = set()
        total = 0
        pending = list(self.paths)
        while pending and total <= self.limit:
            path = pending.pop()
            try:
                status = os.lstat(path)
            except OSError:
                continue
            devices.add(status.st_dev)
            total += _charge(status, seen)
            if stat.S_ISDIR(status.st_mode):
                try:
                    with os.scandir(path) as entries:
                        for entry in entries:
                            if entry.is_dir(follow_symlinks=False):
                                pending.append(Path(entry.path))
                            else:
                                try:
                                    total += _charge(entry.stat(follow_symlinks=False), seen)
                                except OSError:
                                    continue
                except OSError:
                    continue
        deleted, memfds = _unnamed_files(members, devices, seen)
        return total + deleted, memfds


def _charge(status: os.stat_result, seen: set[tuple[int, int]]) -> int:
    key = (status.st_dev, status.st_ino)
    if key in seen:
        return 0
    seen.add(key)
    return max(status.st_blocks * 512, ENTRY_BYTES)


def _unnamed_files(pids: list[int], devices: set[int], seen: set[tuple[int, int]]) -> tuple[int, int]:
    """Files the processes `pids` keep open that have no name left: (bytes of those on `devices`, the disk the
    run writes; bytes of memfds, held in memory). Others (a deleted file of the private /tmp) are counted
    elsewhere."""
    on_disk = in_memory = 0
    for pid in pids:
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                status = os.stat(f"/proc/{pid}/fd/{fd}")
                if not stat.S_ISREG(status.st_mode) or status.st_nlink or (status.st_dev, status.st_ino) in seen:
                    continue
                seen.add((status.st_dev, status.st_ino))
                if status.st_dev in devices:
                    on_disk += status.st_blocks * 512
                elif os.readlink(f"/proc/{pid}/fd/{fd}").startswith("/memfd:"):
                    in_memory += status.st_blocks * 512
            except OSError:
                continue
    return on_disk, in_memory


def _private_tmp(pids: list[int], size: int | None) -> int:
    """Bytes of files in a confined run's private /tmp: a tmpfs, so memory (seen through one of its processes'
    root; only a filesystem of exactly the size the sandbox gave it counts: never the host's /tmp, which a
    process still being set up may see)."""
    if size is None:
        return 0
    for pid in pids:
        try:
            found = os.statvfs(f"/proc/{pid}/root/tmp")
        except OSError:
            continue
        if found.f_blocks * found.f_frsize == size:
            return (found.f_blocks - found.f_bfree) * found.f_frsize
    return 0


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
