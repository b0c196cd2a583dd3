"""Golden input -> output pairs for each post-processing filter, in the contexts of real holes."""

from __future__ import annotations

import pytest

from dice_lsp.cuda.holes import find_hole
from dice_lsp.cuda.postprocess import (
    FillContext,
    balance_braces,
    clean_candidates,
    cut_suffix_repeat,
    drop_degenerate,
    fix_indentation,
    postprocess,
    strip_special_tokens,
)

KERNEL = "__global__ void add(const float* a, float* c, int n) {\n"
DOCUMENTS = {  # `‸` is the cursor; each gives a real hole
    "unfinished": KERNEL + "    int i = blockIdx.x *‸\n    if (i < n) c[i] = a[i];\n}\n",
    "empty": KERNEL + "    int i = threadIdx.x;\n    ‸\n    c[i] = a[i];\n}\n",
    "after statement": KERNEL + "    int i = threadIdx.x;‸\n}\n",
    "column 0": KERNEL + "    int i = 0;\n‸    \n    c[i] = 1;\n}\n",
    "end of block": KERNEL + "    if (n) {\n        c[0] = 1;\n        ‸\n    }\n}\n",
    "unclosed if": KERNEL + "    if (n) {\n        ‸\n    c[1] = 2;\n",
    "marker call": KERNEL + "    c[0] = f(/*@fill*/);‸\n}\n",
    "marker condition": KERNEL + "    if (/*@fill*/)‸\n        c[0] = 1;\n}\n",
    "body": KERNEL + "    ‸",
    "body same line": KERNEL[:-1] + "‸",
    "body in if": KERNEL + "    if (n) {\n        ‸",
    "body signature": "__global__ void k(const float* a,\n                  float* c) {‸",
    "body in namespace": "namespace ops {\n    __device__ float f(float* a) {\n        ‸",
    "two spaces": "__global__ void k(float* a) {\n  int i = 0;\n  ‸\n  a[i] = 1;\n}\n",
    "tabs": "__global__ void k(float* a) {\n\tint i = 0;\n\t‸\n\ta[i] = 1;\n}\n",
    "crlf": KERNEL.replace("\n", "\r\n") + "    int i = 0;\r\n    ‸\r\n    c[i] = 1;\r\n}\r\n",
    "crlf body": KERNEL.replace("\n", "\r\n") + "    ‸",
}


def context(name: str) -> FillContext:
    document = DOCUMENTS[name]
    text = document.replace("‸", "")
    hole = find_hole(text, document.index("‸"))
    assert hole is not None, name
    return FillContext(hole, text[:hole.start], text[hole.end:])


STRIP_SPECIAL_TOKENS = [
    ("empty", "c[i] = 0;<|pad|><|pad|><|pad|>", "c[i] = 0;"),
    ("empty", "c[i] = 0;<|eos|>float junk;", "c[i] = 0;"),
    ("empty", "c[<|mask|>i] = 0;", "c[i] = 0;"),
    ("empty", "c[i]<|fim_middle|> = 0;", "c[i] = 0;"),
    ("empty", "<|endoftext|>c[i] = 0;", ""),
    ("empty", "<|pad|>", ""),
    ("empty", "ok = a < b || c > d;", "ok = a < b || c > d;"),
]

CUT_SUFFIX_REPEAT = [
    ("empty", "float v = a[i];\n    c[i] = a[i];\n}", "float v = a[i];\n"),  # the fill runs into the suffix
    ("empty", "float v = a[i];\n    c[i] = a[i];\n    c[i] += v;", "float v = a[i];\n"),  # a distinctive line
    ("empty", "c[i] = a[i];", ""),
    ("empty", "float v = a[i];\n    c[i] = v;", "float v = a[i];\n    c[i] = v;"),
    ("end of block", "c[1] = 2;\n    }", "c[1] = 2;\n"),
    ("end of block", "c[1] = 2;\n    }\n}", "c[1] = 2;\n"),
    ("end of block", "if (n > 1) {\n            c[1] = 2;\n        }",
     "if (n > 1) {\n            c[1] = 2;\n        }"),  # its own '}', not the suffix's
    ("end of block", "c[1] = 2;\n    }\n    c[2] = 3;", "c[1] = 2;\n    }\n    c[2] = 3;"),  # short '}' alone
    ("crlf", "c[i] = 2;\r\n    c[i] = 1;\r\n}", "c[i] = 2;\r\n"),
    ("marker call", "a[0], n);", "a[0], n"),
    ("marker call", "g(a[0]));", "g(a[0])"),
    ("marker call", "g(a[0])", "g(a[0])"),
    ("marker condition", "n > 0)", "n > 0"),
    ("marker condition", "f(n)", "f(n)"),  # cutting ')' would leave '(' open
]

