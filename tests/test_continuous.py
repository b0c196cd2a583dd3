"""Iteration-level scheduling: fills join a running batch between steps, each filled as it would be alone."""

from __future__ import annotations

from pathlib import Path

import pytest

from dice_lsp.engine import Draft, FillRequest, LoadedModel, SamplerConfig, fill, load_model
from dice_lsp.engine.continuous import FillScheduler, Stream, supports
from dice_lsp.errors import Cancelled, DiceError

PREFIX = "__global__ void add(const float* a, float* c, int n) {\n    int i = "
SUFFIX = ";\n    if (i < n) c[i] = a[i];\n}\n"
SAMPLERS = {
    "greedy": SamplerConfig(steps=4),
    "greedy-no-cache": SamplerConfig(steps=4, context_cache=False),
    "seeded": SamplerConfig(steps=4, temperature=1.0, top_k=20, seed=7),
    "blocks": SamplerConfig(steps=3, block_length=4),
    "threshold": SamplerConfig(strategy="threshold", steps=6, threshold=0.2),
}


@pytest.fixture(scope="module")
def model(native_dir: Path) -> LoadedModel:
    return load_model(native_dir, device="cpu", dtype="float32")


def requests(sampler: SamplerConfig) -> list[FillRequest]:
    """Requests of one batch key whose prefixes, suffixes, rows and canvases all differ."""
    return [FillRequest(PREFIX, SUFFIX, max_tokens=10, sampler=sampler),
            FillRequest("int x = ", "", max_tokens=10, sampler=sampler, candidates=2),
            FillRequest("#include <cuda.h>\n" + PREFIX * 3, SUFFIX * 2, max_tokens=10, sampler=sampler,
                        lengths=(6, 10)),
            FillRequest(PREFIX * 2, "}\n", max_tokens=10, sampler=sampler)]


def run_out(scheduler: FillScheduler) -> list[Stream]:
    left = []
    while scheduler.busy:
        left += scheduler.step()
    return left


@pytest.mark.parametrize("name", SAMPLERS)
def test_fills_that_join_mid_way_get_their_solo_tokens(model: LoadedModel, name: str) -> None:
    asked = requests(SAMPLERS[name])
    alone = [fill(model, request) for request in asked]
    scheduler = FillScheduler(model)
    streams = [scheduler.admit(asked[0])]
    scheduler.step()
    streams += [scheduler.admit(asked[1]), scheduler.admit(asked[2])]  # join after one step
    scheduler.step()
    streams.append(scheduler.admit(asked[3]))  # after two
    left = run_out(scheduler)
    assert sorted(map(id, left)) == sorted(map(id, streams))
    results = [stream.result for stream in streams]
    assert all(result is not None for result in results)
    assert [r.texts for r in results if r] == [r.texts for r in alone]
    assert [r.canvases for r in results if r] == [r.canvases for r in alone]
    assert [r.model_calls for r in results if r] == [r.model_calls for r in alone]
    for got, solo in zip(results, alone, strict=True):
        assert got is not None and got.scores == pytest.approx(solo.scores, abs=1e-4)


def test_a_fill_finished_early_leaves_while_the_batch_runs_on(model: LoadedModel) -> None:
    asked = requests(SamplerConfig(steps=4))
    scheduler = FillScheduler(model)
    first = scheduler.admit(asked[0])
    scheduler.step()
    scheduler.step()
    late = scheduler.admit(asked[1])
    assert scheduler.step() == []
    assert scheduler.step() == [first]  # its 4th step: done, handed back while `late` has 2 to go
    assert first.result is not None and first.result.texts == fill(model, asked[0]).texts
    assert scheduler.streams == [late] and late.result is None
    assert scheduler.step() == []
    assert scheduler.step() == [late] and not scheduler.busy


def test_a_cancelled_fill_leaves_at_the_next_step_and_the_others_keep_their_tokens(model: LoadedModel) -> None:
    sampler = SamplerConfig(steps=4, temperature=1.0, seed=3)
    asked = requests(sampler)
    alone = [fill(model, request) for request in asked]
    cancelled = [False]
    scheduler = FillScheduler(model)
    streams = [scheduler.admit(asked[0]), scheduler.admit(asked[1], lambda: cancelled[0]), scheduler.admit(asked[2])]
    scheduler.step()
    cancelled[0] = True
    left = scheduler.step()
    assert left == [streams[1]] and isinstance(streams[1].error, Cancelled) and streams[1].result is None
    assert streams[1].denoiser.model_calls == 1  # its rows were not run again
    run_out(scheduler)
    assert [streams[0].result.texts, streams[2].result.texts] == [alone[0].texts, alone[2].texts]  # type: ignore[union-attr]


