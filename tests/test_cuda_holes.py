"""Golden cases for hole detection: `‸` is the cursor, `«...»` the expected region (none: no hole)."""

from __future__ import annotations

import pytest

from dice_lsp.cuda.holes import (
    BODY_TOKENS,
    END_OF_BLOCK_TOKENS,
    KERNEL_BODY_TOKENS,
    LINE_TOKENS,
    REWRITE_MAX_TOKENS,
    REWRITE_MIN_TOKENS,
    Hole,
    find_hole,
    find_markers,
)


def parse_case(case: str) -> tuple[str, int, tuple[int, int] | None]:
    """Strip the markers: (text, cursor, expected region)."""
    text, cursor, region = "", -1, [-1, -1]
    for char in case:
        if char == "‸":
            cursor = len(text)
        elif char in "«»":
            region["«»".index(char)] = len(text)
        else:
            text += char
    return text, cursor, (region[0], region[1]) if region[0] >= 0 else None


def hole_at(case: str) -> tuple[Hole | None, tuple[int, int] | None]:
    text, cursor, region = parse_case(case)
    return find_hole(text, cursor), region


KERNEL = "__global__ void add(const float* a, float* c, int n) {\n"

LINE_CASES = {
    "unfinished line": KERNEL + "    int i = blockIdx.x *‸«»\n}\n",
    "unfinished line, trailing blanks eaten": KERNEL + "    int i = ‸«   »\n}\n",
    "end of a finished statement": KERNEL + "    int i = 0;‸«»\n    c[i] = a[i];\n}\n",
    "after the opening brace of a closed body": KERNEL[:-1] + "‸«»\n    c[0] = a[0];\n}\n",
    "empty line between statements": KERNEL + "    int i = 0;\n    ‸«»\n    c[i] = a[i];\n}\n",
    "cursor at column 0 of a whitespace line": KERNEL + "    int i = 0;\n‸«    »\n    c[i] = a[i];\n}\n",
    "blank lines after it, never the code line": KERNEL + "    int i = 0;\n    ‸«\n\n  »\n    c[i] = a[i];\n}\n",
    "nested block": KERNEL + "    if (n) {\n        ‸«»\n        c[0] = 1;\n    }\n}\n",
    "syntax error in the same body": KERNEL + "    int i = ;\n    ‸«»\n    c[i] = a[i];\n}\n",
    "unbalanced brace earlier in the body": KERNEL + "    if (n) {\n    c[0] = 1;\n    ‸«»\n    c[1] = 2;\n",
    "syntax error elsewhere": "int broken( {\n}\n" + KERNEL + "    int i = 0;\n    ‸«»\n    c[i] = a[i];\n}\n",
    "unicode comment before the cursor": "// größe ≥ 1 — ü\n" + KERNEL + "    float π = 3.14f; // π\n    ‸«»\n}\n",
    "unicode identifier on the line": KERNEL + "    float größe = a[0] *‸«»\n}\n",
    "CRLF line endings": KERNEL.replace("\n", "\r\n") + "    int i = 0;\r\n    ‸«»\r\n    c[i] = 1;\r\n}\r\n",
    "CRLF, blank lines after": KERNEL.replace("\n", "\r\n") + "    int i = 0;\r\n    ‸«\r\n»\r\n    c[i] = 1;\r\n}\r\n",
    "tabs": KERNEL + "\tint i = 0;\n\t‸«»\n\tc[i] = a[i];\n}\n",
    "method in a struct": "struct S {\n    __device__ int f() {\n        ‸«»\n        return 1;\n    }\n};\n",
    "kernel in a namespace": "namespace ops {\n" + KERNEL + "    ‸«»\n    c[0] = 1;\n}\n}\n",
}


@pytest.mark.parametrize("case", LINE_CASES.values(), ids=LINE_CASES.keys())
def test_line_holes(case: str) -> None:
    hole, region = hole_at(case)
    assert hole is not None and (hole.start, hole.end) == region
    assert hole.kind == "line" and not hole.close_brace


NO_HOLE_CASES = {
    "middle of a token": KERNEL + "    int i = block‸Idx.x;\n}\n",
    "code after the cursor": KERNEL + "    int i = ‸blockIdx.x;\n}\n",
    "line comment": KERNEL + "    int i = 0; // index‸\n}\n",
    "block comment": KERNEL + "    /* about ‸ */\n}\n",
    "string": KERNEL + '    printf("value ‸");\n}\n',
    "outside any function": "#include <cstdio>\n‸\n" + KERNEL + "}\n",
    "after a closed kernel": KERNEL + "    c[0] = 1;\n}\n‸",
    "before the body's brace": "__global__ void k(float* x)‸ {\n}\n",
    "struct body": "struct S {\n    int a;\n    ‸\n};\n",
    "empty file": "‸",
}


