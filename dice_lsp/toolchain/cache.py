"""Compile results keyed by everything that decides them, kept across processes in one msgpack file.

Key: the source text, every local file it includes (found through quoted `#include`s, recursively),
the flags, and the nvcc version. The file lives under the user's cache directory (XDG), holds at most
`max_entries` results and `max_bytes` bytes (the oldest go first; a single result larger than
MAX_ENTRY_BYTES is not kept), and is replaced atomically (write a temporary file, then rename), so the
server and the CLI can share it and a crash mid-write never leaves a torn file behind. A cache is a help,
never a condition: a file that cannot be read (another program, a folder in its place) counts as empty,
and one that cannot be written (a read-only folder, a full disk) is skipped, with one warning per cache.
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

from dice_lsp.errors import DiceError
from dice_lsp.sandbox import own, run_host_tool

LOG = logging.getLogger("dice_lsp.cache")
MAX_ENTRIES = 512  # results kept in the compile cache
MAX_BYTES = 64 << 20  # size of the compile cache's file
MAX_ENTRY_BYTES = 1 << 20  # a larger result (thousands of diagnostics) is compiled again rather than kept
_QUOTED_INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"', re.MULTILINE)


def cache_root() -> Path:
    """dice-lsp's folder under the user's cache directory (XDG_CACHE_HOME, else ~/.cache)."""
    return Path(os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")) / "dice-lsp"


def cache_folder(name: str) -> Path:
    """`cache_root()/name` (builds, extensions, rewrites), held as this process's own for its sandboxed runs
    (`sandbox.own`): a harness child reads the cubins and extension builds kept there."""
    return _owned(cache_root() / name)


@cache
def _owned(folder: Path) -> Path:
    own(folder)
    return folder


def replace_atomically(path: Path, data: bytes) -> None:
    """Write `data` as `path`, atomically (a temporary file beside it, then a rename): a reader in another process
    never sees half a file. OSError when the folder cannot be written (no temporary file is left behind)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, scratch = tempfile.mkstemp(prefix=f".{path.name}-", dir=path.parent)
    try:
        with os.fdopen(handle, "wb") as out:
            out.write(data)
        os.replace(scratch, path)
    finally:
        Path(scratch).unlink(missing_ok=True)


def default_path() -> Path:
    return cache_root() / "compile-cache.msgpack"


VERSION_TIMEOUT_S = 30.0  # `nvcc --version` answers in ~20 ms; one that hangs is a broken installation


@cache
def nvcc_version(nvcc: Path, mtime: float) -> str:
    """`nvcc --version` (remembered per binary and modification time); a DiceError naming nvcc when it does not
    answer within VERSION_TIMEOUT_S."""
    try:
        return run_host_tool([str(nvcc), "--version"], VERSION_TIMEOUT_S).stdout
    except subprocess.TimeoutExpired:
        raise DiceError(f"{nvcc} --version did not answer within {VERSION_TIMEOUT_S:g} s; is that nvcc "
                        "installed whole? (dice.nvcc chooses another)") from None


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
    def __init__(self, path: Path | None = None, max_entries: int = MAX_ENTRIES, max_bytes: int = MAX_BYTES) -> None:
        self.path = path or default_path()
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self._warned = False

    def _warn(self, message: str, *args: object) -> None:
        """A warning the first time, then quietly: a read-only cache folder stays read-only."""
        LOG.log(logging.DEBUG if self._warned else logging.WARNING, message, *args)
        self._warned = True

    def _load(self) -> dict[str, Any]:
        try:
            data = msgpack.unpackb(self.path.read_bytes(), raw=False)
        except FileNotFoundError:
            return {}
        except (OSError, ValueError, msgpack.UnpackException) as exc:
            self._warn("%s: unreadable compile cache, compiling without it (%s)", self.path, exc)
            return {}
        return data if isinstance(data, dict) else {}

    def get(self, key: str) -> dict[str, Any] | None:
        entry = self._load().get(key)
        value = entry.get("value") if isinstance(entry, dict) else None
        return value if isinstance(value, dict) else None

    def put(self, key: str, value: dict[str, Any]) -> None:
        """Keep `value` for `key` if it can be kept; never raises."""
        packed = msgpack.packb({"time": time.time(), "value": value}, use_bin_type=True)
        if len(packed) > MAX_ENTRY_BYTES:
            LOG.info("compile cache: a result of %d bytes is not kept", len(packed))
            return
        entries = self._load()
        entries[key] = {"time": time.time(), "value": value}
        try:
            self._write(self._bounded(entries))
        except OSError as exc:
            self._warn("%s: cannot write the compile cache, compiling without it (%s)", self.path,
                       exc.strerror or exc)

    def _bounded(self, entries: dict[str, Any]) -> dict[str, Any]:
        """The newest entries within `max_entries` and `max_bytes`."""
        newest = sorted(entries.items(), key=lambda item: _time(item[1]), reverse=True)
        kept: dict[str, Any] = {}
        size = 0
        for key, entry in newest[:self.max_entries]:
            size += len(key) + len(msgpack.packb(entry, use_bin_type=True))
            if size > self.max_bytes:
                break
            kept[key] = entry
        return kept

    def _write(self, entries: dict[str, Any]) -> None:
        replace_atomically(self.path, msgpack.packb(entries, use_bin_type=True))


def _time(entry: Any) -> float:
    moment = entry.get("time") if isinstance(entry, dict) else None
    return float(moment) if isinstance(moment, (int, float)) else 0.0
