"""The executable part of CUDA-Infill: self-contained kernels with a launch spec verified on a GPU.

Three steps, each a subcommand of `python -m dice_lsp.training.suite_executable`:

    extract   (CPU) every `__global__` kernel of the pinned sources whose parameters the harness can pass
              (pointers to its dtypes, scalars it passes by value) and whose body uses only its parameters,
              CUDA built-ins and the file's own non-template `__device__` functions, macros and constant
              globals (copied in, recursively), becomes a standalone file; a `template <typename T>` kernel
              is instantiated textually as float. Kernels mostly made of lines of the training corpus are
              dropped (> 50% of their normalised 4-line shingles in it). Each file is compiled here with
              nvcc (a cubin for sm_90, which also names the kernel's symbol); a few generic launch specs
              are written for it, and holes are cut in its kernel body. Result: one JSON line per kernel.
    verify    (GPU) compiles every candidate, accepts the first spec under which the kernel verifies
              against itself at every size (no write out of bounds, inputs untouched) and changes at least
              1% of an output buffer; then compiles the file with each hole's text deleted and keeps the
              hole only when that fails to compile or fails verification against the whole file. Needs
              torch and the harness only (no tree-sitter); kernels run in worker processes, and a worker
              that dies or hangs is replaced, its item marked failed.
    write     the verified files and kept holes as the suite's `executable` part, and EXECUTABLE.md.

A file's split is its kernel's source file's split (`suite.split_of`).
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import logging
import random
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from functools import cache
from pathlib import Path
from typing import Any, TypedDict

from dice_lsp.evals import suite
from dice_lsp.sandbox import run_tool
from dice_lsp.toolchain.flags import CompileFlags
from dice_lsp.toolchain.scratch import run_folder
from dice_lsp.training import corpus
from dice_lsp.training import suite_build as build

LOG = logging.getLogger("dice_lsp.training.suite_executable")

CACHE = build.DATA / "executable"  # the corpus shingles (not in git)
TREES = build.DATA / "trees"  # the pinned archives, unpacked
SOURCE_EXTS = (".cu", ".cuh", ".h", ".hpp", ".cuinl", ".inl")
NOVELTY_LIMIT = 0.5
SHINGLE_WIDTH = 4
MAX_BODY_CHARS = 6000
HOLES_PER_KIND = 2

POINTER_DTYPES = {
    "float": "float32", "double": "float64", "half": "float16", "__half": "float16", "__nv_bfloat16": "bfloat16",
    "int": "int32", "int32_t": "int32", "unsigned": "uint32", "unsigned int": "uint32", "uint32_t": "uint32",
    "int64_t": "int64", "long long": "int64", "long long int": "int64", "long": "int64", "size_t": "int64",
    "int8_t": "int8", "char": "int8", "signed char": "int8", "uint8_t": "uint8", "unsigned char": "uint8",
}
SCALAR_DTYPES = {
    "int": "int32", "int32_t": "int32", "unsigned": "uint32", "unsigned int": "uint32", "uint32_t": "uint32",
    "int64_t": "int64", "long long": "int64", "long long int": "int64", "long": "int64", "size_t": "int64",
    "float": "float32", "double": "float64", "bool": "uint8",
}
_QUALIFIER_WORDS = re.compile(r"\b(?:const|volatile|__restrict__|__restrict|restrict)\b")
_IDENT = re.compile(r"\b[A-Za-z_]\w*\b")
_WORDS_N = ("n", "size", "count", "numel", "num", "len", "length", "elements", "elems", "total", "nelem", "nelems")
_WORDS_ROWS = ("rows", "row", "height", "h", "m", "batch", "outer", "num_rows", "nrows")
_WORDS_COLS = ("cols", "col", "width", "w", "dim", "hidden", "inner", "k", "d", "num_cols", "ncols", "stride")
BLOCK = 256


# ---------------------------------------------------------------- novelty against the training corpus

def shingle_hashes(text: str, width: int = SHINGLE_WIDTH) -> set[int]:
    """64-bit hashes of the `width`-line windows of normalised lines (one window for shorter texts)."""
    from dice_lsp.training.corpus import normalized_lines
    lines = normalized_lines(text)
    windows = {"\n".join(lines[i:i + width]) for i in range(max(1, len(lines) - width + 1))}
    return {int.from_bytes(hashlib.blake2b(w.encode("utf-8"), digest_size=8).digest(), "little") for w in windows}


def corpus_shingles(downloads: Path = corpus.DOWNLOADS, cache: Path = CACHE) -> set[int]:
    """The shingles of every CUDA file of the training corpus (its sources' archives and the local CUDA
    include folder), cached as a sorted array of uint64."""
    import numpy as np

    path = cache / f"corpus_shingles{SHINGLE_WIDTH}.npy"
    if path.is_file():
        return set(np.load(path).tolist())
    found: set[int] = set()
    for src in corpus.SOURCES:
        if src.kind == "local":
            locations = [corpus.CUDA_INCLUDE.resolve()]
        elif src.kind == "pypi":
            locations = corpus._find_pypi(src, downloads / "pypi")
        else:
            locations = corpus._find_debian(src, downloads / "debian")
        for location in locations:
            before = len(found)
            for name, raw in corpus.iter_files(location):
                text = raw.decode("utf-8", "replace")
                if corpus.file_lang(name, text) == "cuda":
                    found |= shingle_hashes(text)
            LOG.info("corpus shingles: %s %s +%d", src.name, location.name, len(found) - before)
    cache.mkdir(parents=True, exist_ok=True)
    np.save(path, np.array(sorted(found), dtype=np.uint64))
    return found


def corpus_share(text: str, known: set[int]) -> float:
    hashes = shingle_hashes(text)
    return sum(h in known for h in hashes) / max(1, len(hashes))


# ---------------------------------------------------------------- parameters and launch specs

@dataclass(frozen=True)
class Param:
    name: str
    dtype: str
    pointer: bool
    const: bool


def parse_params(signature: str) -> list[Param] | None:
    """The kernel's parameters from the text between its parentheses; None when one cannot be passed."""
    parts = [p.strip() for p in _split_top(signature) if p.strip()]
    if parts == ["void"]:
        return []
    params = []
    for part in parts:
        if "=" in part or "[" in part or "&" in part or part.count("*") > 1:
            return None
        const = bool(re.search(r"\bconst\b", part.split("*")[0])) if "*" in part else False
        words = _QUALIFIER_WORDS.sub(" ", part).replace("*", " * ")
        match = re.fullmatch(r"\s*(?P<type>[A-Za-z_][\w\s]*?)\s*(?P<star>\*)?\s*(?P<name>[A-Za-z_]\w*)\s*", words)
        if match is None:
            return None
        base = " ".join(match["type"].split())
        table = POINTER_DTYPES if match["star"] else SCALAR_DTYPES
        if base not in table:
            return None
        params.append(Param(match["name"], table[base], bool(match["star"]), const))
    return params


