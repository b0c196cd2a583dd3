"""Context around a hole: what goes in first, the budget, and the prefix/suffix boundary."""

from __future__ import annotations

import pytest

from dice_lsp.cuda.context import build_context
from dice_lsp.cuda.holes import Hole, find_hole


def quarter(text: str) -> list[int]:
    """A stand-in tokenizer: a token starts every 4 characters."""
    return list(range(0, len(text), 4))


def size(text: str) -> int:
    return len(quarter(text))


def within(prefix: str, suffix: str, budget: int) -> bool:
    """Tokens are counted per piece of the file, so each piece may be one token over (a split token)."""
    pieces = 2 + 2 * (prefix.count("// ...") + suffix.count("// ..."))
    return size(prefix) + size(suffix) <= budget + pieces


FILE = """\
// Copyright
#include <cuda_runtime.h>
#include <cstdio>

#define BLOCK 256
#define UNUSED 3
#define SQ(x) ((x) * (x))

__device__ float sq(float v) { return SQ(v); }

__device__ float cube(float v) {
    return v * v * v;
}

__global__ void norm(const float* x, float* y, int n) {
    int i = blockIdx.x * BLOCK + threadIdx.x;
    @
    if (i < n) y[i] = sq(x[i]);
}

void helper() {
    printf("unrelated\\n");
}

int main() {
    float *x, *y;
    int n = 1024;
    norm<<<(n + BLOCK - 1) / BLOCK, BLOCK>>>(x, y, n);
    return 0;
}
"""
TEXT = FILE.replace("@", "")
HOLE = find_hole(TEXT, FILE.index("@"))

FUNCTION = """\
__global__ void norm(const float* x, float* y, int n) {
    int i = blockIdx.x * BLOCK + threadIdx.x;
    """
FUNCTION_END = """
    if (i < n) y[i] = sq(x[i]);
}
"""

GOLDEN = {  # budget -> (prefix, suffix); each budget adds the next pieces in priority order
    40: ("// ...\n}\n\n" + FUNCTION, FUNCTION_END + "\n// ...\n"),
    60: ("// ...\n#include <cuda_runtime.h>\n#include <cstdio>\n\n#define BLOCK 256\n// ...\n}\n\n" + FUNCTION,
         FUNCTION_END + "\n// ...\n"),
    90: ("// ...\n#include <cuda_runtime.h>\n#include <cstdio>\n\n#define BLOCK 256\n// ...\n"
         "__device__ float sq(float v) { return SQ(v); }\n// ...\n}\n\n" + FUNCTION,
         FUNCTION_END + "\n// ...\n    norm<<<(n + BLOCK - 1) / BLOCK, BLOCK>>>(x, y, n);\n// ...\n"),
    1000: (TEXT[:HOLE.start] if HOLE else "", TEXT[HOLE.end:] if HOLE else ""),
}


@pytest.mark.parametrize("budget", GOLDEN)
def test_golden_priorities(budget: int) -> None:
    assert HOLE is not None
    prefix, suffix = build_context(TEXT, HOLE, budget, quarter)
    assert (prefix, suffix) == GOLDEN[budget]
    assert within(prefix, suffix, budget)


def tail(text: str) -> str:
    """What follows the last `// ...` line: the part that must be a verbatim neighbour of the hole."""
    return text.rsplit("// ...\n", 1)[-1]


def head(text: str) -> str:
    return text.split("// ...\n", 1)[0]


def test_budget_and_boundaries_for_every_hole_and_budget() -> None:
    holes = [h for c in range(len(TEXT) + 1) if (h := find_hole(TEXT, c)) is not None]
    holes.append(Hole(TEXT.index("int main"), TEXT.index("int main") + 8, "selection", "", 16, False))
    assert len(holes) > 10
    for hole in holes:
        for budget in (0, 3, 8, 25, 50, 75, 110, 200):
            prefix, suffix = build_context(TEXT, hole, budget, quarter)
            assert within(prefix, suffix, budget)
            assert TEXT[:hole.start].endswith(tail(prefix))
            assert TEXT[hole.end:].startswith(head(suffix))


def test_a_tiny_budget_keeps_the_nearest_characters() -> None:
    assert HOLE is not None
    prefix, suffix = build_context(TEXT, HOLE, 3, quarter)
    assert (prefix, suffix) == ("x;\n    ", "\n    if")  # 7 characters each side: 1 + 1 tokens
    assert build_context(TEXT, HOLE, 0, quarter) == ("", "")


