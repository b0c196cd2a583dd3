"""The canonical-idioms set (bench/idioms) and its loader (bench/canonical_idioms.py), without a model.

The markers are checked against an independent reading of the raw files (a plain regular expression, line by
line), so that a loader bug cannot hide behind itself: the marker-free text, each hole's truth, each midline
prefix, and the document a system is given for a hole (exactly that hole's text removed). With nvcc on the
machine, every marker-free kernel must compile alone.
"""

from __future__ import annotations

import importlib.util
import re
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import ModuleType

import pytest

from dice_lsp.errors import DiceError
from dice_lsp.evals import marked
from dice_lsp.evals.suite import Suite

BENCH = Path(__file__).resolve().parents[1] / "bench"
IDIOMS = BENCH / "idioms"
RAW_MARKER = re.compile(r"[ \t]*// @hole(?: midline=(?P<prefix>.*))?$")


def _load_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("canonical_idioms", BENCH / "canonical_idioms.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("canonical_idioms", module)
    spec.loader.exec_module(module)
    return module


ci = _load_module()


@pytest.fixture(scope="module")
def suite() -> Suite:
    loaded: Suite = ci.load_idioms(IDIOMS, compile_check=False)
    return loaded


def raw_lines(stem: str) -> list[str]:
    return (IDIOMS / f"{stem}.cu").read_text(encoding="utf-8").split("\n")


def test_the_set_is_the_size_asked_for(suite: Suite) -> None:
    kinds = {kind: sum(h.kind == kind for h in suite.holes) for kind in ("line", "midline")}
    assert len(suite.files) >= 40
    assert 90 <= len(suite.holes) <= 125
    assert kinds["line"] >= 30 and kinds["midline"] >= 30
    assert len({h.id for h in suite.holes}) == len(suite.holes)


def test_every_kernel_file_parses_its_markers() -> None:
    for path in sorted(IDIOMS.glob("*.cu")):
        raw = path.read_text(encoding="utf-8")
        _, marks = marked.strip_markers(raw, path.name)
        assert 1 <= len(marks) <= 3, path.name
        assert len(marks) == raw.count("// @hole"), path.name
        for mark in marks:
            assert RAW_MARKER.search(raw.split("\n")[mark.line]), f"{path.name}:{mark.line + 1}"


def test_every_truth_is_one_non_empty_line_without_marker(suite: Suite) -> None:
    for hole in suite.holes:
        truth = hole.truth(suite.text(hole))
        assert truth.strip() == truth and truth, hole.id
        assert "\n" not in truth and "@hole" not in truth, hole.id
        assert hole.function and not hole.template, hole.id


def test_the_marker_free_text_is_what_the_loader_produces(suite: Suite) -> None:
    for path in sorted(IDIOMS.glob("*.cu")):
        expected = "\n".join(RAW_MARKER.sub("", line) for line in raw_lines(path.stem))
        assert suite.files[path.stem].text == expected, path.name
        assert "@hole" not in expected


def test_each_truth_is_its_marked_line_or_the_rest_after_its_prefix(suite: Suite) -> None:
    for hole in suite.holes:
        stem, line = hole.id.split("/", 1)[1].rsplit(":", 1)
        raw = raw_lines(stem)[int(line) - 1]
        match = RAW_MARKER.search(raw)
        assert match is not None, hole.id
        content = raw[:match.start()].strip()
        truth = hole.truth(suite.text(hole))
        if hole.kind == "line":
            assert match.group("prefix") is None and truth == content, hole.id
        else:
            prefix = match.group("prefix").strip()
            assert content.startswith(prefix), hole.id
            assert content[len(prefix):].lstrip() == truth, hole.id
            assert ci.typed_prefix(suite, hole).rstrip() == prefix, hole.id


def test_the_document_for_a_hole_has_exactly_that_hole_removed(suite: Suite) -> None:
    from dice_lsp.evals.systems import document_for

    for hole in suite.holes:
        stem, line = hole.id.split("/", 1)[1].rsplit(":", 1)
        lines = [RAW_MARKER.sub("", raw) for raw in raw_lines(stem)]
        number = int(line) - 1
        marked = lines[number]
        indent = marked[:len(marked) - len(marked.lstrip())]
        match = RAW_MARKER.search(raw_lines(stem)[number])
        assert match is not None
        if hole.kind == "line":
            lines[number] = indent
        else:
            prefix = match.group("prefix").strip()
            after = marked.lstrip()[len(prefix):]
            lines[number] = indent + prefix + after[:len(after) - len(after.lstrip())]
        document = document_for(suite.text(hole), hole)
        assert document == "\n".join(lines), hole.id
        assert len(suite.text(hole)) - len(document) == hole.end - hole.start


def test_a_constant_idiom_is_scored_as_the_suite_scores_it(suite: Suite) -> None:
    """The pipeline's scoring on this set, no model: the constant thread-index line is shown everywhere and is
    exact exactly where the truth is that line (up to whitespace between tokens)."""
    from dice_lsp.evals.run import evaluate
    from dice_lsp.evals.systems import IDIOM, idiom

    report = evaluate(suite, suite.holes, idiom())
    rows = {row.kind: row for row in ci.stage_rows("idiom", report)}
    expected = sum(re.sub(r"\s", "", h.truth(suite.text(h))) == re.sub(r"\s", "", IDIOM) for h in suite.holes)
    assert rows["all"].holes == len(suite.holes) == rows["all"].shown
    assert rows["all"].exact == expected >= 2
    assert rows["all"].wrong == len(suite.holes) - expected
    assert rows["all"].precision == pytest.approx(expected / len(suite.holes))
    fills = ci.fills_markdown("idiom", suite, suite.holes, report)
    assert fills.count("| ✓ |") == expected and "Not shown (0): none" in fills
    assert ci.table_line(rows["line"]).startswith("| idiom | line |")


@pytest.mark.parametrize(("line", "message"), [
    ("    a[0] = 1;  // @hole sometimes", "malformed hole marker"),
    ("    a[0] = 1;  // @hole midline=", "empty midline prefix"),
    ("    a[0] = 1;  // @hole midline=b[0]", "is not how the line starts"),
    ("    a[0] = 1;  // @hole midline=a[0] = 1;", "leaves nothing to complete"),
    ("    // @hole", "without code"),
    ("    a[0] = 1;  /* one */  // @hole", "another comment"),
    ("    a[0] = 1;  // @hole // @hole", "malformed hole marker"),
    ("    a[0] = 1;  // @holes", "malformed hole marker"),
])
def test_a_malformed_marker_is_a_one_line_error_naming_its_line(line: str, message: str) -> None:
    raw = f"__global__ void k(int *a)\n{{\n{line}\n}}\n"
    with pytest.raises(DiceError, match=message) as caught:
        marked.strip_markers(raw, "k.cu")
    assert str(caught.value).startswith("k.cu:3: ") and "\n" not in str(caught.value)


def test_bad_folders_exit_2_with_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    unmarked = tmp_path / "unmarked"
    unmarked.mkdir()
    (unmarked / "k.cu").write_text("__global__ void k(int *a)\n{\n    a[0] = 1;\n}\n")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "k.cu").write_text("int x = 1;  // @hole\n")
    for folder, message in [(tmp_path / "missing", "not a folder"), (empty, "no kernels"),
                            (unmarked, "no hole marker"), (outside, "outside any function")]:
        assert ci.main(["--folder", str(folder), "--holes"]) == 2
        err = capsys.readouterr().err
        assert message in err and err.count("\n") == 1, err
    assert ci.main(["--folder", str(IDIOMS), "--no-compile-check"]) == 2
    assert "--out DIR is required" in capsys.readouterr().err


