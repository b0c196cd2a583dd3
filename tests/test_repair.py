"""Repair against the real nvcc, with the embedded model (what `dice-lsp repair` and the quick fix run)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from dice_lsp.engine import LoadedModel, load_model
from dice_lsp.errors import Cancelled
from dice_lsp.optimize.repair import Check, checker, errors_of, region, repair
from dice_lsp.toolchain.cache import CompileCache
from dice_lsp.toolchain.flags import CompileFlags
from dice_lsp.toolchain.report import Diagnostic

ROOT = Path(__file__).resolve().parents[1]
SAXPY = (ROOT / "examples" / "saxpy.cu").read_text()
STATEMENT = "if (i < n) y[i] = a * x[i] + y[i];"
NO_SEMICOLON = SAXPY.replace(STATEMENT, STATEMENT[:-1], 1)
UNDEFINED = SAXPY.replace("int i = blockIdx.x", "int i = blockIdy.x", 1)


@pytest.fixture(scope="module")
def model() -> LoadedModel:
    return load_model(None, "cpu", "auto")


@pytest.fixture(scope="module")
def check(tmp_path_factory: pytest.TempPathFactory) -> Check:
    """nvcc's report, each text compiled once for the module (the tests compile the same few broken and fixed
    files again and again): a compile cache of the module's own, as the product's repair keeps one."""
    cache = CompileCache(tmp_path_factory.mktemp("repair-cache") / "compile-cache.msgpack")
    return checker(ROOT / "examples", CompileFlags(), cache=cache)


class Counted:
    """A model runner (as the CLI builds one) that counts the jobs it runs."""

    def __init__(self, model: LoadedModel, before: Callable[[], None] | None = None) -> None:
        self.model, self.before, self.calls = model, before, 0

    def __call__(self, job: Callable[[LoadedModel], list[str]]) -> list[str]:
        self.calls += 1
        if self.before is not None:
            self.before()
        return job(self.model)


def line_of(text: str, offset: int) -> int:
    return text.count("\n", 0, offset)


def masked(text: str, spans: list[tuple[int, int]]) -> list[str]:
    return [text[lo:hi] for lo, hi in spans]


def errors(check: Check, text: str) -> list[Diagnostic]:
    found = errors_of(check(text))
    assert found, "the planted error must make nvcc fail"
    return found


def test_narrow_region_for_a_missing_semicolon_is_the_end_of_the_line_before(check: Check) -> None:
    found = errors(check, NO_SEMICOLON)
    first = min(found, key=lambda e: e.line)
    statement_line = line_of(NO_SEMICOLON, NO_SEMICOLON.index(STATEMENT[:-1]))
    assert first.message == 'expected a ";"' and first.line == statement_line + 1 and first.character == 0, \
        "nvcc reports the missing ; at the start of the `}` line"
    start, end, spans = region(NO_SEMICOLON, found, narrow=True)
    assert masked(NO_SEMICOLON, spans) == ["]"]
    assert [line_of(NO_SEMICOLON, lo) for lo, _ in spans] == [statement_line]
    saxpy = NO_SEMICOLON.index("__global__ void saxpy(")
    body_open, body_close = NO_SEMICOLON.index("{", saxpy), NO_SEMICOLON.index("\n}", saxpy) + 1
    assert (start, end) == (body_open + 1, body_close), "the region stays inside the kernel's braces"


def test_narrow_region_for_an_undefined_identifier_is_the_identifier(check: Check) -> None:
    found = errors(check, UNDEFINED)
    assert [(e.message, e.character) for e in found] == [('identifier "blockIdy" is undefined', 12)]
    _, _, spans = region(UNDEFINED, found, narrow=True)
    at = UNDEFINED.index("blockIdy")
    assert spans == [(at, at + len("blockIdy"))]


@pytest.mark.parametrize(("text", "line"), [(NO_SEMICOLON, STATEMENT[:-1]),
                                            (UNDEFINED, "int i = blockIdy.x * blockDim.x + threadIdx.x;")])
def test_wide_region_masks_whole_lines_but_never_braces_alone(check: Check, text: str, line: str) -> None:
    start, end, spans = region(text, errors(check, text), narrow=False)
    assert masked(text, spans) == [line], "the code of the line, its indentation kept"
    assert text[start:end].count("\n") >= 2, "context lines around the masked one"


def test_nearby_errors_share_a_round_far_ones_wait(check: Check) -> None:
    text = UNDEFINED.replace("threadIdx.x;\n    if (i < n) y[i]", "threadIdx.x;\n    if (i < m) y[i]", 1)
    text = text.replace("int i = (blockIdx.x", "int i = (blockIdz.x", 1)  # in saxpy_vec4, 20 lines below
    found = errors(check, text)
    assert len(found) == 3
    _, _, spans = region(text, found, narrow=True)
    assert masked(text, spans) == ["blockIdy", "m"]


def test_missing_semicolon_is_repaired_in_one_round(model: LoadedModel, check: Check) -> None:
    run = Counted(model)
    result = repair(run, NO_SEMICOLON, check)
    assert (result.compiles, result.rounds, result.errors, run.calls) == (True, 1, [], 1)
    assert result.text == SAXPY


def test_a_file_that_compiles_is_left_alone(model: LoadedModel, check: Check) -> None:
    run = Counted(model)
    result = repair(run, SAXPY, check)
    assert (result.compiles, result.rounds, result.text, run.calls) == (True, 0, SAXPY, 0)


def test_rounds_are_bounded(model: LoadedModel, check: Check) -> None:
    """Three errors far apart in three kernels: a round re-writes the region of one, so two rounds cannot
    make the file compile, and the model runs once per round, no more."""
    kernels = "".join(
        f"__global__ void k{k}(float* x, int n) {{\n    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
        f"    if (i < n) x[i] = {name} * x[i];\n}}\n\n// ---\n// ---\n// ---\n// ---\n\n"
        for k, name in enumerate(["alpha", "beta", "gamma"]))
    assert len(errors(check, kernels)) == 3
    run = Counted(model)
    result = repair(run, kernels, check, rounds=2, candidates=2)
    assert not result.compiles and result.errors
    assert result.rounds == 2 and run.calls == 2
    last = kernels.index("__global__ void k2")
    assert result.text.endswith(kernels[last:]), "the third kernel lies outside both rounds' regions"


def test_a_candidate_that_deletes_the_rejected_line_is_not_taken(model: LoadedModel, check: Check) -> None:
    """The deletion compiles, and repair tries it first: only the empty-line rule keeps it out."""
    start, end, _ = region(NO_SEMICOLON, errors(check, NO_SEMICOLON), narrow=True)
    draft = NO_SEMICOLON[start:end]
    deletion = draft.replace(f"    {STATEMENT[:-1]}\n", "")
    assert deletion != draft
    deleted = NO_SEMICOLON[:start] + deletion + NO_SEMICOLON[end:]
    assert not errors_of(check(deleted)), "deleting the line would make the file compile"

    def run(job: Callable[[LoadedModel], list[str]]) -> list[str]:
        return [deletion, *job(model)]

    result = repair(run, NO_SEMICOLON, check, rounds=1, candidates=2)
    assert result.text != deleted
    assert STATEMENT[:-2] in result.text, "the line is still there (only its last token was re-written)"


UNKNOWN_SCALE = SAXPY.replace(STATEMENT, "if (i < n) y[i] = a * x[i] * scale_factor;", 1)


def test_a_candidate_that_replaces_the_users_statement_is_not_taken(check: Check) -> None:
    """`scale_factor` is undefined. Another statement in its line's place compiles (a `__syncthreads()` there
    would even hang after a divergent return): it is not taken; a re-write of what nvcc points at is, and the
    rest of the user's statement stays."""
    found = errors(check, UNKNOWN_SCALE)
    start, end, _ = region(UNKNOWN_SCALE, found, narrow=True)
    draft = UNKNOWN_SCALE[start:end]
    statement = "if (i < n) y[i] = a * x[i] * scale_factor;"
    replaced = draft.replace(statement, "__syncthreads();")
    fixed = draft.replace(statement, "if (i < n) y[i] = a * x[i] * a;")
    assert not errors_of(check(UNKNOWN_SCALE[:start] + replaced + UNKNOWN_SCALE[end:])), "it would compile"

    def run(job: Callable[[LoadedModel], list[str]]) -> list[str]:
        return [replaced, fixed]

    result = repair(run, UNKNOWN_SCALE, check, rounds=1, candidates=2)
    assert result.compiles and "__syncthreads" not in result.text
    assert result.text == UNKNOWN_SCALE.replace(statement, "if (i < n) y[i] = a * x[i] * a;")
    assert [(c.before, c.after) for c in result.changes] == [(statement, "if (i < n) y[i] = a * x[i] * a;")]


