"""Build the library part of CUDA-Infill: holes cut from pinned CUDA sources the model never saw.

    python -m dice_lsp.training.suite_build [--sources NAME ...] [--per-kind 650] [--downloads DIR]
                                   [--corpus-downloads DIR]

writes bench/infill/{test,dev}/library.{files,holes}.jsonl.gz, bench/infill/sources.json (the pins and what
was kept of each) and bench/infill/SOURCES.md (the same as a table).

Sources. `SOURCES` pins each upstream archive (Debian .orig tarball or PyPI sdist) by version and sha256;
a missing archive is fetched (`apt-get source --download-only NAME=VERSION`, or the sdist URL that
`https://pypi.org/pypi/NAME/json` lists for the version) and checked against its pin. Only permissive
licenses (MIT, BSD, Apache-2.0, BSL), read from each archive's LICENSE/COPYING file; `DROPPED_SOURCES` says
which candidates were left out and why. From each archive: the files `corpus.file_lang` calls CUDA, decoded
as UTF-8, not dropped by `corpus.drop_reason` (generated, data tables), at most `MAX_FILE_BYTES`.

Never in the training corpus. Every CUDA file of every corpus source (`corpus.SOURCES`, read from the corpus
downloads, whatever the corpus's own filters later kept) goes into an index (cached under data/infill/):
1. file level: the corpus's exact key and its MinHash `NearDeduper` (same threshold). A suite file is dropped
   when it is an exact or near copy of a corpus file, then when it copies a suite file kept before it (suite
   files are checked, then remembered, in source order and path order);
2. function level: the hashes of every 4-line window of normalised lines (`corpus.normalized_lines`) of
   those files. A function whose body lines (from the line of its `{` to the line of its `}`) have more than
   half of their windows in that set hosts no hole.
A corpus source the corpus kept no CUDA file of may be missing from the corpus downloads (the C/C++-only
libraries are not all downloaded).

Holes (`cut_holes`): string offsets, only inside the bodies of `__global__` and `__device__` functions
(`parse_functions`) whose tree-sitter definition holds no ERROR or MISSING node. A *statement line* is a
line strictly between the lines of the body's `{` and `}` whose content (first to last non-blank character)
has more than 3 characters, at most `LINE_MAX`, is not a lone brace (only `{`, `}`, `;`, `(`, `)`), and
touches no comment, no preprocessor line (continuations included), no inactive region (`#if 0` or
`#if false` up to the matching `#else`, `#elif` or `#endif`), and no string or character literal that runs
past the content. Kinds:
- `line`: a statement line's content;
- `midline`: from a cut point to the end of a statement line's content; the cut is drawn uniformly (with the
  caller's rng, one per line) among the token boundaries at least 4 characters into the content that leave
  at least 3 non-blank characters: after a space, or between a word token (identifier, number, literal)
  and a punctuation character, either way round. Never between two punctuation characters or inside a
  literal;
- `lines`: 2-5 consecutive lines whose first and last are statement lines and whose middle lines are blank
  or code (statement lines, lone braces, short lines: nothing that touches a comment, preprocessor line,
  inactive region or crossing literal), at most `LINES_MAX` characters, with as many `{` as `}` outside
  literals;
- `body`: `body_open + 1` to `body_close`, when the stripped body has at most `BODY_MAX` characters and
  at least 2 statement lines.

Sampling. Per file (an rng seeded by the source and path), at most `PER_FUNCTION` holes of each kind per
function and `PER_FILE` of each kind per file. Per split (`suite.split_of`), files are visited in a fixed
hashed order and give all their capped holes until each kind has its quota (`--per-kind` for test,
2/5 of it for dev): fewer, fuller files keep the suite small. Bodies of `__global__` kernels come first;
`__device__` bodies only fill what kernels leave short. Each kind's holes are then shuffled (fixed seed),
so that a prefix is a fair sample. Files that host a kept hole are written; `compiles` is nvcc's
compile-only verdict for files that include system headers only (None otherwise).
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import json
import logging
import random
import re
import subprocess
import sys
import time
import urllib.request
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any
from urllib.parse import urljoin

import numpy as np

from dice_lsp.cuda.functions import Function, parse, parse_functions
from dice_lsp.errors import DiceError
from dice_lsp.evals import suite
from dice_lsp.toolchain.nvcc import compile_source
from dice_lsp.training import corpus

LOG = logging.getLogger("dice_lsp.training.suite_build")

DATA = corpus.REPO_ROOT / "data" / "infill"
DOWNLOADS = DATA / "downloads"
INDEX_CACHE = DATA / "corpus-index"
COMPILE_CACHE = DATA / "compiles.json"
MAX_FILE_BYTES = 60_000
SHINGLE_WIDTH = 4
COPIED_SHARE = 0.5
PER_FUNCTION = 3
PER_FILE = 12
LINE_MAX = 120
LINES_MAX = 400
BODY_MAX = 600
SEED = 17
DEV_PARTS = (2, 5)  # dev quota = per_kind * 2 // 5


@dataclass(frozen=True)
class Pin:
    """One pinned upstream archive of the suite."""

    name: str
    kind: str  # "debian" | "pypi"
    version: str
    license: str
    archive: str
    sha256: str

    @property
    def url(self) -> str:
        if self.kind == "pypi":
            return f"https://pypi.org/project/{self.name}/{self.version}/#files"
        return corpus.debian_url(corpus.CorpusSource(self.name, "debian", self.name, self.version, self.license, 0.0),
                                 Path(self.archive))


SOURCES: tuple[Pin, ...] = (
    Pin("onnxruntime", "debian", "1.21.0+dfsg-1", "MIT", "onnxruntime_1.21.0+dfsg.orig.tar.xz",
        "32df1f82bd6b07b18372c0f387133214905cbde7a586b3ad83f0ed0075f80273"),
    Pin("open3d", "debian", "0.19.0-3", "MIT", "open3d_0.19.0.orig.tar.xz",
        "fb72d73f3c6a8699682d3330f25cc9da6c2436073c896e64786a3281df5a1d15"),
    Pin("pcl", "debian", "1.15.0+dfsg-2", "BSD-3-Clause", "pcl_1.15.0+dfsg.orig.tar.xz",
        "2a7258e2bdd298241eeb720f240832206945bc935d2e0003fd06bd8906f5fb7d"),
    Pin("pytorch-audio", "debian", "2.6.0-1", "BSD-2-Clause", "pytorch-audio_2.6.0.orig.tar.gz",
        "3335d8fcf58c26acf3c628d751103b59226e01c91847ce56efb2a4e7ae8351ef"),
    Pin("hypre", "debian", "2.32.0-4", "MIT OR Apache-2.0", "hypre_2.32.0.orig.tar.gz",
        "2277b6f01de4a7d0b01cfe12615255d9640eaa02268565a7ce1a769beab25fa1"),
    Pin("ceres-solver", "debian", "2.2.0+dfsg-4.1", "BSD-3-Clause", "ceres-solver_2.2.0+dfsg.orig.tar.xz",
        "fb22a61518dadb2cdfdbc698fbc9620d6d1e5e1b68a93b983086b668e39f395a"),
    Pin("gloo", "debian", "0.0~git20231202.5354032-3", "BSD-3-Clause",
        "gloo_0.0~git20231202.5354032.orig.tar.xz",
        "66d6fadb7b07cfcff08f74ae2acfab504e780d6b7536ee74d2011718cda25030"),
    Pin("lightseq", "pypi", "3.0.1", "Apache-2.0", "lightseq-3.0.1.tar.gz",
        "3c4da116d240a49538ec6e67d95aab51c55a918ede0736d0da43ca0b64e4507d"),
    Pin("transformer-engine-torch", "pypi", "2.20.2", "Apache-2.0", "transformer_engine_torch-2.20.2.tar.gz",
        "4c40ced8a6261649e689076f198d4feaf02277b1ba18931a66eccdaceb33c43e"),
    Pin("chainer", "pypi", "7.8.1", "MIT", "chainer-7.8.1.tar.gz",
        "179f06176f8d7a42385bc7811956db04e68213cfe30f5081491b9e2b6ff70de8"),
    Pin("thinc", "pypi", "8.3.14", "MIT", "thinc-8.3.14.tar.gz",
        "35d26c2d3138f6c08bd7c192f493a01e00513b8439ffaf4ce9d2def9b31e6dfa"),
    Pin("optimum-quanto", "pypi", "0.2.7", "Apache-2.0", "optimum_quanto-0.2.7.tar.gz",
        "91b5c2dc8a9100297dc7924a93747fb77ab010784b5e1f6d0208976ba054dade"),
    Pin("hqq", "pypi", "0.2.8.post1", "Apache-2.0", "hqq-0.2.8.post1.tar.gz",
        "8fa34c074df43b32acf10173abbc7dfdeff1ae529b673acfc2628a1c9c61fc8a"),
    Pin("inplace-abn", "pypi", "1.1.0", "BSD-3-Clause", "inplace-abn-1.1.0.tar.gz",
        "7c286ca53d35cb37b0d1f8b9beb5a910c694129d3d4f7b8e53188370bb260c27"),
    Pin("torchsort", "pypi", "0.1.10", "Apache-2.0", "torchsort-0.1.10.tar.gz",
        "416a7dd2ab88332b27e98318d7fb2e0243b9fb6f1fffcf77760d63103d70dd04"),
    Pin("warp-rnnt", "pypi", "0.7.0", "MIT", "warp_rnnt-0.7.0.tar.gz",
        "d50d34defc1377856bbf79b854bc2699bb87f5e48d82f5eb0151e610782d98a5"),
    Pin("chamferdist", "pypi", "1.0.3", "MIT", "chamferdist-1.0.3.tar.gz",
        "ac9d3a723329d230bcdd5ee8a01f13632ebae31b2ae221116579637ed57a4567"),
    Pin("torch-kdtree", "pypi", "1.0", "MIT", "torch_kdtree-1.0.tar.gz",
        "ead1029568e8783d57c74f6ff19b61424bdef9d2696cd97e5f74f48aa3ce70b6"),
    Pin("scikit-cuda", "pypi", "0.5.3", "BSD-3-Clause", "scikit-cuda-0.5.3.tar.gz",
        "46e05613d25bbc988c63bfbdbd6adf0e0fa2cdba0827f0c5595d77d9f45aa3ba"),
)
DROPPED_SOURCES = {
    "aqlm 1.1.7": "no LICENSE or COPYING file in the sdist and no license header in its kernel; "
                  "only the package metadata says MIT, so its notice cannot be carried",
}


# ---------------------------------------------------------------- archives

def _sha256(path: Path) -> str:
    with path.open("rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


def _download_sdist(pin: Pin, target: Path) -> None:
    """The sdist that PyPI's JSON API lists for the pinned version."""
    api = f"https://pypi.org/pypi/{pin.name}/json"
    with urllib.request.urlopen(api, timeout=60) as response:
        releases = json.load(response)["releases"]
    sdists = [entry for entry in releases.get(pin.version, []) if entry["packagetype"] == "sdist"]
    if not sdists:
        raise DiceError(f"{pin.name} {pin.version}: PyPI lists no sdist")
    url = urljoin(api, sdists[0]["url"])
    LOG.info("download %s", url)
    partial = target.with_name(target.name + ".part")
    with urllib.request.urlopen(url, timeout=300) as response, partial.open("wb") as out:
        while block := response.read(1 << 20):
            out.write(block)
    partial.rename(target)


