"""Mine the idiom bank: the statement lines of GPU code that reliably follow a given line, or precede one, across
projects.

    python -m dice_lsp.training.idioms --corpus data/corpus --out dice_lsp/models/dice-tiny/idioms.json.gz

What is read: `<corpus>/train.jsonl` (built by dice_lsp.training.corpus; files near-duplicate to the benchmark
are already out), only files the model may be trained on (`is_permissive(license)`), only GPU files of the
CUDA dialects (`lang` "cuda" with `dialect` in `--dialects`, default cuda and cuda-pystring: CUDA files and CUDA
kernels kept from Python strings; HIP mapped to CUDA spellings and OpenCL are left out by default).

What is counted: every statement line (not blank, not a comment, not a preprocessor line or a directive's
continuation, not a line of only braces/brackets/`;`/`,`) with its context line: the nearest line above that is not
blank, not a comment and not a lone `{` (the same rule the completion source applies at a hole:
dice_lsp.completion.sources.idioms.context_line); and, separately, with its context below: the nearest such line
after it (`below_line`; a hole sits between two lines, and the one after often says most: `if (i < n) {` below
an emptied line asks for the index that `i` is). The context becomes a key by `abstract_key` (comments dropped,
spacing reduced to what separates two words, trailing `{` dropped, identifiers that are not C/C++/CUDA vocabulary
abstracted to `$0`, `$1`, ... in order of appearance); the statement becomes a value by `abstract_value` with the
key's mapping. Every pair is counted under the context's generic key and, where it differs, its specific key (names
found in the GPU files of at least --min-name-projects projects stay concrete; stored as `names`, for the lookup to
build the same keys). An identifier of the value that the key does not bind stays concrete: such a value is kept
only when that concrete name itself followed the key often enough (the thresholds below apply to the concrete text),
so the bank never holds a placeholder a hole cannot bind. Values are grouped by their spacing-blind (compact) form;
each is stored in its most frequent spacing (one space wherever the code had whitespace).

A third table lists the one-line declarations of each variable name (`declaration_pairs`, every name concrete):
what a hole whose code below uses a name nothing declares most likely held.

A pair is counted once per file. `files` = distinct files where the value followed the key, `projects` =
distinct upstream projects among them (`project_of`: versions of one project, such as pytorch 1.13 and 2.6, are
one project, and a library vendored in another source's tree, such as cutlass in tilelang or ggml in two
llama.cpp wrappers, is its own), `total` = the key's pair count over all values (each counted once per file),
`share` = files / total. A pair is kept when files >= --min-files, projects >= --min-projects and share >=
--min-share; at most --max-values values per key (most files first).

Format (gzipped JSON, keys sorted, gzip mtime 0, so the same corpus gives the same bytes):

    {"format": "dice-idioms/2",
     "corpus": {"split": "train", "dialects": [...], "sources": [...], "projects": N, "files": N, "pairs": N},
     "thresholds": {"min_files": 3, "min_projects": 2, "min_share": 0.02, "max_values": 10,
                    "min_name_projects": 10},
     "score": "files / (total + 4)",
     "names": ["i", "idx", "tid", ...],
     "entries": {"<key>": [total, [["<value>", files, projects, share], ...]], ...},
     "below": {... the same, keyed by the context line below ...},
     "declarations": {"<name>": [total, [["<declaration of name>", files, projects, share], ...]], ...}}

e.g. "int $0=blockIdx.x*blockDim.x+threadIdx.x;" -> [total, [["if ($0 < n) {", files, projects, share], ...]].
"""

from __future__ import annotations

import argparse
import gzip
import json
import re
import sys
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import cache, lru_cache
from pathlib import Path
from typing import Any, Literal

from tqdm import tqdm

from dice_lsp.completion.lexing import declared_name, is_vocabulary
from dice_lsp.completion.sources.idioms import (
    FORMAT,
    PRIOR,
    Side,
    abstract_key,
    abstract_value,
    is_context,
)
from dice_lsp.errors import DiceError
from dice_lsp.training.corpus import SOURCES, is_permissive