@pytest.mark.parametrize("case", NO_HOLE_CASES.values(), ids=NO_HOLE_CASES.keys())
def test_no_hole(case: str) -> None:
    hole, _ = hole_at(case)
    assert hole is None


BODY_CASES = {
    "half-typed kernel at EOF": KERNEL[:-1] + "‸«»",
    "next line, indented": KERNEL + "    ‸«»",
    "trailing whitespace eaten": KERNEL + "    ‸«   \n\n»",
    "after some statements": KERNEL + "    int i = threadIdx.x;\n    ‸«\n»",
    "before the next top-level code": KERNEL + "    ‸«\n»\nint main() {\n    return 0;\n}\n",
    "unicode before": "// ünïcode ✓\n" + KERNEL + "    float größe = 0;\n    ‸«»",
    "CRLF": KERNEL.replace("\n", "\r\n") + "    ‸«\r\n»",
    "before a #define and the next kernel": KERNEL + "    ‸«\n»\n#define N 4\n__global__ void k2(float* x) {\n"
                                            "    x[0] = N;\n}\n",
    "before an #include": KERNEL + "    ‸«»\n#include <cstdio>\nint main() {\n    return 0;\n}\n",
    "before an indented kernel": KERNEL + "    ‸«»\n  __global__ void k2(float* x) {\n    x[0] = 1;\n  }\n",
    "before an indented kernel in a namespace": "namespace ops {\n" + KERNEL + "    ‸«»\n"
                                                "  __global__ void k2(float* x) {\n    x[0] = 1;\n  }\n}\n",
    "before a template": KERNEL + "    ‸«»\ntemplate <int N>\n__global__ void k2(float* x) {\n    x[0] = N;\n}\n",
}


@pytest.mark.parametrize("case", BODY_CASES.values(), ids=BODY_CASES.keys())
def test_body_holes(case: str) -> None:
    hole, region = hole_at(case)
    assert hole is not None and (hole.start, hole.end) == region
    assert hole.kind == "body" and hole.close_brace and hole.canvas_tokens == KERNEL_BODY_TOKENS


def test_body_of_a_helper_gets_the_smaller_canvas() -> None:
    hole, _ = hole_at("__device__ float sq(float x) {\n    ‸")
    assert hole is not None and hole.kind == "body" and hole.canvas_tokens == BODY_TOKENS


def test_unclosed_body_with_code_after_the_cursor_is_a_line_hole() -> None:
    hole, region = hole_at(KERNEL + "    ‸«»\n    c[0] = 1;\n")
    assert hole is not None and hole.kind == "line" and (hole.start, hole.end) == region


@pytest.mark.parametrize("after", ["#define N 4\n    c[0] = N;\n}\n", "#pragma unroll\n    for (;;) {}\n}\n",
                                   "    auto f = [](int x) { return x; };\n}\n"])
def test_body_code_after_a_directive_or_lambda_keeps_a_line_hole(after: str) -> None:
    hole, region = hole_at(KERNEL + "    ‸«»\n" + after)
    assert hole is not None and hole.kind == "line" and (hole.start, hole.end) == region


def test_indent_and_canvas() -> None:
    hole, _ = hole_at(KERNEL + "\tif (n) {\n\t\tc[0] = 1;\n\t\t‸\n\t}\n}\n")
    assert hole is not None and hole.indent == "\t\t" and hole.canvas_tokens == END_OF_BLOCK_TOKENS
    hole, _ = hole_at(KERNEL + "    int i = ‸\n}\n")
    assert hole is not None and hole.indent == "    " and hole.canvas_tokens == LINE_TOKENS
    hole, _ = hole_at(KERNEL + "    ‸\n    c[0] = 1;\n}\n")
    assert hole is not None and hole.canvas_tokens < END_OF_BLOCK_TOKENS