def _split_top(text: str) -> list[str]:
    """Split at commas outside parentheses and angle brackets."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch in "(<":
            depth += 1
        elif ch in ")>":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return parts


def _role_of_int(name: str, layout: str) -> str:
    """The size expression an integer scalar gets from its name, under a layout ("1d" or "2d")."""
    lowered = name.lower()
    words = set(re.split(r"_|(?<=[a-z])(?=[A-Z])", name)) | {lowered}
    words = {w.lower() for w in words if w}
    if layout == "1d":
        return "n" if words & set(_WORDS_N) else ("64" if words & set(_WORDS_COLS) else "1")
    if words & set(_WORDS_ROWS):
        return "rows"
    if words & set(_WORDS_COLS):
        return "cols"
    return "rows*cols" if words & set(_WORDS_N) else "1"


@dataclass(frozen=True)
class Layout:
    """One generic way to launch a kernel: sizes, grid, block and the expression every buffer's shape is."""

    name: str
    sizes: dict[str, int]
    checks: tuple[dict[str, int], ...]
    grid: tuple[str, ...]
    block: tuple[int, ...]
    shape: str
    ints: str  # "1d" or "2d": how integer scalars are named


LAYOUTS = (
    Layout("flat", {"n": 1 << 16}, ({"n": 1000}, {"n": 4097}), ("cdiv(n, 256)",), (BLOCK,), "n", "1d"),
    Layout("grid2d", {"rows": 256, "cols": 256}, ({"rows": 37, "cols": 100}, {"rows": 65, "cols": 33}),
           ("cdiv(cols, 16)", "cdiv(rows, 16)"), (16, 16), "rows*cols", "2d"),
    Layout("flat2d", {"rows": 256, "cols": 256}, ({"rows": 37, "cols": 100}, {"rows": 65, "cols": 33}),
           ("cdiv(rows*cols, 256)",), (BLOCK,), "rows*cols", "2d"),
    Layout("rowblock", {"rows": 256, "cols": 256}, ({"rows": 37, "cols": 100}, {"rows": 65, "cols": 33}),
           ("rows",), (BLOCK,), "rows*cols", "2d"),
)


def spec_toml(kernel: str, params: Sequence[Param], layout: Layout, shared_bytes: int = 0) -> str:
    """The launch spec of `kernel` under `layout`, as the TOML inside a `dice:launch` comment."""
    def table(values: dict[str, int]) -> str:
        return "{ " + ", ".join(f"{k} = {v}" for k, v in values.items()) + " }"

    lines = [f'kernel = "{kernel}"', f"sizes = {table(layout.sizes)}",
             "check_sizes = [" + ", ".join(table(c) for c in layout.checks) + "]",
             "grid = [" + ", ".join(f'"{g}"' for g in layout.grid) + "]",
             "block = [" + ", ".join(str(b) for b in layout.block) + "]"]
    if shared_bytes:
        lines.append(f"shared_bytes = {shared_bytes}")
    lines.append("args = [")
    for p in params:
        if p.pointer:
            role = "in" if p.const else "inout"
            lines.append(f'  {{ name = "{p.name}", role = "{role}", dtype = "{p.dtype}", '
                         f'shape = ["{layout.shape}"] }},')
        else:
            value = "1" if p.dtype == "uint8" else (
                _role_of_int(p.name, layout.ints) if p.dtype.startswith(("int", "uint")) else "0.5")
            lines.append(f'  {{ name = "{p.name}", role = "scalar", dtype = "{p.dtype}", value = "{value}" }},')
    lines.append("]")
    return "\n".join(lines) + "\n"


def candidate_specs(kernel: str, params: Sequence[Param], body: str) -> list[str]:
    """The specs worth trying, most likely first: 2-D layouts first for a kernel that reads `.y` indices."""
    shared = 8192 if re.search(r"\bextern\s+__shared__", body) else 0
    two_d = bool(re.search(r"\b(?:threadIdx|blockIdx)\.y\b", body))
    order = [LAYOUTS[1], LAYOUTS[2], LAYOUTS[0], LAYOUTS[3]] if two_d else [LAYOUTS[0], LAYOUTS[2], LAYOUTS[3]]
    return [spec_toml(kernel, params, layout, shared) for layout in order]


def with_spec(text: str, toml: str) -> str:
    return f"{text}\n/* dice:launch\n{toml}*/\n"


# ---------------------------------------------------------------- standalone files

_DEFINE = re.compile(r"^[ \t]*#[ \t]*define[ \t]+(?P<name>[A-Za-z_]\w*)(?:.*\\\n)*.*$", re.MULTILINE)
_CONST_GLOBAL = re.compile(
    r"^(?:static\s+)?(?:__device__\s+)?(?:static\s+)?(?:constexpr|const)\s+(?:__device__\s+)?"
    r"(?:(?:unsigned|signed|long|short|int|float|double|char|size_t|u?int\d+_t|bool)\s+)+"
    r"(?P<name>[A-Za-z_]\w*)\s*=\s*[^;{}]+;[ \t]*$", re.MULTILINE)
