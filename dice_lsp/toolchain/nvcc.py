"""Compile-only nvcc runs in a temporary directory, never in the user's tree.

A result says whether it is *transient*: a timeout, an nvcc (or one of its steps) killed by a signal, a
full or read-only temporary folder. Those say nothing about the source, so no cache keeps them."""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import threading
from dataclasses import dataclass
from pathlib import Path

from dice_lsp.errors import DiceError
from dice_lsp.sandbox import run_tool
from dice_lsp.toolchain.flags import DEFAULT_FLAGS, CompileFlags
from dice_lsp.toolchain.scratch import run_folder


def find_nvcc(configured: str | None = None) -> Path:
    """The configured nvcc (`dice.nvcc`), else CUDA_HOME / CUDA_PATH, then PATH, then the registry's
    `nvidia-cuda-nvcc` package in this environment (`pip install dice-lsp[cuda]`), then /usr/local/cuda."""
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
    packaged = packaged_nvcc()
    if packaged is not None:
        return packaged
    default = Path("/usr/local/cuda/bin/nvcc")
    if default.is_file():
        return default
    raise DiceError("nvcc not found (set CUDA_HOME, put nvcc on PATH, or pip install 'dice-lsp[cuda]')")


def packaged_nvcc() -> Path | None:
    """nvcc from the `nvidia-cuda-nvcc` wheel (`nvidia/cu13/bin/nvcc`), when `nvidia-cuda-runtime` put the
    CUDA headers beside it: other packages (torch among them) pull in nvcc alone, which cannot compile a .cu."""
    spec = importlib.util.find_spec("nvidia")
    for root in (spec.submodule_search_locations or []) if spec is not None else []:
        for candidate in sorted(Path(root).glob("*/bin/nvcc"), reverse=True):
            if os.access(candidate, os.X_OK) and (candidate.parents[1] / "include" / "cuda_runtime.h").is_file():
                return candidate
    return None


@dataclass(frozen=True)
class CompileResult:
    ok: bool
    output: str
    transient: bool = False  # failed for a reason of the machine, not of the source: never cached


COMPILE_TIMEOUT_S = 120.0  # the longest one compile-only nvcc run may take (then its process group is killed)
# what nvcc and its steps say when the machine, not the source, made them fail
_MACHINE_FAILURE = re.compile(r"No space left on device|Read-only file system|Disk quota exceeded|"
                              r"Could not open output file|died due to signal|virtual memory exhausted|"
                              r"Cannot allocate memory|Killed signal terminated program|"
                              r"Failed to preprocess host compiler properties")  # its first temporary file


def transient_failure(returncode: int, output: str) -> bool:
    """Whether a failed run failed because of the machine: killed by a signal, or out of disk or memory."""
    return returncode < 0 or (returncode != 0 and _MACHINE_FAILURE.search(output) is not None)


SOURCE_NAME = "source.cu"  # what the compiled text is called in nvcc's messages
INCLUDE_LINKS = "include"  # the scratch folder's links to the include folders: include/0, include/1, ...
_SAFE_PATH = re.compile(r"[\w./+-]+")


def nvcc_command(path: Path, flags: CompileFlags, folder: Path | None = None, ptxas_verbose: bool = False,
                 nvcc: Path | None = None, cubin: bool = False) -> list[str]:
    """The compile-only command for the .cu file at `path`, a generated name in its scratch folder (its
    includes resolve from `folder`); the object (or, with `cubin`, the device code alone, loadable by the
    driver) lands next to it.

    nvcc hands its arguments to a shell, so no path the user chose appears here: each include folder is
    linked into the scratch folder as `include/N` (`linked_folders`), and the flags were checked when they
    were made (`CompileFlags`)."""
    scratch = path.parent
    if not _SAFE_PATH.fullmatch(str(path)):
        raise DiceError(f"the scratch folder {scratch} has characters nvcc's shell would interpret; "
                        "point TMPDIR (or XDG_CACHE_HOME) at a plain folder")
    links = linked_folders(scratch, [*flags.include_dirs, *([folder] if folder else [])])
    output = ["-cubin", "-o", str(path.with_suffix(".cubin"))] if cubin else ["-c", "-o", str(path.with_suffix(".o"))]
    command = [str(nvcc or find_nvcc()), *flags.options(), *(f"-I{link}" for link in links), str(path), *output]
    return command + (["-Xptxas", "-v"] if ptxas_verbose else [])


def linked_folders(scratch: Path, folders: list[Path]) -> dict[Path, Path]:
    """Each of `folders` as a symbolic link `scratch/include/N`, mapped to the folder."""
    root = scratch / INCLUDE_LINKS
    root.mkdir(exist_ok=True)
    links = {}
    for number, folder in enumerate(folders):
        link = root / str(number)
        if link.is_symlink() and os.readlink(link) != str(folder.resolve()):
            link.unlink()
        if not link.is_symlink():
            link.symlink_to(folder.resolve(), target_is_directory=True)
        links[link] = folder
    return links


def user_paths(output: str, scratch: Path) -> str:
    """nvcc's `output` with the linked include folders spelled as the user's folders again."""
    root = scratch / INCLUDE_LINKS
    if not root.is_dir():
        return output
    for link in sorted(root.iterdir(), key=lambda entry: -len(entry.name)):  # include/10 before include/1
        output = output.replace(f"{link}/", f"{os.readlink(link)}/")
    return output


def compile_source(source: str, flags: CompileFlags = DEFAULT_FLAGS, folder: Path | None = None,
                   timeout: float = COMPILE_TIMEOUT_S, ptxas_verbose: bool = False, nvcc: Path | None = None,
                   cancel: threading.Event | None = None) -> CompileResult:
    """Compile `source` as a .cu translation unit living in `folder` to an object file that is thrown away.

    `ptxas_verbose` adds `-Xptxas -v`: registers, shared memory, stack and spills per kernel. Raises
    `lifetime.Stopped` when `cancel` is set (nvcc killed) or dice-lsp shuts down.
    """
    try:
        folder_made = run_folder("nvcc")
    except OSError as exc:  # the temporary folder is full, read-only or gone
        return _unwritable(exc)
    with folder_made as scratch:
        path = Path(scratch) / SOURCE_NAME
        try:
            path.write_text(source, encoding="utf-8")
        except OSError as exc:
            return _unwritable(exc)
        command = nvcc_command(path, flags, folder, ptxas_verbose, nvcc)
        try:
            proc = run_tool(command, Path(scratch), timeout, [*flags.include_dirs, *([folder] if folder else [])],
                            cancel)
        except subprocess.TimeoutExpired:
            return CompileResult(False, f"nvcc timed out after {timeout:.0f} s", transient=True)
        output = user_paths(proc.stderr + proc.stdout, Path(scratch))
        return CompileResult(proc.returncode == 0, output, transient_failure(proc.returncode, output))


def _unwritable(exc: OSError) -> CompileResult:
    return CompileResult(False, f"cannot write nvcc's scratch folder: {exc.strerror or exc}", transient=True)