DIALECTS = ("cuda", "cuda-pystring")
BRACES_ONLY = frozenset("{}()[];, \t")


class IdiomError(DiceError):
    """The corpus cannot be read (missing, malformed)."""


@dataclass(frozen=True)
class Thresholds:
    min_files: int = 3
    min_projects: int = 2
    min_share: float = 0.02
    max_values: int = 10
    min_name_projects: int = 10  # a name in this many projects stays concrete in specific keys (0: none)


@dataclass(frozen=True)
class GpuFile:
    source: str
    path: str
    text: str

    @property
    def project(self) -> str:
        return project_of(self.source, self.path)


# A library vendored under another source's tree is its own project wherever it sits (cutlass inside tilelang's
# tvm, ggml inside llama-cpp-python and stable-diffusion-cpp-python, cub inside the CUDA headers' cccl/).
LIBRARIES = frozenset({"cutlass", "cute", "cub", "thrust", "cudacxx", "cccl", "composable_kernel", "ggml",
                       "flashinfer", "flash_attn", "tvm", "faiss", "xgboost", "tensorrt_llm", "marlin"})
VENDOR_DIRS = frozenset({"3rdparty", "third_party", "thirdparty", "third-party", "external", "extern", "vendor",
                         "deps", "contrib", "libs", "restricted"})
# Sources that are versions or builds of one upstream project (beside those whose `package` says so).
PROJECT_ALIASES = {"nvidia-cutlass": "cutlass", "mmcv-full": "mmcv", "xgboost-pypi": "xgboost"}


def canonical(name: str) -> str:
    """One spelling per project name: flash-attn, flash_attn and libflash_attn are one; flashinfer-python is
    flashinfer."""
    name = name.lower().replace("-", "_").removesuffix("_python")
    return name[3:] if name.startswith("lib") and len(name) >= 7 else name


@cache
def _package(source: str) -> str:
    by_name = {s.name: s.package for s in SOURCES}
    return canonical(PROJECT_ALIASES.get(source, by_name.get(source, source)))


def project_of(source: str, path: str) -> str:
    """The upstream project a corpus file belongs to: the innermost known library or vendored folder on its path,
    else its source's package (pytorch and pytorch-2.6 are one project, as are petsc and petsc-3.22)."""
    folders = [canonical(f) for f in path.split("/")[:-1]]
    for index in range(len(folders) - 1, -1, -1):
        if folders[index] in LIBRARIES:
            return folders[index]
        if index and folders[index - 1] in VENDOR_DIRS:
            return folders[index]
    return _package(source)


# ------------------------------------------------------------------------------------------------ lines


def is_statement(stripped: str) -> bool:
    """A line worth proposing: code that is more than braces, brackets, `;` and `,` (a comment after them is
    caught once the line is abstracted: `file_pairs`)."""
    return bool(stripped) and not set(stripped) <= BRACES_ONLY


def code_lines(text: str) -> list[tuple[str, bool]]:
    """The lines of a file that can be a context (`is_context`), stripped, in order, each with whether a hole may
    hold it (a statement, not a preprocessor line). Lines inside `/* ... */` blocks and preprocessor
    continuations are neither."""
    out: list[tuple[str, bool]] = []
    in_block = in_directive = False
    for raw in text.split("\n"):
        line = raw.strip()
        if in_block:
            if "*/" not in line:
                continue
            in_block = False
            line = line.split("*/", 1)[1].strip()
        if in_directive:
            in_directive = line.endswith("\\")
            continue
        if not is_context(line):
            in_block = line.startswith("/*") and "*/" not in line
            continue
        if "/*" in line and "*/" not in line.rsplit("/*", 1)[1]:
            in_block = True
        directive = line.startswith("#")
        if directive:
            in_directive = line.endswith("\\")
        out.append((line, not directive and is_statement(line)))
    return out


def context_pairs(text: str, side: Side = "above") -> Iterator[tuple[str, str]]:
    """(context line, statement line), both stripped, for every statement line of a file that has a context
    line on `side`: the nearest `code_lines` line above it, or below it."""
    lines = code_lines(text)
    step = -1 if side == "above" else 1
    for index, (line, statement) in enumerate(lines):
        if statement and 0 <= index + step < len(lines):
            yield lines[index + step][0], line