def fetch(pin: Pin, folder: Path) -> Path:
    """The pinned archive in `folder`, downloaded when missing, checked against its sha256."""
    path = folder / pin.archive
    if not path.is_file():
        folder.mkdir(parents=True, exist_ok=True)
        if pin.kind == "debian":
            LOG.info("$ apt-get source --download-only %s=%s", pin.name, pin.version)
            subprocess.run(["apt-get", "source", "--download-only", f"{pin.name}={pin.version}"], cwd=folder,
                           capture_output=True, text=True, check=False)
        else:
            _download_sdist(pin, path)
    if not path.is_file():
        raise DiceError(f"{pin.name} {pin.version}: {pin.archive} could not be fetched")
    digest = _sha256(path)
    if digest != pin.sha256:
        raise DiceError(f"{path}: sha256 {digest} is not the pinned {pin.sha256}")
    return path


def cuda_texts(location: Path) -> Iterator[tuple[str, str]]:
    """(path, text) of every UTF-8 CUDA file in an archive or folder, as the corpus selects them."""
    for path, raw in corpus.iter_files(location):
        text = corpus._decode(raw)
        if text is not None and corpus.file_lang(path, text) == "cuda":
            yield path, text


# ---------------------------------------------------------------- the corpus index

def window_hashes(text: str) -> np.ndarray:
    """Distinct 64-bit hashes of the `SHINGLE_WIDTH`-line windows of normalised lines (one for short texts)."""
    lines = corpus.normalized_lines(text)
    windows = {"\n".join(lines[i:i + SHINGLE_WIDTH]) for i in range(max(1, len(lines) - SHINGLE_WIDTH + 1))}
    digests = b"".join(hashlib.blake2b(w.encode("utf-8"), digest_size=8).digest() for w in sorted(windows))
    return np.frombuffer(digests, dtype=np.uint64)


