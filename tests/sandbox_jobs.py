"""Harness jobs that try to leave the sandbox, for tests/test_sandbox.py (run in a confined child)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any


def hog_memory_in_a_grandchild(payload: dict[str, Any]) -> dict[str, Any]:
    """A `setsid` grandchild that grows: it has left the process group, not the sandbox."""
    code = f"b = [bytearray(1 << 20) for _ in range({payload['mib']})]; import time; time.sleep(60)"
    subprocess.Popen(["python3", "-c", code], start_new_session=True)
    time.sleep(60)
    return {}


def result_is_a_link(payload: dict[str, Any]) -> dict[str, Any]:
    """Leave the result file as a link to a file of the host, then exit before the child writes it."""
    os.symlink(payload["target"], _result_file())
    os._exit(0)


def result_is_a_fifo(payload: dict[str, Any]) -> dict[str, Any]:
    """Leave the result file as a FIFO nobody writes: reading it would block the server."""
    os.mkfifo(_result_file())
    os._exit(0)


def _result_file() -> Path:
    """Where the child writes the result: named in its job file (`python -m dice_lsp.harness.child JOB`)."""
    return Path(json.loads(Path(sys.argv[1]).read_text())["result"])