def test_holes_lists_every_hole_with_its_truth(capsys: pytest.CaptureFixture[str], suite: Suite) -> None:
    assert ci.main(["--holes"]) == 0
    out = capsys.readouterr().out
    assert out.count("⟩") == len(suite.holes)
    assert f"{len(suite.files)} kernels, {len(suite.holes)} holes" in out


def _nvcc_available() -> bool:
    from dice_lsp.toolchain.nvcc import find_nvcc

    try:
        find_nvcc()
    except DiceError:
        return False
    return True


@pytest.mark.skipif(not _nvcc_available(), reason="no nvcc on this machine (CUDA_HOME, PATH or dice-lsp[cuda])")
def test_every_marker_free_kernel_compiles_alone(suite: Suite) -> None:
    """nvcc -c of each file as the system sees it (the suite's default flags; verdicts cached on disk by text)."""
    from dice_lsp.evals.score import compiles
    from dice_lsp.toolchain.nvcc import compile_source

    keys = sorted(suite.files)
    with ThreadPoolExecutor(max_workers=2) as pool:
        verdicts = dict(zip(keys, pool.map(lambda key: compiles(suite.files[key].text), keys), strict=True))
    failed = {key: compile_source(suite.files[key].text).output[-400:] for key, ok in verdicts.items() if not ok}
    assert not failed, failed
