"""The completion pipeline after the model: clean, check, re-mask, rank, and say nothing rather than garbage.

The model is replaced by fixed fills here (`FillResult`s written by hand, a filler that answers re-masking
requests), so each assertion is about the pipeline's decisions; tests/test_cli_complete.py and the LSP tests
run the same pipeline with the real model.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from dice_lsp.complete import CompileVerdicts, NvccJudge, Pipeline, PreparedFill, prepare, remask_spans
from dice_lsp.completion.checks import Checks
from dice_lsp.engine import EMBEDDED_MODEL, FillRequest, FillResult, load_model
from dice_lsp.engine.infill import Draft, fill
from dice_lsp.engine.tokenizer import Tokenizer
from dice_lsp.settings import Settings
from dice_lsp.textdoc import Position

KERNEL = ("__global__ void scale(const float* x, float* y, float s, int n) {\n"
          "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
          "    \n"
          "}\n")
EMPTY_LINE = Position(2, 4)
GOOD = "if (i < n) y[i] = s * x[i];"


@pytest.fixture(scope="module")
def prepared() -> PreparedFill:
    found = prepare(Tokenizer(EMBEDDED_MODEL), 512, KERNEL, EMPTY_LINE, Settings())
    assert found is not None and found.context.hole.kind == "line"
    return found


def result(*fills: tuple[str, float]) -> FillResult:
    return FillResult([text for text, _ in fills], 1, [score for _, score in fills], [24] * len(fills))


def test_a_capped_canvas_is_still_filled_beside_the_shorter_ones() -> None:
    tokenizer = Tokenizer(EMBEDDED_MODEL)
    full = prepare(tokenizer, 512, KERNEL, EMPTY_LINE, Settings())
    capped = prepare(tokenizer, 512, KERNEL, EMPTY_LINE, Settings(max_canvas=16))
    assert full is not None and full.request.lengths == (12, full.context.hole.canvas_tokens)
    assert capped is not None and capped.request.lengths == (12, 16) and capped.request.max_tokens == 16


def test_garbage_only_shows_nothing_and_says_why(prepared: PreparedFill) -> None:
    completion = prepared.completion(result(("float maxval = = ;;", -0.1), ("int j = tidq.x;", -0.2),
                                            ("y[i] = x[i.];];];", -0.3)))
    assert completion.texts == [] and completion.checks == []
    assert completion.withheld == "no fill passed the checks (3 tried; the best does not parse)"


@pytest.mark.parametrize(("fill", "why"), [
    ("int i = threadIdx.x;", "declares 'i' again"),
    ("y[i] = s * xx[i] + bias;", "uses unknown names (xx, bias)"),
])
def test_a_withheld_fill_says_which_name_is_wrong(prepared: PreparedFill, fill: str, why: str) -> None:
    completion = prepared.completion(result((fill, -0.1)))
    assert completion.texts == [] and completion.withheld == f"no fill passed the checks (1 tried; the best {why})"


def test_the_best_fill_that_passes_is_shown_whatever_the_scores(prepared: PreparedFill) -> None:
    completion = prepared.completion(result(("if ( = (int)threadIdx)ii;", -0.01), (GOOD, -0.9),
                                            ("y[i] = s * x[i]; y[i] = 0;", -0.5)))
    assert completion.texts == ["y[i] = s * x[i];", GOOD]  # higher score first among those passing
    assert completion.checks == [Checks(True, True, None), Checks(True, True, None)]
    assert completion.withheld is None


def test_equal_fills_are_shown_once_with_their_better_score(prepared: PreparedFill) -> None:
    completion = prepared.completion(result((GOOD, -0.9), ("if (i < n)  y[i] = s * x[i];", -0.2)))
    assert completion.texts == ["if (i < n)  y[i] = s * x[i];"]


def test_a_planted_unknown_name_is_remasked_and_replaced(prepared: PreparedFill) -> None:
    """The failing span (and a few characters around it) is masked again in place; the rest is kept."""
    asked: list[FillRequest] = []

    def filler(request: FillRequest) -> FillResult:
        asked.append(request)
        return result(("int j = threadIdx.x;", -0.3))

    completion = prepared.completion(result(("int j = tidq.x;", -0.1)), filler)
    assert [r.draft for r in asked] == [Draft("int j = tidq.x;", spans=((6, 14),), grow=2, over_fill=True)]
    assert completion.texts == ["int j = threadIdx.x;"]
    assert completion.checks == [Checks(True, True, None)]


def test_a_round_after_a_half_typed_line_computes_its_context_around_the_draft() -> None:
    """Rounds re-denoise over the first fill's context keys (`Draft.over_fill`) except after text typed on
    the hole's line, where the context must see the draft (docs/bench-logs/performance-history.md: dev pool,
    mid-line holes)."""
    typed = KERNEL.replace("    int i = blockIdx.x * blockDim.x + threadIdx.x;", "    int i = ")
    half = prepare(Tokenizer(EMBEDDED_MODEL), 512, typed, Position(1, 12), Settings())
    assert half is not None and half.context.line_before == "    int i = "
    asked: list[FillRequest] = []

    def filler(request: FillRequest) -> FillResult:
        asked.append(request)
        return result(("threadIdx.x;", -0.3))

    half.completion(result(("tidq.x;", -0.1)), filler)
    assert [r.draft.over_fill for r in asked if r.draft] == [False]


def test_a_repair_that_fails_as_much_is_not_kept(prepared: PreparedFill) -> None:
    completion = prepared.completion(result(("int j = tidq.x;", -0.1)),
                                     lambda request: result(("int j = tidr.x;", -0.3)))
    assert completion.texts == [] and completion.withheld is not None


def test_a_misspelt_name_in_scope_is_corrected_without_a_model_call(prepared: PreparedFill) -> None:
    def filler(request: FillRequest) -> FillResult:
        raise AssertionError("a rename needs no re-masking")

    completion = prepared.completion(result(("int j = threadIdxx.x;", -0.1), ("if (j < N) y[j] = S * x[j];", -0.2)),
                                     filler)
    assert completion.texts == ["int j = threadIdx.x;"]  # `N`/`S`: one letter, never edited (and `j` is unknown)
    assert completion.checks == [Checks(True, True, None)]


def test_without_renames_the_misspelt_name_goes_to_re_masking(prepared: PreparedFill) -> None:
    asked: list[FillRequest] = []

    def filler(request: FillRequest) -> FillResult:
        asked.append(request)
        return result(("int j = blockIdx.x;", -0.3))

    completion = prepared.completion(result(("int j = threadIdxx.x;", -0.1)), filler,
                                     pipeline=Pipeline(renames=False))
    assert len(asked) == 1 and completion.texts == ["int j = blockIdx.x;"]


def test_a_compiler_withdraws_what_does_not_compile(prepared: PreparedFill) -> None:
    document = KERNEL
    completion = prepared.completion(result(("return n;", -0.1), (GOOD, -0.5)), None,
                                     lambda text: "return n;" not in text, document)
    assert completion.texts == [GOOD]
    assert completion.checks == [Checks(True, True, True)]


class PointingCompiler(NvccJudge):
    """nvcc as the pipeline sees it, minus the compile: `s * n` is an error, at the column of `n`."""

    def __init__(self) -> None:
        self.asked: list[str] = []

    def new_errors(self, text: str) -> list[tuple[int, int]]:
        self.asked.append(text)
        at = text.find("s * n;")
        if at < 0:
            return []
        return [(text.count("\n", 0, at), at - text.rfind("\n", 0, at) - 1 + len("s * "))]


def test_nvcc_s_column_is_remasked_and_the_repair_compiles(prepared: PreparedFill) -> None:
    asked: list[FillRequest] = []

    def filler(request: FillRequest) -> FillResult:
        asked.append(request)
        return result(("y[i] = s * x[i];", -0.3))

    compiler = PointingCompiler()
    completion = prepared.completion(result(("y[i] = s * n;", -0.1)), filler, compiler, KERNEL)
    fill_text = "y[i] = s * n;"
    assert [r.draft for r in asked] == [Draft(fill_text, spans=((fill_text.index("n") - 2, len(fill_text)),),
                                              grow=2, over_fill=True)]
    assert completion.texts == ["y[i] = s * x[i];"]
    assert completion.checks == [Checks(True, True, True)]
    assert len(set(compiler.asked)) == 2  # the fill (its verdict, then where), then its repair


def test_background_verdicts_rank_the_next_request(prepared: PreparedFill) -> None:
    """The language server never waits for nvcc: the first completion shows what the cheap checks pass and
    queues a compile per multi-line fill (once each); the next one for the same hole withdraws what failed."""
    queued: list[Callable[[], None]] = []
    judged: list[str] = []

    def judge(text: str) -> bool | None:
        judged.append(text)
        return "y[i] = 0;" not in text

    verdicts = CompileVerdicts(queued.append)
    compiler = verdicts.compiler(judge, KERNEL, "folder\0flags")
    bad, good = "if (i < n) {\n        y[i] = 0;\n    }", "if (i < n) {\n        y[i] = s * x[i];\n    }"
    fills = result((bad, -0.1), (good, -0.5), (GOOD, -0.9))
    first = prepared.completion(fills, None, compiler, KERNEL)
    assert first.texts == [bad, good, GOOD] and [c.compiles for c in first.checks or []] == [None, None, None]
    assert len(queued) == 2 and judged == []  # nothing compiled on the request's path; one-line fills never
    prepared.completion(fills, None, compiler, KERNEL)
    assert len(queued) == 2  # asked again before the verdicts came: not queued twice
    for work in queued:
        work()
    assert sorted(judged) == sorted(KERNEL[:prepared.context.hole.start] + text + KERNEL[prepared.context.hole.end:]
                                    for text in (bad, good))
    again = prepared.completion(fills, None, compiler, KERNEL)
    assert again.texts == [good, GOOD]
    assert [c.compiles for c in again.checks or []] == [True, None]


@pytest.mark.parametrize(("faults", "spans"), [
    ([(8, 18)], ((6, 20),)),
    ([(0, 1), (2, 3)], ((0, 5),)),
    ([(19, 21)], ((17, 21),)),
    ([(4, 4)], ((2, 7),)),
])
def test_remask_spans_widen_and_merge(faults: list[tuple[int, int]], spans: tuple[tuple[int, int], ...]) -> None:
    assert remask_spans("int j = threadIdxx.x;", faults) == spans


def test_the_real_model_rewrites_only_the_remasked_span() -> None:
    """End to end on dice-tiny: a draft with a planted unknown name keeps its text outside the re-masked tokens
    (whole tokens are masked: ` threadIdxx` takes its space along)."""
    model = load_model(EMBEDDED_MODEL, device="cpu", dtype="float32")
    line = "    int j = blockIdx.x * blockDim.x + threadIdxx.x;"
    at = line.index("threadIdxx")
    request = FillRequest(KERNEL[:KERNEL.index("    \n")], KERNEL[KERNEL.index("    \n") + 4:], 24,
                          draft=Draft(line, spans=((at, at + len("threadIdxx")),), grow=2))
    text = fill(model, request).texts[0]
    assert text.startswith(line[:at - 1]) and text.endswith(".x;") and "threadIdxx" not in text


def test_fills_without_scores_are_still_ranked_by_their_checks(prepared: PreparedFill) -> None:
    completion = prepared.completion(FillResult(["int j = = ;", GOOD], 1))  # a family that gives no scores
    assert completion.texts == [GOOD]


BLOCK = "if (i < n) {\n        y[i] = s * x[i];\n    }"


def test_a_crlf_document_is_filled_as_its_lf_text(prepared: PreparedFill) -> None:
    """The model gets the same request for the same file in CRLF; the fill comes back with the file's `\\r\\n`."""
    crlf = prepare(Tokenizer(EMBEDDED_MODEL), 512, KERNEL.replace("\n", "\r\n"), EMPTY_LINE, Settings())
    assert crlf is not None
    assert crlf.request == prepared.request and crlf.context == prepared.context
    assert (crlf.start, crlf.end) == (prepared.start, prepared.end) == (EMPTY_LINE, EMPTY_LINE)
    assert prepared.completion(result((BLOCK, -0.1))).texts == [BLOCK]
    assert crlf.completion(result((BLOCK, -0.1))).texts == [BLOCK.replace("\n", "\r\n")]