_TYPE_NAMES = re.compile(r"\b(?:struct|class|union|enum(?:\s+class)?)\s+(?P<name>[A-Za-z_]\w*)"
                         r"|\btypedef\b[^;{}]*?\b(?P<alias>[A-Za-z_]\w*)\s*;|\busing\s+(?P<used>[A-Za-z_]\w*)\s*=")
_KEYWORDS = frozenset((
    "if", "else", "for", "while", "do", "switch", "case", "default", "break", "continue", "return", "goto",
    "sizeof", "const", "volatile", "static", "inline", "extern", "unsigned", "signed", "void", "int", "float",
    "double", "char", "bool", "long", "short", "auto", "true", "false", "struct", "class", "union", "enum",
    "typedef", "template", "typename", "using", "namespace", "new", "delete", "this", "__global__", "__device__",
    "__host__", "__forceinline__", "__noinline__", "__shared__", "__constant__", "__restrict__",
    "__launch_bounds__", "__syncthreads", "threadIdx", "blockIdx", "blockDim", "gridDim", "warpSize", "nullptr",
    "NULL", "size_t", "int8_t", "uint8_t", "int16_t", "uint16_t", "int32_t", "uint32_t", "int64_t", "uint64_t",
    "half", "__half", "__half2", "half2", "__nv_bfloat16", "float2", "float3", "float4", "int2", "int3", "int4",
    "uint2", "uint3", "uint4", "double2", "dim3", "constexpr", "signed_char", "INFINITY", "NAN", "FLT_MAX",
    "FLT_MIN", "DBL_MAX", "DBL_MIN", "INT_MAX", "INT_MIN", "UINT_MAX", "LLONG_MAX", "static_cast",
    "reinterpret_cast", "const_cast",
))


@dataclass
class FileTables:
    """What a source file defines at file level that a kernel may copy: macros, non-template `__device__`
    functions (all overloads of a name), constant globals; and the names of its types, which it may not."""

    macros: dict[str, tuple[int, str]] = field(default_factory=dict)
    functions: dict[str, list[tuple[int, str]]] = field(default_factory=dict)  # name -> [(offset, text)]
    constants: dict[str, tuple[int, str]] = field(default_factory=dict)
    types: set[str] = field(default_factory=set)


def file_tables(text: str) -> FileTables:
    from dice_lsp.cuda.functions import parse_functions
    tables = FileTables()
    for match in _DEFINE.finditer(text):
        tables.macros.setdefault(match["name"], (match.start(), match.group(0).strip()))
    for match in _CONST_GLOBAL.finditer(text):
        tables.constants.setdefault(match["name"], (match.start(), match.group(0).strip()))
    tables.types = {m["name"] or m["alias"] or m["used"] for m in _TYPE_NAMES.finditer(_strip_comments(text))}
    tables.types -= _KEYWORDS
    for fn in parse_functions(text):
        head = text[fn.head:fn.start]
        if fn.is_kernel or "__device__" not in fn.qualifiers or head.strip() or "::" in fn.name:
            continue
        tables.functions.setdefault(fn.name, []).append((fn.head, text[fn.head:fn.body_close + 1]))
    return tables


def _strip_comments(text: str) -> str:
    text = re.sub(r"/\*.*?\*/", lambda m: "\n" * m.group(0).count("\n"), text, flags=re.DOTALL)
    return re.sub(r"//[^\n]*", "", text)


def used_names(text: str) -> set[str]:
    code = re.sub(r'"(?:\\.|[^"\\])*"', '""', _strip_comments(text))
    return set(_IDENT.findall(code))



@cache
def cuda_names(include: Path = Path("/usr/local/cuda/include")) -> frozenset[str]:
    """Every name the CUDA headers declare as callable: the built-ins and math a kernel may call."""
    names: set[str] = set()
    for path in [*include.glob("*.h"), *include.glob("*.hpp"), *include.glob("crt/*.h"), *include.glob("crt/*.hpp")]:
        names.update(re.findall(r"\b([A-Za-z_]\w*)\s*\(", path.read_text(encoding="utf-8", errors="replace")))
    return frozenset(names)


@dataclass(frozen=True)
class Standalone:
    kernel: str
    text: str  # the whole file, without its launch spec
    params: tuple[Param, ...]
    body: str  # the kernel's definition, as written in `text`


def _signature_span(definition: str, name: str) -> tuple[int, int] | None:
    """Offsets of the text inside the parameter list's parentheses."""
    match = re.search(rf"\b{re.escape(name)}\s*\(", definition)
    if match is None:
        return None
    depth = 0
    for i in range(match.end() - 1, len(definition)):
        depth += {"(": 1, ")": -1}.get(definition[i], 0)
        if depth == 0:
            return match.end(), i
    return None


def _template_value(kind: str, name: str) -> str | None:
    """What a template parameter becomes in the standalone copy: every type `float`, a boolean `true`, an
    integer 32 when it names a warp, 256 when it names threads or a block (the layouts' block size), else 4."""
    lowered = name.lower()
    if kind in ("typename", "class"):
        return "float"
    if kind == "bool":
        return "true"
    if kind not in ("int", "unsigned", "unsigned int", "size_t", "int32_t", "uint32_t"):
        return None
    if "warp" in lowered:
        return "32"
    return "256" if re.search(r"thread|block|tpb", lowered) else "4"


def _instantiate(head: str, definition: str) -> str | None:
    """The definition itself (no template header), or a copy of a template with each parameter replaced,
    as a whole-word token, by `_template_value`; None for other templates."""
    if not head.strip():
        return definition
    match = re.fullmatch(r"template\s*<(?P<params>[^<>]*)>", head.strip())
    if match is None or not match["params"].strip():
        return None
    for param in match["params"].split(","):
        found = re.fullmatch(r"\s*(?P<kind>typename|class|bool|unsigned int|[A-Za-z_]\w*)\s+(?P<name>[A-Za-z_]\w*)\s*",
                             param)
        value = _template_value(found["kind"], found["name"]) if found else None
        if found is None or value is None:
            return None
        definition = re.sub(rf"\b{re.escape(found['name'])}\b", value, definition)
    return definition


