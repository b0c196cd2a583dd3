"""The team server's completion workers: real worker processes, the embedded tokenizer, fills given by the test.

The server's end-to-end tests (tests/test_remote_server.py) run the same path with the model; here the fills
are chosen, so the round trips a completion makes between its worker and the model are exact."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from dice_lsp.engine.checkpoint import EMBEDDED_MODEL
from dice_lsp.engine.fill_types import FillRequest, FillResult
from dice_lsp.errors import Cancelled, DiceError
from dice_lsp.remote.completers import Completers
from dice_lsp.settings import Settings
from dice_lsp.textdoc import Position

from .lsp_client import LOOP_HEADER

# whatever passes the checks is shown (dice.minConfidence 0): these tests are about the round trips and the checks;
# the show filter's decisions are the editor's (tests/test_lsp_workspace_index.py, tests/test_cli_complete.py)
SETTINGS = Settings(max_canvas=24, type_check=False, min_confidence=0.0)
AT = Position(2, 29)  # after `i < n; ` in LOOP_HEADER


@pytest.fixture(scope="module")
def completers() -> Iterator[Completers]:
    workers = Completers(Path(EMBEDDED_MODEL), window=2048, count=1)
    yield workers
    workers.close()


def test_a_completion_asks_the_server_for_its_fill_and_checks_it_in_the_worker(completers: Completers) -> None:
    asked: list[FillRequest] = []

    def fill(request: FillRequest) -> FillResult:
        asked.append(request)
        return FillResult(["++i) {", "j++) {"], 4, [-0.1, -0.2])

    completion = completers.complete(LOOP_HEADER, AT, SETTINGS, None, 0.0, fill)
    assert completion is not None
    assert len(asked) == 1 and asked[0].draft is None
    assert completion.texts == ["++i) {"]  # `j` is no name in scope: withheld
    assert completion.checks is not None and completion.checks[0].names


def test_a_fill_that_fails_the_checks_is_remasked_through_the_server(completers: Completers) -> None:
    asked: list[FillRequest] = []

    def fill(request: FillRequest) -> FillResult:
        asked.append(request)
        return FillResult(["k++) {"] if request.draft is None else ["i++) {"], 4, [-0.1])

    completion = completers.complete(LOOP_HEADER, AT, SETTINGS, None, 0.0, fill)
    assert [request.draft is not None for request in asked] == [False, True]
    assert asked[1].draft is not None and asked[1].draft.text == "k++) {"
    assert completion is not None and completion.texts == ["i++) {"]
    assert completion.model_calls == 8


def test_a_cancelled_fill_ends_the_completion_with_cancelled(completers: Completers) -> None:
    def fill(request: FillRequest) -> FillResult:
        raise Cancelled("cancelled after 2 model calls")

    with pytest.raises(Cancelled, match="after 2 model calls"):
        completers.complete(LOOP_HEADER, AT, SETTINGS, None, 0.0, fill)
    # the worker is free for the next one
    completion = completers.complete(LOOP_HEADER, AT, SETTINGS, None, 0.0, lambda _: FillResult(["++i) {"], 4))
    assert completion is not None and completion.texts == ["++i) {"]


def test_no_hole_at_the_cursor_asks_for_no_fill(completers: Completers) -> None:
    def fill(request: FillRequest) -> FillResult:
        raise AssertionError("no fill may be asked for")

    assert completers.complete("int x = 1;\n", Position(0, 3), SETTINGS, None, 0.0, fill) is None


def test_timing_counts_each_completion_and_where_its_time_went(completers: Completers) -> None:
    before = completers.timing.completions
    completers.complete(LOOP_HEADER, AT, SETTINGS, None, 0.0, lambda _: FillResult(["++i) {"], 4))
    timing = completers.timing.to_json()
    assert timing["completions"] == before + 1
    assert timing["worker_s"] > 0 and timing["model_s"] >= 0 and timing["total_s"] >= timing["worker_s"]


def test_completions_on_one_worker_run_side_by_side(completers: Completers) -> None:
    """The first completion's fill is answered only once a second completion on the same worker has ended."""
    second_done = threading.Event()
    results: dict[str, object] = {}

    def held_fill(request: FillRequest) -> FillResult:
        assert second_done.wait(60), "the second completion did not run while the first waited for its fill"
        return FillResult(["++i) {"], 4)

    first = threading.Thread(target=lambda: results.setdefault(
        "first", completers.complete(LOOP_HEADER, AT, SETTINGS, None, 0.0, held_fill)))
    first.start()
    results["second"] = completers.complete(LOOP_HEADER, AT, SETTINGS, None, 0.0, lambda _: FillResult(["i++) {"], 4))
    second_done.set()
    first.join(60)
    assert [c.texts for c in (results["first"], results["second"])] == [["++i) {"], ["i++) {"]]  # type: ignore[attr-defined]


