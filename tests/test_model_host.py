"""The model thread's fill scheduler: fills join a running batch between steps and leave when done.

Timing is made exact by tickets that act when the scheduler checks them (once per stream per step, before
the step's model calls), and by a model job that holds the thread on an event: no sleeps.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from pathlib import Path

import pytest

from dice_lsp.engine import Draft, FillRequest, FillResult, LoadedModel, SamplerConfig, fill
from dice_lsp.errors import Cancelled
from dice_lsp.jobs.model_host import ModelHost, Ticket
from dice_lsp.settings import Settings

PREFIX = "__global__ void add(const float* a, float* c, int n) {\n    int i = "
SUFFIX = ";\n    if (i < n) c[i] = a[i];\n}\n"
GREEDY = SamplerConfig(steps=4)
A = FillRequest(PREFIX, SUFFIX, max_tokens=10, sampler=GREEDY)
B = FillRequest("int x = ", "", max_tokens=10, sampler=GREEDY)
C = FillRequest(PREFIX * 2, "}\n", max_tokens=10, sampler=GREEDY)


class Hook(Ticket):
    """A ticket that runs `act(n)` at its n-th check (n from 1)."""

    def __init__(self, act: Callable[[int], None]) -> None:
        super().__init__()
        self.checks = 0
        self.act = act

    def __call__(self) -> bool:
        self.checks += 1
        self.act(self.checks)
        return super().__call__()


@pytest.fixture
def host(native_dir: Path) -> Iterator[ModelHost]:
    host = ModelHost(lambda status: None, max_batch_rows=8)
    host.load(Settings(model=str(native_dir), device="cpu", dtype="float32")).result()
    yield host
    assert host.close(30)


def solo(host: ModelHost, request: FillRequest) -> FillResult:
    return host.submit(lambda model: fill(model, request)).result()


def test_a_fill_queued_mid_way_joins_the_running_batch_with_its_solo_tokens(host: ModelHost) -> None:
    alone = [solo(host, A), solo(host, B)]
    before = (host.fills, host.fill_batches, host.fill_steps, host.step_rows)
    joined: list[Future[FillResult]] = []

    def at(check: int) -> None:
        if check == 2:  # A's second step is about to run: B is queued now, and joins for A's third
            joined.append(host.fill(B, Ticket()))

    first = host.fill(A, Hook(at))
    assert [first.result().texts, joined[0].result().texts] == [alone[0].texts, alone[1].texts]
    after = (host.fills, host.fill_batches, host.fill_steps, host.step_rows)
    # one run; calls: A, A, (B's context + A), (A + B), B, B = 7 carrying 8 rows
    assert [a - b for a, b in zip(after, before, strict=True)] == [2, 1, 7, 8]


def test_a_fill_done_early_is_answered_while_the_batch_runs_on(host: ModelHost) -> None:
    seen: list[bool] = []
    first: list[Future[FillResult]] = []
    late: list[Future[FillResult]] = []

    def at_a(check: int) -> None:
        if check == 2:
            late.append(host.fill(B, Hook(lambda _: seen.append(first[0].done()))))

    gate = threading.Event()
    host.submit(lambda model: gate.wait(30))  # A is queued (and `first` set) before it starts
    first.append(host.fill(A, Hook(at_a)))
    gate.set()
    first[0].result()
    late[0].result()
    # B's checks before its steps 1-4 (A's 3-6; A left after its 4th), then the host's before answering it
    assert seen == [False, False, True, True, True]


def test_a_cancelled_fill_leaves_without_disturbing_the_others(host: ModelHost) -> None:
    sampler = SamplerConfig(steps=4, temperature=1.0, seed=5)
    asked = [FillRequest(r.prefix, r.suffix, max_tokens=10, sampler=sampler, candidates=2) for r in (A, B, C)]
    alone = [solo(host, request) for request in asked]
    gate = threading.Event()
    held = host.submit(lambda model: gate.wait(30))  # all three queue behind it, and start as one batch
    victim = Ticket()

    def at(check: int) -> None:
        if check == 2:
            victim.cancel()  # after one step of all three

    futures = [host.fill(asked[0], Hook(at)), host.fill(asked[1], victim), host.fill(asked[2], Ticket())]
    steps_before = host.fill_steps
    gate.set()
    assert held.result() is True
    with pytest.raises(Cancelled):
        futures[1].result()
    assert [futures[0].result().texts, futures[2].result().texts] == [alone[0].texts, alone[2].texts]
    assert host.fill_steps - steps_before == 4  # one context call for all three, then windows alone


def test_a_draft_and_a_fill_of_another_size_queued_mid_run_do_not_wait_for_it_to_drain(host: ModelHost) -> None:
    """While A runs, a re-masking round's draft (it runs alone) and a fill of another canvas and sampler are queued:
    the draft is answered between A's steps and the fill joins A's run, both before A is done, each with its solo
    texts (before, the draft and the other shape waited for the run to drain)."""
    long = FillRequest(PREFIX, SUFFIX, max_tokens=10, sampler=SamplerConfig(steps=10))
    draft = FillRequest(PREFIX, SUFFIX, max_tokens=10, sampler=GREEDY,
                        draft=Draft("blockIdx.x * 4", spans=((0, 8),)))
    other = FillRequest("int x = ", "", max_tokens=16, sampler=SamplerConfig(steps=2))
    alone = [solo(host, request) for request in (long, draft, other)]
    order: list[str] = []
    queued: list[Future[FillResult]] = []

    def at(check: int) -> None:
        if check == 2:
            queued.append(host.fill(draft, Ticket()))
            queued.append(host.fill(other, Ticket()))
            queued[0].add_done_callback(lambda _: order.append("draft"))
            queued[1].add_done_callback(lambda _: order.append("other"))

    before = host.fill_batches
    first = host.fill(long, Hook(at))
    first.add_done_callback(lambda _: order.append("long"))
    first.result()
    assert [future.result().texts for future in (first, *queued)] == [result.texts for result in alone]
    assert order == ["draft", "other", "long"]
    assert host.fill_batches - before == 2  # the run, and the draft alone inside it


def test_a_model_job_is_not_overtaken_by_fills_queued_after_it(host: ModelHost) -> None:
    order: list[str] = []
    queued: list[Future[object]] = []

    def at(check: int) -> None:
        if check == 1:  # while A runs: a model job, then a fill of A's shape
            queued.append(host.submit(lambda model: order.append("job")))
            queued.append(host.fill(B, Hook(lambda n: order.append("B") if n == 1 else None)))

    gate = threading.Event()
    host.submit(lambda model: gate.wait(30))
    first = host.fill(A, Hook(at))
    first.add_done_callback(lambda _: order.append("A"))
    gate.set()
    first.result()
    for future in queued:
        future.result()
    assert order == ["A", "job", "B"]
    assert host.pending == 0


def test_the_unbatched_host_fills_alone(native_dir: Path) -> None:
    host = ModelHost(lambda status: None, max_batch_rows=1)
    try:
        host.load(Settings(model=str(native_dir), device="cpu", dtype="float32")).result()
        model: LoadedModel = host.model()
        assert host.fill(A, Ticket()).result().texts == fill(model, A).texts
        assert (host.fills, host.fill_batches, host.fill_steps) == (1, 1, 0)
    finally:
        assert host.close(30)


def test_a_loaded_model_completes_a_kernel_once_before_it_is_ready(native_dir: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """The first completion of a process would also pay for the one-time work on its path (tree-sitter queries,
    the header-name index, the first calls' kernels): the host completes a small kernel while still loading, and
    a model that cannot complete it is ready all the same (the real request reports what is wrong)."""
    import dice_lsp.complete as complete

    statuses: list[str] = []
    warmed: list[tuple[str, str]] = []
    real = complete.prepare

    def recorded(tokenizer: object, window: int, text: str, *args: object, **kwargs: object) -> object:
        warmed.append((text, statuses[-1]))
        return real(tokenizer, window, text, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(complete, "prepare", recorded)
    host = ModelHost(lambda status: statuses.append(status.state))
    try:
        host.load(Settings(model=str(native_dir), device="cpu", dtype="float32")).result()
        assert warmed == [(complete.WARM_UP_TEXT, "loading")] and statuses[-1] == "ready"

        def broken(*args: object, **kwargs: object) -> object:
            raise RuntimeError("no kernels for this shape")

        monkeypatch.setattr(complete, "prepare", broken)
        host.load(Settings(model=str(native_dir), device="cpu", dtype="float32")).result()
        assert statuses[-1] == "ready" and host.model() is not None
    finally:
        assert host.close(30)
