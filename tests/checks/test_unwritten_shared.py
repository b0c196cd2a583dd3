"""Golden cases of the rule on reads of shared memory the function has not written yet."""

from __future__ import annotations

import pytest

from dice_lsp.completion.checks.rules.unwritten_shared import RULE
from tests.checks.documents import judge_construct

TRANSPOSE = ("#define TILE 16\n"
             "__global__ void transpose(const float* in, float* out, int rows, int cols) {\n"
             "    __shared__ float tile[TILE][TILE + 1];\n"
             "    int x = blockIdx.x * TILE + threadIdx.x;\n"
             "    int y = blockIdx.y * TILE + threadIdx.y;\n"
             "    if (x < cols && y < rows) {\n"
             "        ‸\n"
             "    }\n"
             "    __syncthreads();\n"
             "    out[x * rows + y] = tile[threadIdx.x][threadIdx.y];\n"
             "}\n")


@pytest.mark.parametrize(("fill", "ok"), [
    ("out[y * cols + x] = tile[threadIdx.x][threadIdx.y];", False),  # the tile is not loaded yet
    ("tile[threadIdx.y][threadIdx.x] = in[y * cols + x];", True),  # the load
    ("float v = tile[threadIdx.y][0] + 1.0f;", False),
    ("tile[threadIdx.y][threadIdx.x] = 0.f;\n        out[0] = tile[0][0];", True),  # written first, in the fill
    ("atomicAdd(&tile[0][0], 1.0f);", True),  # an address: may be a write
    ("auto& first = tile[0][0];", True),  # a reference: may be written through
])
def test_a_fill_may_not_read_shared_memory_nothing_wrote(fill: str, ok: bool) -> None:
    judge_construct(RULE, fill, ok, TRANSPOSE)


LOADED = TRANSPOSE.replace("    if (x < cols", "    load_tile(tile, in);\n    if (x < cols")
IN_A_LOOP = TRANSPOSE.replace("    if (x < cols && y < rows) {\n        ‸\n    }\n",
                              "    for (int k = 0; k < rows; ++k) {\n        ‸\n"
                              "        tile[threadIdx.y][threadIdx.x] = in[k];\n    }\n")
WRITTEN = TRANSPOSE.replace("    int x = ", "    tile[threadIdx.y][threadIdx.x] = 0.f;\n    int x = ")


@pytest.mark.parametrize("case", [LOADED, IN_A_LOOP, WRITTEN], ids=["handed-on-whole", "in-a-loop", "written-above"])
def test_a_read_after_any_write_or_in_a_loop_passes(case: str) -> None:
    judge_construct(RULE, "out[y * cols + x] = tile[threadIdx.x][threadIdx.y];", True, case)


def test_an_array_of_global_memory_is_not_shared() -> None:
    case = TRANSPOSE.replace("__shared__ float tile", "float tile")
    judge_construct(RULE, "out[y * cols + x] = tile[threadIdx.x][threadIdx.y];", True, case)