def test_cancel_before_a_round_raises_cancelled(model: LoadedModel, check: Check) -> None:
    run = Counted(model)
    with pytest.raises(Cancelled):
        repair(run, NO_SEMICOLON, check, cancel=lambda: True)
    assert run.calls == 0


def test_cancel_while_the_model_denoises_raises_cancelled(model: LoadedModel, check: Check) -> None:
    """A cancel that comes once the model runs stops it between two denoising steps and ends the repair."""
    flag: list[bool] = []
    run = Counted(model, before=lambda: flag.append(True))
    with pytest.raises(Cancelled):
        repair(run, NO_SEMICOLON, check, cancel=lambda: bool(flag))
    assert run.calls == 1


def test_a_missing_header_is_reported_on_its_include_line_and_not_rewritten(check: Check) -> None:
    """No re-writing conjures a header: the include line would only be renamed to something that exists."""
    include = '#include "missing_header.cuh"'
    text = SAXPY.replace("#include <cuda_runtime.h>\n", f"#include <cuda_runtime.h>\n{include}\n", 1)
    [error] = errors(check, text)
    assert error.line == 2 and "missing_header.cuh" in error.message
    run = Counted(load_model(None, "cpu", "auto"))
    result = repair(run, text, check)
    assert (result.compiles, result.rounds, result.text, run.calls) == (False, 0, text, 0)