@dataclass
class CorpusIndex:
    """What the suite must not overlap: exact keys, MinHash signatures and line windows of corpus files."""

    exact: set[bytes]
    near: corpus.NearDeduper
    corpus_files: int  # signatures below this index in `near` are corpus files
    windows: np.ndarray  # sorted distinct window hashes

    @classmethod
    def from_parts(cls, exact: Iterable[bytes], signatures: Iterable[np.ndarray],
                   windows: np.ndarray) -> CorpusIndex:
        near = corpus.NearDeduper()
        for sig in signatures:
            if near.match(sig) is None:
                near.remember(sig)
        return cls(set(exact), near, len(near.signatures), np.unique(windows))

    @classmethod
    def from_texts(cls, texts: Iterable[str]) -> CorpusIndex:
        exact, signatures, windows = _digest_texts(texts)
        return cls.from_parts(exact, signatures, windows)

    def copied(self, text: str) -> bool:
        """More than `COPIED_SHARE` of the text's line windows occur in the corpus."""
        hashes = window_hashes(text)
        if not len(self.windows):
            return False
        at = np.minimum(np.searchsorted(self.windows, hashes), len(self.windows) - 1)
        return bool((self.windows[at] == hashes).sum() > COPIED_SHARE * len(hashes))


def _digest_texts(texts: Iterable[str]) -> tuple[list[bytes], list[np.ndarray], np.ndarray]:
    near = corpus.NearDeduper()
    exact: list[bytes] = []
    signatures: list[np.ndarray] = []
    windows: list[np.ndarray] = []
    for text in texts:
        exact.append(corpus.exact_key(text))
        signatures.append(near.signature(text))
        windows.append(window_hashes(text))
    return exact, signatures, np.concatenate(windows) if windows else np.zeros(0, dtype=np.uint64)


def _manifest_entries() -> dict[str, dict[str, Any]]:
    return {e["name"]: e for e in corpus.load_manifest().get("sources", [])}


