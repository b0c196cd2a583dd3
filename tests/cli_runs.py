"""`dice-lsp` command lines run as real processes, all of a call's at once: a test's independent runs (a run
through the team server and its local twin, JSON and human output) then take, on two cores, the time of one."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def cli_runs(*commands: list[str], timeout: float = 300, cwd: Path | None = None,
             ) -> list[subprocess.CompletedProcess[str]]:
    """`python -m dice_lsp.cli COMMAND` for each command, started together; their results in order."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    processes = [subprocess.Popen([sys.executable, "-m", "dice_lsp.cli", *command], stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True, env=env, cwd=cwd) for command in commands]
    return [finished(process, timeout) for process in processes]


def finished(process: subprocess.Popen[str], timeout: float) -> subprocess.CompletedProcess[str]:
    try:
        out, err = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        raise
    return subprocess.CompletedProcess(process.args, process.returncode, out, err)


def cli_here(*command: str) -> subprocess.CompletedProcess[str]:
    """`dice-lsp COMMAND` in this process (`cli.main`, its stdout and stderr captured): for a run that only serves
    as the reference of another (a local twin of a team server's answer), where a process of its own would add a
    torch import and a model load and nothing the test asserts."""
    import contextlib
    import io

    from dice_lsp import cli

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli.main(list(command))
    return subprocess.CompletedProcess(["dice-lsp", *command], code, out.getvalue(), err.getvalue())