def test_a_repair_says_what_it_changed_and_why(model: LoadedModel, check: Check) -> None:
    result = repair(Counted(model), NO_SEMICOLON, check)
    assert result.compiles
    line = NO_SEMICOLON.splitlines().index("    " + STATEMENT[:-1])
    assert [(c.line, c.before, c.after) for c in result.changes] == [(line, STATEMENT[:-1], STATEMENT)]
    assert "expected" in result.changes[0].error
    error = result.changes[0].error
    assert result.to_json()["summary"] == f"line {line + 1}: `{STATEMENT[:-1]}` -> `{STATEMENT}` (for: {error})"


def test_the_time_budget_stops_repair_before_a_round(model: LoadedModel, check: Check) -> None:
    run = Counted(model)
    result = repair(run, NO_SEMICOLON, check, budget_s=0)
    assert run.calls == 0 and result.rounds == 0 and not result.compiles and result.changes == []
    assert result.stopped == "stopped after 0 rounds: the time budget (0 s) is spent"


def test_an_error_that_resists_gives_way_to_the_next() -> None:
    """nvcc's first error is a consequence of a later one (a fake compiler says so): after the first error's
    two rounds (narrow, then whole lines) the third round re-writes the later line, and that fixes both."""
    from dice_lsp.toolchain.report import CheckReport

    lines = ["__global__ void k(float* x) {", "    x[0] = total;", *["    // ..."] * 8,
             "    float total = BAD;", "}"]
    text = "\n".join(lines) + "\n"

    def fake_check(source: str) -> CheckReport:
        if "BAD" not in source:
            return CheckReport([], [], 0.0)
        column = source.splitlines()[10].index("BAD")
        return CheckReport([Diagnostic(1, 11, 1, 16, "error", "identifier \"total\" is undefined"),
                            Diagnostic(10, column, 10, column + 3, "error", "identifier \"BAD\" is undefined")],
                           [], 0.0)

    asked: list[str] = []

    def fake_model(job: Callable[[LoadedModel], list[str]]) -> list[str]:
        draft = job.keywords["request"].draft  # type: ignore[attr-defined]
        asked.append(draft.text)
        return [draft.text.replace("BAD", "1.0f")]

    result = repair(fake_model, text, fake_check, rounds=3, candidates=1)
    assert result.compiles and result.rounds == 3
    assert ["BAD" in region_text for region_text in asked] == [False, False, True]
    assert [c.after for c in result.changes] == ["float total = 1.0f;"]