def _corpus_locations(src: corpus.CorpusSource, downloads: Path) -> list[Path]:
    """Where a corpus source already lies (never downloaded here); the manifest's version when unpinned.
    A source the corpus kept no CUDA file of may be missing (the C/C++-only libraries): nothing to read."""
    entry = _manifest_entries().get(src.name, {})
    if src.kind == "local":
        return [corpus.CUDA_INCLUDE.resolve()]
    if src.version is None:
        src = replace(src, version=entry.get("version"))
    found = (corpus._find_pypi(src, downloads / "pypi") if src.kind == "pypi"
             else corpus._find_debian(src, downloads / "debian"))
    if not found and entry.get("kept", {}).get("files", {}).get("cuda"):
        raise DiceError(f"corpus source {src.name} {src.version} is not in {downloads}")
    if not found:
        LOG.warning("corpus source %s is not in %s; the corpus kept no CUDA file of it", src.name, downloads)
    return found


def _digest_source(job: tuple[corpus.CorpusSource, Path, Path]) -> tuple[list[bytes], list[np.ndarray], np.ndarray]:
    """One corpus source's exact keys, signatures and windows, cached in its own file under `folder`."""
    src, downloads, folder = job
    cache = folder / f"{src.name}.npz"
    key = json.dumps([src.name, src.version, str(downloads.resolve())])
    if cache.is_file():
        with np.load(cache) as saved:
            if str(saved["key"]) == key:
                return ([bytes(row) for row in saved["exact"]], list(saved["signatures"]), saved["windows"])
    texts = [text for location in _corpus_locations(src, downloads) for _, text in cuda_texts(location)]
    exact, signatures, windows = _digest_texts(texts)
    folder.mkdir(parents=True, exist_ok=True)
    np.savez(cache, key=np.array(key), exact=np.frombuffer(b"".join(exact), dtype=np.uint8).reshape(-1, 16),
             signatures=np.stack(signatures) if signatures else np.zeros((0, 128), dtype=np.uint64),
             windows=windows)
    LOG.info("corpus %s: %d CUDA files", src.name, len(exact))
    return exact, signatures, windows


def load_corpus_index(downloads: Path, folder: Path = INDEX_CACHE) -> CorpusIndex:
    """The index of every corpus source's CUDA files, read 2 sources at a time (each cached in `folder`)."""
    started = time.perf_counter()
    exact: list[bytes] = []
    signatures: list[np.ndarray] = []
    windows: list[np.ndarray] = []
    with ProcessPoolExecutor(max_workers=2) as pool:
        for keys, sigs, hashes in pool.map(_digest_source, [(s, downloads, folder) for s in corpus.SOURCES]):
            exact += keys
            signatures += sigs
            windows.append(hashes)
    index = CorpusIndex.from_parts(exact, signatures, np.concatenate(windows))
    LOG.info("corpus index: %d CUDA files, %d distinct 4-line windows (%.0f s)", len(exact), len(index.windows),
             time.perf_counter() - started)
    return index


# ---------------------------------------------------------------- the cutter

_LEXEMES = re.compile(r"""//[^\n]*|/\*.*?(?:\*/|\Z)|"(?:\\.|[^"\\\n])*"?|'(?:\\.|[^'\\\n])*'?"""
                      r"|^[ \t]*#(?:\\\r?\n|[^\n])*", re.DOTALL | re.MULTILINE)
_DIRECTIVE = re.compile(r"[ \t]*#[ \t]*(\w+)[ \t]*([^\n]*)")
_FALSE = frozenset({"0", "(0)", "false", "(false)"})
_TOKEN = re.compile(r""""(?:\\.|[^"\\])*"|'(?:\\.|[^'\\])*'|[A-Za-z_]\w*|(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?\w*|\S""")
_LONE = str.maketrans("", "", "{}();")


@dataclass(frozen=True)
class HoleSite:
    """A candidate hole and the function that hosts it."""

    kind: suite.Kind
    start: int
    end: int
    function: str
    template: bool
    kernel: bool


@dataclass
class _Layout:
    """Per-character facts about a text: what holes must not touch, and which literal each character is in."""

    text: str
    line_starts: list[int]
    blocked: np.ndarray  # comment, preprocessor line or inactive region
    literal: np.ndarray  # 0 outside literals, else a literal's number

    @classmethod
    def of(cls, text: str) -> _Layout:
        blocked = np.zeros(len(text) + 1, dtype=bool)
        literal = np.zeros(len(text) + 1, dtype=np.int32)
        for number, match in enumerate(_LEXEMES.finditer(text), start=1):
            if match.group()[0] in "\"'":
                literal[match.start():match.end()] = number
            else:
                blocked[match.start():match.end()] = True
        starts = [0, *(m.end() for m in re.finditer("\n", text))]
        for start, end in _inactive(text, starts):
            blocked[start:end] = True
        return cls(text, starts, blocked, literal)

    def line_of(self, offset: int) -> int:
        lo, hi = 0, len(self.line_starts)
        while hi - lo > 1:
            mid = (lo + hi) // 2
            lo, hi = (mid, hi) if self.line_starts[mid] <= offset else (lo, mid)
        return lo

    def content(self, line: int) -> tuple[int, int]:
        """(first non-blank, just past the last non-blank) of a line; equal for a blank line."""
        start = self.line_starts[line]
        end = self.line_starts[line + 1] - 1 if line + 1 < len(self.line_starts) else len(self.text)
        raw = self.text[start:end]
        first = start + len(raw) - len(raw.lstrip())
        return first, max(first, start + len(raw.rstrip()))

    def splits_literal(self, offset: int) -> bool:
        return offset > 0 and self.literal[offset - 1] != 0 and self.literal[offset - 1] == self.literal[offset]

    def is_code(self, line: int) -> bool:
        """Blank, or touches no comment, preprocessor line or inactive region, nor cuts a literal."""
        first, last = self.content(line)
        return first == last or not (self.blocked[first:last].any() or self.splits_literal(first)
                                     or self.splits_literal(last))

    def is_statement(self, line: int) -> bool:
        first, last = self.content(line)
        content = self.text[first:last]
        solid = sum(not ch.isspace() for ch in content)
        return (solid > 3 and last - first <= LINE_MAX and bool(content.translate(_LONE).strip())
                and self.is_code(line))


