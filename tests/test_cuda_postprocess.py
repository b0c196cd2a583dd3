"""Golden input -> output pairs for each post-processing filter, in the contexts of real holes."""

from __future__ import annotations

import pytest

from dice_lsp.cuda.functions import parse
from dice_lsp.cuda.holes import find_hole
from dice_lsp.cuda.postprocess import (
    FillContext,
    balance_braces,
    balance_brackets,
    clean_candidates,
    close_open_brackets,
    cut_line_at_statement_end,
    cut_marker_at_its_line,
    cut_suffix_repeat,
    drop_block_closer,
    drop_comment_only,
    drop_degenerate,
    drop_neighbour_repeat,
    drop_unreachable_jump,
    fix_indentation,
    postprocess,
    strip_retyped_word,
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
    "dedented": KERNEL + "    if (n) {\n        c[0] = 1;\n    ‸\n        c[0] = 2;\n    }\n}\n",
    "dedented tabs": "__global__ void k(float* c, int n) {\n\tif (n) {\n\t\tc[0] = 1;\n\t‸\n\t\tc[0] = 2;\n\t}\n}\n",
    "dedented before close": KERNEL + "    if (n) {\n        c[0] = 1;\n    ‸\n    }\n}\n",
    "dedented pragma": KERNEL + "    if (n) {\n        c[0] = 1;\n    ‸\n#pragma unroll\n"
                       "        for (;;) {}\n    }\n}\n",
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
    "for header": KERNEL + "    for (int i = 0; ‸\n        c[i] = a[i];\n}\n",
    "split for": KERNEL + "    for (int i = 0;\n         ‸\n        c[i] = a[i];\n}\n",
    "split call": KERNEL + "    atomicAdd(c,\n              ‸\n    c[0] = 1;\n}\n",
    "call open": KERNEL + "    c[0] = max(a[0], ‸\n}\n",
    "index open": KERNEL + "    c[0] = a[‸\n}\n",
    "lambda arg": KERNEL + "    auto k = apply(a, [=] __device__ (float x) {\n        ‸\n    });\n}\n",
    "macro": KERNEL + "#define AT(p, i) \\\n    (p)[‸\n    c[0] = 1;\n}\n",
    "macro line": KERNEL + "#define SET(p, v) \\\n    ‸\n    c[0] = 1;\n}\n",
    "repeat": KERNEL + "    int i = threadIdx.x;\n    c[i] = a[i];\n    ‸\n    c[i] *= 2.0f;\n}\n",
    "repeat typed": KERNEL + "    int i = threadIdx.x;\n    c[i] = a[i];\n    c[i] = ‸\n    c[i] *= 2.0f;\n}\n",
    "row": KERNEL + "    const float w[4] = {\n        0.25f, 0.25f,\n        ‸\n    };\n}\n",
    "several per line": KERNEL + "    int r = 0; int s = 1;\n    ‸\n    c[r] = a[s];\n}\n",
    "switch": KERNEL + "    switch (n) {\n        ‸\n    }\n}\n",
    "marker repeat": KERNEL + "    c[0] = f(a[0]);\n    c[0] = /*@fill*/;‸\n}\n",
    "marker sync": KERNEL + "    __syncthreads();\n    /*@fill*/‸\n    c[0] = 1;\n}\n",
    "marker body": KERNEL[:-1] + " /*@fill*/‸ }\n",
    "marker in if": KERNEL + "    if (n) {\n        c[0] = 1;\n        /*@fill*/‸\n    }\n}\n",
    "typed if": KERNEL + "    if (‸\n    c[0] = 1;\n}\n",
    "typed prefix": KERNEL + "    float _storage_x = 0.f;\n    _st‸\n    c[0] = _storage_x;\n}\n",
    "typed word": KERNEL + "    float2 _storage;\n    _storage‸\n    c[0] = _storage.x;\n}\n",
    "typed s": KERNEL + "    int ss_ = 0, s = 1;\n    s‸\n    c[0] = ss_ + s;\n}\n",
    "typed guarded": KERNEL + "    if (n < 1)\n        ret‸\n    c[0] = 1;\n}\n",
    "mid block": KERNEL + "    float v = a[0];\n    ‸\n    // store it\n    c[0] = v;\n}\n",
    "guarded": KERNEL + "    if (n < 1)\n        ‸\n    c[0] = 1;\n}\n",
    "typed return": KERNEL + "    float v = a[0];\n    ret‸\n    c[0] = v;\n}\n",
    "before case": KERNEL + "    switch (n) {\n    case 1:\n        c[0] = 1;\n        ‸\n    case 2:\n"
                   "        c[0] = 2;\n    }\n}\n",
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

SHUFFLES = "\n    ".join(f"s += __shfl_down_sync(m, s, {n});" for n in (16, 8, 4))
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
    ("empty", "int int = = =\n    int  int = = = ;\n    int int =  = =\n    int int = =;\n    int int = = =\n"
              "    int int = = =\n    int int = = = =\n    int int = =\n    int int = = =", None),  # seen in use
    ("empty", "int int = = =\n    int int int = = = =\n    int = =", None),  # words doubled
    ("empty", "x = a[i];\n    x  =  a[i] ;\n    x=a[i];", None),
    ("empty", "c[0] = a[0];\n    c[1] = a[1];\n    c[2] = a[2];", "c[0] = a[0];\n    c[1] = a[1];\n    c[2] = a[2];"),
    ("empty", SHUFFLES, SHUFFLES),  # lines that differ in a number only
]

