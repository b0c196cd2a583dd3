"""Compile-only nvcc runs in a temporary directory, never in the user's tree."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from dice_lsp.errors import DiceError


def find_nvcc(configured: str | None = None) -> Path:
    """The configured nvcc (`dice.nvcc`), else CUDA_HOME / CUDA_PATH, then PATH, then the usual install folder."""
    if configured:
        if not Path(configured).is_file():
            raise DiceError(f"nvcc not found at {configured} (dice.nvcc)")
        return Path(configured)
    for variable in ("CUDA_HOME", "CUDA_PATH"):
        root = os.environ.get(variable)
        if root and (Path(root) / "bin" / "nvcc").is_file():
            return Path(root) / "bin" / "nvcc"
    found = shutil.which("nvcc")
    if found:
        return Path(found)
    default = Path("/usr/local/cuda/bin/nvcc")
    if default.is_file():
        return default
    raise DiceError("nvcc not found (set CUDA_HOME or put nvcc on PATH)")


@dataclass(frozen=True)
class CompileResult:
    ok: bool
    output: str


SOURCE_NAME = "source.cu"  # what the compiled text is called in nvcc's messages


def nvcc_command(path: Path, arch: str = "sm_90", include_dirs: tuple[Path, ...] = (), ptxas_verbose: bool = False,
                 nvcc: Path | None = None) -> list[str]:
    """The compile-only command for the .cu file at `path`; the object lands next to it."""
    command = [str(nvcc or find_nvcc()), "-std=c++17", f"-arch={arch}", "-c", str(path),
               "-o", str(path.with_suffix(".o"))]
    return command + [f"-I{d}" for d in include_dirs] + (["-Xptxas", "-v"] if ptxas_verbose else [])


def compile_source(source: str, arch: str = "sm_90", include_dirs: tuple[Path, ...] = (),
                   timeout: float = 120.0, ptxas_verbose: bool = False, nvcc: Path | None = None) -> CompileResult:
    """Compile `source` as a .cu translation unit to an object file that is thrown away.

    `ptxas_verbose` adds `-Xptxas -v`: registers, shared memory, stack and spills per kernel.
    """
    with tempfile.TemporaryDirectory(prefix="dice-nvcc-") as scratch:
        path = Path(scratch) / SOURCE_NAME
        path.write_text(source, encoding="utf-8")
        command = nvcc_command(path, arch, include_dirs, ptxas_verbose, nvcc)
        try:
            proc = subprocess.run(command, capture_output=True, text=True, timeout=timeout, cwd=scratch)
        except subprocess.TimeoutExpired:
            return CompileResult(False, f"nvcc timed out after {timeout:.0f} s")
        return CompileResult(proc.returncode == 0, proc.stderr + proc.stdout)