def _dependencies(code: str, tables: FileTables, params: set[str]) -> tuple[list[tuple[int, str]], str | None]:
    """The file-level definitions `code` needs, recursively, in file order; or why it cannot stand alone."""
    chosen: dict[str, list[tuple[int, str]]] = {}
    pending = [code]
    while pending:
        for name in sorted(used_names(pending.pop()) - params - chosen.keys()):
            if name in tables.types:
                return [], f"uses a type of the file: {name}"
            found = (tables.functions.get(name) or ([tables.macros[name]] if name in tables.macros else [])
                     or ([tables.constants[name]] if name in tables.constants else []))
            if found:
                chosen[name] = found
                pending.extend(text for _, text in found)
    deps = sorted({item for items in chosen.values() for item in items})
    everything = "\n".join([code, *(text for _, text in deps)])
    reason = _foreign_use(everything, set(chosen) | params)
    return deps, reason


def _foreign_use(code: str, local: set[str]) -> str | None:
    """Why `code` needs something from outside the file and CUDA (a namespace, a template, a project
    function), or None."""
    stripped = re.sub(r'"(?:\\.|[^"\\])*"', '""', _strip_comments(code))
    if "::" in stripped:
        return "uses a namespace"
    declared = set(re.findall(r"\b([A-Za-z_]\w*)\s*\([^;{}]*\)\s*(?:const\s*)?\{", stripped))
    for name in re.findall(r"\b([A-Za-z_]\w*)\s*<[^<>;()]*>\s*\(", stripped):
        if name not in local | _KEYWORDS:
            return f"calls a template: {name}"
    for name in set(re.findall(r"\b([A-Za-z_]\w*)\s*\(", stripped)):
        if name not in local | declared | _KEYWORDS and name not in cuda_names():
            return f"calls a function that is not in the file: {name}"
    return None


def _includes(code: str) -> list[str]:
    wanted = ["cuda_runtime.h"]
    if re.search(r"\b(?:half2?|__half2?|__float2half\w*|__half2float|__h\w+)\b", code):
        wanted.append("cuda_fp16.h")
    if re.search(r"\b(?:__nv_bfloat16\w*|__float2bfloat16\w*|__bfloat162float)\b", code):
        wanted.append("cuda_bf16.h")
    if re.search(r"\bu?int(?:8|16|32|64)_t\b", code):
        wanted.append("stdint.h")
    if re.search(r"\b(?:sqrtf?|expf?|logf?|powf?|tanhf?|fabsf?|floorf?|ceilf?|sinf?|cosf?|erff?|fmaxf?|fminf?|"
                 r"roundf?|rsqrtf?|log1pf?|expm1f?|isnan|isinf|INFINITY|NAN)\b", code):
        wanted.append("math.h")
    return wanted


def standalone(text: str, kernel_start: int, tables: FileTables, origin: str, license_: str) -> Standalone | str:
    """The self-contained file for the kernel defined at `kernel_start` (a Function.start of `text`), or
    why there is none."""
    from dice_lsp.cuda.functions import parse_functions
    fn = next((f for f in parse_functions(text) if f.start == kernel_start and f.is_kernel), None)
    if fn is None:
        return "not a kernel"
    if fn.body_close - fn.body_open > MAX_BODY_CHARS:
        return "body too long"
    definition = _instantiate(text[fn.head:fn.start], text[fn.start:fn.body_close + 1])
    if definition is None:
        return "template with a parameter other than a type, bool or integer"
    span = _signature_span(definition, fn.name)
    params = parse_params(_strip_comments(definition[span[0]:span[1]])) if span else None
    if params is None:
        return "a parameter the harness cannot pass"
    if not any(p.pointer and not p.const for p in params):
        return "no writable buffer"
    deps, reason = _dependencies(definition, tables, {p.name for p in params})
    if reason:
        return reason
    dep_text = "\n\n".join(t for _, t in deps)
    code = "\n".join([dep_text, definition])
    header = [f"// Kernel `{fn.name}` of {origin.rsplit(':', 1)[0]}, made standalone for CUDA-Infill.",
              f"// License: {license_} (the source's).", f"// SPDX-License-Identifier: {license_}"]
    parts = ["\n".join(header), "\n".join(f"#include <{h}>" for h in _includes(code))]
    if dep_text:
        parts.append(dep_text)
    parts.append(definition)
    return Standalone(fn.name, "\n\n".join(parts) + "\n", tuple(params), definition)


# ---------------------------------------------------------------- holes

ExecutableHole = tuple[suite.Kind, int, int, str, bool]
_LONE = re.compile(r"^[{}\s;]*(?:else)?[{}\s;]*$")


def _statement_lines(text: str, open_: int, close: int) -> list[tuple[int, int]]:
    """(first, last + 1) non-blank offsets of each statement line strictly inside a body: no comment or
    preprocessor line, no lone brace."""
    found = []
    offset = text.index("\n", open_) + 1 if "\n" in text[open_:close] else close
    while offset < close:
        end = text.find("\n", offset, close)
        end = close if end < 0 else end
        line = text[offset:end]
        stripped = line.strip()
        if stripped and not stripped.startswith(("//", "/*", "*", "#")) and not _LONE.match(stripped):
            first = offset + len(line) - len(line.lstrip())
            found.append((first, offset + len(line.rstrip())))
        offset = end + 1
    return found


def _balanced(text: str) -> bool:
    return all(text.count(a) == text.count(b) for a, b in ("{}", "()", "[]"))


def _midline_starts(text: str, first: int, last: int) -> list[int]:
    """Token boundaries inside a line with at least 4 characters before and 3 non-blank after."""
    starts = []
    for i in range(first + 4, last):
        before, here = text[i - 1], text[i]
        word_before, word_here = before.isalnum() or before == "_", here.isalnum() or here == "_"
        boundary = before.isspace() != here.isspace() or word_before != word_here
        if boundary and not here.isspace() and len(text[i:last].replace(" ", "")) >= 3:
            starts.append(i)
    return starts


