"""Scratch folders of killed processes are removed by the next process (`dice_lsp.toolchain.scratch`)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from dice_lsp.toolchain.scratch import STALE_S, sweep

MAKE_AND_WAIT = """
import sys, time
from dice_lsp.toolchain.scratch import process_folder
made = process_folder("clang-pch")
(made / "x.pch").write_bytes(b"0" * 1000)
print(made, flush=True)
time.sleep(float(sys.argv[1]))
"""


def _dead_pid() -> int:
    proc = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True,
                          check=True)
    return int(proc.stdout)


def _age(path: Path, seconds: float) -> None:
    then = time.time() - seconds
    os.utime(path, (then, then))


def test_only_stale_folders_of_processes_that_are_gone_are_removed(tmp_path: Path) -> None:
    dead = _dead_pid()
    folders = {name: tmp_path / name for name in (
        f"dice-clang-pch-{dead}-ab_12",  # gone, untouched long: removed
        f"dice-clang-{dead}-x9",  # a run's folder of the same process: removed
        f"dice-nvcc-{dead}-recent",  # gone but written just now (another PID namespace may be using it): kept
        f"dice-clang-pch-{os.getpid()}-mine",  # this process's own: kept
        f"dice-clang-pch-{os.getppid()}-parent",  # a live process's: kept
        f"dice-clang-pch-{dead}",  # not a name made here: kept
        f"other-clang-pch-{dead}-ab",  # not ours at all: kept
    )}
    for name, path in folders.items():
        path.mkdir()
        (path / "file").write_text("x")
        if "recent" not in name:
            _age(path, STALE_S + 60)
    plain_file = tmp_path / f"dice-clang-{dead}-file"
    plain_file.write_text("x")
    _age(plain_file, STALE_S + 60)

    removed = sweep(tmp_path)

    assert sorted(p.name for p in removed) == sorted([f"dice-clang-pch-{dead}-ab_12", f"dice-clang-{dead}-x9"])
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [name for name in folders if name not in {p.name for p in removed}] + [plain_file.name])


def test_a_killed_process_s_preambles_are_removed_by_the_next_process(tmp_path: Path) -> None:
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    killed = subprocess.Popen([sys.executable, "-c", MAKE_AND_WAIT, "60"], env=env, stdout=subprocess.PIPE, text=True)
    assert killed.stdout is not None
    left = Path(killed.stdout.readline().strip())
    os.kill(killed.pid, signal.SIGKILL)
    killed.wait()
    assert left.parent == tmp_path and (left / "x.pch").is_file()  # a kill runs no exit handler
    _age(left, STALE_S + 60)

    proc = subprocess.run([sys.executable, "-c", MAKE_AND_WAIT, "0"], env=env, capture_output=True, text=True,
                          check=True)

    assert not left.exists()
    assert list(tmp_path.iterdir()) == []  # and the second process removed its own on exit
    assert proc.stdout.strip().startswith(str(tmp_path / "dice-clang-pch-"))
