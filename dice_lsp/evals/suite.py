"""The CUDA-Infill suite on disk: files, the holes cut from them, and the split each belongs to.

    bench/infill/<split>/<part>.files.jsonl.gz   one SuiteFile per line
    bench/infill/<split>/<part>.holes.jsonl.gz   one SuiteHole per line, pointing into a file by id

`split` is `test` (the suite: measured, never tuned on) or `dev` (built the same way, for tuning decoding
defaults and filters). `part` is `library` (holes in files of the pinned sources, as they are) or
`executable` (self-contained kernels with a `dice:launch` spec, verified on a GPU when the suite was built;
a fill there passes only when the filled kernel is verified against the original). A hole is a span of its
file's text; the text of the span is the truth, which no system under test is ever shown, nor its length.
"""

from __future__ import annotations

import gzip
import hashlib
import json
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

from dice_lsp.errors import DiceError

SUITE_ROOT = Path(__file__).resolve().parents[2] / "bench" / "infill"
SUITES = ("cuda-infill",)
SPLITS = ("test", "dev")
PARTS = ("library", "executable")
Kind = Literal["line", "midline", "lines", "body"]
KINDS: tuple[Kind, ...] = ("line", "midline", "lines", "body")
KIND_HELP = {
    "line": "one statement line, cursor on the emptied line",
    "midline": "the rest of a half-typed line, cursor mid-line",
    "lines": "2-5 consecutive lines",
    "body": "a whole kernel (or __device__ function) body",
}
DEV_SHARE = 4  # one file in DEV_SHARE (by a hash of source and path) goes to the dev split


def inner_path(path: str) -> str:
    """A path inside an archive without the archive's top folder (`onnxruntime-1.21.0/`): what names a file
    across versions of its source."""
    return path.split("/", 1)[1] if "/" in path else path


def split_of(source: str, path: str) -> str:
    """The split a source file belongs to, fixed by its source's name and its `inner_path` (so a rebuild, or a
    newer version of the source, never moves a file; both parts of the suite use this one rule)."""
    digest = hashlib.sha256(f"{source}/{path}".encode()).digest()
    return "dev" if digest[0] % DEV_SHARE == 0 else "test"


@dataclass(frozen=True)
class SuiteFile:
    id: str  # unique within a split, e.g. "onnxruntime/0042"
    source: str  # name of the pinned source (bench/infill/sources.json)
    path: str  # path inside that source
    license: str
    text: str
    compiles: bool | None  # compiles on its own with nvcc (CUDA headers only); None: not tried
    launch: bool = False  # carries a dice:launch spec (part "executable")
    origin: str = ""  # executable part: "source:path:function" of the kernel it was made from


@dataclass(frozen=True)
class SuiteHole:
    id: str  # unique within a split, e.g. "line/000123"
    kind: Kind
    file: str  # SuiteFile.id
    start: int  # string offsets into the file's text
    end: int
    function: str  # name of the enclosing kernel or __device__ function
    template: bool  # the function is a template (nvcc does not check an uninstantiated body)
    executable: bool = False  # in a file with a launch spec: the fill is run and verified

    def truth(self, text: str) -> str:
        return text[self.start:self.end]


@dataclass
class Suite:
    name: str
    split: str
    files: dict[str, SuiteFile]
    holes: list[SuiteHole]

    def text(self, hole: SuiteHole) -> str:
        return self.files[hole.file].text

    def select(self, kinds: Iterable[str] | None = None, limit: int | None = None,
               executable: bool = False) -> list[SuiteHole]:
        """Holes of `kinds` (all by default), the first `limit` of each kind in suite order (the builder
        shuffled them, so a prefix is a fair sample); only executable ones with `executable`."""
        wanted = list(kinds) if kinds else list(KINDS)
        chosen: list[SuiteHole] = []
        for kind in wanted:
            rows = [h for h in self.holes if h.kind == kind and (h.executable or not executable)]
            chosen.extend(rows if limit is None else rows[:limit])
        return chosen


def _read_jsonl(path: Path) -> Iterator[dict[str, Any]]:
    with gzip.open(path, "rt", encoding="utf-8") as handle:
        for line in handle:
            if line.strip():
                yield json.loads(line)


def write_jsonl(path: Path, rows: Iterable[SuiteFile | SuiteHole]) -> int:
    """Write rows as gzipped JSON lines, reproducibly (no timestamp in the gzip header)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    count = 0
    with path.open("wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as handle:
        for row in rows:
            handle.write((json.dumps(asdict(row), ensure_ascii=False, sort_keys=True) + "\n").encode("utf-8"))
            count += 1
    return count


def part_paths(split: str, part: str, root: Path = SUITE_ROOT) -> tuple[Path, Path]:
    folder = root / split
    return folder / f"{part}.files.jsonl.gz", folder / f"{part}.holes.jsonl.gz"


def load_suite(name: str = "cuda-infill", split: str = "test", root: Path = SUITE_ROOT) -> Suite:
    """The suite's files and holes (every part that is built); a one-line error when none is."""
    if name not in SUITES:
        raise DiceError(f"unknown suite {name!r}; known: {', '.join(SUITES)}")
    if split not in SPLITS:
        raise DiceError(f"unknown split {split!r}; known: {', '.join(SPLITS)}")
    files: dict[str, SuiteFile] = {}
    holes: list[SuiteHole] = []
    for part in PARTS:
        files_path, holes_path = part_paths(split, part, root)
        if not files_path.is_file() or not holes_path.is_file():
            continue
        files.update((row["id"], SuiteFile(**row)) for row in _read_jsonl(files_path))
        holes.extend(SuiteHole(**row) for row in _read_jsonl(holes_path))
    if not holes:
        raise DiceError(f"{root / split}: the {name} suite is not built (python -m dice_lsp.training.suite_build)")
    missing = sorted({h.file for h in holes} - files.keys())
    if missing:
        raise DiceError(f"{root / split}: holes point to files that are not there: {', '.join(missing[:3])}")
    return Suite(name, split, files, holes)
