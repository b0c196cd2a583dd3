"""Kernel-level builds: a .cu file to a cubin the driver loads, kept in the cache directory by hash.

Same source, local includes, flags and nvcc give the same folder (`<cache>/builds/<hash>/`), so the
optimize loop and repeated benchmarks build each candidate once. A build is written into a scratch folder
and renamed into place, so a crash never leaves a half-written build that looks finished. A build that
failed for a reason of the machine (a timeout, a signal, a full disk) is returned and not kept. An entry
that cannot be read (another version's, a file in a folder's place) is a miss and is replaced. The
folder is bounded: after each new build, builds unused for MAX_AGE_S go, then the least recently used
until the rest fits in MAX_BYTES; a build used in the last IN_USE_S seconds stays (a benchmark may be
about to load it), and so does a scratch folder younger than that. The same `evict` bounds the torch
extensions and rewritten files `harness.bench` keeps beside the builds.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from dice_lsp.errors import DiceError
from dice_lsp.sandbox import run_tool
from dice_lsp.toolchain.cache import cache_folder, cache_key
from dice_lsp.toolchain.flags import CompileFlags
from dice_lsp.toolchain.nvcc import INCLUDE_LINKS, SOURCE_NAME, find_nvcc, nvcc_command, transient_failure, user_paths
from dice_lsp.toolchain.report import KernelResources, parse_resources

LOG = logging.getLogger("dice_lsp.build")
MAX_BYTES = 2 << 30  # the builds folder's size after eviction
MAX_AGE_S = 30 * 86400  # a build unused this long goes
IN_USE_S = 600  # a build used (or a scratch folder written) this recently is never evicted (a benchmark's timeout
# is at most 300 s on a team server)
BUILD_TIMEOUT_S = 300.0  # one nvcc -cubin run
_SCRATCH = ".build-"


@dataclass(frozen=True)
class Build:
    ok: bool
    output: str  # nvcc's messages
    cubin: Path | None
    kernels: tuple[KernelResources, ...]
    seconds: float
    cached: bool

    def mangled(self, kernel: str) -> str:
        """The symbol of the kernel called `kernel` (`saxpy`, `scale<float>` or the full signature)."""
        for k in self.kernels:
            if k.name == kernel or re.match(rf"(?:\S+\s+)?{re.escape(kernel)}\s*[<(]", k.name) or k.mangled == kernel:
                return k.mangled
        names = ", ".join(k.name for k in self.kernels) or "none"
        raise DiceError(f"no kernel {kernel!r} in the build (kernels: {names})")


def build_cubin(source: str, folder: Path | None, flags: CompileFlags, nvcc: Path | None = None,
                timeout: float = BUILD_TIMEOUT_S) -> Build:
    """Build `source` (a file living in `folder`) for `flags.arch`; a failed build is returned, not raised."""
    started = time.perf_counter()
    nvcc = nvcc or find_nvcc()
    key = cache_key(source, [folder] if folder else [], ("cubin", *flags.arguments()), nvcc)
    target = builds_root() / key[:32]
    if (hit := _read(target, time.perf_counter() - started)) is not None:
        mark_used(target)
        return hit
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        scratch = Path(tempfile.mkdtemp(prefix=_SCRATCH, dir=target.parent))
    except OSError as exc:
        return _failed(f"cannot write the build folder {target.parent}: {exc.strerror or exc}", started)
    try:
        try:
            ok, output, transient = _compile(source, folder, flags, nvcc, timeout, scratch)
        except OSError as exc:
            return _failed(f"cannot write the build folder {target.parent}: {exc.strerror or exc}", started)
        if transient:
            return Build(False, output, None, (), time.perf_counter() - started, cached=False)
        kernels = parse_resources(output, source, nvcc) if ok else []
        try:
            (scratch / "build.json").write_text(json.dumps({"ok": ok, "output": output,
                                                            "kernels": [vars(k) for k in kernels]}))
            _store(scratch, target)
        except OSError as exc:  # a full disk: the messages are still the user's
            reason = f"cannot keep the build in {target.parent}: {exc.strerror or exc}"
            return _failed("\n".join(part for part in (output.rstrip("\n"), reason) if part), started)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    evict(target.parent, keep=target)
    build = _read(target, time.perf_counter() - started)
    if build is None:  # removed or damaged by someone else in the meantime
        return _failed(f"the build in {target} disappeared", started)
    return Build(build.ok, build.output, build.cubin, build.kernels, build.seconds, cached=False)


def builds_root() -> Path:
    return cache_folder("builds")


def _compile(source: str, folder: Path | None, flags: CompileFlags, nvcc: Path, timeout: float,
             scratch: Path) -> tuple[bool, str, bool]:
    """nvcc -cubin of `source` in `scratch`: whether it built, its messages, and whether it failed for a
    reason of the machine."""
    path = scratch / SOURCE_NAME
    path.write_text(source, encoding="utf-8")
    command = nvcc_command(path, flags, folder, ptxas_verbose=True, nvcc=nvcc, cubin=True)
    try:
        proc = run_tool(command, scratch, timeout, [*flags.include_dirs, *([folder] if folder else [])])
    except subprocess.TimeoutExpired:
        return False, f"nvcc timed out after {timeout:.0f} s", True
    finally:
        shutil.rmtree(scratch / INCLUDE_LINKS, ignore_errors=True)  # links to the user's folders stay out of the cache
    output = user_paths(proc.stderr + proc.stdout, scratch)
    return proc.returncode == 0, output, transient_failure(proc.returncode, output)


def _store(scratch: Path, target: Path) -> None:
    """Move the finished build into place, replacing an entry that cannot be read."""
    if (target.exists() or target.is_symlink()) and _read(target, 0.0) is None:
        _remove(target)
    try:
        os.replace(scratch, target)
    except OSError:
        if _read(target, 0.0) is None:  # not another process finishing the same build first
            raise


def _failed(reason: str, started: float) -> Build:
    return Build(False, reason, None, (), time.perf_counter() - started, cached=False)


def _read(folder: Path, seconds: float) -> Build | None:
    """The build kept in `folder`; None when there is none or it cannot be read."""
    cubin = folder / Path(SOURCE_NAME).with_suffix(".cubin")
    try:
        data = json.loads((folder / "build.json").read_text())
        build = Build(bool(data["ok"]), str(data["output"]), cubin if data["ok"] else None,
                      tuple(KernelResources(**k) for k in data["kernels"]), seconds, cached=True)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        if folder.exists() or folder.is_symlink():
            LOG.info("%s: unreadable build, building again (%s)", folder, exc)
        return None
    if build.ok and not cubin.is_file():
        return None
    return build


def write_if_changed(path: Path, data: bytes) -> bool:
    """Write `data` to `path` unless it already holds exactly those bytes; whether it wrote. A file left alone
    keeps its modification time, so ninja, which compares it with its outputs', does not build again (a
    torch extension's build folder: rewriting the same source made every benchmark a full rebuild). A write
    goes through a temporary file renamed into place: another process reading the file sees the old bytes or
    the new, never part of them."""
    try:
        if path.read_bytes() == data:
            return False
    except OSError:  # missing or unreadable: written
        pass
    fd, scratch = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as file:
            file.write(data)
        os.chmod(scratch, 0o644)
        os.replace(scratch, path)
    except BaseException:
        Path(scratch).unlink(missing_ok=True)
        raise
    return True


def mark_used(folder: Path) -> None:
    """Mark a build as used now (eviction goes by last use)."""
    with contextlib.suppress(OSError):
        os.utime(folder)


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


def evict(root: Path, keep: Path | None = None, max_bytes: int = MAX_BYTES, max_age_s: float = MAX_AGE_S) -> None:
    """Remove builds from `root` (see the module's docstring), never `keep`; never raises."""
    now = time.time()
    entries: list[tuple[float, int, Path]] = []
    try:
        for entry in root.iterdir():
            used = entry.lstat().st_mtime
            if entry != keep and now - used > IN_USE_S:
                entries.append((used, _size(entry), entry))
    except OSError as exc:
        LOG.info("%s: cannot look for old builds (%s)", root, exc)
        return
    total = _size(root)
    for used, size, entry in sorted(entries):
        if now - used <= max_age_s and total <= max_bytes and not entry.name.startswith(_SCRATCH):
            continue
        _remove(entry)
        total -= size


def _size(path: Path) -> int:
    """Bytes of the files under `path` (not following links)."""
    if not path.is_dir() or path.is_symlink():
        try:
            return path.lstat().st_size
        except OSError:
            return 0
    total = 0
    for top, _dirs, files in os.walk(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(top, name)).st_size
            except OSError:
                continue
    return total
