"""A team server request read once into typed values (`remote.requests.read_params`): the job it asks for with
every parameter, its sources, and the defaults a request may leave out, taken from the harness and the operator's
limits."""

from __future__ import annotations

from pathlib import Path

import pytest

from dice_lsp.harness.limits import Limits
from dice_lsp.jobs.api import BenchJob, CheckJob, CompleteJob, Defaults, Document, OptimizeJob, RepairJob
from dice_lsp.remote.limits import RequestLimits
from dice_lsp.remote.requests import FillParams, Received, Sources, defaults_within, read_params
from dice_lsp.settings import REPAIR_CANDIDATES, Settings
from dice_lsp.textdoc import Position
from dice_lsp.toolchain.flags import CompileFlags

SETTINGS = Settings(max_canvas=48, candidates=3)
DOCUMENT = Document(Path("/srv/request/kernel.cu"), "k", SETTINGS, CompileFlags)


def received(method: str, params: dict[str, object]) -> Received:
    read = read_params(method, params, SETTINGS)
    assert isinstance(read, Received) and read.method == method and read.settings == SETTINGS
    return read


def test_a_completion_reads_its_position_and_selection() -> None:
    plain = received("complete", {"text": "k", "line": 2, "character": 5})
    assert plain.sources == Sources("k") and plain.job(DOCUMENT) == CompleteJob(DOCUMENT, Position(2, 5))
    selected = received("complete", {"text": "k", "line": 2, "character": 5, "selection": [[1, 0], [3, 4]]})
    assert selected.job(DOCUMENT) == CompleteJob(DOCUMENT, Position(2, 5), selection=(Position(1, 0), Position(3, 4)))


def test_a_fill_takes_the_canvas_setting_unless_it_names_max_tokens() -> None:
    assert read_params("fill", {"prefix": "a"}, SETTINGS) == FillParams("a", "", 48, SETTINGS)
    assert read_params("fill", {"prefix": "a", "suffix": "b", "max_tokens": 7}, SETTINGS) == FillParams(
        "a", "b", 7, SETTINGS)


def test_the_sources_keep_the_name_the_reference_and_the_files() -> None:
    params = {"text": "k", "path": "src/k.cu", "ref": "ref.py", "files": {"ref.py": "r", "src/k.h": "h"}}
    check = received("check", params)
    assert check.sources == Sources("k", "src/k.cu", "ref.py", {"ref.py": "r", "src/k.h": "h"})
    assert check.job(DOCUMENT) == CheckJob(DOCUMENT)
    assert received("check", {"text": "k", "ref": "", "files": None}).sources == Sources("k", "kernel.cu", None, {})


def test_each_job_reads_its_own_parameters_and_leaves_the_rest_to_the_defaults() -> None:
    assert received("bench", {"text": "k"}).job(DOCUMENT) == BenchJob(DOCUMENT)
    assert received("bench", {"text": "k", "timeout": 9, "trials": 4}).job(DOCUMENT) == BenchJob(DOCUMENT, 9.0, 4)
    assert received("repair", {"text": "k"}).job(DOCUMENT) == RepairJob(DOCUMENT)
    assert received("repair", {"text": "k", "candidates": 5}).job(DOCUMENT) == RepairJob(DOCUMENT, 5)
    optimize = received("optimize", {"text": "k", "kernel": "add", "timeout": 2}).job(DOCUMENT)
    assert isinstance(optimize, OptimizeJob) and (optimize.kernel, optimize.timeout) == ("add", 2.0)


def test_what_a_request_leaves_out_defaults_to_the_harness_within_the_limits() -> None:
    assert defaults_within(RequestLimits()) == Defaults(Limits.timeout, Limits.trials, REPAIR_CANDIDATES)
    tight = defaults_within(RequestLimits(max_timeout=2.0, max_trials=1, max_candidates=1))
    assert tight == Defaults(timeout=2.0, trials=1, repair_candidates=1)
    assert BenchJob(DOCUMENT).arguments(tight) == {"limits": Limits(timeout=2.0, trials=1)}
    assert BenchJob(DOCUMENT, 9.0, 4).arguments(tight) == {"limits": Limits(timeout=9.0, trials=4)}
    assert RepairJob(DOCUMENT).arguments(tight) == {"candidates": 1}


def test_only_an_explicit_false_marks_an_untrusted_optimize() -> None:
    def trusted(value: object) -> bool:
        job = received("optimize", {"text": "k", "kernel": "add", "trusted": value}).job(DOCUMENT)
        assert isinstance(job, OptimizeJob)
        return job.document.settings.trusted

    assert [trusted(value) for value in (False, None, True, 0)] == [False, True, True, True]


def test_what_does_not_read_is_a_value_or_key_error() -> None:
    with pytest.raises(KeyError, match="kernel"):
        read_params("optimize", {"text": "k"}, SETTINGS)
    with pytest.raises(ValueError, match="no such method 'status'"):
        read_params("status", {"text": "k"}, SETTINGS)
