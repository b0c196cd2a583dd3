"""The order the suite's tests start in, so that the workers of `make test` (pytest-xdist, one per core) finish
together: the longest work first, then the rest in the order collected.

A unit of work is one test, or a whole module when its tests share a fixture the module sets up once (a team
server, a Ray cluster, a compiled preamble): those tests carry `xdist_group(<module>)`, so that under
`--dist loadgroup` one worker runs them all and sets the fixture up once. Units are ordered by their time in
tests/durations.json (seconds per test id, written by `pytest --store-durations`; tests under `RECORDED_FROM`
seconds are left out of it). A test the file does not know counts as short: the order only decides how evenly
the workers end, never what a test does.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

DURATIONS = Path(__file__).with_name("durations.json")
RECORDED_FROM = 1.0  # seconds: shorter tests are not written to DURATIONS
_GROUP_SUFFIX = re.compile(r"@tests/[^@]*$")  # what xdist appends to a grouped test's id in the reports
_SHARED_SCOPES = ("module", "package", "class", "session")


def shared_module(item: pytest.Item) -> str | None:
    """The test's module path when the test uses a fixture of that module set up once for several tests."""
    info = getattr(item, "_fixtureinfo", None)
    module = item.nodeid.split("::")[0]
    for name in getattr(item, "fixturenames", ()):
        definitions = info.name2fixturedefs.get(name) if info is not None else None
        if not definitions:
            continue
        fixture = definitions[-1]
        # a fixture of the module itself (a conftest's session fixtures are set up once per worker anyway)
        if fixture.scope in _SHARED_SCOPES and getattr(fixture, "baseid", "") == module:
            return module
    return None


def read_durations(path: Path = DURATIONS) -> dict[str, float]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return {str(k): float(v) for k, v in data.items()} if isinstance(data, dict) else {}


def order(items: list[pytest.Item], durations: dict[str, float]) -> None:
    """Group the tests that share a module's fixture, then sort `items` longest unit first (a unit's tests stay
    together, in their order; units of equal time keep the order collected)."""
    units: list[str] = []
    weight: dict[str, float] = {}
    first: dict[str, int] = {}
    for index, item in enumerate(items):
        module = shared_module(item)
        if module is not None:
            item.add_marker(pytest.mark.xdist_group(module))
        unit = module or item.nodeid
        units.append(unit)
        weight[unit] = weight.get(unit, 0.0) + durations.get(item.nodeid, 0.0)
        first.setdefault(unit, index)
    ranked = sorted(range(len(items)), key=lambda i: (-weight[units[i]], first[units[i]], i))
    items[:] = [items[i] for i in ranked]


def test_id(report_nodeid: str) -> str:
    """A report's test id without the group xdist appends to it."""
    return _GROUP_SUFFIX.sub("", report_nodeid)


def write_durations(measured: dict[str, float], whole_suite: bool, path: Path = DURATIONS) -> None:
    """Keep the tests of `measured` that took `RECORDED_FROM` seconds or more; a run of the whole suite replaces
    the file, a run of some tests updates theirs."""
    kept = {} if whole_suite else read_durations(path)
    for test, seconds in measured.items():
        kept.pop(test, None)
        if seconds >= RECORDED_FROM:
            kept[test] = round(seconds, 1)
    path.write_text(json.dumps(dict(sorted(kept.items())), indent=0) + "\n", encoding="utf-8")