def test_a_worker_whose_pipe_breaks_on_send_fails_its_completion_in_one_line_and_is_replaced(
        completers: Completers) -> None:
    """The worker may end between two messages before its reader sees the pipe close: the send itself breaks."""
    worker = completers.workers[0]
    real = worker.connection

    class Broken:
        def send(self, message: object) -> None:
            raise BrokenPipeError(32, "Broken pipe")

        def __getattr__(self, name: str) -> object:
            return getattr(real, name)

    worker.connection = Broken()  # type: ignore[assignment]
    try:
        with pytest.raises(DiceError, match=r"the completion worker \(pid \d+\) ended"):
            completers.complete(LOOP_HEADER, AT, SETTINGS, None, 0.0, lambda _: FillResult(["++i) {"], 4))
    finally:
        worker.connection = real
    assert not worker.alive
    completion = completers.complete(LOOP_HEADER, AT, SETTINGS, None, 0.0, lambda _: FillResult(["++i) {"], 4))
    assert completion is not None and completion.texts == ["++i) {"]
    assert completers.workers[0] is not worker
    worker.close()


def test_a_worker_that_dies_fails_its_completion_and_is_replaced(completers: Completers) -> None:
    def killing_fill(request: FillRequest) -> FillResult:
        process = completers.workers[0].process
        process.kill()
        process.join(10)
        return FillResult(["++i) {"], 4)

    with pytest.raises(DiceError, match=r"the completion worker \(pid \d+\) ended"):
        completers.complete(LOOP_HEADER, AT, SETTINGS, None, 0.0, killing_fill)
    completion = completers.complete(LOOP_HEADER, AT, SETTINGS, None, 0.0, lambda _: FillResult(["++i) {"], 4))
    assert completion is not None and completion.texts == ["++i) {"]


BLEND = ("__global__ void blend(const float* src, float* dst, float alpha, int n) {\n"
         "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
         "    if (i >= n) return;\n"
         "    \n"
         "}\n")
BLEND_LINE = "dst[i] = alpha * src[i] + (1.0f - alpha) * dst[i];"


def test_the_clients_workspace_lines_are_candidates_on_the_server_too(completers: Completers) -> None:
    """A team server has no copy of the client's workspace: the client sends what its index proposes for the hole
    (`proposals`), and the worker checks, ranks and decides on them with the model's fills."""
    from dice_lsp.completion.sources.workspace import WorkspaceCandidate
    from dice_lsp.remote.requests import read_proposals
    from dice_lsp.remote.team import proposals

    class Index:
        def candidates(self, before: str, after: str, limit: int = 3) -> list[WorkspaceCandidate]:
            assert before.endswith("return;\n    ") and after.startswith("\n}")
            return [WorkspaceCandidate(BLEND_LINE, "workspace", 1.0, files=2, rivals=0)]

    sent = proposals(BLEND, Position(3, 4), (Index(),))
    assert sent == [{"text": BLEND_LINE, "score": 1.0, "files": 2, "rivals": 0}]
    completion = completers.complete(BLEND, Position(3, 4), SETTINGS, None, 0.0,
                                     lambda request: FillResult(["dst[i] = 0;"], 4, [-0.4]), read_proposals(sent))
    assert completion is not None and completion.texts[:1] == [BLEND_LINE]
    assert completion.sources is not None and completion.sources[0] == "workspace"
    assert completion.confidences is not None and completion.confidences[0] is not None
