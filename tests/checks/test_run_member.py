"""Golden cases of the rule on one more member of a run that already steps across the hole."""

from __future__ import annotations

import pytest

from dice_lsp.completion.checks.rules.run_member import RULE
from tests.checks.documents import judge_construct

REDUCTION = ("__device__ unsigned long long sum(unsigned long long value) {\n"
             "    value += __shfl_down_sync(0xffffffff, value, 16);\n"
             "    value += __shfl_down_sync(0xffffffff, value,  8);\n"
             "    ‸\n"
             "    value += __shfl_down_sync(0xffffffff, value,  4);\n"
             "    value += __shfl_down_sync(0xffffffff, value,  2);\n"
             "    return value;\n"
             "}\n")
UNROLLED = ("__global__ void load(const float* in, float* out) {\n"
            "    float a0 = in[0];\n"
            "    ‸\n"
            "    float a1 = in[1];\n"
            "    out[0] = a0 + a1;\n"
            "}\n")
GAP = REDUCTION.replace("    value += __shfl_down_sync(0xffffffff, value,  4);\n", "")  # 8 above, 2 below: 4 is missing


@pytest.mark.parametrize(("case", "fill", "ok"), [
    (REDUCTION, "value += __shfl_down_sync(0xffffffff, value,  2);", False),  # the run steps 8 -> 4 already
    (REDUCTION, "value += __shfl_down_sync(0xffffffff, value, 16);", False),
    (REDUCTION, "__syncwarp();", True),  # not a member
    (UNROLLED, "float a2 = in[2];", False),  # a0 -> a1 steps already
    (UNROLLED, "float b = in[0] * 2.0f;", True),
    (GAP, "value += __shfl_down_sync(0xffffffff, value,  4);", True),  # 8 -> 2 is no step: the 4 belongs here
])
def test_a_run_that_steps_across_the_hole_takes_no_new_member(case: str, fill: str, ok: bool) -> None:
    judge_construct(RULE, fill, ok, case)


def test_a_line_of_another_family_between_members_passes() -> None:
    case = ("__global__ void offsets(float* buf1, float* buf2, int* idx_buf1, int len) {\n"
            "    buf1 += len;\n    ‸\n    buf2 += len;\n}\n")
    judge_construct(RULE, "idx_buf1 += len;", True, case)
    judge_construct(RULE, "buf3 += len;", False, case)
