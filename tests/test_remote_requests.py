"""A team server request read once into typed values (`remote.requests.read_params`): every field, and the
defaults a request may leave out, taken from the harness and the operator's limits."""

from __future__ import annotations

import pytest

from dice_lsp.harness.limits import Limits
from dice_lsp.remote.limits import RequestLimits
from dice_lsp.remote.requests import (
    BenchParams,
    CheckParams,
    CompleteParams,
    FillParams,
    OptimizeParams,
    RepairParams,
    Sources,
    read_params,
)
from dice_lsp.settings import REPAIR_CANDIDATES, Settings
from dice_lsp.textdoc import Position

SETTINGS = Settings(max_canvas=48, candidates=3)
LIMITS = RequestLimits()


def test_a_completion_reads_its_position_and_selection() -> None:
    assert read_params("complete", {"text": "k", "line": 2, "character": 5}, SETTINGS, LIMITS) == CompleteParams(
        "k", Position(2, 5), None, SETTINGS)
    selected = read_params("complete", {"text": "k", "line": 2, "character": 5, "selection": [[1, 0], [3, 4]]},
                           SETTINGS, LIMITS)
    assert isinstance(selected, CompleteParams) and selected.selection == (Position(1, 0), Position(3, 4))


def test_a_fill_takes_the_canvas_setting_unless_it_names_max_tokens() -> None:
    assert read_params("fill", {"prefix": "a"}, SETTINGS, LIMITS) == FillParams("a", "", 48, SETTINGS)
    assert read_params("fill", {"prefix": "a", "suffix": "b", "max_tokens": 7}, SETTINGS, LIMITS) == FillParams(
        "a", "b", 7, SETTINGS)


def test_the_sources_keep_the_name_the_reference_and_the_files() -> None:
    params = {"text": "k", "path": "src/k.cu", "ref": "ref.py", "files": {"ref.py": "r", "src/k.h": "h"}}
    assert read_params("check", params, SETTINGS, LIMITS) == CheckParams(
        Sources("k", "src/k.cu", "ref.py", {"ref.py": "r", "src/k.h": "h"}), SETTINGS)
    assert read_params("check", {"text": "k", "ref": "", "files": None}, SETTINGS, LIMITS) == CheckParams(
        Sources("k", "kernel.cu", None, {}), SETTINGS)


def test_bench_and_optimize_default_to_the_harness_within_the_limits() -> None:
    assert read_params("bench", {"text": "k"}, SETTINGS, LIMITS) == BenchParams(
        Sources("k"), SETTINGS, Limits(timeout=Limits.timeout, trials=Limits.trials))
    tight = RequestLimits(max_timeout=2.0, max_trials=1)
    assert read_params("bench", {"text": "k"}, SETTINGS, tight) == BenchParams(
        Sources("k"), SETTINGS, Limits(timeout=2.0, trials=1))
    assert read_params("bench", {"text": "k", "timeout": 9, "trials": 4}, SETTINGS, LIMITS) == BenchParams(
        Sources("k"), SETTINGS, Limits(timeout=9.0, trials=4))
    assert read_params("optimize", {"text": "k", "kernel": "add"}, SETTINGS, tight) == OptimizeParams(
        Sources("k"), SETTINGS, "add", 2.0, True)


def test_only_an_explicit_false_marks_an_untrusted_optimize() -> None:
    def trusted(value: object) -> bool:
        read = read_params("optimize", {"text": "k", "kernel": "add", "trusted": value}, SETTINGS, LIMITS)
        assert isinstance(read, OptimizeParams)
        return read.trusted

    assert [trusted(value) for value in (False, None, True, 0)] == [False, True, True, True]


def test_repair_tries_default_to_the_setting_within_the_limit() -> None:
    assert read_params("repair", {"text": "k"}, SETTINGS, LIMITS) == RepairParams(
        Sources("k"), SETTINGS, REPAIR_CANDIDATES)
    assert read_params("repair", {"text": "k"}, SETTINGS, RequestLimits(max_candidates=1)) == RepairParams(
        Sources("k"), SETTINGS, 1)
    assert read_params("repair", {"text": "k", "candidates": 5}, SETTINGS, LIMITS) == RepairParams(
        Sources("k"), SETTINGS, 5)


def test_what_does_not_read_is_a_value_or_key_error() -> None:
    with pytest.raises(KeyError, match="kernel"):
        read_params("optimize", {"text": "k"}, SETTINGS, LIMITS)
    with pytest.raises(ValueError, match="no such method 'status'"):
        read_params("status", {"text": "k"}, SETTINGS, LIMITS)
