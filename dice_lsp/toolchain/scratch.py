"""Scratch folders for the tools (clang's precompiled preambles and runs, nvcc's objects) that no dead process leaves
behind.

A process removes its folders when it exits, but not when it is killed: an editor that kills its language server,
a crash, a CI job cut short. clang's precompiled preambles are 5–130 MB per file opened, so each such death left
that much in the temporary folder for good. Every folder made here is named after the process that made it
(`dice-clang-pch-<pid>-<random>`); the first folder a process makes removes the folders of processes that are
gone (`sweep`): those whose process no longer exists, that belong to this user, and that nothing has written
for `STALE_S` (a process of another PID namespace sharing the folder, a container's, looks gone from here; its
folders are spared while they are in use).
"""

from __future__ import annotations

import atexit
import contextlib
import os
import re
import shutil
import tempfile
import threading
import time
from pathlib import Path

from dice_lsp import sandbox

PREFIX = "dice-"
STALE_S = 600.0  # a dead process's folder untouched this long is removed
_NAME = re.compile(rf"{PREFIX}[a-z-]+?-(\d+)-[a-z0-9_]+")  # mkdtemp's random part has no '-'
_swept = False
_lock = threading.Lock()


def process_folder(kind: str) -> Path:
    """A new folder `dice-<kind>-<pid>-…` in the temporary folder, removed when this process exits; a sandboxed
    run may be given it (`sandbox.own`)."""
    made = Path(tempfile.mkdtemp(prefix=_prefix(kind)))
    sandbox.own(made)
    atexit.register(shutil.rmtree, made, True)
    return made


class run_folder:
    """A folder for one run, made at once (in `parent`, default the temporary folder) so that a full disk shows
    here, and removed after the `with` block; while it exists a sandboxed run may be given it (`sandbox.own`)."""

    def __init__(self, kind: str, parent: Path | None = None) -> None:
        self._made = tempfile.TemporaryDirectory(prefix=_prefix(kind), dir=parent, ignore_cleanup_errors=True)
        self.path = Path(self._made.name)
        sandbox.own(self.path)

    def __enter__(self) -> str:
        return self._made.name

    def __exit__(self, *_exc: object) -> None:
        sandbox.disown(self.path)
        self._made.cleanup()


def _prefix(kind: str) -> str:
    _sweep_once()
    return f"{PREFIX}{kind}-{os.getpid()}-"


def _sweep_once() -> None:
    global _swept
    with _lock:
        if _swept:
            return
        _swept = True
    with contextlib.suppress(OSError):
        sweep(Path(tempfile.gettempdir()))


def sweep(root: Path, now: float | None = None) -> list[Path]:
    """Remove the folders under `root` made here by processes that are gone; the ones removed."""
    now = time.time() if now is None else now
    removed = []
    for path in root.glob(f"{PREFIX}*"):
        match = _NAME.fullmatch(path.name)
        if match is None or not _gone(int(match[1])):
            continue
        try:
            stat = path.lstat()
        except OSError:
            continue
        if not path.is_dir() or path.is_symlink() or stat.st_uid != os.getuid() or now - stat.st_mtime < STALE_S:
            continue
        shutil.rmtree(path, ignore_errors=True)
        removed.append(path)
    return removed


def _gone(pid: int) -> bool:
    if pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except OSError:  # another user's process (PermissionError): alive
        return False
    return False