# Fills seen in real use, and what the chain makes of them on an empty line (None: dropped). Two are one
# statement that does not parse: no filter here can tell, the parse check drops them later.
GARBAGE = [
    ("if ( = (int)threadIdx)ii;", "if ( = (int)threadIdx)ii;"),  # balanced, one statement: parse check
    ("__syncthreads(tid = threadIdx.x();", "__syncthreads(tid = threadIdx.x());"),  # closed: clang's to judge
    ("out[...] = tile[x.];];];", "out[...] = tile[x.];"),  # cut at the ';' (`x.]` is for the parse check)
    ("float maxval = = ;;", "float maxval = = ;"),  # cut at the ';' (`= =` is for the parse check)
    ("out[i] = tile[x];];", "out[i] = tile[x];"),
    ("foo(a, b));", "foo(a, b);"),
    ("c[i] = f(a[i]];", None),
]

CUT_LINE_AT_STATEMENT_END = [
    ("empty", "c[i] = 0; c[i] += 1;", "c[i] = 0;"),
    ("empty", "c[i] = 0;\n    c[i] += 1;", "c[i] = 0;"),  # one line
    ("empty", "out[i] = tile[x];];", "out[i] = tile[x];"),
    ("empty", "out[...] = tile[x.];];];", "out[...] = tile[x.];"),
    ("empty", "float maxval = = ;;", "float maxval = = ;"),
    ("empty", "if ( = (int)threadIdx)ii;", "if ( = (int)threadIdx)ii;"),
    ("empty", "__syncthreads(tid = threadIdx.x();", "__syncthreads(tid = threadIdx.x();"),  # ';' inside '('
    ("empty", "foo(a, b));", "foo(a, b));"),  # the stray ')' is balance_brackets' job
    ("empty", "for (int j = 0; j < n; ++j) c[j] = 0;", "for (int j = 0; j < n; ++j) c[j] = 0;"),
    ("empty", "for (int j = 0; j < n; ++j) c[j] = 0; c[i] = 1;", "for (int j = 0; j < n; ++j) c[j] = 0;"),
    ("empty", "if (i < n) {", "if (i < n) {"),
    ("empty", "if (i < n) {\n        c[i] = 0;\n    }", "if (i < n) {\n        c[i] = 0;\n    }"),  # its block
    ("empty", "x = 1; if (i < n) {", "x = 1; if (i < n) {"),
    ("empty", "if (i < n) { c[i] = 0; } c[0] = 1; c[1] = 2;", "if (i < n) { c[i] = 0; } c[0] = 1;"),
    ("empty", "} else { c[i] = 0; }", "} else { c[i] = 0; }"),
    ("empty", "c[i] = 0; // done; really", "c[i] = 0; // done; really"),
    ("empty", "c[i] = 0; /* ; */", "c[i] = 0; /* ; */"),
    ("empty", 'printf("a; b) %d\\n", i); c[i] = 0;', 'printf("a; b) %d\\n", i);'),
    ("empty", "char s = ';'; c[i] = 0;", "char s = ';';"),
    ("empty", "c[i] = convert<float, 4>(a[i]); c[0] = 1;", "c[i] = convert<float, 4>(a[i]);"),
    ("empty", "auto f = [&](int j) { return a[j]; }; c[i] = f(i);", "auto f = [&](int j) { return a[j]; };"),
    ("empty", "#pragma unroll", "#pragma unroll"),
    ("empty", "\n\n    c[i] = 0; c[i] += 1;", "c[i] = 0;"),  # the first line with code
    ("empty", "  \n", None),
    ("column 0", "\n    c[i] = 0;\n    c[i] += 1;", "    c[i] = 0;"),  # at the hole's indentation
    ("column 0", "\nc[i] = 0;", "    c[i] = 0;"),
    ("column 0", "\n    if (i) {\n        c[i] = 0;\n    }", "    if (i) {\n        c[i] = 0;\n    }"),
    ("after statement", "\n    c[i] = 0; c[i] += 1;", "\n    c[i] = 0;"),  # after a finished line: the next one
    ("unfinished", " blockDim.x + threadIdx.x; i += 1;", " blockDim.x + threadIdx.x;"),
    ("unfinished", "\n blockDim.x;", "blockDim.x;"),
    ("for header", "i < n; ++i) c[i] = 0; c[0] = 1;", "i < n; ++i) c[i] = 0;"),  # counted from the line start
    ("for header", "i < n; ++i) {", "i < n; ++i) {"),
    ("split for", "i < n; ++i)", "i < n; ++i)"),  # the '(' the line above opened
    ("split for", "i < n; ++i) c[i] = 0; c[0] = 1;", "i < n; ++i) c[i] = 0;"),
    ("split call", "1.0f); c[1] = 2;", "1.0f);"),
    ("lambda arg", "return x * 2; });", "return x * 2; });"),  # closes the lambda and the call
    ("lambda arg", "return x * 2; }); c[0] = 1;", "return x * 2;"),
    ("lambda arg", "return x * 2; ]);", "return x * 2;"),
    ("macro line", "(p)[0] = (v); (p)[1] = (v); \\", "(p)[0] = (v); (p)[1] = (v); \\"),  # the macro goes on
    ("macro line", "(p)[0] = (v); (p)[1] = (v);", "(p)[0] = (v);"),
    ("several per line", "c[0] = r; c[1] = s;", "c[0] = r; c[1] = s;"),  # the document's style
    ("switch", "case 0: c[0] = 1; break;", "case 0: c[0] = 1; break;"),
    ("switch", "case 0: c[0] = 1; c[1] = 2; break;", "case 0: c[0] = 1;"),
    ("crlf", "c[i] = 0; c[i] += 1;\r\n    c[i] = 2;", "c[i] = 0;"),
    ("crlf", "if (i) {\r\n        c[i] = 0;\r\n    }", "if (i) {\r\n        c[i] = 0;\r\n    }"),
    ("marker call", "a[0]; b", "a[0]; b"),  # line holes only
    ("body", "c[0] = 1; c[1] = 2;", "c[0] = 1; c[1] = 2;"),
]