MARKER_CASES = {
    "marker alone on a line": KERNEL + "    int i = 0;\n    «/*@fill*/»‸\n}\n",
    "cursor inside the marker": KERNEL + "    c[0] = «/* @f‸ill */»;\n}\n",
    "spaces and tabs inside": KERNEL + "    c[0] = «/*\t@fill  */»;‸\n}\n",
    "cursor before it on its line": KERNEL + "  ‸  c[0] = «/*@fill*/»;\n}\n",
    "outside any function": "«/*@fill*/»‸\n",
    "broken file": "int x = (;\n" + KERNEL + "    «/*@fill*/»‸\n",
    "nearest of two on the line": KERNEL + "    f(/*@fill*/, «/*@fill*/»‸);\n}\n",
}


@pytest.mark.parametrize("case", MARKER_CASES.values(), ids=MARKER_CASES.keys())
def test_marker_holes(case: str) -> None:
    hole, region = hole_at(case)
    assert hole is not None and (hole.start, hole.end) == region
    assert hole.kind == "marker" and hole.canvas_tokens == REWRITE_MIN_TOKENS


def test_marker_on_another_line_is_ignored() -> None:
    hole, region = hole_at(KERNEL + "    /*@fill*/\n    int i = ‸«»\n}\n")
    assert hole is not None and hole.kind == "line" and (hole.start, hole.end) == region


def test_find_markers_skips_strings_and_other_comments() -> None:
    text = 'void f() {\n    g(/* @fill */, "/*@fill*/"); // /*@fill*/\n    /*@fill*/\n}\n'
    assert [text[s:e] for s, e in find_markers(text)] == ["/* @fill */", "/*@fill*/"]
    assert find_markers(text)[1][0] == text.rindex("/*@fill*/")
    assert find_markers("// ü\n/*@fill*/") == [(5, 14)]


def test_selection_wins_and_is_sized_from_its_text() -> None:
    text = KERNEL + "    int i = 0; /*@fill*/\n" + "    c[i] = a[i] + a[i + 1] + a[i + 2];\n" * 30 + "}\n"
    cursor = text.index("/*@fill*/")
    start = text.index("    c[i]")
    hole = find_hole(text, cursor, (start + 20, start))
    assert hole == Hole(start, start + 20, "selection", "    ", REWRITE_MIN_TOKENS, False)
    hole = find_hole(text, cursor, (start, start + 200))
    assert hole is not None and hole.canvas_tokens == round(200 / 3.3 * 1.5)
    hole = find_hole(text, cursor, (0, len(text)))
    assert hole is not None and hole.canvas_tokens == REWRITE_MAX_TOKENS
    hole = find_hole(text, cursor, (cursor, cursor))  # an empty selection is no selection
    assert hole is not None and hole.kind == "marker"


def test_offsets_out_of_range_are_clamped() -> None:
    text = KERNEL + "    "
    hole = find_hole(text, 10_000)
    assert hole is not None and 0 <= hole.start <= hole.end <= len(text)
    hole = find_hole(text, 5, (-4, 10_000))
    assert hole is not None and (hole.start, hole.end) == (0, len(text))
    assert find_hole(text, -3) is None


BROKEN = [
    "}}}{{{", "__global__ void", "__global__ void k(", "__global__ void k(float* x) {{{{", "#define X {\n",
    "void f() {\n  \"unterminated\n  \n}\n", "void f() { /* open comment\n  \n", "\r\n\r\n{\r\n", "{\n  }\n}\n  ",
    "template <typename T> __global__ void k(T* x) {\n  for (int i = 0; i <",
]


@pytest.mark.parametrize("text", BROKEN)
def test_never_raises_and_stays_in_the_text(text: str) -> None:
    for cursor in range(len(text) + 1):
        hole = find_hole(text, cursor)
        assert hole is None or 0 <= hole.start <= hole.end <= len(text)


def test_the_end_of_a_file_whose_braces_all_close_is_no_body() -> None:
    """`#if`/`#else` branches that open the same function twice leave tree-sitter a function still open at the
    end of the file; read one branch of each conditional, every brace is closed there: no region (it was a
    192-token body fill, shown nowhere, ~0.7 s of the model's time at the end of ggml's mmq.cuh)."""
    text = ("#if FAST\n__global__ void k(int* o) {\n#else\n__global__ void k(int* o, int n) {\n#endif\n"
            "    o[0] = 1;\n}\n\n")
    assert find_hole(text, len(text)) is None
    unfinished = "#if FAST\n__global__ void k(int* o) {\n#else\n__global__ void k(int* o, int n) {\n#endif\n    "
    hole = find_hole(unfinished, len(unfinished))
    assert hole is not None and hole.kind == "body"
