"""Kernel-level builds: a .cu file to a cubin the driver loads, kept in the cache directory by hash.

Same source, local includes, flags and nvcc give the same folder (`<cache>/builds/<hash>/`), so the
optimize loop and repeated benchmarks build each candidate once. A build is written into a scratch folder
and renamed into place, so a crash never leaves a half-written build that looks finished.
"""

from __future__ import annotations

import json
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
from dice_lsp.toolchain.cache import cache_key, cache_root
from dice_lsp.toolchain.flags import CompileFlags
from dice_lsp.toolchain.nvcc import INCLUDE_LINKS, SOURCE_NAME, find_nvcc, nvcc_command, user_paths
from dice_lsp.toolchain.report import KernelResources, parse_resources


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
                timeout: float = 300.0) -> Build:
    """Build `source` (a file living in `folder`) for `flags.arch`; a failed build is returned, not raised."""
    started = time.perf_counter()
    nvcc = nvcc or find_nvcc()
    key = cache_key(source, [folder] if folder else [], ("cubin", *flags.arguments()), nvcc)
    target = cache_root() / "builds" / key[:32]
    if (target / "build.json").is_file():
        return _read(target, time.perf_counter() - started)
    target.parent.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=".build-", dir=target.parent))
    try:
        path = scratch / SOURCE_NAME
        path.write_text(source, encoding="utf-8")
        command = nvcc_command(path, flags, folder, ptxas_verbose=True, nvcc=nvcc, cubin=True)
        try:
            proc = run_tool(command, scratch, timeout, [*flags.include_dirs, *([folder] if folder else [])])
            ok, output = proc.returncode == 0, user_paths(proc.stderr + proc.stdout, scratch)
        except subprocess.TimeoutExpired:
            ok, output = False, f"nvcc timed out after {timeout:.0f} s"
        shutil.rmtree(scratch / INCLUDE_LINKS, ignore_errors=True)  # links to the user's folders stay out of the cache
        kernels = parse_resources(output, source, nvcc) if ok else []
        (scratch / "build.json").write_text(json.dumps({"ok": ok, "output": output,
                                                        "kernels": [vars(k) for k in kernels]}))
        try:
            os.replace(scratch, target)
        except OSError:  # another process finished the same build first
            shutil.rmtree(scratch, ignore_errors=True)
    finally:
        if scratch.exists():
            shutil.rmtree(scratch, ignore_errors=True)
    build = _read(target, time.perf_counter() - started)
    return Build(build.ok, build.output, build.cubin, build.kernels, build.seconds, cached=False)


def _read(folder: Path, seconds: float) -> Build:
    data = json.loads((folder / "build.json").read_text())
    cubin = folder / Path(SOURCE_NAME).with_suffix(".cubin")
    return Build(data["ok"], data["output"], cubin if data["ok"] else None,
                 tuple(KernelResources(**k) for k in data["kernels"]), seconds, cached=True)