def _inactive(text: str, starts: list[int]) -> list[tuple[int, int]]:
    """Spans of `#if 0` / `#if false` regions: from the `#if` line to the end of its `#else`, `#elif` or
    `#endif` line."""
    spans: list[tuple[int, int]] = []
    depth = 0
    opened: tuple[int, int] | None = None  # (depth, offset) of the inactive #if
    for number, start in enumerate(starts):
        end = starts[number + 1] if number + 1 < len(starts) else len(text)
        match = _DIRECTIVE.match(text, start, end)
        if match is None:
            continue
        word, rest = match.group(1), match.group(2).split("//")[0].strip()
        if word in ("if", "ifdef", "ifndef"):
            depth += 1
            if opened is None and word == "if" and rest in _FALSE:
                opened = (depth, start)
        elif word in ("else", "elif", "endif"):
            if opened is not None and opened[0] == depth:
                spans.append((opened[1], end))
                opened = None
            depth -= word == "endif"
    if opened is not None:
        spans.append((opened[1], len(text)))
    return spans


def _clean(text: str, fn: Function) -> bool:
    """The function's tree-sitter definition holds no ERROR or MISSING node."""
    src = parse(text)
    byte = src.byte(fn.body_open)
    node = src.root.descendant_for_byte_range(byte, byte + 1)
    while node is not None:
        body = node.child_by_field_name("body") if node.type == "function_definition" else None
        if body is not None and body.start_byte == byte:
            return not node.has_error
        node = node.parent
    return False


def midline_cuts(content: str) -> list[int]:
    """Token boundaries in a line's content (offsets into it) where a half-typed line may stop: at least 4
    characters in, at least 3 non-blank characters left."""
    tokens = list(_TOKEN.finditer(content))
    cuts = []
    for before, token in itertools.pairwise(tokens):
        word_before = before.group()[0] in "\"'_" or before.group()[0].isalnum()
        word_after = token.group()[0] in "\"'_" or token.group()[0].isalnum()
        at = token.start()
        if ((at > before.end() or word_before != word_after) and at >= 4
                and sum(not ch.isspace() for ch in content[at:]) >= 3):
            cuts.append(at)
    return cuts


def _function_holes(layout: _Layout, fn: Function, rng: random.Random) -> list[HoleSite]:
    text = layout.text
    template, kernel = fn.head != fn.start, fn.is_kernel
    first, last = layout.line_of(fn.body_open) + 1, layout.line_of(fn.body_close)
    statements = [n for n in range(first, last) if layout.is_statement(n)]
    holes: list[HoleSite] = []
    for number in statements:
        start, end = layout.content(number)
        holes.append(HoleSite("line", start, end, fn.name, template, kernel))
        cuts = midline_cuts(text[start:end])
        if cuts:
            holes.append(HoleSite("midline", start + rng.choice(cuts), end, fn.name, template, kernel))
        for other in range(number + 1, min(number + 5, last)):
            if not layout.is_code(other - 1):
                break
            if other not in statements:
                continue
            span_end = layout.content(other)[1]
            span = text[start:span_end]
            outside = [ch for at, ch in enumerate(span, start) if layout.literal[at] == 0 and ch in "{}"]
            if span_end - start <= LINES_MAX and outside.count("{") == outside.count("}"):
                holes.append(HoleSite("lines", start, span_end, fn.name, template, kernel))
    body = text[fn.body_open + 1:fn.body_close]
    if len(body.strip()) <= BODY_MAX and len(statements) >= 2:
        holes.append(HoleSite("body", fn.body_open + 1, fn.body_close, fn.name, template, kernel))
    return holes


def cut_functions(text: str, rng: random.Random) -> list[tuple[Function, list[HoleSite]]]:
    """Every cleanly parsed `__global__` / `__device__` function with its candidate holes."""
    layout = _Layout.of(text)
    found = []
    for fn in parse_functions(text):
        if fn.closed and ("__global__" in fn.qualifiers or "__device__" in fn.qualifiers) and _clean(text, fn):
            found.append((fn, _function_holes(layout, fn, rng)))
    return found


def cut_holes(text: str, rng: random.Random) -> list[tuple[str, int, int, str, bool]]:
    """All candidate holes of a file, before any cap: (kind, start, end, function name, template)."""
    seen: set[tuple[str, int, int]] = set()
    holes: list[tuple[str, int, int, str, bool]] = []
    for _, found in cut_functions(text, rng):
        for hole in found:
            if (hole.kind, hole.start, hole.end) not in seen:
                seen.add((hole.kind, hole.start, hole.end))
                holes.append((hole.kind, hole.start, hole.end, hole.function, hole.template))
    return holes


# ---------------------------------------------------------------- suite files