CUT_MARKER_AT_ITS_LINE = [
    ("marker repeat", "a[1];\n    c[1] = 2;", "a[1]"),  # `c[0] = /*@fill*/;`: the line's ';' ends it
    ("marker repeat", "a[1]; c[1] = 2", "a[1]"),
    ("marker repeat", "a[1] + 1", "a[1] + 1"),
    ("marker repeat", "\n    a[1]", "a[1]"),
    ("marker call", "i.x);\n    float v = fmaxf(aaix, v", "i.x)"),  # the ')' is balance_brackets' job
    ("marker call", "[](int x) { return x; }", "[](int x) { return x; }"),  # its own braces
    ("marker condition", "n > 0", "n > 0"),
    ("marker condition", "n > 0 &&\n        n < 4", "n > 0 &&"),
    ("marker sync", "c[0] = 2;\n    c[1] = 3;", "c[0] = 2;\n    c[1] = 3;"),  # alone on its line: a region
    ("empty", "c[i] = 0;\n    c[i] += 1;", "c[i] = 0;\n    c[i] += 1;"),  # markers only
    ("marker body", "\n    int i = threadIdx.x;\n    c[i] = a[i];\n",
     "\n    int i = threadIdx.x;\n    c[i] = a[i];\n"),  # `{ /*@fill*/ }`: the block's statements
]

