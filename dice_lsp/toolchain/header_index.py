"""The names the CUDA/C++ headers declare, as this machine's nvcc sees them: the outer scope of the completion's
symbol table (`dice_lsp.completion.checks.symbols`).

A fixed list of headers (`HEADERS`) goes through `nvcc -E -x cu` of a generated stub that includes them, and
their macro names through `nvcc -E -x cu -Xcompiler -dM`: no text of the user's ever reaches nvcc here. The
declarations are read from the preprocessed text by `header_declarations` (tree-sitter, outside function bodies
and parameter lists, by the same reading of declarators as the user's file: `dice_lsp.cuda.names`) into a
`HeaderIndex`. When the stub fails, each header is tried alone and the ones that fail are skipped.
The result is cached as a gzipped sorted list under the user's cache folder, keyed by nvcc's path, its
`--version` output and the header list; without nvcc the package's fallback list (`header_names.txt.gz`, built
with `python -m dice_lsp.toolchain.header_index --write-fallback`) is used. `header_names_now` never waits: the
fallback while a background thread builds nvcc's.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import logging
import re
import subprocess
import sys
import threading
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cache, cached_property
from pathlib import Path

from dice_lsp.cuda.functions import parser
from dice_lsp.cuda.names import FIELD, declared_by, parameter_counts, words
from dice_lsp.errors import DiceError
from dice_lsp.toolchain.cache import cache_root, nvcc_version, replace_atomically
from dice_lsp.toolchain.nvcc import find_nvcc
from dice_lsp.toolchain.scratch import run_folder

LOG = logging.getLogger(__name__)

HEADERS = ("cuda_runtime.h", "cuda.h", "cuda_fp16.h", "cuda_bf16.h", "cuda_fp8.h", "cooperative_groups.h",
           "cooperative_groups/reduce.h", "mma.h", "cuda/pipeline", "cuda/barrier", "cub/cub.cuh",
           "thrust/device_vector.h", "thrust/host_vector.h", "thrust/reduce.h", "thrust/sort.h",
           "thrust/transform.h", "curand_kernel.h", "math_constants.h", "cstdio", "cstdlib", "cstdint", "cmath",
           "cfloat", "climits", "cstring", "algorithm", "utility", "type_traits", "limits", "vector", "array",
           "tuple", "memory")
FALLBACK = Path(__file__).with_name("header_names.txt.gz")
INDEX_VERSION = "3"  # part of the cache key: bump when the way names are collected changes
_SAFE_PATH = re.compile(r"[\w./+-]+")
_WORD = re.compile(rb"[A-Za-z_][A-Za-z0-9_]*")
PREPROCESS_TIMEOUT = 300.0


@dataclass(frozen=True)
class HeaderIndex:
    """What the CUDA/C++ headers declare, by where a name may be used from.

    globals: declared at global scope (functions, types, variables, enumerators, names a global `using`
        brings in) and macro names: what an unqualified variable of a kernel may be (`stderr`, `cudaSuccess`);
    scoped: declared only inside a namespace (`thrust::reduce`, `std::size`): reachable qualified, called,
        or after a `using namespace`;
    fields: members of classes and structs (after `.` or `->`);
    arities: (name, fewest, most) argument counts of the functions declared at global scope, each over all its
        declarations (`cudaMemcpy` 4-4, `__shfl_down_sync` 3-4, `printf` 1-inf); none for a macro's name.
    Parameters and locals of the headers' own functions are not names a user's code can use, and are left out.
    """

    globals: frozenset[str] = frozenset()
    scoped: frozenset[str] = frozenset()
    fields: frozenset[str] = frozenset()
    arities: frozenset[tuple[str, int, float]] = frozenset()

    @cached_property
    def arity(self) -> dict[str, tuple[int, float]]:
        return {name: (fewest, most) for name, fewest, most in self.arities}

    def __contains__(self, name: object) -> bool:
        """Declared anywhere at namespace scope (globally or in a namespace)."""
        return name in self.globals or name in self.scoped

    def lines(self) -> list[str]:
        """The on-disk form: `name` (global), `::name` (in a namespace only), `.name` (a member), `(name 3 4` (a
        global function's argument counts)."""
        return sorted([*self.globals, *(f"::{n}" for n in self.scoped), *(f".{n}" for n in self.fields),
                       *(f"({n} {low} {high}" for n, low, high in self.arities)])

    @classmethod
    def from_lines(cls, lines: Iterable[str]) -> HeaderIndex:
        found: dict[str, set[str]] = {"": set(), ":": set(), ".": set()}
        arities: set[tuple[str, int, float]] = set()
        for line in lines:
            if line.startswith("("):
                name, low, high = line[1:].split()
                arities.add((name, int(low), float(high)))
            elif line and not line.startswith("#"):
                kind = "." if line[0] == "." else ":" if line.startswith("::") else ""
                found[kind].add(line.lstrip(".:"))
        return cls(frozenset(found[""]), frozenset(found[":"]), frozenset(found["."]), frozenset(arities))


NO_HEADERS = HeaderIndex()  # no header read: what checks without the headers' names use

_LINE_MARKER = re.compile(rb"^#.*$", re.MULTILINE)
_DEFINE = re.compile(rb"^\s*#\s*define\s+([A-Za-z_]\w*)(.*)$", re.MULTILINE)
_ATTRIBUTE = re.compile(rb"__attribute__\s*\(\((?:[^()]|\((?:[^()]|\([^()]*\))*\))*\)\)")
# subtrees whose names are not declarations a user's code can reach: bodies, parameters, expressions in types
_NOT_SCOPE = frozenset({"compound_statement", "parameter_list", "template_parameter_list", "lambda_expression",
                        "field_initializer_list", "requires_clause", "requires_expression", "decltype",
                        "trailing_return_type", "noexcept"})


def header_declarations(preprocessed: bytes, macros: bytes) -> HeaderIndex:
    """The names the preprocessed headers declare (tree-sitter, outside function bodies and parameter lists;
    `__attribute__((...))` blanked first: tree-sitter misreads `enum __attribute__((x)) cudaError {`), and the
    macro names of `macros` (`-dM` output)."""
    data = _ATTRIBUTE.sub(lambda match: b" " * len(match.group()), _LINE_MARKER.sub(b"", preprocessed))
    found: dict[str, set[str]] = {"global": set(), "scoped": set(), "field": set()}
    counts: dict[str, tuple[int, float]] = {}
    stack = [(parser().parse(data).root_node, False)]
    while stack:
        node, in_namespace = stack.pop()
        if node.type in _NOT_SCOPE:
            continue
        if node.type == "function_declarator" and not in_namespace and (arity := parameter_counts(node)):
            name_node = node.child_by_field_name("declarator")
            if name_node is not None and name_node.type == "identifier":
                function = data[name_node.start_byte:name_node.end_byte].decode("ascii", "replace")
                low, high = counts.get(function, arity)
                counts[function] = (min(low, arity[0]), max(high, arity[1]))
        for name in declared_by(node):
            if _WORD.fullmatch(word := data[name.start_byte:name.end_byte]):  # not a MISSING node's empty name
                where = "field" if name.type == FIELD else "scoped" if in_namespace else "global"
                found[where].add(word.decode("ascii"))
        if node.type == "using_declaration" and not in_namespace:  # `using std::isnan;` at global scope
            found["global"].update(words(data[node.start_byte:node.end_byte].rsplit(b"::", 1)[-1]))
        inside = in_namespace or node.type == "namespace_definition"
        stack.extend((child, inside) for child in node.children)
    defined = {match.group(1).decode("ascii") for match in _DEFINE.finditer(macros)}
    found["global"].update(defined)
    return HeaderIndex(frozenset(found["global"]), frozenset(found["scoped"] - found["global"]),
                       frozenset(found["field"]),
                       frozenset((name, low, high) for name, (low, high) in counts.items() if name not in defined))


def _preprocess(nvcc: Path, headers: Sequence[str], scratch: Path, macros: bool) -> tuple[bytes | None, str]:
    """`nvcc -E` (with `macros`: the `#define`s, `-Xcompiler -dM`) of a stub including `headers`: the output
    (None when it fails) and nvcc's messages. The stub is generated here from the fixed header list; nvcc runs
    through `sandbox.run_tool`, as every nvcc does."""
    from dice_lsp.sandbox import run_tool

    stub = scratch / "stub.cu"
    stub.write_text("".join(f"#include <{header}>\n" for header in headers), encoding="utf-8")
    output = scratch / ("macros.txt" if macros else "stub.ii")
    output.unlink(missing_ok=True)
    argv = [str(nvcc), "-E", "-x", "cu", *(["-Xcompiler", "-dM"] if macros else []), str(stub), "-o", str(output)]
    try:
        proc = run_tool(argv, scratch, PREPROCESS_TIMEOUT)
    except (OSError, subprocess.SubprocessError, DiceError) as exc:
        return None, f"nvcc -E failed to run: {exc}"
    messages = proc.stderr + proc.stdout
    if proc.returncode != 0 or not output.is_file():
        return None, messages
    return output.read_bytes(), messages


def _missing(messages: str, headers: Sequence[str]) -> set[str]:
    """The headers nvcc's messages say it cannot find."""
    return {header for header in headers if f"{header}: No such file" in messages}


def build_header_names(nvcc: Path) -> HeaderIndex:
    """Run nvcc's preprocessor on the fixed header list and collect the names. Headers nvcc cannot find are
    dropped from the stub; when it still fails, each header is tried alone and the ones that fail are skipped."""
    with run_folder("headers") as folder:
        scratch = Path(folder)
        if not _SAFE_PATH.fullmatch(str(scratch)):
            raise DiceError(f"the scratch folder {scratch} has characters nvcc's shell would interpret")
        headers: list[str] = list(HEADERS)
        preprocessed, messages = _preprocess(nvcc, headers, scratch, False)
        while preprocessed is None and _missing(messages, headers):
            missing = _missing(messages, headers)
            LOG.info("header index: %s not found by %s, skipped", ", ".join(sorted(missing)), nvcc)
            headers = [header for header in headers if header not in missing]
            preprocessed, messages = _preprocess(nvcc, headers, scratch, False)
        if preprocessed is None:  # a header that is there but fails: find it by trying each alone
            parts: list[bytes] = []
            headers = []
            for header in HEADERS:
                one, _ = _preprocess(nvcc, [header], scratch, False)
                if one is None:
                    LOG.info("header index: %s does not preprocess with %s, skipped", header, nvcc)
                else:
                    headers.append(header)
                    parts.append(one)
            preprocessed = b"\n".join(parts)
        if not headers:
            raise DiceError(f"{nvcc}: none of the CUDA headers preprocess")
        macros, _ = _preprocess(nvcc, headers, scratch, True)
        return header_declarations(preprocessed, macros or b"")


def _encode(index: HeaderIndex, comment: str = "") -> bytes:
    text = "".join(f"# {line}\n" for line in comment.splitlines()) + "".join(f"{n}\n" for n in index.lines())
    return gzip.compress(text.encode("utf-8"), compresslevel=9, mtime=0)


def _decode(data: bytes) -> HeaderIndex:
    return HeaderIndex.from_lines(gzip.decompress(data).decode("utf-8").splitlines())


def index_path(nvcc: Path) -> Path:
    """Where the index of `nvcc` is cached: keyed by its path, its `--version` output and the header list."""
    version = nvcc_version(nvcc, nvcc.stat().st_mtime)
    key = "\0".join([INDEX_VERSION, str(nvcc), version, *HEADERS]).encode("utf-8")
    return cache_root() / "header-names" / f"{hashlib.sha256(key).hexdigest()[:24]}.txt.gz"


@cache
def fallback_names() -> HeaderIndex:
    """The shipped index (built with nvcc 13.0), for machines without nvcc; empty if the file is missing."""
    try:
        return _decode(FALLBACK.read_bytes())
    except (OSError, EOFError, gzip.BadGzipFile) as exc:
        LOG.warning("%s: no fallback header index (%s)", FALLBACK, exc)
        return HeaderIndex()


@cache
def header_names(nvcc: Path | None = None) -> HeaderIndex:
    """Names of the CUDA/C++ headers (`HEADERS`) as `nvcc` sees them (None: `find_nvcc()`), built once per
    nvcc and cached on disk; the shipped fallback when there is no nvcc or it cannot preprocess them."""
    try:
        nvcc = nvcc or find_nvcc()
        path = index_path(nvcc)
    except (DiceError, OSError, subprocess.SubprocessError) as exc:
        LOG.info("header index: no nvcc (%s), using the shipped list", exc)
        return fallback_names()
    try:
        return _decode(path.read_bytes())
    except FileNotFoundError:
        pass
    except (OSError, EOFError, gzip.BadGzipFile) as exc:
        LOG.warning("%s: unreadable header index, building it again (%s)", path, exc)
    try:
        names = build_header_names(nvcc)
    except DiceError as exc:
        LOG.warning("header index: %s; using the shipped list", exc)
        return fallback_names()
    try:
        replace_atomically(path, _encode(names))
    except OSError as exc:
        LOG.warning("%s: cannot cache the header index (%s)", path, exc)
    return names


_INDEX: dict[str, HeaderIndex] = {}


def header_names_now() -> HeaderIndex:
    """The header index without waiting: nvcc's when it is built (or cached on disk), else the shipped list
    while a background thread builds it (5 s the first time on a machine, then read from the cache)."""
    if "nvcc" in _INDEX:
        return _INDEX["nvcc"]
    if "building" not in _INDEX:
        _INDEX["building"] = HeaderIndex()

        def build() -> None:
            _INDEX["nvcc"] = header_names()

        threading.Thread(target=build, name="dice-header-index", daemon=True).start()
    return _INDEX.setdefault("fallback", fallback_names())


def main(argv: Sequence[str] | None = None) -> int:
    parser_ = argparse.ArgumentParser(prog="python -m dice_lsp.toolchain.header_index",
                                      description=__doc__.splitlines()[0])
    parser_.add_argument("--write-fallback", action="store_true",
                         help=f"build the header index with this machine's nvcc and write it to {FALLBACK}")
    parser_.add_argument("--nvcc", type=Path, default=None, help="the nvcc to use (default: find_nvcc())")
    args = parser_.parse_args(argv)
    if not args.write_fallback:
        parser_.print_help()
        return 2
    from dice_lsp.toolchain.cache import nvcc_version
    nvcc = args.nvcc or find_nvcc()
    started = time.perf_counter()
    names = build_header_names(nvcc)
    version = nvcc_version(nvcc, nvcc.stat().st_mtime).strip().splitlines()
    data = _encode(names, f"dice-lsp header index, built by {parser_.prog} --write-fallback from\n"
                          + (version[-2] if len(version) >= 2 else "nvcc"))
    FALLBACK.write_bytes(data)
    print(f"{FALLBACK}: {len(names.lines())} names, {len(data)} bytes, built in {time.perf_counter() - started:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
