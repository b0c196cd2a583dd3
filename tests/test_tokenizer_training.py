"""Tokenizer training and corpus filters of dice_lsp.training (offline, a few seconds)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tokenizers import Tokenizer

from dice_lsp.training import corpus
from dice_lsp.training.tokenizer import SPECIAL_TOKENS, save, train_tokenizer

KERNEL = """#include <cuda_runtime.h>

__global__ void saxpy(int n, float a, const float* __restrict__ x, float* __restrict__ y) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        y[i] = a * x[i] + y[i];
    }
}
"""

REDUCE = """template <int BLOCK>
__global__ void reduce_sum(const float* in, float* out, int n) {
    __shared__ float smem[BLOCK];
    int tid = threadIdx.x;
    float acc = 0.0f;
    for (int i = blockIdx.x * BLOCK + tid; i < n; i += gridDim.x * BLOCK) acc += in[i];
    smem[tid] = acc;
    __syncthreads();
    for (int s = BLOCK / 2; s > 0; s >>= 1) {
        if (tid < s) smem[tid] += smem[tid + s];
        __syncthreads();
    }
    if (tid == 0) atomicAdd(out, smem[0]);
}
"""

HOST = """int main() {
    float *x, *y;
    cudaMalloc(&x, 1024 * sizeof(float));
    saxpy<<<4, 256>>>(1024, 2.0f, x, y);
    cudaDeviceSynchronize();
    return 0;
}
"""

TRICKY = [
    "\tif (x) {\r\n\t\treturn 1;\r\n\t}\r\n",
    "// ünïcödé 中文 emoji 🚀 and a NBSP:\u00a0 end",
    " " * 37 + "deep_indent();\n" + "\n" * 5 + "\t \t mixed\n",
    "  leading spaces and trailing   ",
    "x=0x1F; y = 3.14159e-10; z=1234567890;",
    "",
]


@pytest.fixture(scope="module")
def tok() -> Tokenizer:
    return train_tokenizer([KERNEL, REDUCE, HOST] * 4, vocab_size=300, min_frequency=1)


def test_special_token_ids(tok: Tokenizer) -> None:
    for index, token in enumerate(SPECIAL_TOKENS):
        assert tok.token_to_id(token) == index
    assert SPECIAL_TOKENS[:3] == ("<|pad|>", "<|eos|>", "<|mask|>")
    assert tok.get_vocab_size() == 300


@pytest.mark.parametrize("text", [*TRICKY, KERNEL, REDUCE])
def test_round_trip(tok: Tokenizer, text: str) -> None:
    ids = tok.encode(text, add_special_tokens=False).ids
    assert tok.decode(ids, skip_special_tokens=False) == text


def test_digits_are_single_tokens(tok: Tokenizer) -> None:
    tokens = tok.encode("n = 4096;", add_special_tokens=False).tokens
    assert [t for t in tokens if any(c.isdigit() for c in t)] == ["4", "0", "9", "6"]


def test_save_writes_config(tok: Tokenizer, tmp_path: Path) -> None:
    save(tok, tmp_path)
    config = json.loads((tmp_path / "tokenizer_config.json").read_text())
    assert config["mask_token"] == "<|mask|>"
    assert config["fim_middle_token"] == "<|fim_middle|>"
    assert (tmp_path / "tokenizer.json").exists()


def test_drop_reason_keeps_real_code() -> None:
    assert corpus.drop_reason("k.cu", KERNEL) is None
    assert corpus.drop_reason("r.cuh", REDUCE) is None


def test_drop_reason_filters_generated_and_junk() -> None:
    banner = "// This file is auto-generated. Do not edit!\n"
    assert corpus.drop_reason("x.cu", banner + KERNEL) == "generated"
    assert corpus.drop_reason("cake_fwd_sm90.cu", KERNEL) == "generated"
    assert corpus.drop_reason("big.h", "int a;\n" * 60_000) == "huge"
    assert corpus.drop_reason("t.h", "int a;\n") == "tiny"
    assert corpus.drop_reason("lut.h", "int x[] = {" + "1," * 800 + "};\n" + KERNEL) == "long-line"
    table = "\n".join("    1234567, 7654321, 1111111, 2222222," for _ in range(50))
    assert corpus.drop_reason("tab.h", "static int t[] = {\n" + table + "\n};\n") == "data-table"


def test_lang_and_kernel_detection() -> None:
    assert corpus.file_lang("a.cu", HOST) == "cuda"
    assert corpus.file_lang("a.cpp", "int main() { return 0; }") == "cpp"
    assert corpus.file_lang("a.h", "__device__ inline float f(float x) { return x; }") == "cuda"
    assert corpus.file_lang("a.py", KERNEL) is None
    assert corpus.has_kernel(KERNEL) and corpus.has_kernel(REDUCE)
    assert not corpus.has_kernel(HOST)
    assert corpus.has_kernel("extern \"C\" __global__ void __launch_bounds__(256) k(int* p) {}")


def test_exact_dedup_ignores_whitespace() -> None:
    reformatted = KERNEL.replace("    ", "\t").replace("\n", "\n\n")
    assert corpus.exact_key(reformatted) == corpus.exact_key(KERNEL)
    assert corpus.exact_key(REDUCE) != corpus.exact_key(KERNEL)


def test_near_dedup() -> None:
    dedup = corpus.NearDeduper()
    long_file = "\n".join(f"    out[{i}] = compute_{i}(in[{i}], scale * {i});" for i in range(200))
    assert not dedup.is_duplicate(long_file)
    one_line_changed = long_file.replace("compute_100(", "compute_x(")
    assert dedup.is_duplicate(one_line_changed)
    assert not dedup.is_duplicate(KERNEL + REDUCE)
    assert not dedup.is_duplicate("\n".join(f"float g{i} = h{i}(x);" for i in range(200)))


def test_splits_are_deterministic_and_test_only_holds_kernels() -> None:
    splits = {corpus.assign_split("s", f"f{i}.cu", KERNEL, "cuda") for i in range(400)}
    assert splits == {"train", "valid", "test"}
    host_splits = {corpus.assign_split("s", f"f{i}.cu", HOST, "cuda") for i in range(400)}
    assert "test" not in host_splits
    first = corpus.assign_split("s", "a.cu", KERNEL, "cuda")
    assert all(corpus.assign_split("s", "a.cu", KERNEL, "cuda") == first for _ in range(3))