def _cut_holes(text: str, rng: random.Random) -> list[ExecutableHole]:
    """Holes of the four kinds in each kernel body of `text`, up to HOLES_PER_KIND of each per kernel."""
    from dice_lsp.cuda.functions import parse_functions
    holes: list[ExecutableHole] = []
    for fn in (f for f in parse_functions(text) if f.is_kernel):
        template = bool(text[fn.head:fn.start].strip())
        lines = _statement_lines(text, fn.body_open, fn.body_close)
        for first, last in rng.sample(lines, min(HOLES_PER_KIND, len(lines))):
            holes.append(("line", first, last, fn.name, template))
        mids = [(s, last) for first, last in lines if (starts := _midline_starts(text, first, last))
                for s in [rng.choice(starts)]]
        for start, last in rng.sample(mids, min(HOLES_PER_KIND, len(mids))):
            holes.append(("midline", start, last, fn.name, template))
        spans = [(lines[i][0], lines[j][1]) for i in range(len(lines)) for j in range(i + 1, min(i + 5, len(lines)))
                 if text[lines[i][0]:lines[j][1]].count("\n") == j - i and _balanced(text[lines[i][0]:lines[j][1]])]
        for start, end in rng.sample(spans, min(HOLES_PER_KIND, len(spans))):
            holes.append(("lines", start, end, fn.name, template))
        if lines:
            holes.append(("body", fn.body_open + 1, fn.body_close, fn.name, template))
    return holes


# ---------------------------------------------------------------- extract (CPU)

@dataclass
class StandaloneKernel:
    key: str  # "source:path:kernel"
    source: str
    path: str
    license: str
    split: str
    kernel: str
    symbol: str
    text: str  # the standalone file without its spec; hole offsets index it (the spec goes after)
    specs: list[str]
    holes: list[list[Any]]  # [kind, start, end]


def source_trees(downloads: Path = build.DOWNLOADS, root: Path = TREES) -> Iterator[tuple[str, str, Path]]:
    """(source name, license, unpacked top folder) of each pinned source of the suite (`build.SOURCES`),
    fetched and checked against its pin when missing, unpacked once under `root`."""
    for pin in build.SOURCES:
        folder = root / pin.name
        if not folder.is_dir():
            archive = build.fetch(pin, downloads)
            scratch = root / f".{pin.name}.partial"
            shutil.rmtree(scratch, ignore_errors=True)
            scratch.mkdir(parents=True)
            with tarfile.open(archive, mode="r:*") as tar:
                tar.extractall(scratch, filter="data")
            scratch.rename(folder)
        inside = list(folder.iterdir())
        yield pin.name, pin.license, inside[0] if len(inside) == 1 and inside[0].is_dir() else folder


def compile_cubin(text: str, nvcc: str = "nvcc", arch: str = CompileFlags.arch) -> tuple[bool, str, str]:
    """(ok, nvcc's messages, the kernel's symbol) for a cubin of `text`."""
    with run_folder("exec") as scratch:
        path = Path(scratch) / "kernel.cu"
        path.write_text(text, encoding="utf-8")
        try:
            proc = run_tool([nvcc, "-cubin", f"-arch={arch}", "-Xptxas", "-v", "-o", str(path.with_suffix(".cubin")),
                             str(path)], Path(scratch), 120)
        except subprocess.TimeoutExpired:
            return False, "nvcc timed out", ""
        output = proc.stderr + proc.stdout
        symbols = re.findall(r"Compiling entry function '(\w+)'", output)
        return proc.returncode == 0, output, symbols[0] if symbols else ""


def extract(known: set[int], rng: random.Random, stats: dict[str, Counter[str]],
            downloads: Path = build.DOWNLOADS) -> list[StandaloneKernel]:
    """Standalone, novel, compiling kernels of every source, with their candidate specs and holes."""
    from dice_lsp.cuda.functions import parse_functions
    made: list[tuple[StandaloneKernel, Standalone]] = []
    seen: set[str] = set()
    origins: set[str] = set()
    for name, license_, folder in source_trees(downloads):
        for path in sorted(p for p in folder.rglob("*") if p.suffix in SOURCE_EXTS and p.is_file()):
            text = path.read_text(encoding="utf-8", errors="replace")
            if "__global__" not in text or len(text) > 400_000:
                continue
            relative = str(path.relative_to(folder))
            tables = file_tables(text)
            for fn in (f for f in parse_functions(text) if f.is_kernel):
                stats[name]["kernels"] += 1
                origin = f"{name}:{relative}:{fn.name}"
                if origin in origins:  # overloads of one name: the first stands for them
                    stats[name]["duplicate"] += 1
                    continue
                origins.add(origin)
                made_one = standalone(text, fn.start, tables, origin, license_)
                if isinstance(made_one, str):
                    stats[name][f"refused: {made_one.split(':')[0]}"] += 1
                    continue
                digest = hashlib.sha256(" ".join(made_one.text.split()).encode()).hexdigest()
                if digest in seen:
                    stats[name]["duplicate"] += 1
                    continue
                seen.add(digest)
                if corpus_share(made_one.body, known) > NOVELTY_LIMIT:
                    stats[name]["in corpus"] += 1
                    continue
                stats[name]["standalone"] += 1
                made.append((StandaloneKernel(origin, name, relative, license_, suite.split_of(name, relative), fn.name,
                                       "", made_one.text, candidate_specs(fn.name, made_one.params, made_one.body),
                                       []), made_one))
    with ThreadPoolExecutor(2) as pool:
        built = list(pool.map(lambda pair: compile_cubin(pair[0].text), made))
    kept = []
    for (candidate, _), (ok, output, symbol) in zip(made, built, strict=True):
        if not ok or not symbol:
            stats[candidate.source]["compile fails"] += 1
            LOG.debug("%s does not compile: %s", candidate.key, output[-300:])
            continue
        stats[candidate.source]["compiles"] += 1
        candidate.symbol = symbol
        candidate.holes = [[kind, start, end] for kind, start, end, _, _ in _cut_holes(candidate.text, rng)]
        kept.append(candidate)
    return kept