BALANCE_BRACKETS = [
    ("empty", "foo(a, b));", "foo(a, b);"),
    ("empty", "foo(a, b)) + 1;", "foo(a, b)"),
    ("empty", "out[i] = tile[x];];", "out[i] = tile[x];"),
    ("empty", "out[...] = tile[x.];];];", "out[...] = tile[x.];"),
    ("empty", "c[i] = a[i]]", "c[i] = a[i]"),
    ("empty", "c[i] = f(a[i]];", None),  # ']' closing a '('
    ("empty", "c[i] = f(a[i)];", None),
    ("empty", "c[i] = (a[i];", "c[i] = (a[i];"),  # an unclosed '(' is for the parse check
    ("empty", "if ( = (int)threadIdx)ii;", "if ( = (int)threadIdx)ii;"),
    ("empty", "__syncthreads(tid = threadIdx.x();", "__syncthreads(tid = threadIdx.x();"),
    ("empty", "float maxval = = ;;", "float maxval = = ;;"),
    ("empty", 'printf("%d)\\n", i);', 'printf("%d)\\n", i);'),
    ("empty", "c[i] = ')'; // )", "c[i] = ')'; // )"),
    ("empty", "c[i] = convert<float>(a[i]);", "c[i] = convert<float>(a[i]);"),
    ("empty", "auto f = [&](int j) { return a[j]; };", "auto f = [&](int j) { return a[j]; };"),
    ("empty", "c[i] = 0;\n    f(a));\n    c[i] += 1;", "c[i] = 0;\n    f(a);\n    c[i] += 1;"),
    ("call open", "a[1]);", "a[1]);"),
    ("call open", "a[1]));", "a[1]);"),
    ("call open", "a[1]]);", None),
    ("index open", "i]);", "i];"),
    ("index open", "i] + a[i + 1];", "i] + a[i + 1];"),
    ("split call", "1.0f);", "1.0f);"),  # the '(' is on the line above
    ("split call", "1.0f));", "1.0f);"),
    ("lambda arg", "return x * 2; });", "return x * 2; });"),
    ("lambda arg", "return x * 2; }));", "return x * 2; });"),
    ("lambda arg", "return x * 2; ]);", "return x * 2;"),
    ("macro", "i])", "i]"),  # the macro's '[' only
    ("macro", "i]", "i]"),
    ("marker call", "g(a[0])", "g(a[0])"),
    ("marker call", "a[0], n)", "a[0], n"),  # the ')' after the hole closes the call
    ("marker call", "a[0]), n", "a[0]"),
    ("marker condition", "n > 0)", "n > 0"),
    ("marker condition", "n > 0", "n > 0"),
    ("body", "int i = 0;\n    c[i] = f(a));\n}", "int i = 0;\n    c[i] = f(a);\n}"),
    ("body", "int i = 0;\n    c[i] = f(a)) + 1;\n}", "int i = 0;\n    c[i] = f(a)\n}"),  # cut, '}' back
    ("body", "));\n}", None),
]

