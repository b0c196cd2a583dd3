"""Golden cases of the rule on loops that start at the thread's global index and step by one."""

from __future__ import annotations

import pytest

from dice_lsp.completion.checks.rules.grid_stride_step import RULE
from tests.checks.documents import judge_construct

START = "int i = blockIdx.x * blockDim.x + threadIdx.x"


@pytest.mark.parametrize(("fill", "ok"), [
    (f"for ({START}; i < n; i++) out[i] = 0.f;", False),  # every thread walks over its successors' elements
    (f"for ({START}; i < n; ++i) out[i] = 0.f;", False),
    (f"for ({START}; i < n; i += 1) out[i] = 0.f;", False),
    (f"for ({START}; i < n; i = i + 1) out[i] = 0.f;", False),
    ("for (int k = threadIdx.x + blockDim.x * blockIdx.x; k < n; k++) out[k] = 0.f;", False),
    (f"for ({START}; i < n; i += blockDim.x * gridDim.x) out[i] = 0.f;", True),  # the grid-stride loop
    (f"for ({START}; i < n; i += stride) out[i] = 0.f;", True),
    ("for (int i = threadIdx.x; i < n; i++) out[i] = 0.f;", True),  # a block's own index: not this rule's
    ("for (int i = 0; i < n; i++) out[i] = 0.f;", True),
    (f"for ({START}; i < (blockIdx.x * blockDim.x + threadIdx.x) + 4; i++) out[i] = 0.f;", True),  # its own four
    ("for (int i = 4 * (blockIdx.x * blockDim.x + threadIdx.x); i < n && i < 4 * (blockIdx.x * blockDim.x + "
     "threadIdx.x) + 4; i++) out[i] = 0.f;", True),
    (f"for ({START}, j = 0; i < n; i++) out[i] = 0.f;", True),  # two variables: not read
])
def test_a_loop_from_the_thread_index_that_steps_by_one_does_not_pass(fill: str, ok: bool) -> None:
    judge_construct(RULE, fill, ok)


def test_the_step_typed_after_a_grid_loops_header_does_not_pass() -> None:
    header = ("__global__ void fill_ones(float* out, int n) {\n"
              f"    for ({START}; i < n; ‸\n        out[i] = 1.0f;\n    }}\n}}\n")
    judge_construct(RULE, "i++) {", False, header)
    judge_construct(RULE, "i += blockDim.x * gridDim.x) {", True, header)
