"""Compile results keyed by everything that decides them, kept across processes in one msgpack file.

Key: the source text, every local file it includes (found through quoted `#include`s, recursively),
the flags, and the nvcc version. The file lives under the user's cache directory (XDG), holds at most
`max_entries` results (the oldest go first), and is replaced atomically (write a temporary file, then
rename), so the server and the CLI can share it and a crash mid-write never leaves a torn file behind; a
file that cannot be read anyway (another program, a full disk) counts as empty.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import subprocess
import tempfile
import time
from collections.abc import Iterable
from functools import cache
from pathlib import Path
from typing import Any

import msgpack  # type: ignore[import-untyped]

LOG = logging.getLogger("dice_lsp.cache")
_QUOTED_INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"', re.MULTILINE)


def cache_root() -> Path:
    """dice-lsp's folder under the user's cache directory (XDG_CACHE_HOME, else ~/.cache)."""
    return Path(os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")) / "dice-lsp"


def default_path() -> Path:
    return cache_root() / "compile-cache.msgpack"


@cache
def nvcc_version(nvcc: Path, mtime: float) -> str:
    """`nvcc --version` (remembered per binary and modification time)."""
    return subprocess.run([str(nvcc), "--version"], capture_output=True, text=True, timeout=30).stdout


def _follow_includes(text: str, folders: Iterable[Path]) -> tuple[dict[Path, bytes], set[Path]]:
    """Files reachable through quoted includes, looked up in `folders`, with their content; and every
    path tried for a name that was not found (creating one of them changes the compile)."""
    search = list(folders)
    found: dict[Path, bytes] = {}
    missing: set[Path] = set()
    pending = [text]
    while pending:
        for name in _QUOTED_INCLUDE.findall(pending.pop()):
            tried = [(folder / name).resolve() for folder in search]
            path = next((p for p in tried if p.is_file()), None)
            if path is None:
                missing.update(tried)
            elif path not in found:
                found[path] = path.read_bytes()
                pending.append(found[path].decode("utf-8", errors="replace"))
    return found, missing


def local_includes(text: str, folders: Iterable[Path]) -> list[tuple[Path, bytes]]:
    """Every file reachable through quoted includes, looked up in `folders`, with its content."""
    return sorted(_follow_includes(text, folders)[0].items())


def include_dependencies(text: str, folders: Iterable[Path]) -> set[Path]:
    """The paths whose creation, change or removal changes how `text` compiles (local includes only)."""
    found, missing = _follow_includes(text, folders)
    return set(found) | missing


def cache_key(text: str, folders: Iterable[Path], flags: Iterable[str], nvcc: Path) -> str:
    folders = list(folders)
    digest = hashlib.sha256()
    for part in (text.encode(), *(str(f).encode() for f in flags), nvcc_version(nvcc, nvcc.stat().st_mtime).encode()):
        digest.update(len(part).to_bytes(8, "little") + part)
    for path, content in local_includes(text, folders):
        digest.update(str(path).encode() + b"\0" + hashlib.sha256(content).digest())
    return digest.hexdigest()


class CompileCache:
    def __init__(self, path: Path | None = None, max_entries: int = 512) -> None:
        self.path = path or default_path()
        self.max_entries = max_entries

    def _load(self) -> dict[str, Any]:
        try:
            data = msgpack.unpackb(self.path.read_bytes(), raw=False)
        except FileNotFoundError:
            return {}
        except (OSError, ValueError, msgpack.UnpackException) as exc:
            LOG.warning("%s: unreadable compile cache, starting empty (%s)", self.path, exc)
            return {}
        return data if isinstance(data, dict) else {}

    def get(self, key: str) -> dict[str, Any] | None:
        entry = self._load().get(key)
        return entry["value"] if isinstance(entry, dict) and "value" in entry else None

    def put(self, key: str, value: dict[str, Any]) -> None:
        entries = self._load()
        entries[key] = {"time": time.time(), "value": value}
        if len(entries) > self.max_entries:
            newest = sorted(entries.items(), key=lambda item: item[1].get("time", 0.0))[-self.max_entries:]
            entries = dict(newest)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        handle, scratch = tempfile.mkstemp(prefix=".compile-cache-", dir=self.path.parent)
        try:
            with os.fdopen(handle, "wb") as out:
                out.write(msgpack.packb(entries, use_bin_type=True))
            os.replace(scratch, self.path)
        except OSError:
            Path(scratch).unlink(missing_ok=True)
            raise