STRIP_RETYPED_WORD = [
    ("typed prefix", "_storage_x = 1.0f;", "orage_x = 1.0f;"),  # the line reads `_storage_x = 1.0f;`
    ("typed word", "_storage.x = 1.0f;", ".x = 1.0f;"),
    ("typed word", "_storage;", ";"),
    ("typed s", "s = 2;", " = 2;"),  # `ss` is no word of the document
    ("typed s", "s_ = 2;", "s_ = 2;"),  # `ss_` is: the fill completes that name
    ("typed prefix", "orage_x = 1.0f;", "orage_x = 1.0f;"),  # completes the typed word
    ("typed word", ".y = 0.f;", ".y = 0.f;"),
    ("typed word", "or = 0;", "or = 0;"),  # glued, not repeated: the name check judges `_storageor`
    ("typed word", " = make_float2(0.f, 0.f);", " = make_float2(0.f, 0.f);"),
    ("empty", "c[i] = 0;", "c[i] = 0;"),  # nothing typed
    ("unfinished", "blockDim.x;", "blockDim.x;"),  # `*` typed last
    ("marker call", "f(a[0])", "f(a[0])"),  # only a line hole continues a typed word
]

CLOSE_OPEN_BRACKETS = [
    ("empty", "return (code >> (nbits - 3 * (level + 1));", "return (code >> (nbits - 3 * (level + 1)));"),
    ("empty", "int cur_offset = f(a, g(b);", "int cur_offset = f(a, g(b));"),  # innermost first
    ("empty", "c[i] = a[b[i];", "c[i] = a[b[i]];"),
    ("empty", "c[i] = f(a[i ;", "c[i] = f(a[i]);"),
    ("empty", "c[i] = f(a; // note", "c[i] = f(a); // note"),
    ("unfinished", "(a[0] + 1;", "(a[0] + 1);"),  # a declaration typed before the hole
    ("after statement", "\n    c[i] = f(a;", "\n    c[i] = f(a);"),  # the next line
    ("call open", "g(a[1];", "g(a[1]);"),  # the fill's own '(' only: `max(` was typed
    ("call open", "a[1];", "a[1];"),
    ("split call", "1.0f;", "1.0f;"),  # the '(' is on the line above
    ("empty", "if (x == 0;", "if (x == 0;"),  # a control head: `if (x == 0);` is an empty `if`
    ("empty", "for (int j = 0; j++)", "for (int j = 0; j++)"),
    ("empty", "for (int j = 0; j < n;", "for (int j = 0; j < n;"),
    ("empty", "while (i < n;", "while (i < n;"),
    ("empty", "switch (n;", "switch (n;"),
    ("empty", "} else if (f(i) < n;", "} else if (f(i) < n;"),
    ("typed if", "f(i) < g(n;", "f(i) < g(n;"),  # the head was typed before the hole
    ("marker call", "g(a[0]", "g(a[0]"),  # `f(/*@fill*/);`: not a line hole
    ("empty", "c[i] = (a[i]; c[j] = 0;", "c[i] = (a[i]; c[j] = 0;"),  # not one statement
    ("empty", "int w[2] = {f(1;", "int w[2] = {f(1;"),  # a '{' of its own
    ("empty", "c[i] = f(a)", "c[i] = f(a)"),  # no ';' to close before
    ("empty", "c[i] = a[i];", "c[i] = a[i];"),
    ("empty", "c[i] = f(a\n    c[j] = 0;", "c[i] = f(a\n    c[j] = 0;"),  # not one line
]

