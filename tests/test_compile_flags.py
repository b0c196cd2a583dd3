"""Which nvcc flags a file is checked with: its build's compile_commands.json, else the dice.* settings."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from dice_lsp.toolchain.flags import DEFAULT_FLAGS, CompileFlags, flags_for

USES_BUILD_FLAGS = """#include "config.cuh"
#ifndef TILE
#error TILE must be defined by the build
#endif
__global__ void k(float* a) { a[threadIdx.x] *= SCALE * TILE; }
"""


def write_database(folder: Path, entries: list[dict[str, Any]]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "compile_commands.json"
    path.write_text(json.dumps(entries))
    return path


def check(path: Path, *extra: str) -> tuple[int, dict[str, Any], str]:
    proc = subprocess.run([sys.executable, "-m", "dice_lsp.cli", "check", str(path), "--json", *extra],
                          capture_output=True, text=True, timeout=300)
    return proc.returncode, json.loads(proc.stdout) if proc.stdout else {}, proc.stderr


def test_a_build_command_keeps_what_changes_the_device_code_and_drops_the_rest(tmp_path: Path) -> None:
    command = ("/usr/local/cuda/bin/nvcc -O3 -Iinclude -isystem /opt/cutlass/include -DTILE=32 -D DEBUG "
               "-std=c++20 -gencode arch=compute_80,code=sm_80 --maxrregcount 64 --expt-relaxed-constexpr "
               "-Xcompiler -fPIC -c src/k.cu -o build/k.o")
    write_database(tmp_path / "build", [{"directory": str(tmp_path), "command": command, "file": "src/k.cu"}])
    flags = flags_for(tmp_path / "src" / "k.cu", DEFAULT_FLAGS)
    assert flags.include_dirs == ((tmp_path / "include").resolve(), Path("/opt/cutlass/include"))
    assert flags.defines == ("TILE=32", "DEBUG") and flags.std == "c++20" and flags.arch == "sm_80"
    assert flags.extra == ("--maxrregcount=64", "--expt-relaxed-constexpr")
    assert flags.origin == str(tmp_path / "build" / "compile_commands.json")
    assert "-fPIC" not in flags.arguments() and "-o" not in flags.arguments()


def test_a_file_the_database_does_not_list_takes_its_nearest_neighbour(tmp_path: Path) -> None:
    entries = [{"directory": str(tmp_path), "arguments": ["nvcc", "-DWHERE=1", "-c", "a/x.cu"], "file": "a/x.cu"},
               {"directory": str(tmp_path), "arguments": ["nvcc", "-DWHERE=2", "-c", "b/y.cu"], "file": "b/y.cu"}]
    write_database(tmp_path, entries)
    assert flags_for(tmp_path / "b" / "new.cu", DEFAULT_FLAGS).defines == ("WHERE=2",)
    assert flags_for(tmp_path / "a" / "x.cu", DEFAULT_FLAGS).defines == ("WHERE=1",)


def test_no_database_or_a_broken_one_falls_back_to_the_settings(tmp_path: Path) -> None:
    fallback = CompileFlags(arch="sm_86", defines=("FROM_SETTINGS",))
    assert flags_for(tmp_path / "k.cu", fallback, stop=tmp_path) == fallback
    (tmp_path / "compile_commands.json").write_text("[{not json")
    assert flags_for(tmp_path / "k.cu", fallback) == fallback


def test_check_compiles_with_the_build_flags(tmp_path: Path) -> None:
    (tmp_path / "include").mkdir()
    (tmp_path / "include" / "config.cuh").write_text("#define SCALE 2.0f\n")
    source = tmp_path / "k.cu"
    source.write_text(USES_BUILD_FLAGS)
    code, report, _ = check(source)
    assert code == 1, "without the build's flags the include and the define are missing"
    write_database(tmp_path, [{"directory": str(tmp_path), "file": "k.cu",
                               "arguments": ["nvcc", "-Iinclude", "-DTILE=4", "--maxrregcount=16", "-c", "k.cu"]}])
    code, report, _ = check(source)
    assert code == 0, report["diagnostics"]
    [warning] = report["diagnostics"]  # proof that --maxrregcount reached ptxas
    assert warning["severity"] == "warning" and "register count of 16" in warning["message"]


def test_check_command_line_flags_apply_on_top(tmp_path: Path) -> None:
    (tmp_path / "include").mkdir()
    (tmp_path / "include" / "config.cuh").write_text("#define SCALE 2.0f\n")
    source = tmp_path / "k.cu"
    source.write_text(USES_BUILD_FLAGS)
    code, report, _ = check(source, "-I", str(tmp_path / "include"), "-D", "TILE=8", "--std", "c++20")
    assert code == 0 and report["diagnostics"] == []
    bad = subprocess.run([sys.executable, "-m", "dice_lsp.cli", "check", str(source), "--std", "c99"],
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "C++ standard" in bad.stderr and len(bad.stderr.strip().splitlines()) == 1


def test_the_registry_nvcc_package_is_found_without_path_or_cuda_home(monkeypatch: pytest.MonkeyPatch) -> None:
    from dice_lsp.toolchain.nvcc import find_nvcc, packaged_nvcc
    from dice_lsp.toolchain.report import check_source

    if packaged_nvcc() is None:
        pytest.skip("the nvidia-cuda-nvcc package is not installed (pip install 'dice-lsp[cuda]')")
    for variable in ("CUDA_HOME", "CUDA_PATH"):
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.setenv("PATH", os.pathsep.join(p for p in os.environ["PATH"].split(os.pathsep)
                                              if not (Path(p) / "nvcc").exists()))
    nvcc = find_nvcc()
    assert nvcc == packaged_nvcc() and "site-packages" in str(nvcc)
    report = check_source("__global__ void k(float* a) { a[threadIdx.x] *= 2.0f; }\n", Path.cwd(), nvcc=nvcc)
    assert report.diagnostics == [] and report.kernels[0].name == "k(float*)"