@lru_cache(maxsize=1 << 18)
def _key(line: str, common: frozenset[str]) -> tuple[str, tuple[str, ...]] | None:
    found = abstract_key(line, common)
    return None if found is None else (found[0], tuple(found[1]))


@lru_cache(maxsize=1 << 18)
def _value(line: str, names: tuple[str, ...], free: bool, keep: frozenset[str]) -> tuple[str, str] | None:
    return abstract_value(line, list(names), free, keep)


def file_pairs(text: str, common: frozenset[str] = frozenset(),
               side: Side = "above") -> Iterator[tuple[str, str, str, bool]]:
    """(key, compact value, spaced value, free) for each context pair of a file (`side`) that abstracts: under its
    generic
    key and, where the context line has `common` names, under its specific key too; each value as it is (names
    the key does not bind kept) and, where it has such names, with them as free placeholders (free=True)."""
    for context, line in context_pairs(text, side):
        generic = _key(context, frozenset())
        if generic is None:
            continue
        specific = _key(context, common) if common else None
        for key in (generic, specific) if specific is not None and specific[0] != generic[0] else (generic,):
            value = _value(line, key[1], False, frozenset())
            if value is None or set(value[0]) <= BRACES_ONLY:  # `}  // end` is no statement
                continue
            yield key[0], value[0], value[1], False
            keep = frozenset(_WORD.findall(key[0])) & common if key is specific else frozenset()
            free = _value(line, key[1], True, keep)
            if free is not None and free[0] != value[0]:
                yield key[0], free[0], free[1], True


def declaration_pairs(text: str) -> Iterator[tuple[str, str, str, bool]]:
    """(declared name, compact line, spaced line, False) for each statement line of a file that declares one
    variable (`declared_name`), every name in it concrete: the table a hole whose code below uses a name nothing
    declares reads (`int i = blockIdx.x * blockDim.x + threadIdx.x;` for `i`)."""
    for line, statement in code_lines(text):
        name = declared_name(line) if statement else None
        value = abstract_value(line, []) if name is not None else None
        if name is not None and value is not None:
            yield name, value[0], value[1], False


Table = Literal["above", "below", "declarations"]
TABLES: tuple[Table, ...] = ("above", "below", "declarations")


def table_pairs(text: str, common: frozenset[str], table: Table) -> Iterator[tuple[str, str, str, bool]]:
    """The (key, compact value, spaced value, free) pairs of one of the bank's tables in a file."""
    if table == "declarations":
        return declaration_pairs(text)
    return file_pairs(text, common, table)


_WORD = re.compile(r"\b[A-Za-z_]\w*")


def common_names(files: Iterable[GpuFile], min_projects: int) -> frozenset[str]:
    """Identifiers (not C/C++/CUDA vocabulary) found in the files of at least `min_projects` projects: the names
    the specific keys keep concrete (`tid`, `idx`, `sdata`, ...)."""
    seen: dict[str, set[str]] = defaultdict(set)
    for file in files:
        project = file.project
        for word in set(_WORD.findall(file.text)):
            seen[word].add(project)
    return frozenset(w for w, s in seen.items() if len(s) >= min_projects and not is_vocabulary(w))


# ------------------------------------------------------------------------------------------------ mining


@dataclass
class Counts:
    """Pair evidence gathered over the corpus (each pair counted once per file)."""

    files: Counter[tuple[str, str]]
    projects: dict[tuple[str, str], set[str]]
    totals: Counter[str]  # over the values as they are (free forms regroup the same lines)
    free: set[tuple[str, str]] = field(default_factory=set)
    seen_files: int = 0
    seen_sources: frozenset[str] = frozenset()
    seen_projects: frozenset[str] = frozenset()


