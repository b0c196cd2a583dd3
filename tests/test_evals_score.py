"""CUDA-Infill per-fill verdicts: golden values for each field on a hand-made kernel file."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

import pytest

from dice_lsp.evals import score as score_module
from dice_lsp.evals.score import FillScore, levenshtein, normalise, score_fill, similarity, tokens
from dice_lsp.evals.suite import SuiteHole

TEXT = """#include <cuda_runtime.h>

__global__ void scale(float* out, const float* in, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        out[i] = 2.0f * in[i];
    }
}

__device__ float twice(float x) { return 2.0f * x; }
"""
TRUTH = "out[i] = 2.0f * in[i];"
START = TEXT.index(TRUTH)
HOLE = SuiteHole("line/000001", "line", "f/0", START, START + len(TRUTH), "scale", False)
BODY_START = TEXT.index("{\n    int i") + 1
BODY = SuiteHole("body/000001", "body", "f/0", BODY_START, TEXT.index("}\n\n__device__"), "scale", False)


def verdict(fill: str | None, hole: SuiteHole = HOLE) -> FillScore:
    return score_fill(TEXT, hole, fill, compile_check=False)


def test_the_truth_is_exact_on_every_measure() -> None:
    assert verdict(TRUTH) == FillScore(shown=True, exact=True, exact_ws=True, first_line=True, similarity=1.0,
                                       parses=True, substantive=True, compiles=None, passes=None)


def test_trailing_whitespace_and_outer_blank_lines_do_not_count_but_indentation_does() -> None:
    assert verdict("\n" + TRUTH + "  \n\n").exact
    assert normalise("\n\n  a  \n\n b\t\n\n") == "  a\n\n b"
    indented = verdict("    " + TRUTH)
    assert (indented.exact, indented.exact_ws, indented.first_line) == (False, True, True)


def test_token_equality_ignores_spacing_between_tokens_only() -> None:
    spaced = verdict("out[i]=2.0f*in[i];")
    assert (spaced.exact, spaced.exact_ws, spaced.first_line) == (False, True, False)
    assert [t for t, _ in tokens("int a")] == ["int", "a"]
    assert [t for t, _ in tokens("inta")] == ["inta"]
    assert [t for t, _ in tokens('k<<<g, b>>>(s, "a  b"); x>>=1; // two  words')] == [
        "k", "<<<", "g", ",", "b", ">>>", "(", "s", ",", '"a  b"', ")", ";", "x", ">>=", "1", ";", "// two words"]
    assert [t for t, _ in tokens("a - -b")] != [t for t, _ in tokens("a --b")]


def test_first_line_compares_the_first_non_blank_lines_stripped() -> None:
    body = BODY.truth(TEXT)
    same_start = verdict("\n  int i = blockIdx.x * blockDim.x + threadIdx.x;  \n    out[i] = 0;\n", BODY)
    assert (same_start.first_line, same_start.exact, same_start.parses) == (True, False, True)
    assert not verdict("int j = 0;\n" + body, BODY).first_line


def test_edit_similarity_is_one_minus_levenshtein_over_the_longer_length() -> None:
    assert levenshtein("kitten", "sitting") == 3
    assert levenshtein("", "abc") == 3 and levenshtein("abc", "abc") == 0
    assert similarity("kitten", "sitting") == pytest.approx(1 - 3 / 7)
    assert similarity("", "") == 1.0
    assert verdict("out[i] = 3.0f * in[i];").similarity == pytest.approx(1 - 1 / len(TRUTH))
    assert verdict(None).similarity == 0.0


def test_unbalanced_brackets_do_not_parse() -> None:
    assert not verdict("out[i] = (2.0f * in[i];").parses
    assert not verdict("if (i < n) {").parses  # the kernel loses its closing brace
    assert not verdict("}").parses  # closes the kernel early: the rest of its body is an error
    assert not verdict("out[i] = 2.0f *;").parses


def test_an_error_outside_the_holes_function_does_not_count() -> None:
    broken = TEXT + "\n__device__ int bad( { return ; \n"
    assert score_fill(broken, HOLE, TRUTH, compile_check=False).parses


def test_comment_only_fill_is_shown_but_not_substantive() -> None:
    comment = verdict("// scale the input")
    assert (comment.shown, comment.substantive, comment.parses, comment.exact) == (True, False, True, False)
    assert not verdict("/* a\n   b */").substantive
    assert verdict('out[i] = 0; // "//"').substantive


def test_empty_and_missing_fills() -> None:
    empty = verdict("")
    assert (empty.shown, empty.substantive, empty.parses, empty.exact, empty.similarity) == (
        False, False, True, False, 0.0)
    assert not verdict(" \n\t").shown
    missing = verdict(None)
    assert (missing.shown, missing.parses, missing.first_line, missing.compiles) == (False, False, False, None)


def test_scores_are_json_serialisable() -> None:
    assert json.loads(json.dumps(asdict(verdict(TRUTH))))["similarity"] == 1.0


@pytest.fixture
def fresh_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    return tmp_path


@pytest.mark.usefixtures("fresh_cache")
def test_compile_verdicts_with_nvcc(monkeypatch: pytest.MonkeyPatch) -> None:
    truth = score_fill(TEXT, HOLE, TRUTH, compile_check=True)
    wrong = score_fill(TEXT, HOLE, "out[i] = in[i] - 1.0f;", compile_check=True)
    undefined = score_fill(TEXT, HOLE, "out[i] = 2.0f * input[i];", compile_check=True)
    assert (truth.compiles, wrong.compiles, wrong.exact, undefined.parses, undefined.compiles) == (
        True, True, False, True, False)

    def no_nvcc(*_args: object, **_kwargs: object) -> None:
        raise AssertionError("nvcc ran for a fill that needs no compile")

    monkeypatch.setattr(score_module, "compile_source", no_nvcc)
    assert score_fill(TEXT, HOLE, "// nothing", compile_check=True).compiles is False
    assert score_fill(TEXT, HOLE, "", compile_check=True).compiles is False
    assert score_fill(TEXT, HOLE, None, compile_check=True).compiles is False
    assert score_fill(TEXT, HOLE, TRUTH, compile_check=True).compiles is True  # remembered on disk
    assert score_fill(TEXT, HOLE, "out[i] = 2.0f * input[i];", compile_check=True).compiles is False