def test_the_real_model_fills_crlf_and_lf_alike() -> None:
    """dice-tiny on one file in LF and in CRLF: the same raw fills (written at all), the same region and verdict."""
    model = load_model(EMBEDDED_MODEL, device="cpu", dtype="float32")
    text = ("__global__ void relu(const float* x, float* y, int n) {\n"
            "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n    if (i >= n) return;\n"
            "    float v = x[i];\n    \n}\n")
    runs = []
    for document in (text, text.replace("\n", "\r\n")):
        prepared = prepare(model.tokenizer, model.window, document, Position(4, 4), Settings())
        assert prepared is not None
        raw = fill(model, prepared.request).texts
        runs.append((raw, prepared.start, prepared.end, prepared.completion(FillResult(raw, 1)).withheld))
    assert any(fill_text.strip() for fill_text in runs[0][0])
    assert runs[0] == runs[1]


def test_fills_the_clean_up_drops_are_withheld_with_the_reason(prepared: PreparedFill) -> None:
    completion = prepared.completion(result(("// thread", -0.1), ("// ...<|pad|>", -0.2)))
    assert completion.texts == []
    assert completion.withheld == "no fill was left after clean-up (2 written: comments only, repeats or no code)"
    nothing = prepared.completion(result(("<|pad|><|pad|>", -0.1), ("  ", -0.2)))
    assert nothing.withheld == "the model wrote nothing here (white space or special tokens only)"


BRANCHES = ("__global__ void clip(const float* x, float* y, int n) {{\n"
            "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
            "    {head} {{\n"
            "        y[i] = x[i];\n"
            "    \n"
            "        y[i] = 0.0f;\n"
            "    }}\n"
            "}}\n")


@pytest.mark.parametrize(("head", "shown"), [("if (x[i] > 0.0f)", True), ("for (; i < n; i += n)", False)])
def test_an_else_where_the_cursor_stepped_out_of_the_block_is_shown_only_after_an_if(head: str, shown: bool) -> None:
    # the cursor sits dedented between two lines of the block: `} else {` is what the layout asks for; the
    # parse check then decides whether the block it closes can take an `else`
    found = prepare(Tokenizer(EMBEDDED_MODEL), 512, BRANCHES.format(head=head), Position(4, 4), Settings())
    assert found is not None and found.context.hole.kind == "line"
    completion = found.completion(result(("} else {", -0.1)))
    assert completion.texts == (["} else {"] if shown else [])
    assert completion.withheld == (None if shown else "no fill passed the checks (1 tried; the best does not parse)")
