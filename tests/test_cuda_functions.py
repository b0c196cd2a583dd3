"""Where a position's definition and open braces are, read from a file being typed."""

from __future__ import annotations

import pytest

from dice_lsp.cuda.functions import open_braces, top_level_span


@pytest.mark.parametrize(("text", "definition"), [
    ("int g;\n__global__ void k(int* o) {\n    ‸\n}\nint h;\n", "\n__global__ void k(int* o) {\n    ‸\n}"),
    ("namespace a { namespace b {\nstruct S { int x; };\n__device__ void f() {\n    ‸\n}\n} }\n",
     "\n__device__ void f() {\n    ‸\n}"),
    ('extern "C" {\n__global__ void k() { const char* s = "}"; /* } */ // }\n    ‸\n}\n}\n',
     '\n__global__ void k() { const char* s = "}"; /* } */ // }\n    ‸\n}'),
    ("#if FAST\n__global__ void k(int* o) {\n#else\n__global__ void k(int* o, int n) {\n#endif\n    ‸\n}\n"
     "#define OPEN {\n", "#if FAST\n__global__ void k(int* o) {\n#else\n__global__ void k(int* o, int n) {\n#endif\n"
     "    ‸\n}"),
    ("struct S { int x; };\n‸\n", None),  # at top level
    ("__global__ void k(int* o) {\n    ‸\n", None),  # the braces never close
    ("__global__ void k(float* out, int n) {\n    int i = threadIdx.x;\n    ‸\n    out[i] = 0.f;\n\n"
     "BINARY_OP(int8_t, add, +);\n", None),  # the kernel never closes before macros tree-sitter gives up on
])
def test_the_top_level_definition_that_holds_a_position(text: str, definition: str | None) -> None:
    data = text.replace("‸", "").encode()
    span = top_level_span(data, text.index("‸"))
    assert (None if span is None else data[span[0]:span[1]].decode()) == (
        None if definition is None else definition.replace("‸", ""))


@pytest.mark.parametrize(("text", "open_at_x"), [
    ("#if 0\nold();\n#else\n__global__ void k() {\n    x();\n#endif\n", 1),  # `#if 0`: its #else is the code
    ("#if A\nvoid f(int a) {\n#elif B\nvoid f(long a) {\n#else\nvoid f() {\n#endif\n    x;\n}\n", 1),
    ("void f() {\n#define OPEN {\n    const char* s = \"{\"; // {\n    x;\n}\n", 1),
    ("namespace a {\nvoid f() {}\nx;\n}\n", 1),
])
def test_braces_open_at_a_position_read_one_branch_of_each_conditional(text: str, open_at_x: int) -> None:
    data = text.encode()
    assert open_braces(data, data.index(b"x")) == open_at_x