@dataclass(frozen=True)
class SuiteCandidate:
    source: str
    path: str
    text: str
    license: str


@dataclass
class SuiteSourceStats:
    """What happened to one source's CUDA files, for sources.json and SOURCES.md."""

    cuda_files: int = 0
    dropped: Counter[str] = field(default_factory=Counter)
    screened: int = 0  # files left after every file-level drop
    copied_functions: int = 0
    hosts: int = 0  # functions left to host holes
    files: dict[str, int] = field(default_factory=lambda: defaultdict(int))  # written, per split
    holes: dict[str, int] = field(default_factory=lambda: defaultdict(int))  # "split/kind" -> count
    compiles: Counter[str] = field(default_factory=Counter)


def collect(pin: Pin, archive: Path, stats: SuiteSourceStats) -> list[SuiteCandidate]:
    """The source's CUDA files worth cutting holes from, in path order."""
    found = []
    for path, text in cuda_texts(archive):
        stats.cuda_files += 1
        reason = "over-60KB" if len(text.encode("utf-8")) > MAX_FILE_BYTES else corpus.drop_reason(path, text)
        if reason is not None:
            stats.dropped[reason] += 1
        else:
            found.append(SuiteCandidate(pin.name, path, text, pin.license))
    return sorted(found, key=lambda c: c.path)


def screen(candidates: Sequence[SuiteCandidate],
           index: CorpusIndex) -> tuple[list[SuiteCandidate], list[tuple[str, str]]]:
    """Files that copy neither the corpus nor a suite file kept before them; and (source, why) for each
    other one: "corpus-exact", "corpus-near", "suite-exact" or "suite-near"."""
    kept: list[SuiteCandidate] = []
    reasons: list[tuple[str, str]] = []
    suite_exact: set[bytes] = set()
    for cand in candidates:
        key = corpus.exact_key(cand.text)
        sig = index.near.signature(cand.text)
        other = index.near.match(sig)
        if key in index.exact:
            reasons.append((cand.source, "corpus-exact"))
        elif other is not None and other < index.corpus_files:
            reasons.append((cand.source, "corpus-near"))
        elif key in suite_exact:
            reasons.append((cand.source, "suite-exact"))
        elif other is not None:
            reasons.append((cand.source, "suite-near"))
        else:
            kept.append(cand)
            suite_exact.add(key)
            index.near.remember(sig)
    return kept, reasons


def _function_lines(text: str, fn: Function) -> str:
    """The lines of a function body, from the line of its `{` to the line of its `}`, whole."""
    start = text.rfind("\n", 0, fn.body_open) + 1
    end = text.find("\n", fn.body_close)
    return text[start:end if end >= 0 else len(text)]


def file_holes(cand: SuiteCandidate, index: CorpusIndex, stats: SuiteSourceStats) -> dict[str, list[HoleSite]]:
    """The file's holes after the function-level corpus check and the per-function and per-file caps."""
    rng = random.Random(f"{SEED}:{cand.source}/{cand.path}")
    chosen: dict[str, list[HoleSite]] = {kind: [] for kind in suite.KINDS}
    seen: set[tuple[str, int, int]] = set()
    for fn, holes in cut_functions(cand.text, rng):
        if not holes:
            continue
        if index.copied(_function_lines(cand.text, fn)):
            stats.copied_functions += 1
            continue
        stats.hosts += 1
        for kind in suite.KINDS:
            mine = [h for h in holes if h.kind == kind and (h.kind, h.start, h.end) not in seen]
            rng.shuffle(mine)
            for hole in mine[:PER_FUNCTION]:
                seen.add((hole.kind, hole.start, hole.end))
                chosen[kind].append(hole)
    for name, rows in chosen.items():
        rng.shuffle(rows)
        if name == "body":
            rows.sort(key=lambda h: not h.kernel)  # stable: kernels' bodies before device functions'
        chosen[name] = rows[:PER_FILE]
    return chosen


@dataclass
class Pooled:
    cand: SuiteCandidate
    holes: dict[str, list[HoleSite]]


def _order(pooled: Iterable[Pooled]) -> list[Pooled]:
    return sorted(pooled, key=lambda p: hashlib.sha256(f"{SEED}:{p.cand.source}/{p.cand.path}".encode()).digest())


def select(pooled: Sequence[Pooled], quota: int) -> list[tuple[SuiteCandidate, HoleSite]]:
    """Up to `quota` holes of each kind, taking all of a file's holes before visiting the next file;
    `__device__` bodies only where kernels' bodies fall short."""
    taken: dict[str, list[tuple[SuiteCandidate, HoleSite]]] = {kind: [] for kind in suite.KINDS}
    ordered = _order(pooled)

    def take(item: Pooled, kind: str, kernel: bool | None) -> None:
        rows = [h for h in item.holes[kind] if kernel is None or h.kernel == kernel]
        room = quota - len(taken[kind])
        taken[kind] += [(item.cand, hole) for hole in rows[:max(0, room)]]

    for item in ordered:
        if all(len(rows) >= quota for rows in taken.values()):
            break
        for kind in ("line", "midline", "lines"):
            take(item, kind, None)
        take(item, "body", True)
    used = {id(cand) for rows in taken.values() for cand, _ in rows}
    for item in sorted(ordered, key=lambda p: id(p.cand) not in used):
        take(item, "body", False)
    rng = random.Random(SEED)
    chosen: list[tuple[SuiteCandidate, HoleSite]] = []
    for kind in suite.KINDS:
        rng.shuffle(taken[kind])
        chosen += taken[kind]
    return chosen