def test_a_function_too_long_keeps_its_lines_nearest_the_hole() -> None:
    body = "".join(f"    y[{i}] = x[{i}];\n" for i in range(200))
    text = "__global__ void k(float* x, float* y) {\n" + body + "    \n" + body + "}\n"
    hole = find_hole(text, text.index("    \n") + 4)
    assert hole is not None
    prefix, suffix = build_context(text, hole, 100, quarter)
    assert prefix.startswith("// ...\n    y[") and suffix.endswith("// ...\n")
    assert abs(prefix.count("\n") - suffix.count("\n")) <= 1
    assert text[:hole.start].endswith(tail(prefix)) and text[hole.end:].startswith(head(suffix))


def test_outside_a_function_only_includes_and_nearest_code() -> None:
    start = TEXT.index("#define UNUSED")
    hole = Hole(start, start + len("#define UNUSED 3"), "selection", "", 16, False)
    prefix, suffix = build_context(TEXT, hole, 30, quarter)
    assert prefix.startswith("// ...\n#include <cuda_runtime.h>\n#include <cstdio>\n")
    assert prefix.endswith("#define BLOCK 256\n") and suffix.startswith("\n#define SQ")


def test_half_typed_kernel_at_the_end() -> None:
    text = TEXT + "\n__global__ void twice(float* y) {\n    float v = cube(y[0]);\n    "
    hole = find_hole(text, len(text))
    assert hole is not None and hole.kind == "body"
    prefix, suffix = build_context(text, hole, 60, quarter)
    assert suffix == ""
    assert prefix.endswith("\n__global__ void twice(float* y) {\n    float v = cube(y[0]);\n    ")
    assert "__device__ float cube(float v) {\n    return v * v * v;\n}\n" in prefix


def test_crlf_and_unicode() -> None:
    text = "// größe — ü\r\n" + TEXT.replace("\n", "\r\n").replace("threadIdx.x;", "threadIdx.x; // π")
    hole = find_hole(text, text.index("    \r\n    if") + 4)
    assert hole is not None
    prefix, suffix = build_context(text, hole, 60, quarter)
    assert "// ...\r\n" in prefix and "\n// ...\n" not in prefix.replace("\r\n", "\r")
    assert prefix.endswith("threadIdx.x; // π\r\n    ") and suffix.startswith("\r\n    if (i < n)")


def test_with_the_embedded_tokenizer() -> None:
    from dice_lsp.engine import EMBEDDED_MODEL
    from dice_lsp.engine.tokenizer import Tokenizer

    tokenizer = Tokenizer(EMBEDDED_MODEL)

    def count(text: str) -> int:
        return len(tokenizer.encode(text))

    assert HOLE is not None
    for budget in (10, 60, 120, 200, 400):
        prefix, suffix = build_context(TEXT, HOLE, budget, tokenizer.token_starts)
        assert count(prefix) + count(suffix) <= budget + 4, "counted by spans: within a few tokens"
        assert TEXT[:HOLE.start].endswith(tail(prefix)) and TEXT[HOLE.end:].startswith(head(suffix))
    prefix, suffix = build_context(TEXT, HOLE, 400, tokenizer.token_starts)
    assert prefix + suffix == TEXT


SIMILAR_FILE = """\
#include <cuda_runtime.h>

__global__ void first(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    y[i] = 2.0f * x[i];
}

void host_side(int n) {
    printf("%d\\n", n);
    printf("%d\\n", n + 1);
    printf("%d\\n", n + 2);
}

__global__ void second(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    @
    y[i] = x[i] + 1.0f;
}
"""


def test_the_lines_after_a_line_like_the_one_above_the_hole_come_from_elsewhere_in_the_file() -> None:
    text = SIMILAR_FILE.replace("@", "")
    hole = find_hole(text, SIMILAR_FILE.index("@"))
    assert hole is not None
    function = text[text.index("__global__ void second"):hole.start]
    prefix, _ = build_context(text, hole, 70, quarter, similar=1)
    assert prefix == ("#include <cuda_runtime.h>\n// ...\n    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
                      "    if (i >= n) return;\n// ...\n}\n\n" + function)
    without, _ = build_context(text, hole, 70, quarter, similar=0)
    assert "return;" not in without and without.endswith(function)
