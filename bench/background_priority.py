"""Does a background tool run yield the CPU? Three CPU-bound processes on this machine, the third started as a
tool run (a session of its own) at a lower priority: plain `nice` (the old way) and `sandbox.lower_priority`
(its session's nice value too, where the kernel groups processes by session: autogroup).

    python bench/background_priority.py [--seconds 6]

Prints each process's share of the work done (loop iterations in millions). On a 2-core machine with
autogroup, a process that yields gets a small share; one that does not gets about as much as the others.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

from dice_lsp.sandbox import lower_priority

BUSY = "import time\nt = time.time()\nn = 0\nwhile time.time() - t < {s}: n += 1\nprint(n)"


def trial(seconds: float, session_nice: bool) -> list[int]:
    busy = [sys.executable, "-c", BUSY.format(s=seconds)]
    others = [subprocess.Popen(busy, stdout=subprocess.PIPE, text=True) for _ in range(2)]
    background = subprocess.Popen(["nice", "-n", "10", *busy], stdout=subprocess.PIPE, text=True,
                                  start_new_session=True)
    if session_nice:
        lower_priority(background.pid, 10)
    return [int(p.communicate()[0]) // 1_000_000 for p in (*others, background)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=6.0)
    args = parser.parse_args()
    autogroup = Path("/proc/self/autogroup").is_file()
    print(f"autogroup: {'on' if autogroup else 'off or absent'}")
    print("| background run | editor-priority process 1 | process 2 | background (nice 10) |")
    print("|---|---|---|---|")
    for label, session in (("`nice -n 10` in its own session", False), ("+ its session niced", True)):
        a, b, c = trial(args.seconds, session)
        print(f"| {label} | {a} | {b} | {c} |")


if __name__ == "__main__":
    main()