def write_candidates(path: Path, candidates: Iterable[StandaloneKernel]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(path, "wt", encoding="utf-8") as handle:
        for candidate in candidates:
            handle.write(json.dumps(asdict(candidate)) + "\n")


def read_candidates(path: Path) -> list[StandaloneKernel]:
    with gzip.open(path, "rt", encoding="utf-8") as handle:
        return [StandaloneKernel(**json.loads(line)) for line in handle if line.strip()]


# ---------------------------------------------------------------- verify (GPU)

ITEM_TIMEOUT_S = 40.0
STICKY = re.compile(r"CUDA_ERROR|CUDA error")  # any driver error: most kernel faults leave the context dead
LANES = 12


class Item(TypedDict):
    """One check a worker process runs (sent as JSON): the kernel `symbol` of `cubin` against the one of
    `reference` under the launch `spec` (TOML); with `effect`, it must also change its buffers."""

    id: str
    spec: str
    cubin: str
    reference: str
    symbol: str
    effect: bool


def check_item(item: Item, driver: Any) -> str:
    """'' when the candidate cubin verifies against the reference under the spec (and, with `effect`,
    changes at least 1% of a writable buffer at the timed sizes); else why not."""
    import torch

    from dice_lsp.errors import DiceError
    from dice_lsp.harness.kernel_level import Kernel, _check_once
    from dice_lsp.harness.spec import parse_spec
    from dice_lsp.harness.verify import TORCH_DTYPES, random_tensor
    try:
        spec = parse_spec(item["spec"])
        candidate = Kernel(driver, spec, item["cubin"], item["symbol"])
        reference = Kernel(driver, spec, item["reference"], item["symbol"])
        generator = torch.Generator(device="cuda").manual_seed(0)
        errors = {"max_abs_err": 0.0, "max_rel_err": 0.0}
        for sizes in spec.verification_sizes():
            for trial in range(3):
                _check_once(driver, spec, candidate, reference, sizes, trial, generator, errors)
        if not item.get("effect"):
            return ""
        tensors = {a.name: random_tensor((a.numel(spec.sizes),), TORCH_DTYPES[a.dtype], 0, generator)
                   for a in spec.args if a.role != "scalar"}
        before = {name: t.clone() for name, t in tensors.items()}
        candidate.launch(tensors, dict(spec.sizes))
        driver.synchronize()
        changed = max((float((~((tensors[a.name] == before[a.name]) | (tensors[a.name] != tensors[a.name]))).float()
                              .mean()) for a in spec.args if a.role not in ("scalar", "in")), default=0.0)
        return "" if changed >= 0.01 else f"changes {changed:.2%} of its buffers"
    except (DiceError, RuntimeError) as exc:  # torch's RuntimeError: an op it lacks for a dtype, or a fault
        return str(exc)[:300] or "failed"


def worker(items_path: Path, results_path: Path) -> None:
    """Check items in order, one JSON line each ("start" first, so a crash names its culprit); stop after a
    kernel fault."""
    import torch

    from dice_lsp.harness.cuda_driver import Driver
    items = json.loads(items_path.read_text())
    torch.empty(1, device="cuda")
    driver = Driver()
    with results_path.open("a") as out:
        for item in items:
            out.write(json.dumps({"start": item["id"]}) + "\n")
            out.flush()
            error = check_item(item, driver)
            out.write(json.dumps({"id": item["id"], "error": error}) + "\n")
            out.flush()
            if STICKY.search(error):  # a kernel fault leaves the context unusable: the lane starts a new worker
                return


def _run_lane(items: list[Item], scratch: Path, lane: int) -> dict[str, str]:
    """Run `items` in worker processes, replacing a worker that dies or hangs (its item fails)."""
    results: dict[str, str] = {}
    round_ = 0
    while items:
        round_ += 1
        items_path, results_path = scratch / f"lane{lane}-{round_}.json", scratch / f"lane{lane}-{round_}.jsonl"
        items_path.write_text(json.dumps(items))
        results_path.touch()
        log_path = scratch / f"lane{lane}-{round_}.log"
        with log_path.open("w") as log:
            proc = subprocess.Popen([sys.executable, __file__, "worker", str(items_path), str(results_path)],
                                    stdout=log, stderr=log)
            size, last_change = 0, time.monotonic()
            while proc.poll() is None:
                time.sleep(0.2)
                now_size = results_path.stat().st_size
                if now_size != size:
                    size, last_change = now_size, time.monotonic()
                elif time.monotonic() - last_change > ITEM_TIMEOUT_S:
                    proc.kill()
                    proc.wait()
        lines = log_path.read_text(errors="replace").strip().splitlines()
        why = f"the worker died or hung: {lines[-1][:200] if lines else ''}"
        rows = [json.loads(line) for line in results_path.read_text().splitlines()]
        if not rows:  # the worker cannot even start: every item fails alike
            return {**results, **{i["id"]: why for i in items}}
        started = None
        for row in rows:
            if "start" in row:
                started = row["start"]
            else:
                results[row["id"]] = row["error"]
                started = None
        if started is not None:
            results[started] = why
        items = [i for i in items if i["id"] not in results]
    return results


def run_items(items: list[Item], scratch: Path) -> dict[str, str]:
    lanes = [items[i::LANES] for i in range(LANES)]
    with ThreadPoolExecutor(LANES) as pool:
        done = list(pool.map(lambda pair: _run_lane(pair[1], scratch, pair[0]), enumerate(lanes)))
    return {k: v for part in done for k, v in part.items()}


def _build_all(texts: dict[str, str], scratch: Path, workers: int = 16) -> dict[str, tuple[bool, str]]:
    """Compile each text to `scratch/<id>.cubin`; id -> (ok, cubin path)."""
    def build(pair: tuple[str, str]) -> tuple[str, tuple[bool, str]]:
        name, text = pair
        target = scratch / f"{hashlib.sha1(name.encode()).hexdigest()}.cubin"
        source = target.with_suffix(".cu")
        source.write_text(text, encoding="utf-8")
        proc = run_tool(["nvcc", "-cubin", "-arch=sm_90", "-o", str(target), str(source)], scratch, 180)
        return name, (proc.returncode == 0, str(target))
    with ThreadPoolExecutor(workers) as pool:
        return dict(pool.map(build, texts.items()))


@dataclass
class Verdict:
    """A candidate's GPU verdict: the spec that verified (its index; None: none did), each spec's failure
    ('' for one that verified), and per hole (its index as text) what deleting its text did: `passes`,
    `does not compile` or `fails: why`. The verdicts file holds `to_json` per candidate key."""

    spec: int | None
    spec_errors: list[str] = field(default_factory=list)
    holes: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"spec": self.spec, "spec_errors": self.spec_errors, "holes": self.holes}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Verdict:
        return cls(data["spec"], list(data.get("spec_errors", [])), dict(data.get("holes", {})))


