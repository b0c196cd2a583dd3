"""Where compilers run: every nvcc call goes through `run_tool`.

nvcc runs its sub-steps (cudafe++, cicc, ptxas, the host compiler) through a shell, and a compile reads
whatever its `#include`s name. The arguments are made safe before they get here (`toolchain.flags`,
`toolchain.nvcc`); this module decides *where* the process runs. In the editor and the CLI it runs as the
user, who asked for it; the team server confines it (see `dice_lsp.remote`).

Every run has stdin closed (an `#include "/dev/stdin"` reads nothing instead of blocking), its own process
group (killed whole on a timeout, so `cicc` does not outlive a killed `nvcc`), and a timeout.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from collections.abc import Sequence
from pathlib import Path


def run_tool(argv: Sequence[str], cwd: Path, timeout: float,
             readable: Sequence[Path] = ()) -> subprocess.CompletedProcess[str]:
    """Run `argv` in `cwd` (its scratch folder) and capture its output; `readable` are the folders it reads
    besides the toolkit (include folders). Raises `subprocess.TimeoutExpired` after `timeout` seconds, with
    the whole process group killed."""
    del readable  # used where the process is confined
    with subprocess.Popen(list(argv), cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True, errors="replace", start_new_session=True) as proc:
        try:
            stdout, stderr = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            _kill_group(proc)
            raise
        return subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr)


def _kill_group(proc: subprocess.Popen[str]) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.kill()
    with contextlib.suppress(subprocess.TimeoutExpired):  # a process that left the group may hold the pipes
        proc.communicate(timeout=5)