def count_pairs(files: Iterable[GpuFile], common: frozenset[str] = frozenset(), table: Table = "above") -> Counts:
    counts = Counts(Counter(), defaultdict(set), Counter())
    sources: set[str] = set()
    projects: set[str] = set()
    for file in files:
        counts.seen_files += 1
        sources.add(file.source)
        projects.add(file.project)
        for key, value, free in {(k, v, f) for k, v, _, f in table_pairs(file.text, common, table)}:
            counts.files[key, value] += 1
            counts.projects[key, value].add(file.project)
            if free:
                counts.free.add((key, value))
            else:
                counts.totals[key] += 1
    counts.seen_sources = frozenset(sources)
    counts.seen_projects = frozenset(projects)
    return counts


def select(counts: Counts, limits: Thresholds) -> dict[str, list[str]]:
    """key -> its kept compact values, most files first (ties by text): at most max_values as they are and
    max_values free forms."""
    kept: dict[tuple[str, bool], list[str]] = defaultdict(list)
    for (key, value), files in counts.files.items():
        if (files >= limits.min_files and len(counts.projects[key, value]) >= limits.min_projects
                and files / counts.totals[key] >= limits.min_share):
            kept[key, (key, value) in counts.free].append(value)
    out: dict[str, list[str]] = defaultdict(list)
    for (key, _), values in sorted(kept.items()):
        values.sort(key=lambda v: (-counts.files[key, v], v))
        out[key].extend(values[:limits.max_values])
    for key, values in out.items():
        values.sort(key=lambda v: (-counts.files[key, v], v))
    return dict(out)


def spellings(files: Iterable[GpuFile], kept: dict[str, list[str]], common: frozenset[str] = frozenset(),
              table: Table = "above") -> dict[tuple[str, str], str]:
    """The most frequent spaced form of every kept (key, compact value) (ties: the smallest text)."""
    wanted = {(key, value) for key, values in kept.items() for value in values}
    seen: dict[tuple[str, str], Counter[str]] = defaultdict(Counter)
    for file in files:
        for key, value, spaced, _ in table_pairs(file.text, common, table):
            if (key, value) in wanted:
                seen[key, value][spaced] += 1
    return {pair: min(forms.items(), key=lambda kv: (-kv[1], kv[0]))[0] for pair, forms in seen.items()}


def build_bank(files: Sequence[GpuFile], limits: Thresholds, dialects: Sequence[str] = DIALECTS) -> dict[str, Any]:
    """The bank's JSON object (module docstring) for these GPU files."""
    common = common_names(files, limits.min_name_projects) if limits.min_name_projects > 0 else frozenset()
    tables: dict[Table, dict[str, list[Any]]] = {}
    corpus: dict[str, Any] = {}
    for table in TABLES:
        counts = count_pairs(files, common, table)
        kept = select(counts, limits)
        spaced = spellings(files, kept, common, table)
        tables[table] = {key: [counts.totals[key],
                              [[spaced[key, v], counts.files[key, v], len(counts.projects[key, v]),
                                round(counts.files[key, v] / counts.totals[key], 4)] for v in kept[key]]]
                        for key in sorted(kept)}
        if table == "above":
            corpus = {"split": "train", "dialects": sorted(dialects), "sources": sorted(counts.seen_sources),
                      "projects": len(counts.seen_projects), "files": counts.seen_files,
                      "pairs": sum(counts.totals.values())}
    return {
        "format": FORMAT,
        "corpus": corpus,
        "thresholds": {"min_files": limits.min_files, "min_projects": limits.min_projects,
                       "min_share": limits.min_share, "max_values": limits.max_values,
                       "min_name_projects": limits.min_name_projects},
        "names": sorted(common),
        "score": f"files / (total + {PRIOR})",
        "entries": tables["above"],
        "below": tables["below"],
        "declarations": tables["declarations"],
    }


def bank_bytes(bank: dict[str, Any]) -> bytes:
    """The bank gzipped reproducibly: sorted keys, no spaces, no file name or time in the gzip header."""
    raw = json.dumps(bank, ensure_ascii=False, sort_keys=True, separators=(",", ":")).encode("utf-8")
    return gzip.compress(raw, compresslevel=9, mtime=0)


# ------------------------------------------------------------------------------------------------ corpus