DROP_BLOCK_CLOSER = [
    ("empty", "} c[i] = 0;", None),  # closes the kernel: the code after the hole lands outside it
    ("empty", "} if (i < n) {", None),  # parses, and moves the code after the hole into the `if`
    ("end of block", "} else {", None),
    ("end of block", "}", None),
    ("lambda arg", "return x * 2; });", None),  # the suffix closes the lambda already
    ("empty", "if (i) {\n        c[i] = 0;\n    }", "if (i) {\n        c[i] = 0;\n    }"),  # its own block
    ("empty", "c[i] = 0; // }", "c[i] = 0; // }"),
    ("empty", "c[i] = '}';", "c[i] = '}';"),
    ("unclosed if", "c[0] = 1;\n    }", "c[0] = 1;\n    }"),  # the document leaves the `if` open
    ("body", "c[0] = 1;\n}", "c[0] = 1;\n}"),  # a body's own '}'
    # the cursor stepped out of the `if`'s block, code below still in one: the layout of an else branch
    ("dedented", "} else {", "} else {"),
    ("dedented", "} else if (n > 1) {", "} else if (n > 1) {"),
    ("dedented tabs", "} else {", "} else {"),
    ("dedented", "}", None),  # closes the block and opens none: the code below would end the kernel
    ("dedented", "} else c[0] = 3;", None),
    ("dedented", "} if (n > 1) {", None),  # only `else` reopens what it closed
    ("dedented", "} elsewhere(n) {", None),
    ("dedented before close", "} else {", None),  # the line below is the block's own '}': not dedented
    ("dedented pragma", "} else {", "} else {"),  # a directive at column 0 is not the line below
    # lines asked for explicitly may end the block and start the next, not end it alone
    ("marker in if", "c[1] = 2;\n    } else {\n        c[1] = 3;", "c[1] = 2;\n    } else {\n        c[1] = 3;"),
    ("marker in if", "c[1] = 2;\n    }\n    if (n > 1) {\n        c[2] = 3;",
     "c[1] = 2;\n    }\n    if (n > 1) {\n        c[2] = 3;"),
    ("marker in if", "c[1] = 2;\n    }", None),
    ("marker in if", "} c[1] = 0;", None),
]

DROP_NEIGHBOUR_REPEAT = [
    ("repeat", "c[i] = a[i];", None),  # the line above
    ("repeat", "c[i]=a[i] ;", None),
    ("repeat", "c[i] *= 2.0f;", None),  # the line below
    ("repeat", "c[i] = a[i];\n    c[i] += 1.0f;", None),
    ("repeat", "c[i] = a[i] + 1.0f;", "c[i] = a[i] + 1.0f;"),
    ("repeat", "c[i] += 1.0f;\n    c[i] *= 2.0f;", "c[i] += 1.0f;\n    c[i] *= 2.0f;"),  # not whole
    ("repeat typed", "a[i];", None),  # judged with what was typed
    ("repeat typed", "a[i] * 2.0f;", "a[i] * 2.0f;"),
    ("row", "0.25f, 0.25f,", "0.25f, 0.25f,"),  # not a statement: rows of data repeat
    ("split call", "atomicAdd(c,", "atomicAdd(c,"),
    ("after statement", "\n    int i = threadIdx.x;", None),  # the next line repeats the hole's line
    ("after statement", "\n    c[i] = 0;", "\n    c[i] = 0;"),
    ("marker repeat", "f(a[0])", None),  # the whole line, not only a statement, counts off line holes
    ("marker repeat", "f(a[1])", "f(a[1])"),
    ("marker sync", "__syncthreads();", "__syncthreads();"),  # repeating it is often right
    ("empty", "c[i] = 0;", "c[i] = 0;"),
]