def only_system_includes(text: str) -> bool:
    return all(quote == "<" for quote in re.findall(r'^[ \t]*#[ \t]*include[ \t]*([<"])', text, re.MULTILINE))


def compile_verdicts(cands: Sequence[SuiteCandidate],
                     cache: Path = COMPILE_CACHE) -> dict[tuple[str, str], bool | None]:
    """nvcc compile-only verdict (2 at a time) for each file that includes system headers only, None for the
    others; verdicts are kept in `cache` by the text's sha256, for reruns."""
    known: dict[str, bool] = json.loads(cache.read_text()) if cache.is_file() else {}

    def verdict(cand: SuiteCandidate) -> bool | None:
        if not only_system_includes(cand.text):
            return None
        key = hashlib.sha256(cand.text.encode("utf-8")).hexdigest()
        if key not in known:
            known[key] = compile_source(cand.text).ok
        return known[key]

    with ThreadPoolExecutor(max_workers=2) as pool:
        verdicts = list(pool.map(verdict, cands))
    cache.parent.mkdir(parents=True, exist_ok=True)
    cache.write_text(json.dumps(known, sort_keys=True) + "\n")
    return {(c.source, c.path): v for c, v in zip(cands, verdicts, strict=True)}


def write_split(split: str, chosen: Sequence[tuple[SuiteCandidate, HoleSite]],
                verdicts: dict[tuple[str, str], bool | None],
                root: Path) -> tuple[list[suite.SuiteFile], list[suite.SuiteHole]]:
    """Number the files (per source, in path order) and holes (per kind), and write the library part."""
    cands = sorted({(c.source, c.path): c for c, _ in chosen}.values(), key=lambda c: (c.source, c.path))
    ids: dict[tuple[str, str], str] = {}
    per_source: Counter[str] = Counter()
    files = []
    for cand in cands:
        ids[(cand.source, cand.path)] = f"{cand.source}/{per_source[cand.source]:04d}"
        per_source[cand.source] += 1
        files.append(suite.SuiteFile(ids[(cand.source, cand.path)], cand.source, cand.path, cand.license,
                                     cand.text, verdicts[(cand.source, cand.path)]))
    per_kind: Counter[str] = Counter()
    holes = []
    for cand, hole in chosen:
        holes.append(suite.SuiteHole(f"{hole.kind}/{per_kind[hole.kind]:05d}", hole.kind,
                                     ids[(cand.source, cand.path)], hole.start, hole.end, hole.function,
                                     hole.template))
        per_kind[hole.kind] += 1
    files_path, holes_path = suite.part_paths(split, "library", root)
    suite.write_jsonl(files_path, files)
    suite.write_jsonl(holes_path, holes)
    return files, holes


# ---------------------------------------------------------------- reports

def _gz_bytes(root: Path) -> int:
    return sum(path.stat().st_size for split in suite.SPLITS for path in suite.part_paths(split, "library", root))


def sources_json(pins: Sequence[Pin], stats: dict[str, SuiteSourceStats]) -> dict[str, Any]:
    entries = []
    for pin in pins:
        st = stats[pin.name]
        entries.append({"name": pin.name, "kind": pin.kind, "version": pin.version, "license": pin.license,
                        "archive": pin.archive, "url": pin.url, "sha256": pin.sha256,
                        "cuda_files": st.cuda_files, "dropped": dict(sorted(st.dropped.items())),
                        "screened_files": st.screened, "copied_functions": st.copied_functions,
                        "host_functions": st.hosts, "files": dict(st.files), "holes": dict(sorted(st.holes.items())),
                        "compiles": dict(st.compiles)})
    return {"sources": entries, "dropped_sources": DROPPED_SOURCES}


def render_markdown(report: dict[str, Any], totals: dict[str, Any]) -> str:
    """SOURCES.md: one row per pinned source, then the totals."""
    lines = ["# CUDA-Infill sources (library part)", "",
             "Generated by `python -m dice_lsp.training.suite_build` from `bench/infill/sources.json`; do not edit by "
             "hand.",
             "", "*CUDA files*: files of the archive the corpus would call CUDA. *near-dup of corpus*: exact or "
             "MinHash near copies of a training-corpus CUDA file. *within suite*: copies of a suite file kept "
             "before. *other drops*: over 60 KB, generated, data tables (`corpus.drop_reason`). *copied fns*: "
             "functions whose body lines are mostly 4-line windows of the corpus (no holes there). Holes are "
             "line/midline/lines/body.", "",
             "| source | kind | version | license | archive | sha256 | CUDA files | kept | near-dup of corpus "
             "| within suite | other drops | copied fns | test files | test holes | dev files | dev holes |",
             "|---|---|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|---|---:|---|"]
    for e in report["sources"]:
        dropped = e["dropped"]
        corpus_dups = dropped.get("corpus-exact", 0) + dropped.get("corpus-near", 0)
        suite_dups = dropped.get("suite-exact", 0) + dropped.get("suite-near", 0)
        other = sum(dropped.values()) - corpus_dups - suite_dups
        per_split = {split: "/".join(str(e["holes"].get(f"{split}/{k}", 0)) for k in suite.KINDS)
                     for split in suite.SPLITS}
        lines.append(f"| {e['name']} | {e['kind']} | {e['version']} | {e['license']} | {e['archive']} "
                     f"| `{e['sha256']}` | {e['cuda_files']} | {e['screened_files']} | {corpus_dups} | {suite_dups} "
                     f"| {other} | {e['copied_functions']} | {e['files'].get('test', 0)} | {per_split['test']} "
                     f"| {e['files'].get('dev', 0)} | {per_split['dev']} |")
    lines += ["", "Left out:", ""]
    lines += [f"- {name}: {why}" for name, why in report["dropped_sources"].items()]
    lines += ["", "Totals:", ""]
    lines += [f"- {key}: {json.dumps(value, sort_keys=True)}" for key, value in totals.items()]
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------- build

