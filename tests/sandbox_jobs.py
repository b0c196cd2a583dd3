"""Harness jobs that try to leave the sandbox, for tests/test_sandbox.py (run in a confined child)."""

from __future__ import annotations

import subprocess
import time
from typing import Any


def hog_memory_in_a_grandchild(payload: dict[str, Any]) -> dict[str, Any]:
    """A `setsid` grandchild that grows: it has left the process group, not the sandbox."""
    code = f"b = [bytearray(1 << 20) for _ in range({payload['mib']})]; import time; time.sleep(60)"
    subprocess.Popen(["python3", "-c", code], start_new_session=True)
    time.sleep(60)
    return {}