BALANCE_BRACES = [
    ("empty", "c[i] = 0;\n}", "c[i] = 0;"),
    ("empty", "c[i] = 0;\n    }\n}\n", "c[i] = 0;"),
    ("empty", "if (i) {\n        c[i] = 0;\n    }", "if (i) {\n        c[i] = 0;\n    }"),
    ("empty", "} c[i] = 0;", "} c[i] = 0;"),  # not trailing: left for the user to see
    ("empty", "c[i] = 0; // }", "c[i] = 0; // }"),
    ("unclosed if", "c[0] = 1;\n    }", "c[0] = 1;\n    }"),  # the document leaves it open
    ("body", "int i = threadIdx.x;\n    c[i] = a[i];", "int i = threadIdx.x;\n    c[i] = a[i];\n}"),
    ("body", "int i = 0;\n}\n\n__global__ void next() {\n}", "int i = 0;\n}"),
    ("body", "int i = 0;\n    }", "int i = 0;\n}"),
    ("body", "c[0] = 1; }", "c[0] = 1;\n}"),
    ("body", "if (n) {\n        c[0] = 1;\n    }\n}\n", "if (n) {\n        c[0] = 1;\n    }\n}"),
    ("body", "}", None),
    ("body", "  \n", None),
    ("body in if", "c[0] = 1;\n    }\n}", "c[0] = 1;\n    }\n}"),
    ("body in if", "c[0] = 1;\n    }", "c[0] = 1;\n    }\n}"),
    ("body in namespace", "return a[0];\n}\n}", "return a[0];\n    }"),
    ("body signature", "c[0] = 1;\n}", "c[0] = 1;\n}"),
    ("crlf body", "c[0] = 1;\r\n}", "c[0] = 1;\r\n}"),
]

FIX_INDENTATION = [
    ("unfinished", " blockDim.x + threadIdx.x;   ", " blockDim.x + threadIdx.x;"),
    ("unfinished", "\n    blockDim.x;", "blockDim.x;"),
    ("unfinished", " blockDim.x\n        + threadIdx.x;\n\n", " blockDim.x\n        + threadIdx.x;"),
    ("empty", "    c[i] = 0;", "c[i] = 0;"),
    ("empty", "\n    c[i] = 0;\n", "c[i] = 0;"),
    ("empty", "c[i] = 0;\nc[i] += 1;", "c[i] = 0;\n    c[i] += 1;"),
    ("empty", "if (i) {\nc[i] = 0;\n}", "if (i) {\n        c[i] = 0;\n    }"),
    ("empty", "for (;;) {\n  x();\n  y();\n}", "for (;;) {\n        x();\n        y();\n    }"),
    ("empty", "c[i] = 0;\n\tc[i] += 1;", "c[i] = 0;\n    c[i] += 1;"),
    ("empty", "c[i] = 0;\n#pragma unroll\n    for (;;) {}", "c[i] = 0;\n#pragma unroll\n    for (;;) {}"),
    ("empty", "if (i) {\n        c[i] = 0;\n    } else {\n        c[i] = 1;\n    }",
     "if (i) {\n        c[i] = 0;\n    } else {\n        c[i] = 1;\n    }"),
    ("after statement", "\n    c[i] = 0;", "\n    c[i] = 0;"),
    ("after statement", "\nc[i] = 0;", "\n    c[i] = 0;"),
    ("column 0", "\n    c[i] = 0;", "\n    c[i] = 0;"),
    ("column 0", "    c[i] = 0;  ", "    c[i] = 0;"),
    ("tabs", "a[i] = 0;\n    a[i] += 1;", "a[i] = 0;\n\ta[i] += 1;"),
    ("two spaces", "if (i) {\na[i] = 0;\n}", "if (i) {\n    a[i] = 0;\n  }"),
    ("crlf", "c[i] = 0;\r\n    c[i] += 1;\r\n", "c[i] = 0;\r\n    c[i] += 1;"),
    ("crlf", "c[i] = 0;\nc[i] += 1;", "c[i] = 0;\r\n    c[i] += 1;"),
    ("marker call", "a[0],  ", "a[0],"),
    ("marker call", "a[0],\n          n", "a[0],\n          n"),
    ("body", "\n    int i = 0;\n}", "int i = 0;\n}"),
    ("body same line", "\n    int i = 0;\n}", "\n    int i = 0;\n}"),
    ("body same line", "\nint i = 0;\nc[i] = 0;\n}", "\n    int i = 0;\n    c[i] = 0;\n}"),
    ("body", "int i = 0;\nif (i) {\nc[i] = 0;\n}\n}", "int i = 0;\n    if (i) {\n        c[i] = 0;\n    }\n}"),
    ("body signature", "\n  int i = 0;\n  c[i] = 0;\n}", "\n    int i = 0;\n    c[i] = 0;\n}"),  # not the ')' line's
    ("body in namespace", "\nreturn a[0];\n    }", "return a[0];\n    }"),
    ("empty", " \n\n ", ""),
]

