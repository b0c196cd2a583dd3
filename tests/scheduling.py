"""The order the suite's tests start in, so that the workers of `make test` (pytest-xdist, one per core) finish
together: the longest files first, then the rest in the order collected.

Under `--dist=loadfile` (pyproject's addopts) a file is one unit of work: one worker runs all its tests, so a
fixture its module sets up once (a team server, a Ray cluster, a compiled preamble) is set up once per run.
Files are ordered by the time of their tests in tests/durations.json (seconds per test id, written by
`pytest --store-durations`; tests under `RECORDED_FROM` seconds are left out of it). A test the file does not know
counts as short: the order only decides how evenly the workers end, never what a test does.

(Not `--dist=loadgroup` with an xdist_group per module: pytest-xdist 3.8 groups by a suffix it writes into
`item._nodeid`, which pytest 9.2's node ids no longer read, so its groups were silently split across workers.)
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

DURATIONS = Path(__file__).with_name("durations.json")
RECORDED_FROM = 1.0  # seconds: shorter tests are not written to DURATIONS


def read_durations(path: Path = DURATIONS) -> dict[str, float]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return {str(k): float(v) for k, v in data.items()} if isinstance(data, dict) else {}


def order(items: list[pytest.Item], durations: dict[str, float]) -> None:
    """Sort `items` longest file first; a file's tests stay together, in their order, and files of equal time
    keep the order collected."""
    weight: dict[str, float] = {}
    first: dict[str, int] = {}
    files = [item.nodeid.split("::")[0] for item in items]
    for index, (item, file) in enumerate(zip(items, files, strict=True)):
        weight[file] = weight.get(file, 0.0) + durations.get(item.nodeid, 0.0)
        first.setdefault(file, index)
    ranked = sorted(range(len(items)), key=lambda i: (-weight[files[i]], first[files[i]], i))
    items[:] = [items[i] for i in ranked]


def write_durations(measured: dict[str, float], whole_suite: bool, path: Path = DURATIONS) -> None:
    """Keep the tests of `measured` that took `RECORDED_FROM` seconds or more; a run of the whole suite replaces
    the file, a run of some tests updates theirs."""
    kept = {} if whole_suite else read_durations(path)
    for test, seconds in measured.items():
        kept.pop(test, None)
        if seconds >= RECORDED_FROM:
            kept[test] = round(seconds, 1)
    path.write_text(json.dumps(dict(sorted(kept.items())), indent=0) + "\n", encoding="utf-8")
