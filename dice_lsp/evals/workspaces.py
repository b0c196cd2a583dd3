"""The CUDA-Infill suite as workspaces: the index a suite file would have in its project (the other library files
of its source, both splits, itself excluded), for evaluating the workspace source (`workspace_for`), and the
parallel copies of a file (cuda/rocm twins) a run may leave out to measure what the workspace adds beyond them."""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import cache
from pathlib import Path

from dice_lsp.completion.sources.workspace import MAX_LINES, WorkspaceIndex, WorkspaceSource
from dice_lsp.evals.suite import SPLITS, SUITE_ROOT, SuiteFile, inner_path, load_suite

TWIN_DIRS = frozenset({"cuda", "rocm", "hip"})  # a folder of a backend's copy of the same code
TWIN_OVERLAP = 0.5  # a file holding this share of the file's distinct non-blank lines is a copy of it


def twin_path(path: str) -> str:
    """`path` with what tells backends apart removed: `rocm`/`hip`/`cuda` folders, and such parts of the file
    name (`foo_rocm.cu`, `foo.cuda.cc`), lower case; two files of one project with the same twin path are
    parallel copies (a cuda/ kernel and its hipified rocm/ copy)."""
    folders, _, name = inner_path(path).lower().rpartition("/")
    kept = [part if part not in TWIN_DIRS else "*" for part in folders.split("/")] if folders else []
    stem = [part for part in re.split(r"[._\-]", name) if part not in TWIN_DIRS and part not in ("cu", "cuh")]
    return "/".join([*kept, ".".join(stem)])


@cache
def _distinct_lines(text: str) -> frozenset[str]:
    return frozenset(s for s in (line.strip() for line in text.split("\n")) if s)


@cache
def _suite_library(suite_root: Path) -> dict[str, list[SuiteFile]]:
    """The library files of both splits of CUDA-Infill, by source."""
    by_source: dict[str, list[SuiteFile]] = {}
    for split in SPLITS:
        for file in load_suite("cuda-infill", split, suite_root).files.values():
            if not file.launch:
                by_source.setdefault(file.source, []).append(file)
    return by_source


@cache
def _suite_index(suite_root: Path, source: str) -> WorkspaceIndex:
    """Every library file of `source` (both splits), named by its path; built once per source."""
    index = WorkspaceIndex(max_files=len(_suite_library(suite_root).get(source, [])) + 1, max_lines=10 * MAX_LINES)
    for file in _suite_library(suite_root).get(source, []):
        index.add(file.path, file.text)
    return index


@cache
def _suite_file(suite_root: Path, split: str, file_id: str) -> SuiteFile:
    return load_suite("cuda-infill", split, suite_root).files[file_id]


def suite_twins(file: SuiteFile, others: Iterable[SuiteFile]) -> list[str]:
    """The paths among `others` that are parallel copies of `file`: the same `twin_path`, or holding at least
    `TWIN_OVERLAP` of its distinct non-blank lines."""
    mine = _distinct_lines(file.text)
    twin = twin_path(file.path)
    found = []
    for other in others:
        shared = len(mine & _distinct_lines(other.text))
        if twin_path(other.path) == twin or (mine and shared >= TWIN_OVERLAP * len(mine)):
            found.append(other.path)
    return found


@cache
def _suite_exclusions(suite_root: Path, file: SuiteFile, twins: bool) -> tuple[str, ...]:
    library = _suite_library(suite_root).get(file.source, [])
    own = inner_path(file.path) if not file.launch else file.path
    exclude = [other.path for other in library if inner_path(other.path) == own]
    if not twins:
        exclude += suite_twins(file, (other for other in library if other.path not in exclude))
    return tuple(exclude)


def workspace_for(file: str | SuiteFile, split: str = "dev", *, twins: bool = True,
                  suite_root: Path = SUITE_ROOT) -> WorkspaceSource:
    """The workspace source a CUDA-Infill file would have in its project: the other library files of its
    `source` from both splits (their full texts), itself excluded (for a file of the executable part, the
    library file it was made from, which has its path). `file` is a `SuiteFile` or its id in `split` (ids are
    unique within a split only: `ceres-solver/0000` is a file of each). With `twins=False` its parallel copies
    are excluded too (`suite_twins`), which measures what the workspace adds beyond copies of the file. The index
    of each source is built once and shared, and each file's exclusions are computed once."""
    if isinstance(file, str):
        file = _suite_file(suite_root, split, file)
    return WorkspaceSource(_suite_index(suite_root, file.source), _suite_exclusions(suite_root, file, twins))
