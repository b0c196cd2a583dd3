"""`dice-lsp check`: the real nvcc's diagnostics and per-kernel resources, mapped onto the user's file."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

CLEAN = """#include <cuda_runtime.h>

__global__ void add(float* a, const float* b, int n) {
    __shared__ float tile[256];
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    tile[threadIdx.x] = b[i];
    __syncthreads();
    if (i < n) a[i] += tile[threadIdx.x];
}

template <typename T>
__global__ void scale(T* x, T s) { x[threadIdx.x] *= s; }
template __global__ void scale<float>(float*, float);
"""

BROKEN = """__global__ void k(float* a, int n) {
    int i = threadIdx.x
    a[i] = 1.0f;
    float* p = 3.5;
    a[0] = undefined_thing;
}
"""


def check(path: Path, *extra: str) -> tuple[int, dict[str, Any], str]:
    proc = subprocess.run([sys.executable, "-m", "dice_lsp.cli", "check", str(path), "--json", *extra],
                          capture_output=True, text=True, timeout=300)
    return proc.returncode, json.loads(proc.stdout) if proc.stdout else {}, proc.stderr


def test_clean_file_reports_registers_and_shared_memory_per_kernel(tmp_path: Path) -> None:
    path = tmp_path / "clean.cu"
    path.write_text(CLEAN)
    code, report, _ = check(path)
    assert code == 0 and report["diagnostics"] == []
    kernels = {k["name"]: k for k in report["kernels"]}
    add = kernels["add(float*, float const*, int)"]
    assert add["line"] == 2 and add["shared_bytes"] == 1024 and add["barriers"] == 1
    assert 1 <= add["registers"] <= 255 and add["spill_loads"] == add["spill_stores"] == 0
    assert kernels["void scale<float>(float*, float)"]["line"] == 11, "a template instance maps to its definition"


def test_syntax_type_and_undefined_identifier_errors_have_exact_ranges(tmp_path: Path) -> None:
    path = tmp_path / "broken.cu"
    path.write_text(BROKEN)
    code, report, _ = check(path)
    assert code == 1
    by_line = {d["range"]["start"]["line"]: d for d in report["diagnostics"]}
    assert 'expected a ";"' in by_line[2]["message"]
    assert by_line[3]["range"]["start"]["character"] == 15 and "double" in by_line[3]["message"]
    undefined = by_line[4]
    assert "undefined_thing" in undefined["message"]
    assert (undefined["range"]["start"]["character"], undefined["range"]["end"]["character"]) == (11, 26)
    assert all(d["severity"] == "error" for d in report["diagnostics"])


def test_warning_with_its_code_leaves_exit_zero(tmp_path: Path) -> None:
    path = tmp_path / "warn.cu"
    path.write_text("__global__ void k(float* a) { int unused = 0; a[0] = 1; }\n")
    code, report, _ = check(path)
    assert code == 0
    [warning] = report["diagnostics"]
    assert warning["severity"] == "warning" and warning["code"] == "177-D"
    assert warning["range"]["start"]["character"] == "__global__ void k(float* a) { int ".__len__(), \
        "the column is mapped back through nvcc's macro-expanded echo of the line"


def test_error_in_an_included_header_is_reported_on_the_include_line(tmp_path: Path) -> None:
    (tmp_path / "helpers.h").write_text("inline int f() { return undefined_in_header; }\n")
    path = tmp_path / "main.cu"
    path.write_text('#include <cstdio>\n#include "helpers.h"\n__global__ void k(float* a) { a[0] = f(); }\n')
    code, report, _ = check(path)
    assert code == 1
    [error] = report["diagnostics"]
    assert error["range"]["start"]["line"] == 1 and "helpers.h" in error["message"]
    assert error["related"][0]["file"].endswith("helpers.h") and error["related"][0]["line"] == 0


def test_ptxas_error_lands_on_the_kernel_definition(tmp_path: Path) -> None:
    path = tmp_path / "big.cu"
    path.write_text("// too much shared memory\n__global__ void big(float* o) {\n"
                    "    __shared__ float s[60000];\n    s[threadIdx.x] = 1;\n    o[0] = s[5];\n}\n")
    code, report, _ = check(path)
    assert code == 1
    [error] = report["diagnostics"]
    assert error["code"] == "ptxas" and error["range"]["start"]["line"] == 1
    assert "big(float*)" in error["message"] and "too much shared data" in error["message"]


def test_human_output_and_bad_input(tmp_path: Path) -> None:
    path = tmp_path / "clean.cu"
    path.write_text(CLEAN)
    proc = subprocess.run([sys.executable, "-m", "dice_lsp.cli", "check", str(path)], capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0 and "add(float*, float const*, int)" in proc.stdout and "regs" in proc.stdout
    for args in (["check", str(tmp_path / "missing.cu")], ["check", str(path), "--arch", "ninety"]):
        bad = subprocess.run([sys.executable, "-m", "dice_lsp.cli", *args], capture_output=True, text=True,
                             timeout=120)
        assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1


def test_second_check_is_cached_until_an_included_header_changes(tmp_path: Path) -> None:
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache")}
    (tmp_path / "helpers.h").write_text("inline __device__ float twice(float x) { return 2 * x; }\n")
    path = tmp_path / "main.cu"
    path.write_text('#include "helpers.h"\n__global__ void k(float* a) { a[0] = twice(a[1]); }\n')

    def run() -> dict[str, Any]:
        proc = subprocess.run([sys.executable, "-m", "dice_lsp.cli", "check", str(path), "--json"],
                              capture_output=True, text=True, timeout=300, env=env)
        assert proc.returncode in (0, 1), proc.stderr
        return dict(json.loads(proc.stdout))

    first, second = run(), run()
    assert not first["cached"] and second["cached"]
    assert second["kernels"] == first["kernels"] and second["diagnostics"] == first["diagnostics"]
    (tmp_path / "helpers.h").write_text("inline __device__ float twice(float x) { return undefined_x; }\n")
    third = run()
    assert not third["cached"] and third["diagnostics"] and third["diagnostics"][0]["range"]["start"]["line"] == 0


def test_a_torn_cache_file_counts_as_empty_and_is_replaced(tmp_path: Path) -> None:
    from dice_lsp.toolchain.cache import CompileCache

    cache = CompileCache(tmp_path / "c.msgpack", max_entries=2)
    cache.put("a", {"x": 1})
    (tmp_path / "c.msgpack").write_bytes((tmp_path / "c.msgpack").read_bytes()[:5])  # a write cut short
    assert cache.get("a") is None
    for key in ("b", "c", "d"):
        cache.put(key, {"x": key})
    assert cache.get("b") is None and cache.get("d") == {"x": "d"}, "the oldest entries go first"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.msgpack"], "no temporary files left behind"


def test_a_configured_nvcc_that_is_not_there_is_a_clear_error(tmp_path: Path) -> None:
    import pytest

    from dice_lsp.errors import DiceError
    from dice_lsp.toolchain.nvcc import find_nvcc

    with pytest.raises(DiceError, match=r"nvcc not found at .*no-nvcc"):
        find_nvcc(str(tmp_path / "no-nvcc"))
    assert find_nvcc().name == "nvcc"


def test_one_error_is_counted_in_the_singular(tmp_path: Path) -> None:
    path = tmp_path / "one.cu"
    path.write_text("__global__ void k(float* a) {\n    a[0] = undefined_thing;\n}\n")
    proc = subprocess.run([sys.executable, "-m", "dice_lsp.cli", "check", str(path)], capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 1
    assert proc.stderr.startswith("[1 error, 0 warnings, "), proc.stderr
