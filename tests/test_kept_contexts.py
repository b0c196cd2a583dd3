"""A re-masking round re-denoises its fill over the context keys the fill computed (`engine.contexts`)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
import torch

from dice_lsp.engine import Draft, FillRequest, LoadedModel, SamplerConfig, contexts, fill, load_model
from dice_lsp.engine.continuous import FillScheduler
from dice_lsp.engine.transformer import KVCache, Transformer

PREFIX = "__global__ void add(const float* a, float* c, int n) {\n    int i = blockIdx.x;\n    "
SUFFIX = "\n    c[i] = a[i];\n}\n"
REGION = 16
DRAFT = "c[i] = 0;"  # the fill a round re-masks (a random model's own fills re-encode longer than its canvas)


@pytest.fixture(scope="module")
def model(native_dir: Path) -> LoadedModel:
    return load_model(native_dir, device="cpu", dtype="float32")


@pytest.fixture
def whole_calls(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The widths of the model calls that ran more than a window (a whole sequence: a context computed)."""
    widths: list[int] = []
    forward = Transformer.forward

    def counted(self: Transformer, ids: torch.Tensor, *args: object, **kwargs: object) -> torch.Tensor:
        if ids.shape[1] > REGION:
            widths.append(ids.shape[1])
        return forward(self, ids, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(Transformer, "forward", counted)
    return widths


def first_fill() -> FillRequest:
    return FillRequest(PREFIX, SUFFIX, max_tokens=REGION, sampler=SamplerConfig(steps=4), lengths=(6, REGION))


def round_of(request: FillRequest, text: str = DRAFT) -> FillRequest:
    """The re-masking round `complete.remask` asks for: the fill as a draft, its first word masked again."""
    return replace(request, candidates=1, lengths=(), draft=Draft(text, spans=((0, 1),), grow=2, over_fill=True))


def scheduled(model: LoadedModel, request: FillRequest) -> None:
    """The fill as the language server's model host runs it (a stream: region at position 0)."""
    scheduler = FillScheduler(model)
    scheduler.admit(request)
    while scheduler.busy:
        scheduler.step()


def test_a_round_after_its_fill_computes_no_context(model: LoadedModel, whole_calls: list[int]) -> None:
    request = first_fill()
    fill(model, request)
    assert len(whole_calls) == 1  # the fill's one whole-sequence call, shared by its two canvases
    again = fill(model, round_of(request))
    assert len(whole_calls) == 1  # the round: window steps only
    assert again.model_calls >= 1 and len(again.texts) == 1
    assert again.texts[0].endswith("[i] = 0;")  # what was not masked again stays as it was


def test_the_round_is_the_same_whichever_path_kept_the_context(model: LoadedModel,
                                                              whole_calls: list[int]) -> None:
    """A solo fill keeps its keys at its prefix length, a stream at position 0: rotary attention sees only
    differences, so the round's tokens are the same (fp32)."""
    request = first_fill()
    fill(model, request)
    solo = fill(model, round_of(request))
    contexts.forget()
    scheduled(model, request)
    calls = len(whole_calls)
    streamed = fill(model, round_of(request))
    assert len(whole_calls) == calls  # the stream's context was found, at its own origin
    assert streamed.texts == solo.texts
    assert streamed.scores == pytest.approx(solo.scores, abs=1e-4)


def test_without_a_kept_context_a_round_computes_its_own(model: LoadedModel, whole_calls: list[int]) -> None:
    request = first_fill()
    fill(model, request)
    contexts.forget()
    again = fill(model, round_of(request))
    assert len(whole_calls) == 2 and len(again.texts) == 1


def test_a_draft_not_marked_as_its_fill_s_round_computes_its_own_context(model: LoadedModel,
                                                                         whole_calls: list[int]) -> None:
    request = first_fill()
    fill(model, request)
    round_ = round_of(request)
    assert round_.draft is not None
    fill(model, replace(round_, draft=replace(round_.draft, over_fill=False)))
    assert len(whole_calls) == 2


def test_a_fill_asked_again_computes_its_context_again_and_gets_the_same_tokens(
        model: LoadedModel, whole_calls: list[int]) -> None:
    """Kept contexts serve re-masking rounds only: a fill asked twice is the same computation twice."""
    request = first_fill()
    first = fill(model, request)
    second = fill(model, request)
    assert len(whole_calls) == 2
    assert second.texts == first.texts and second.scores == first.scores


def test_another_hole_or_other_context_is_not_found(model: LoadedModel, whole_calls: list[int]) -> None:
    request = first_fill()
    fill(model, request)
    fill(model, round_of(replace(request, suffix=SUFFIX + "// more\n")))
    fill(model, round_of(replace(request, max_tokens=REGION + 2, lengths=())))
    assert len(whole_calls) == 3


def test_kept_contexts_are_bounded_in_number_and_bytes(monkeypatch: pytest.MonkeyPatch) -> None:
    lm = torch.nn.Linear(1, 1)  # any model object: contexts are kept per model

    def cache(length: int) -> KVCache:
        one = KVCache(2)
        one.keys = [torch.zeros(1, 2, length, 4), torch.zeros(1, 2, length, 4)]
        one.values = [torch.zeros(1, 2, length, 4), torch.zeros(1, 2, length, 4)]
        return one

    rows = [torch.tensor([i, 1, 2, 3]) for i in range(contexts.KEPT + 2)]
    for row in rows:
        contexts.keep(lm, row, 1, 2, cache(3), 0, 0)  # the window's column dropped: 3 of 4 keys
    assert contexts.find(lm, rows[0], 1, 2, 0) is None and contexts.find(lm, rows[1], 1, 2, 0) is None
    found = contexts.find(lm, rows[-1], 1, 2, 0)
    assert found is not None and found.cache.length == 3
    assert contexts.find(lm, rows[-1], 1, 2, -1) is None  # keys computed at another origin: not these
    monkeypatch.setattr(contexts, "KEPT_BYTES", found.bytes * 2)
    contexts.keep(lm, torch.tensor([99, 1, 2, 3]), 1, 2, cache(3), 0, 0)
    assert contexts.find(lm, torch.tensor([99, 1, 2, 3]), 1, 2, 0) is not None
    assert sum(contexts.find(lm, row, 1, 2, 0) is not None for row in rows) == 1


def test_a_round_over_kept_keys_runs_the_static_window_step_as_the_dynamic_one(
        model: LoadedModel, monkeypatch: pytest.MonkeyPatch) -> None:
    """The static step (CUDA graphs on a GPU; here uncaptured on the CPU) loads the kept keys into its fixed
    buffers: the round's tokens are those of the dynamic path (fp32)."""
    from dice_lsp.engine import window_graph

    request = first_fill()
    fill(model, request)
    dynamic = fill(model, round_of(request))
    monkeypatch.setattr(window_graph, "PATH", "static")
    contexts.forget()
    fill(model, request)
    static = fill(model, round_of(request))
    assert static.texts == dynamic.texts
    assert static.scores == pytest.approx(dynamic.scores, abs=1e-4)
