"""Golden cases of the rule on calls with a number of arguments their callee does not take."""

from __future__ import annotations

import pytest

from dice_lsp.completion.checks.rules.arity import RULE
from dice_lsp.toolchain.header_index import HeaderIndex
from tests.checks.documents import at_blank

SCAN = ("__device__ int total(const int* counts, int n, int upto) {\n    return 0;\n}\n"
        "__device__ float blend(float a, float b, float t = 0.5f);\n"
        "__device__ int sum_all(int first, ...);\n"
        "__global__ void k(const int* counts, int n, int* out) {\n    \n}\n")


@pytest.mark.parametrize(("fill", "wrong"), [
    ("out[0] = total(counts, n, 4);", []),
    ("out[0] = total(counts);", ["total"]),  # too few arguments for the one declaration there is
    ("out[0] = blend(1.f, 2.f) + blend(1.f, 2.f, 0.f);", []),  # a default argument
    ("out[0] = blend(1.f);", ["blend"]),
    ("out[0] = sum_all(1, 2, 3, 4);", []),  # variadic
    ("out[0] = max(1, 2);", []),  # not the document's: the headers may overload it
])
def test_calls_to_the_documents_functions_take_a_number_of_arguments_they_declare(fill: str,
                                                                                    wrong: list[str]) -> None:
    checks = at_blank(SCAN, HeaderIndex.from_lines(["max"]))
    assert [name for _, name in checks.wrong_arity(fill)] == wrong
    assert [fault.name for fault in checks.faults_of([RULE], fill)] == wrong
    assert checks.check(fill).names is (not wrong)


CUDA_ARITIES = HeaderIndex.from_lines(["cudaMemcpy", "(cudaMemcpy 4 4", "__shfl_down_sync", "(__shfl_down_sync 3 4",
                                       "max", "(max 2 2", "printf", "(printf 1 inf", "cudaMemcpyDeviceToHost"])


@pytest.mark.parametrize(("document", "fill", "wrong"), [
    (SCAN, "cudaMemcpy(out, counts, n, cudaMemcpyDeviceToHost);", []),
    (SCAN, "cudaMemcpy(out);", ["cudaMemcpy"]),  # shown on a real file as `cudaMemcpy(params.h())`
    (SCAN, "out[0] = __shfl_down_sync(0xffffffff, n, 1);", []),
    (SCAN, "out[0] = __shfl_down_sync(n, 1);", ["__shfl_down_sync"]),
    (SCAN, 'printf("%d %d\\n", n, n);', []),  # variadic
    (SCAN, "out[0] = max(n);", []),  # a common name projects overload in headers not read here: no verdict
    ("#define cudaMemcpy(a) my_copy(a)\n" + SCAN, "cudaMemcpy(out);", []),  # the document's own
])
def test_calls_to_cuda_functions_of_the_headers_take_a_number_of_arguments_they_declare(
        document: str, fill: str, wrong: list[str]) -> None:
    checks = at_blank(document, CUDA_ARITIES)
    assert [name for _, name in checks.wrong_arity(fill)] == wrong
