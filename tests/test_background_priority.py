"""Background tool runs (clang's preamble builds) yield the CPU to the model and the editor.

Every run starts a session of its own, and where the kernel schedules by session (autogroup, on by default on
most desktop Linux) a `nice` value ranks a process only within its session: a niced build in its own session
got a whole core beside the model. `sandbox.run_tool(niceness=N)` lowers the run's nice value and its
session's."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

from dice_lsp import sandbox
from dice_lsp.toolchain.nvcc import find_nvcc

AUTOGROUPS = Path("/proc/self/autogroup").is_file()
REPORT = "import os; print(os.nice(0)); p = '/proc/self/autogroup'; print(open(p).read() if os.path.isfile(p) else '')"


def _priorities(done_stdout: str) -> tuple[int, str]:
    nice, _, group = done_stdout.partition("\n")
    return int(nice), group.strip()


def test_a_background_run_is_niced_and_so_is_its_session(tmp_path: Path) -> None:
    base = sandbox.run_tool([sys.executable, "-c", REPORT], tmp_path, 30)
    low = sandbox.run_tool([sys.executable, "-c", REPORT], tmp_path, 30, niceness=10)
    assert low.returncode == 0, low.stderr
    (base_nice, base_group), (low_nice, low_group) = _priorities(base.stdout), _priorities(low.stdout)
    assert low_nice == min(19, base_nice + 10)
    if AUTOGROUPS:
        assert low_group.endswith("nice 10"), low_group
        assert base_group != low_group and not base_group.endswith("nice 10")


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap (the team server's sandbox)")
def test_a_confined_background_run_is_niced_too(tmp_path: Path) -> None:
    with sandbox.confined(find_nvcc()), sandbox.owning(tmp_path):
        low = sandbox.run_tool([sys.executable, "-c", REPORT], tmp_path, 30, niceness=10)
    assert low.returncode == 0, low.stderr
    nice, group = _priorities(low.stdout)
    assert nice >= 10
    if AUTOGROUPS and group:  # the sandbox's own /proc shows the session's group where the kernel lets it
        assert group.endswith("nice 10"), group