def build(pins: Sequence[Pin], per_kind: int, downloads: Path, corpus_downloads: Path,
          root: Path = suite.SUITE_ROOT) -> dict[str, Any]:
    """Fetch, screen, cut, sample, compile and write both splits; returns the totals."""
    started = time.perf_counter()
    index = load_corpus_index(corpus_downloads)
    stats = {pin.name: SuiteSourceStats() for pin in pins}
    candidates = [c for pin in pins for c in collect(pin, fetch(pin, downloads), stats[pin.name])]
    kept, reasons = screen(candidates, index)
    for source, reason in reasons:
        stats[source].dropped[reason] += 1
    pools: dict[str, list[Pooled]] = {split: [] for split in suite.SPLITS}
    for cand in kept:
        stats[cand.source].screened += 1
        split = suite.split_of(cand.source, suite.inner_path(cand.path))
        pools[split].append(Pooled(cand, file_holes(cand, index, stats[cand.source])))
    quotas = {"test": per_kind, "dev": per_kind * DEV_PARTS[0] // DEV_PARTS[1]}
    chosen = {split: select(pools[split], quotas[split]) for split in suite.SPLITS}
    to_compile = sorted({(c.source, c.path): c for rows in chosen.values() for c, _ in rows}.values(),
                        key=lambda c: (c.source, c.path))
    verdicts = compile_verdicts(to_compile)
    totals: dict[str, Any] = {"holes": {}, "files": {}, "short": {}, "pool": {}, "compiles": Counter()}
    for split in suite.SPLITS:
        files, holes = write_split(split, chosen[split], verdicts, root)
        for file in files:
            stats[file.source].files[split] += 1
            stats[file.source].compiles[str(file.compiles)] += 1
            totals["compiles"][str(file.compiles)] += 1
        for cand, hole in chosen[split]:
            stats[cand.source].holes[f"{split}/{hole.kind}"] += 1
        counts = Counter(h.kind for h in holes)
        totals["holes"][split] = {kind: counts[kind] for kind in suite.KINDS}
        totals["files"][split] = len(files)
        totals["pool"][split] = {kind: sum(len(p.holes[kind]) for p in pools[split]) for kind in suite.KINDS}
        totals["short"][split] = {k: quotas[split] - n for k, n in totals["holes"][split].items() if n < quotas[split]}
    drops: Counter[str] = Counter()
    for st in stats.values():
        drops.update(st.dropped)
    totals["dropped_files"] = dict(sorted(drops.items()))
    totals["copied_functions"] = sum(st.copied_functions for st in stats.values())
    totals["host_functions"] = sum(st.hosts for st in stats.values())
    totals["compiles"] = dict(totals["compiles"])
    totals["gzip_bytes"] = _gz_bytes(root)
    report = sources_json(pins, stats)
    report["totals"] = totals
    (root / "sources.json").write_text(json.dumps(report, indent=1) + "\n")
    (root / "SOURCES.md").write_text(render_markdown(report, totals))
    LOG.info("built in %.0f s", time.perf_counter() - started)  # not in the reports: a rebuild changes nothing
    return totals


def _select_pins(names: Sequence[str] | None) -> list[Pin]:
    if not names:
        return list(SOURCES)
    known = {pin.name: pin for pin in SOURCES}
    unknown = [name for name in names if name not in known]
    if unknown:
        raise DiceError(f"unknown sources: {', '.join(unknown)}; known: {', '.join(known)}")
    return [known[name] for name in names]


def main(argv: Sequence[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s", stream=sys.stderr)
    parser = argparse.ArgumentParser(prog="python -m dice_lsp.training.suite_build", description=__doc__.split("\n")[0])
    parser.add_argument("--sources", nargs="*", help="subset of the pinned sources (default: all)")
    parser.add_argument("--per-kind", type=int, default=650, help="holes of each kind in test (dev: 2/5 of it)")
    parser.add_argument("--downloads", type=Path, default=DOWNLOADS, help="where the suite's archives lie")
    parser.add_argument("--corpus-downloads", type=Path, default=corpus.DOWNLOADS,
                        help="where the training corpus's archives lie (never downloaded here)")
    ns = parser.parse_args(argv)
    try:
        totals = build(_select_pins(ns.sources), ns.per_kind, ns.downloads, ns.corpus_downloads)
    except DiceError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(json.dumps(totals, indent=1), file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