def read_gpu_files(corpus: Path, dialects: Sequence[str], sources: Sequence[str] | None = None,
                   progress: bool = True) -> list[GpuFile]:
    """The trainable GPU files of the corpus's train split (only `sources` when given)."""
    path = corpus / "train.jsonl"
    if not path.is_file():
        raise IdiomError(f"{path}: not found (build the corpus: python -m dice_lsp.training.corpus --out {corpus})")
    wanted = set(dialects)
    out: list[GpuFile] = []
    with path.open(encoding="utf-8") as handle:
        lines = tqdm(handle, desc="reading train.jsonl", unit=" files", file=sys.stderr, disable=not progress)
        for number, line in enumerate(lines, 1):
            try:
                record = json.loads(line)
                keep = (record["lang"] == "cuda" and record["dialect"] in wanted and is_permissive(record["license"])
                        and (sources is None or record["source"] in sources))
                if keep:
                    out.append(GpuFile(record["source"], record["path"], record["text"]))
            except (ValueError, KeyError, TypeError) as exc:
                raise IdiomError(f"{path}:{number}: not a corpus record ({exc})") from None
    if not out:
        raise IdiomError(f"{path}: no trainable GPU files of dialects {', '.join(dialects)}")
    return out


def summary(bank: dict[str, Any], out: Path, size: int) -> dict[str, Any]:
    entries, below, declared = bank["entries"], bank["below"], bank["declarations"]
    return {"out": str(out), "bytes": size, "keys": len(entries),
            "entries": sum(len(values) for _, values in entries.values()), "below_keys": len(below),
            "below_entries": sum(len(values) for _, values in below.values()), "declared_names": len(declared),
            "declarations": sum(len(values) for _, values in declared.values()), **bank["corpus"]}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m dice_lsp.training.idioms",
                                     description="mine the idiom bank (context line -> next statement line) from "
                                                 "the GPU files of a corpus's train split")
    parser.add_argument("--corpus", type=Path, default=Path("data/corpus"))
    parser.add_argument("--out", type=Path, default=Path("dice_lsp/models/dice-tiny/idioms.json.gz"))
    parser.add_argument("--dialects", nargs="+", default=list(DIALECTS),
                        help="GPU dialects read (default: %(default)s)")
    parser.add_argument("--sources", nargs="+", help="only these corpus sources (default: every trainable one)")
    parser.add_argument("--min-files", type=int, default=Thresholds.min_files)
    parser.add_argument("--min-projects", type=int, default=Thresholds.min_projects)
    parser.add_argument("--min-share", type=float, default=Thresholds.min_share)
    parser.add_argument("--max-values", type=int, default=Thresholds.max_values)
    parser.add_argument("--min-name-projects", type=int, default=Thresholds.min_name_projects,
                        help="names found in this many projects stay concrete in specific keys (0: none)")
    parser.add_argument("--json", action="store_true", help="print the summary as JSON (no progress bars)")
    ns = parser.parse_args(argv)
    limits = Thresholds(ns.min_files, ns.min_projects, ns.min_share, ns.max_values, ns.min_name_projects)
    try:
        files = read_gpu_files(ns.corpus, ns.dialects, ns.sources, progress=not ns.json)
        if not ns.json:
            print(f"mining {len(files):,} GPU files ...", file=sys.stderr)
        bank = build_bank(files, limits, ns.dialects)
        data = bank_bytes(bank)
        ns.out.parent.mkdir(parents=True, exist_ok=True)
        ns.out.write_bytes(data)
    except (DiceError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    info = summary(bank, ns.out, len(data))
    if ns.json:
        print(json.dumps(info, indent=1))
    else:
        print(f"{info['entries']:,} idioms under {info['keys']:,} keys above, {info['below_entries']:,} under "
              f"{info['below_keys']:,} keys below and {info['declarations']:,} declarations of "
              f"{info['declared_names']:,} names from {info['files']:,} GPU files of "
              f"{len(info['sources'])} sources ({info['projects']} projects) -> {ns.out} ({len(data) / 1e6:.2f} MB)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
