"""Self-contained held-out kernels: CUDA strings found in Python files, kept when nvcc compiles them."""

from __future__ import annotations

import json
from pathlib import Path

from dice_lsp.toolchain.nvcc import compile_source
from dice_lsp.training.standalone import cuda_strings, usable

PYTHON = '''
import cupy
add = cupy.RawKernel(r"""
extern "C" __global__ void add(const float* a, const float* b, float* c, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        c[i] = a[i] + b[i];
    }
}
""", "add")
template = """
template <typename T>
__global__ void fill(T* out, T value, int n) {
    int i = threadIdx.x;
    if (i < n)
        out[i] = value;
}
"""
doc = "no kernel here"
'''


def test_kernel_strings_are_found_and_templates_are_not_usable() -> None:
    found = list(cuda_strings(PYTHON))
    assert len(found) == 2
    add, template = sorted(found, key=lambda text: "template" in text)
    assert usable(add) and not usable(template), "an uninstantiated template compiles whatever it holds"
    assert compile_source(add).ok
    assert list(cuda_strings("def broken(:\n")) == []


def test_the_committed_set_is_self_contained_kernels() -> None:
    path = Path(__file__).resolve().parents[1] / "bench" / "heldout" / "standalone.jsonl"
    records = [json.loads(line) for line in path.read_text().splitlines()]
    assert len(records) >= 30
    assert all(usable(r["text"]) and r["license"] for r in records)
    assert compile_source(records[0]["text"]).ok