def write_verdicts(path: Path, verdicts: dict[str, Verdict]) -> None:
    path.write_text(json.dumps({key: v.to_json() for key, v in verdicts.items()}, indent=1, sort_keys=True))


def read_verdicts(path: Path) -> dict[str, Verdict]:
    return {key: Verdict.from_json(data) for key, data in json.loads(path.read_text()).items()}


def verify(candidates: list[StandaloneKernel], out: Path) -> dict[str, Verdict]:
    """Verdicts for every candidate: the accepted spec's index (or None, with each spec's failure), and for
    each hole whether deleting it breaks the kernel (kept) or not."""
    scratch = Path(tempfile.mkdtemp(prefix="dice-exec-gpu-"))
    started = time.monotonic()
    bases = _build_all({c.key: c.text for c in candidates}, scratch)
    LOG.info("built %d candidates in %.0f s", len(bases), time.monotonic() - started)
    items = [Item(id=f"{c.key}#spec{i}", spec=spec, cubin=bases[c.key][1], reference=bases[c.key][1],
                  symbol=c.symbol, effect=True)
             for c in candidates if bases[c.key][0] for i, spec in enumerate(c.specs)]
    spec_results = run_items(items, scratch)
    LOG.info("checked %d specs in %.0f s", len(items), time.monotonic() - started)
    verdicts: dict[str, Verdict] = {}
    for c in candidates:
        errors = [spec_results.get(f"{c.key}#spec{i}", "not built") for i in range(len(c.specs))]
        verdicts[c.key] = Verdict(next((i for i, e in enumerate(errors) if not e), None), errors)
    out.parent.mkdir(parents=True, exist_ok=True)
    write_verdicts(out, verdicts)  # kept should the hole checks not finish
    accepted_ones = [c for c in candidates if verdicts[c.key].spec is not None]
    variants = {f"{c.key}#hole{h}": c.text[:start] + c.text[end:]
                for c in accepted_ones for h, (_, start, end) in enumerate(c.holes)}
    built = _build_all(variants, scratch)
    LOG.info("built %d hole variants in %.0f s", len(built), time.monotonic() - started)
    hole_items = []
    for c in accepted_ones:
        spec = verdicts[c.key].spec
        assert spec is not None
        for h in range(len(c.holes)):
            ok, cubin = built[f"{c.key}#hole{h}"]
            if not ok:
                verdicts[c.key].holes[str(h)] = "does not compile"
                continue
            hole_items.append(Item(id=f"{c.key}#hole{h}", spec=c.specs[spec], cubin=cubin,
                                   reference=bases[c.key][1], symbol=c.symbol, effect=False))
    hole_results = run_items(hole_items, scratch)
    for item in hole_items:
        key, hole = item["id"].rsplit("#hole", 1)
        error = hole_results.get(item["id"], "not run")
        verdicts[key].holes[hole] = f"fails: {error}" if error else "passes"
    LOG.info("checked %d hole variants in %.0f s", len(hole_items), time.monotonic() - started)
    write_verdicts(out, verdicts)
    return verdicts


# ---------------------------------------------------------------- write

def kept_holes(candidate: StandaloneKernel, verdict: Verdict) -> list[tuple[str, int, int]]:
    """The load-bearing holes: deleting their text breaks the build or the verification."""
    return [(kind, start, end) for h, (kind, start, end) in enumerate(candidate.holes)
            if verdict.holes.get(str(h), "passes") != "passes"]


def accepted_spec(verdicts: dict[str, Verdict], candidate: StandaloneKernel) -> int | None:
    """The index of the candidate's spec that verified; None when none did or it has no verdict."""
    verdict = verdicts.get(candidate.key)
    return None if verdict is None else verdict.spec


def write_part(candidates: list[StandaloneKernel], verdicts: dict[str, Verdict], root: Path = suite.SUITE_ROOT,
               seed: int = 17) -> dict[str, Counter[str]]:
    """Write the executable part of both splits; per split, the count of files and of holes per kind."""
    counts: dict[str, Counter[str]] = {split: Counter() for split in suite.SPLITS}
    for split in suite.SPLITS:
        files: list[suite.SuiteFile] = []
        holes: list[tuple[str, suite.Kind, int, int, str]] = []
        for c in candidates:
            spec = accepted_spec(verdicts, c)
            kept = kept_holes(c, verdicts[c.key]) if c.split == split and spec is not None else []
            if spec is None or not kept:
                continue
            file_id = f"exec/{len(files):04d}"
            text = with_spec(c.text, c.specs[spec])
            files.append(suite.SuiteFile(file_id, c.source, c.path, c.license, text, True, launch=True, origin=c.key))
            holes.extend((file_id, kind, start, end, c.kernel) for kind, start, end in kept)  # type: ignore[misc]
        random.Random(seed).shuffle(holes)
        rows = []
        for kind in suite.KINDS:
            for index, (file_id, k, start, end, kernel) in enumerate(h for h in holes if h[1] == kind):
                rows.append(suite.SuiteHole(f"exec-{kind}/{index:05d}", k, file_id, start, end, kernel, False,
                                            executable=True))
                counts[split][kind] += 1
        counts[split]["files"] = len(files)
        files_path, holes_path = suite.part_paths(split, "executable", root)
        suite.write_jsonl(files_path, files)
        suite.write_jsonl(holes_path, rows)
    return counts


