"""Corpus v3: the HIP -> CUDA mapping, the permissive-license allow-list and the benchmark exclusion."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from dice_lsp.training import corpus

HIP_KERNEL = """#include <hip/hip_runtime.h>
#include "hip/hip_fp16.h"

__global__ void scale(float* x, float a, int n) {
    int i = hipBlockIdx_x * hipBlockDim_x + hipThreadIdx_x;
    if (i < n) x[i] = a * __shfl_xor(x[i], 1);
}

void run(float* host, int n, hipStream_t stream) {
    float* dev = nullptr;
    hipMalloc(&dev, n * sizeof(float));
    hipMemcpyAsync(dev, host, n * sizeof(float), hipMemcpyHostToDevice, stream);
    hipLaunchKernelGGL(scale, dim3((n + 255) / 256), dim3(256), 0, stream, dev, 2.0f, n);
    hipError_t err = hipGetLastError();
    if (err != hipSuccess) { hipFree(dev); }
}
"""

CUDA_KERNEL = """#include <cuda_runtime.h>
#include "cuda_fp16.h"

__global__ void scale(float* x, float a, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] = a * __shfl_xor_sync(0xffffffff, x[i], 1);
}

void run(float* host, int n, cudaStream_t stream) {
    float* dev = nullptr;
    cudaMalloc(&dev, n * sizeof(float));
    cudaMemcpyAsync(dev, host, n * sizeof(float), cudaMemcpyHostToDevice, stream);
    scale<<<dim3((n + 255) / 256), dim3(256), 0, stream>>>(dev, 2.0f, n);
    cudaError_t err = cudaGetLastError();
    if (err != cudaSuccess) { cudaFree(dev); }
}
"""


def test_hip_to_cuda_golden() -> None:
    assert corpus.hip_to_cuda(HIP_KERNEL) == CUDA_KERNEL


@pytest.mark.parametrize(("hip", "cuda"), [
    ("hipLaunchKernelGGL((k<float, 4>), grid, block, 0, 0, a, b);", "k<float, 4><<<grid, block, 0, 0>>>(a, b);"),
    ("hipLaunchKernelGGL(HIP_KERNEL_NAME(k<T>), g, b, smem, s);", "k<T><<<g, b, smem, s>>>();"),
    ("hipblasSgemm(h, HIPBLAS_OP_N, HIPBLAS_OP_T);", "cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_T);"),
    ("hipcub::BlockReduce<int, 64> r;", "cub::BlockReduce<int, 64> r;"),
    ("#include <hipcub/hipcub.hpp>", "#include <cub/cub.cuh>"),
    ("v = __shfl_down((a + b), 2);", "v = __shfl_down_sync(0xffffffff, (a + b), 2);"),
    ("#ifdef __HIP_DEVICE_COMPILE__", "#ifdef __CUDA_ARCH__"),
])
def test_hip_to_cuda_cases(hip: str, cuda: str) -> None:
    assert corpus.hip_to_cuda(hip) == cuda


@pytest.mark.parametrize("kept", [
    # ambiguous launches (a string or a comment inside the arguments, too few arguments) stay as they are
    'hipLaunchKernelGGL(k, g, b, 0, s, "x,y");',
    "hipLaunchKernelGGL(k, g, b);",
    # names with no exact CUDA twin, and look-alikes that are not HIP API names
    "hipExtLaunchKernelGGL(k, g, b, 0, s, 0, 0, 0, a);",
    "hiprtcCompileProgram(p, 0, nullptr);",
    "int chip_count = shipping(hipster);",
    "__shfl_sync(mask, v, 1);",
    "#include <hip/amd_detail/amd_warp_functions.h>",
])
def test_hip_to_cuda_leaves_the_rest(kept: str) -> None:
    assert corpus.hip_to_cuda(kept) == kept


def test_classify_dialects() -> None:
    assert corpus.classify("k.hip", "int x;") == ("cuda", "hip")
    assert corpus.classify("a.cpp", HIP_KERNEL) == ("cuda", "hip")
    assert corpus.classify("a.cu", CUDA_KERNEL) == ("cuda", "cuda")
    assert corpus.classify("k.cl", "__kernel void add(__global float* a) { a[0] += 1; }") == ("cuda", "opencl")
    assert corpus.classify("x.opencl", "kernel void add(global float* a) { }") == ("cuda", "opencl")
    assert corpus.classify("lisp.cl", "(defun f (x) (* x 2))") is None
    assert corpus.classify("m.cc", "int main() { return 0; }") == ("cpp", "cpp")


@pytest.mark.parametrize(("expression", "ok"), [
    ("MIT", True), ("BSD-3-Clause", True), ("Apache-2.0 WITH LLVM-exception", True), ("BSL-1.0", True),
    ("Zlib", True), ("PSF-2.0", True), ("MIT AND BSD-3-Clause", True), ("BSD-3-Clause OR GPL-2.0-only", True),
    ("LGPL-2.1-or-later", False), ("GPL-2.0-only", False), ("AGPL-3.0-only", False), ("MPL-2.0", False),
    ("MIT AND LGPL-3.0-or-later", False), ("GPL-2.0-or-later AND Apache-2.0", False),
    ("LicenseRef-NVIDIA-CUDA-EULA", False), ("LicenseRef-NVIDIA-Source-Code-License", False),
    ("Apache-2.0 WITH Classpath-exception-2.0", False), ("", False),
])
def test_permissive_allow_list(expression: str, ok: bool) -> None:
    assert corpus.is_permissive(expression) is ok


def test_cuda_include_only_cccl_is_trained() -> None:
    local = corpus.SOURCES[0]
    assert local.kind == "local"
    assert corpus.is_permissive(corpus._file_license(local, "cccl/cub/block/block_reduce.cuh"))
    assert not corpus.is_permissive(corpus._file_license(local, "cuda_runtime.h"))
    assert not corpus.is_permissive(corpus._file_license(local, "crt/math_functions.hpp"))


def test_every_source_license_is_classified() -> None:
    lgpl = {s.name for s in corpus.SOURCES if not corpus.is_permissive(s.license) and s.kind != "local"}
    assert {"gromacs", "lammps", "aphrodite-engine", "warp-lang", "eigen3", "openmm", "blender"} <= lgpl
    assert {"boost1.88", "llvm-toolchain-19", "rocblas", "vtk9"}.isdisjoint(lgpl)


def test_no_source_is_a_benchmark_project() -> None:
    banned = corpus.bench_projects()
    assert {"onnxruntime", "ceres-solver", "open3d", "pcl", "hqq", "chainer", "scikit-cuda"} <= banned
    assert not {"cupy", "pycuda", "tilelang"} & banned  # held-out standalone packages: only string literals
    assert not [s.name for s in corpus.SOURCES if s.name in banned or s.package in banned]
    assert corpus.BENCH_PATHS.search("pkg/third_party/onnxruntime/core/providers/cuda/x.cu")
    assert corpus.BENCH_PATHS.search("internal/ceres/cuda_kernels.cu.cc")
    assert not corpus.BENCH_PATHS.search("src/ceresfoo/kernel.cu")


def test_bench_filter_drops_exact_and_near_copies(tmp_path: Path) -> None:
    body = "\n".join(f"    out[{i}] = f{i}(in[{i}]) * {i};" for i in range(120))
    suite = "__global__ void k(float* out, const float* in) {\n" + body + "\n}\n"
    infill = tmp_path / "infill" / "dev"
    infill.mkdir(parents=True)
    with gzip.open(infill / "library.files.jsonl.gz", "wt") as fh:
        fh.write(json.dumps({"source": "onnxruntime", "text": suite}) + "\n")
    (tmp_path / "heldout").mkdir()
    (tmp_path / "heldout" / "kernels.jsonl").write_text(json.dumps({"source": "x", "text": "int a;"}) + "\n")
    bench = corpus.BenchFilter.load(tmp_path)
    assert bench.size == 2
    assert bench.reason(suite.replace("    ", "\t")) == "bench-exact"
    assert bench.reason(suite.replace("f7(", "g7(")) == "bench-near"
    assert bench.reason("\n".join(f"float g{i} = h{i}(x);" for i in range(200))) is None
    assert "onnxruntime" in corpus.bench_projects(tmp_path)


def test_real_bench_is_loaded() -> None:
    bench = corpus.BenchFilter.load()
    assert bench.size > 400


def test_split_archives_keeps_whole_shards_under_the_limit() -> None:
    shards = [{"file": f"train-{i:02d}.bin", "tokens": 6_000_000} for i in range(10)]
    meta = {"valid": {"tokens": 1_000_000}, "train": {"shards": shards}}
    first, second = corpus.split_archives(meta, limit_bytes=10_000_000, ratio=0.4)
    assert first[:2] == ["meta.json", "valid.bin"]
    assert first[2:] == ["train-00.bin", "train-01.bin", "train-02.bin"]  # 0.4 + 3 * 2.4 MB <= 10 MB
    assert second == ["train-03.bin", "train-04.bin", "train-05.bin", "train-06.bin"]  # the rest is left out
    first, _ = corpus.split_archives(meta, limit_bytes=10_000_000, ratio=0.4, index_bytes=30_000_000)
    assert first == ["meta.json", "valid.bin", "train-files.json", "train-00.bin", "train-01.bin"]  # + 3.6 MB of xz
