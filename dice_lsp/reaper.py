"""The reaper: kills what dice-lsp started when dice-lsp dies, however it dies (SIGKILL, the OOM killer).

`dice_lsp.lifetime` starts one per dice-lsp process, on its first run, as `python -I -S reaper.py` (no shell, no
user text, nothing imported beyond the standard library), with the read end of a pipe as its stdin; dice-lsp keeps
the only write end. Through it dice-lsp says `+PGID` for each process group it starts (a compiler, a harness
child) and `-PGID` once it has reaped it: one write of a few bytes each. When the pipe reaches end-of-file — dice-lsp
exited or was killed, and the kernel closed its end — the reaper SIGKILLs every group still registered and exits.

A process group's id is its leader's pid, which the system may give to another process once the group is gone. So
the reaper notes the leader's start time when it learns of a group, and at the end kills a group only while its
leader is that same process (alive, or a zombie nobody reaped yet), or where no process has that pid any more but
the group still has members (a leader that exited before its children: `sh` under nvcc).

Run as a script, not as a module of the package: importing `dice_lsp` is not needed and would only cost time.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys


def start_time(pid: int) -> int | None:
    """When process `pid` started (clock ticks since boot: field 22 of /proc/PID/stat); None when there is none."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as file:
            stat = file.read()
    except OSError:
        return None
    fields = stat.rsplit(b")", 1)[-1].split()  # the name, in parentheses, may hold anything
    try:
        return int(fields[19])
    except (IndexError, ValueError):
        return None


def kill_group(group: int, started: int | None) -> None:
    """SIGKILL process group `group` if it is still the one registered (its leader started at `started`)."""
    now = start_time(group)
    if now is not None and now != started:
        return  # that pid belongs to another process now: the group registered is gone
    with contextlib.suppress(OSError):
        os.killpg(group, signal.SIGKILL)


def serve(fd: int) -> None:
    """Read `+PGID` / `-PGID` lines from `fd` until end-of-file, then kill every group still registered."""
    groups: dict[int, int | None] = {}
    pending = b""
    while True:
        try:
            chunk = os.read(fd, 4096)
        except InterruptedError:
            continue
        except OSError:
            chunk = b""
        if not chunk:
            break
        pending += chunk
        *lines, pending = pending.split(b"\n")
        for line in lines:
            if len(line) < 2 or not line[1:].isdigit():
                continue
            group = int(line[1:])
            if line[:1] == b"+" and group > 1:
                groups[group] = start_time(group)
            elif line[:1] == b"-":
                groups.pop(group, None)
    for group, started in groups.items():
        kill_group(group, started)


def main() -> None:
    for name in ("SIGINT", "SIGHUP", "SIGTSTP", "SIGTTIN", "SIGTTOU"):  # a terminal's signals are not for us
        signal.signal(getattr(signal, name), signal.SIG_IGN)
    serve(sys.stdin.fileno())


if __name__ == "__main__":
    main()