def test_counters_count_calls_and_the_rows_they_carried(model: LoadedModel) -> None:
    asked = requests(SamplerConfig(steps=4))
    scheduler = FillScheduler(model)
    scheduler.admit(asked[0])  # 1 row
    scheduler.step()
    assert (scheduler.calls, scheduler.row_steps) == (1, 1)
    scheduler.admit(asked[1])  # 2 rows: their first step computes their context, a call of its own
    scheduler.admit(asked[3])  # 1 row
    scheduler.step()
    assert (scheduler.calls, scheduler.row_steps) == (3, 1 + 1 + 3)
    scheduler.step()  # every stream in its window: one call for all 4 rows
    assert (scheduler.calls, scheduler.row_steps) == (4, 9)
    assert scheduler.rows == 4


def test_fills_of_other_region_sizes_and_samplers_share_a_scheduler_with_their_solo_tokens(
        model: LoadedModel) -> None:
    """One scheduler takes the editor's fills whatever their canvases and samplers (a 24- and a 32-token line hole
    decode with different step counts): each runs beside the others from the step after it joins, its tokens its
    solo fill's; a call carries only rows of one sampler and window shape."""
    asked = [FillRequest(PREFIX, SUFFIX, max_tokens=10, sampler=SAMPLERS["greedy"]),
             FillRequest("int x = ", "", max_tokens=16, sampler=SAMPLERS["threshold"], candidates=2),
             FillRequest(PREFIX * 2, "}\n", max_tokens=12, sampler=SAMPLERS["blocks"], lengths=(6, 12)),
             FillRequest("#include <cuda.h>\n" + PREFIX, SUFFIX, max_tokens=10, sampler=SAMPLERS["seeded"]),
             FillRequest(PREFIX, SUFFIX * 2, max_tokens=16, sampler=SAMPLERS["greedy-no-cache"]),
             FillRequest(PREFIX * 2, SUFFIX, max_tokens=10, sampler=SAMPLERS["greedy"]),  # the first's shape
             FillRequest("int y = ", SUFFIX, max_tokens=16, sampler=SAMPLERS["blocks"])]  # blocks of the third's
    alone = [fill(model, request) for request in asked]
    scheduler = FillScheduler(model)
    streams = [scheduler.admit(asked[0]), scheduler.admit(asked[1])]
    scheduler.step()
    streams += [scheduler.admit(request) for request in asked[2:]]  # join after one step
    left = run_out(scheduler)
    assert sorted(map(id, left)) == sorted(map(id, streams))
    for stream, solo in zip(streams, alone, strict=True):
        assert stream.result is not None
        assert (stream.result.texts, stream.result.canvases, stream.result.model_calls) == \
            (solo.texts, solo.canvases, solo.model_calls)
        assert stream.result.scores == pytest.approx(solo.scores, abs=1e-4)
    assert scheduler.calls < sum(solo.model_calls for solo in alone)  # fills of one sampler and window shared calls


def test_only_batchable_in_place_fills_join(model: LoadedModel, sdar_dir: Path) -> None:
    scheduler = FillScheduler(model)
    with pytest.raises(DiceError, match="only in-place fills"):
        scheduler.admit(FillRequest(PREFIX, SUFFIX, max_tokens=10, draft=Draft("threadIdx.x;", spans=((0, 9),))))
    sdar = load_model(sdar_dir, device="cpu", dtype="float32")
    assert supports(model, FillRequest(PREFIX, SUFFIX)) and not supports(sdar, FillRequest(PREFIX, SUFFIX))
    with pytest.raises(DiceError, match="only the embedded"):
        FillScheduler(sdar)


@pytest.mark.parametrize("dtype", ["bfloat16", "int8"])
@pytest.mark.parametrize("name", ["greedy", "blocks"])
def test_a_lone_stream_is_its_solo_fill_in_every_dtype(native_dir: Path, dtype: str, name: str) -> None:
    """The editor's fills run as lone streams (the language server's model host batches by steps): they must be
    exactly the fills the suite measures (`fill`), also where rounding differs with the positions."""
    rounded = load_model(native_dir, device="cpu", dtype=dtype)
    for request in requests(SAMPLERS[name]):
        scheduler = FillScheduler(rounded)
        stream = scheduler.admit(request)
        run_out(scheduler)
        assert stream.result is not None and stream.result.texts == fill(rounded, request).texts
