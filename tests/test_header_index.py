"""The header index: the names the CUDA/C++ headers declare, the outer scope of the completion's symbol table."""

from __future__ import annotations

import gzip
import subprocess
from pathlib import Path

import pytest

from dice_lsp.errors import DiceError
from dice_lsp.toolchain import header_index
from dice_lsp.toolchain.header_index import HeaderIndex, fallback_names, header_declarations, header_names


def test_fallback_index_loads() -> None:
    assert header_index.FALLBACK.stat().st_size < 400_000
    index = fallback_names()
    assert {"__syncthreads", "__shfl_down_sync", "__ldg", "__expf", "threadIdx", "atomicAdd", "float4",
            "cudaMalloc", "CUDART_PI_F", "FLT_MAX", "stderr", "cudaSuccess"} <= index.globals
    assert {"BlockReduce", "numeric_limits", "thread_block", "size", "data"} <= index.scoped - index.globals
    assert {"x", "sync"} <= index.fields
    # the headers' own parameters and locals are not names a kernel can use
    assert not {"i", "tid", "idx", "lane", "tmp"} & (index.globals | index.scoped)
    assert not any(line.startswith("#") for line in index.globals | index.scoped | index.fields)


def test_no_nvcc_uses_the_fallback(monkeypatch: pytest.MonkeyPatch) -> None:
    def missing(configured: str | None = None) -> Path:
        raise DiceError("nvcc not found")

    monkeypatch.setattr("dice_lsp.toolchain.nvcc.find_nvcc", missing)
    header_names.cache_clear()
    try:
        assert header_names(None) == fallback_names()
    finally:
        header_names.cache_clear()


def test_header_index_is_built_with_nvcc_and_cached(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from dice_lsp.toolchain.nvcc import find_nvcc

    try:
        nvcc = find_nvcc()
    except DiceError as exc:
        pytest.skip(f"no nvcc here ({exc}): the index cannot be built")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    header_names.cache_clear()
    try:
        names = header_names(nvcc)
        assert {"__syncthreads", "__shfl_down_sync", "__ldg", "threadIdx", "atomicAdd", "CUDART_PI_F", "FLT_MAX",
                "__CUDA_ARCH__"} <= names.globals
        assert {"BlockReduce", "thread_block"} <= names.scoped
        assert names.arity["cudaMemcpy"] == (4, 4) and names.arity["__shfl_down_sync"] == (3, 4)
        cached = header_index.index_path(nvcc)
        assert cached.is_relative_to(tmp_path) and cached.is_file()
        assert gzip.decompress(cached.read_bytes()).decode().splitlines() == names.lines()

        def no_process(*args: object, **kwargs: object) -> None:
            raise AssertionError("nvcc ran although its index is cached")

        monkeypatch.setattr(subprocess, "run", no_process)
        monkeypatch.setattr(subprocess, "Popen", no_process)
        header_names.cache_clear()
        assert header_names(nvcc) == names
    finally:
        header_names.cache_clear()


def test_header_arities_travel_in_the_index_file() -> None:
    index = HeaderIndex.from_lines(["cudaMemcpy", "(cudaMemcpy 4 4", "printf", "(printf 1 inf", "::size", ".x"])
    assert HeaderIndex.from_lines(index.lines()) == index
    assert index.arity["printf"] == (1, float("inf")) and index.arity["cudaMemcpy"] == (4, 4)
    assert "size" in index and "size" not in index.globals and index.fields == {"x"}


def test_declarations_are_read_outside_bodies_and_parameter_lists() -> None:
    preprocessed = (b"# 1 \"stub.cu\"\nint cudaThing(int a, int b = 0);\nnamespace std { int size(int v); }\n"
                    b"struct Vec { float x; };\nstatic inline int helper(int q) { int local = q; return local; }\n"
                    b"enum __attribute__((visibility(\"default\"))) cudaError { cudaSuccess = 0 };\n")
    index = header_declarations(preprocessed, b"#define CUDART_PI_F 3.14f\n#define cudaThing(x) x\n")
    assert {"cudaThing", "Vec", "helper", "cudaSuccess", "cudaError", "CUDART_PI_F"} <= index.globals
    assert {"size"} <= index.scoped and "x" in index.fields
    assert not {"a", "b", "q", "local", "v"} & (index.globals | index.scoped)
    assert "cudaThing" not in index.arity and index.arity["helper"] == (1, 1)  # a macro's name has no arity
