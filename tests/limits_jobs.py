"""Harness jobs that fill a disk or memory by writing files, for tests/test_sandbox_limits.py. Each says on stdout
how much it has written so far (`wrote N MiB`), and stops at `payload["mib"]`."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

CHUNK = 100 << 20  # each file: 100 MB
_DATA = b"\x5a" * (1 << 20)


def _fill(file: Any, chunk: int = CHUNK) -> None:
    for _ in range(chunk >> 20):
        file.write(_DATA)
    file.flush()


def _said(mib: int) -> None:
    print(f"wrote {mib} MiB", flush=True)


def write_files(payload: dict[str, Any]) -> dict[str, Any]:
    """Many 100 MB files in `payload["folder"]` (default: the scratch folder, the child's working folder)."""
    folder = Path(payload.get("folder", "."))
    written = 0
    for n in range(payload["mib"] // (CHUNK >> 20)):
        with (folder / f"fill-{n}.bin").open("wb") as file:
            _fill(file)
        written += CHUNK >> 20
        _said(written)
        time.sleep(payload.get("pause", 0.0))
    return {"mib": written}


def write_deleted_file(payload: dict[str, Any]) -> dict[str, Any]:
    """One file in the scratch folder, deleted at once and kept open: no name to find, the disk is used all the same."""
    with open("hidden.bin", "wb") as file:
        os.unlink("hidden.bin")
        written = 0
        while written < payload["mib"]:
            _fill(file)
            written += CHUNK >> 20
            _said(written)
            time.sleep(payload.get("pause", 0.0))
        return {"mib": written}


def write_memfds(payload: dict[str, Any]) -> dict[str, Any]:
    """100 MB memfds, kept open (memory no process maps: not resident anywhere)."""
    kept: list[int] = []
    written = 0
    while written < payload["mib"]:
        fd = os.memfd_create(f"fill-{len(kept)}")
        with os.fdopen(os.dup(fd), "wb") as file:
            _fill(file)
        kept.append(fd)
        written += CHUNK >> 20
        _said(written)
        time.sleep(payload.get("pause", 0.0))
    return {"mib": written}


def tmp_size(payload: dict[str, Any]) -> dict[str, Any]:
    found = os.statvfs("/tmp")
    return {"mib": (found.f_blocks * found.f_frsize) >> 20}