DROP_DEGENERATE = [
    ("empty", "c[i] = 0;", "c[i] = 0;"),
    ("empty", "", None),
    ("empty", "  \n\t", None),
    ("empty", "x = 1;\n    x = 1;\n    x = 1;", None),
    ("empty", "__syncthreads();\n    x = 1;\n    __syncthreads();",
     "__syncthreads();\n    x = 1;\n    __syncthreads();"),
    ("empty", "}\n    }\n}", "}\n    }\n}"),  # closing braces repeat by nature
    ("empty", "a = a = a = a = a = a = a = a = a", None),
    ("empty", "f(a, b, c, c, c, c, c, c, c, c, c, c);", None),  # the loop need not reach the end
    ("empty", "c[i] = ((((((((((((((((((", None),
    ("empty", "x = a = b = c = d;", "x = a = b = c = d;"),
    ("empty", "float w[8] = {0, 0, 0, 0, 0, 0, 0, 0};", "float w[8] = {0, 0, 0, 0, 0, 0, 0, 0};"),
]


@pytest.mark.parametrize(("filter_", "table"), [
    (strip_special_tokens, STRIP_SPECIAL_TOKENS),
    (cut_suffix_repeat, CUT_SUFFIX_REPEAT),
    (balance_braces, BALANCE_BRACES),
    (fix_indentation, FIX_INDENTATION),
    (drop_degenerate, DROP_DEGENERATE),
], ids=lambda value: getattr(value, "__name__", ""))
def test_golden(filter_: object, table: list[tuple[str, str, str | None]]) -> None:
    assert callable(filter_)
    failures = [(name, fill, expected, got) for name, fill, expected in table
                if (got := filter_(fill, context(name))) != expected]
    assert failures == []


def test_chain_and_candidates() -> None:
    ctx = context("empty")
    fills = [
        "c[i] = 0;<|pad|><|pad|>",
        "    c[i]  =  0;",  # the same once whitespace is normalised
        "c[i] = a[i];",  # only repeats the suffix
        "x = 1;\nx = 1;\nx = 1;\nx = 1;",
        "<|eos|>",
        "float v = a[i];\nc[i] = a[i];\n}<|pad|>",
    ]
    assert clean_candidates(fills, ctx) == ["c[i] = 0;", "float v = a[i];"]
    assert postprocess("if (i) {\nc[i] = 0;\n}\n}<|eos|>", ctx) == "if (i) {\n        c[i] = 0;\n    }"
    body = context("body")
    assert postprocess("int i = 0;\nc[i] = a[i];\n}\n}\n<|pad|>", body) == "int i = 0;\n    c[i] = a[i];\n}"
    assert clean_candidates([], body) == []