LEFT_OUT = ("refused", "in corpus", "duplicate", "compile fails")


def report(stats: dict[str, dict[str, int]], candidates: list[StandaloneKernel], verdicts: dict[str, Verdict],
           counts: dict[str, Counter[str]], gpu_command: str) -> str:
    """EXECUTABLE.md: what was tried, compiled and verified per source, and the holes kept per split."""
    verified: Counter[str] = Counter(c.source for c in candidates if accepted_spec(verdicts, c) is not None)
    lines = ["# CUDA-Infill, executable part", "",
             "Generated by `python -m dice_lsp.training.suite_executable write`. Kernels of the pinned sources made "
             "standalone, compiled with nvcc (sm_90 cubin), launched under a generic spec that verified on an "
             "H200; holes kept only when deleting their text breaks the build or the verification. The GPU "
             "run's verdicts (spec accepted, each spec's failure, each hole's outcome): "
             "`executable.verdicts.json.gz`.", "",
             "| source | kernels | standalone + novel | compile | verified spec |",
             "| --- | ---: | ---: | ---: | ---: |"]
    for name in sorted(stats):
        s = stats[name]
        lines.append(f"| {name} | {s.get('kernels', 0)} | {s.get('standalone', 0)} | {s.get('compiles', 0)} | "
                     f"{verified.get(name, 0)} |")
    refusals: Counter[str] = Counter()
    for s in stats.values():
        refusals.update({k: v for k, v in s.items() if k.startswith(LEFT_OUT)})
    lines += ["", "Kernels left out: " + ", ".join(f"{k} {v}" for k, v in sorted(refusals.items())) + ".", "",
              "| split | files | " + " | ".join(suite.KINDS) + " | holes |", "| --- | ---: |" + " ---: |" * 5]
    for split in suite.SPLITS:
        c = counts[split]
        lines.append(f"| {split} | {c['files']} | " + " | ".join(str(c[k]) for k in suite.KINDS)
                     + f" | {sum(c[k] for k in suite.KINDS)} |")
    outcomes = Counter(("kept: does not compile without its text" if r == "does not compile" else
                        "dropped: the kernel still verifies without its text" if r == "passes" else
                        "kept: fails verification without its text")
                       for v in verdicts.values() for r in v.holes.values())
    lines += ["", "Holes cut in verified kernels: " + ", ".join(f"{k} {n}" for k, n in sorted(outcomes.items())) + "."]
    layouts: Counter[str] = Counter()
    for candidate in candidates:
        index = accepted_spec(verdicts, candidate)
        if index is not None:
            layouts[_layout_name(candidate.specs[index])] += 1
    lines += ["", "Accepted launch layouts: " + ", ".join(f"{k} {v}" for k, v in sorted(layouts.items())) + ".",
              "", "GPU command (one call, nvidia-h200):", "", "```", gpu_command, "```", ""]
    return "\n".join(lines)


def _layout_name(toml: str) -> str:
    grid = re.search(r"^grid = (.*)$", toml, re.MULTILINE)
    return next((layout.name for layout in LAYOUTS if grid and grid.group(1) == "[" + ", ".join(
        f'"{g}"' for g in layout.grid) + "]" and f'"{layout.shape}"' in toml), "other")


# ---------------------------------------------------------------- command line

def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m dice_lsp.training.suite_executable",
                                     description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    ex = sub.add_parser("extract", help="standalone kernels, specs and holes (CPU)")
    ex.add_argument("--out", type=Path, required=True, help="candidates .jsonl.gz")
    ex.add_argument("--stats", type=Path, required=True, help="per-source counts (JSON)")
    ex.add_argument("--seed", type=int, default=17)
    ex.add_argument("--downloads", type=Path, default=build.DOWNLOADS, help="where the pinned archives are")
    ve = sub.add_parser("verify", help="verify specs and holes on the GPU")
    ve.add_argument("--candidates", type=Path, required=True)
    ve.add_argument("--out", type=Path, required=True, help="verdicts (JSON)")
    wo = sub.add_parser("worker", help="internal: check items in one process")
    wo.add_argument("items", type=Path)
    wo.add_argument("results", type=Path)
    wr = sub.add_parser("write", help="the suite's executable part and EXECUTABLE.md")
    wr.add_argument("--candidates", type=Path, required=True)
    wr.add_argument("--stats", type=Path, required=True)
    wr.add_argument("--verdicts", type=Path, required=True)
    wr.add_argument("--gpu-command", default="")
    ns = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(message)s")
    if ns.command == "extract":
        stats: dict[str, Counter[str]] = defaultdict(Counter)
        candidates = extract(corpus_shingles(), random.Random(ns.seed), stats, ns.downloads)
        write_candidates(ns.out, candidates)
        ns.stats.write_text(json.dumps(stats, indent=1, sort_keys=True))
        LOG.info("%d candidates, %d holes", len(candidates), sum(len(c.holes) for c in candidates))
    elif ns.command == "verify":
        verdicts = verify(read_candidates(ns.candidates), ns.out)
        LOG.info("%d of %d candidates have a verified spec", sum(v.spec is not None for v in verdicts.values()),
                 len(verdicts))
    elif ns.command == "worker":
        worker(ns.items, ns.results)
    else:
        candidates = read_candidates(ns.candidates)
        verdicts = read_verdicts(ns.verdicts)
        counts = write_part(candidates, verdicts)
        (suite.SUITE_ROOT / "EXECUTABLE.md").write_text(
            report(json.loads(ns.stats.read_text()), candidates, verdicts, counts, ns.gpu_command))
        LOG.info("written: %s", {split: dict(c) for split, c in counts.items()})
    return 0


if __name__ == "__main__":
    sys.exit(main())