DROP_UNREACHABLE_JUMP = [
    ("mid block", "return;", None),  # `c[0] = v;` below could never run
    ("mid block", "continue;", None),
    ("mid block", "c[1] = v;", "c[1] = v;"),
    ("mid block", "if (v < 0) return;", "if (v < 0) return;"),  # a guard
    ("mid block", "returned = 1;", "returned = 1;"),
    ("typed return", "urn;", None),  # judged with what was typed
    ("end of block", "return;", "return;"),  # nothing after it in its block
    ("guarded", "return;", "return;"),  # the brace-less `if` above makes it conditional
    ("before case", "break;", "break;"),
    ("body", "return;\n    c[0] = 1;", "return;\n    c[0] = 1;"),  # not a line hole
    ("typed guarded", "urn;", "urn;"),
    ("typed return", "urn f<float>(", "urn f<float>("),  # the statement goes on below
]

DROP_COMMENT_ONLY = [
    ("empty", "// thread", None),
    ("empty", "// int row = 1", None),  # commented-out code is not code
    ("empty", "/* TODO */", None),
    ("empty", "\n    // ...", None),  # the context's mark for code left out
    ("body", "// the sum\n    // of a", None),
    ("empty", "c[i] = 0;  // zero it", "c[i] = 0;  // zero it"),
    ("empty", "// zero it\n    c[i] = 0;", "// zero it\n    c[i] = 0;"),
    ("empty", "c[i] = '/';", "c[i] = '/';"),
    ("marker call", "/* none */", "/* none */"),  # a marker may be a comment being rewritten
    ("marker call", "//", None),  # but not to an empty one (shown for a 2-5-line hole of the suite)
    ("marker call", "/* */", None),
]

@pytest.mark.parametrize(("filter_", "table"), [
    (strip_special_tokens, STRIP_SPECIAL_TOKENS),
    (cut_suffix_repeat, CUT_SUFFIX_REPEAT),
    (balance_braces, BALANCE_BRACES),
    (fix_indentation, FIX_INDENTATION),
    (drop_degenerate, DROP_DEGENERATE),
    (cut_line_at_statement_end, CUT_LINE_AT_STATEMENT_END),
    (cut_marker_at_its_line, CUT_MARKER_AT_ITS_LINE),
    (strip_retyped_word, STRIP_RETYPED_WORD),
    (balance_brackets, BALANCE_BRACKETS),
    (close_open_brackets, CLOSE_OPEN_BRACKETS),
    (drop_block_closer, DROP_BLOCK_CLOSER),
    (drop_neighbour_repeat, DROP_NEIGHBOUR_REPEAT),
    (drop_comment_only, DROP_COMMENT_ONLY),
    (drop_unreachable_jump, DROP_UNREACHABLE_JUMP),
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
    assert postprocess("a[1]);\n    c[1] = f(a[1]);", context("marker call")) == "a[1]"  # no spill past the marker
    end = context("end of block")
    assert clean_candidates(["} else {", "} if (n > 1) {", "c[1] = 2; } c[2] = 3;"], end) == ["c[1] = 2;"]


@pytest.mark.parametrize(("fill", "expected"), GARBAGE)
def test_garbage(fill: str, expected: str | None) -> None:
    assert postprocess(fill, context("empty")) == expected


@pytest.mark.parametrize("after", ["\n#define N 4\n__global__ void k2(float* x) {\n    x[0] = N;\n}\n",
                                   "\n  __global__ void k2(float* x) {\n    x[0] = 1;\n  }\n"])
def test_a_body_before_top_level_code_gets_its_brace(after: str) -> None:
    text = KERNEL + "    " + after
    hole = find_hole(text, len(KERNEL) + 4)
    assert hole is not None
    fill = postprocess("int i = threadIdx.x;\n    c[i] = a[i];", FillContext(hole, text[:hole.start], text[hole.end:]))
    assert fill == "int i = threadIdx.x;\n    c[i] = a[i];\n}"
    assert not parse(text[:hole.start] + fill + text[hole.end:]).root.has_error
