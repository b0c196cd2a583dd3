"""In-place fills' window steps over the context cache, run as a static step (captured as a CUDA graph on a GPU):
the same tokens as the dynamic cache, for solo fills and for fills that join a running batch."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from dice_lsp.engine import FillRequest, LoadedModel, SamplerConfig, fill, load_model, window_graph
from dice_lsp.engine.continuous import FillScheduler

PREFIX = "__global__ void add(const float* a, float* c, int n) {\n    int i = "
SUFFIX = ";\n    if (i < n) c[i] = a[i];\n}\n"
SAMPLERS = [SamplerConfig(steps=4), SamplerConfig(steps=4, temperature=1.0, top_k=20, seed=7),
            SamplerConfig(steps=3, block_length=4), SamplerConfig(strategy="threshold", steps=6, threshold=0.2)]


def requests(sampler: SamplerConfig) -> list[FillRequest]:
    """Fills of one batch key whose contexts, rows and canvases differ (candidates share their context's keys)."""
    return [FillRequest(PREFIX, SUFFIX, max_tokens=10, sampler=sampler),
            FillRequest("int x = ", "", max_tokens=10, sampler=sampler, candidates=2),
            FillRequest("#include <cuda.h>\n" + PREFIX * 3, SUFFIX * 2, max_tokens=10, sampler=sampler,
                        lengths=(6, 10))]


def scheduled(model: LoadedModel, asked: list[FillRequest]) -> list[list[str]]:
    """The texts of `asked` filled by one scheduler, the later ones joining after a step."""
    scheduler = FillScheduler(model)
    streams = [scheduler.admit(asked[0])]
    scheduler.step()
    streams += [scheduler.admit(request) for request in asked[1:]]
    while scheduler.busy:
        scheduler.step()
    return [stream.result.texts if stream.result else [] for stream in streams]


@pytest.fixture(scope="module")
def model(native_dir: Path) -> LoadedModel:
    return load_model(native_dir, device="cpu", dtype="float32")


@pytest.mark.parametrize("sampler", SAMPLERS, ids=["greedy", "seeded", "blocks", "threshold"])
def test_the_static_window_step_fills_as_the_dynamic_cache_does(model: LoadedModel, sampler: SamplerConfig,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    asked = requests(sampler)
    dynamic = [fill(model, request) for request in asked]
    monkeypatch.setattr(window_graph, "PATH", "static")
    assert window_graph.window_path(model.lm, model.device) == "static"
    static = [fill(model, request) for request in asked]
    assert [r.texts for r in static] == [r.texts for r in dynamic]
    assert [r.model_calls for r in static] == [r.model_calls for r in dynamic]
    for got, want in zip(static, dynamic, strict=True):
        assert got.scores == pytest.approx(want.scores, abs=1e-4)
    assert scheduled(model, asked) == [r.texts for r in dynamic]  # padded, joined contexts too
    kinds = {key[0] for key in window_graph._STEPPERS[model.lm]}  # type: ignore[index]
    assert kinds == {"first", "window"}, "first calls and window steps both ran static"


def test_a_window_s_later_steps_reuse_its_loaded_context(model: LoadedModel, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(window_graph, "PATH", "static")
    loads = []
    load = window_graph.WindowStepper.load

    def counted(self: window_graph.WindowStepper, *args: object) -> None:
        before = self.loaded
        load(self, *args)  # type: ignore[arg-type]
        loads.append(self.loaded is not before)

    monkeypatch.setattr(window_graph.WindowStepper, "load", counted)
    result = fill(model, FillRequest(PREFIX, SUFFIX, max_tokens=10, sampler=SamplerConfig(steps=6)))
    assert result.model_calls == 6 and len(loads) == 5  # the first call computes the context, five window steps
    assert loads.count(True) == 1, "the context is copied in once per window"


def test_on_a_cpu_window_steps_stay_dynamic_unless_asked(model: LoadedModel) -> None:
    assert window_graph.PATH == "auto"
    assert window_graph.window_path(model.lm, torch.device("cpu")) == "dynamic"


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["bfloat16", "float32"])
def test_replayed_window_steps_fill_as_the_uncaptured_static_step(native_dir: Path, dtype: str,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(window_graph, "CAPTURE_AT", 1)
    model = load_model(native_dir, device="cuda", dtype=dtype)
    assert window_graph.window_path(model.lm, model.device) == "graph"  # auto on CUDA
    for sampler in SAMPLERS:
        asked = requests(sampler)
        graph = [fill(model, request).texts for request in asked]
        again = [fill(model, request).texts for request in asked]  # replayed by later fills
        joined = scheduled(model, asked)  # rows rounded up; in bf16 a stream's positions round differently
        monkeypatch.setattr(window_graph, "PATH", "static")
        static = [fill(model, request).texts for request in asked]
        monkeypatch.setattr(window_graph, "PATH", "auto")
        assert graph == again == static, sampler
        if dtype == "float32":
            assert joined == graph, sampler
            monkeypatch.setattr(window_graph, "PATH", "dynamic")
            assert [fill(model, request).texts for request in asked] == graph, sampler
            monkeypatch.setattr(window_graph, "PATH", "auto")
    captured = {key[0] for key, s in window_graph._STEPPERS[model.lm].items() if s.graph is not None}  # type: ignore[index]
    assert captured == {"first", "window"}, "the graph path ran uncaptured"


def test_batches_of_3_and_4_rows_share_one_stepper_and_the_extra_row_changes_nothing(
        model: LoadedModel, monkeypatch: pytest.MonkeyPatch) -> None:
    """The team server's batches change size as fills join and leave: rows are rounded up to a power of two, the
    rounding rows see only their own window, and each real row's logits are what the dynamic cache gives."""
    from dice_lsp.engine.transformer import Transformer

    lm = model.lm
    assert isinstance(lm, Transformer)
    monkeypatch.setattr(window_graph, "_STEPPERS", type(window_graph._STEPPERS)())
    monkeypatch.setattr(window_graph, "PATH", "static")
    generator = torch.Generator().manual_seed(0)
    for rows in (3, 4):
        context = torch.randint(5, lm.config.vocab_size, (rows, 40), generator=generator)
        window = torch.randint(5, lm.config.vocab_size, (rows, 8), generator=generator)
        cache = lm.new_cache()
        with torch.inference_mode():
            lm(context, 0, cache, keep=40)
            valid = torch.ones((rows, 48), dtype=torch.bool)
            valid[0, :7] = False  # a row padded on the left, as the scheduler joins contexts
            static = window_graph.window_logits(lm, window, 40, cache, valid)
            dynamic = lm(window, 40, cache, valid_keys=valid)
        assert static.shape == dynamic.shape == (rows, 8, lm.config.vocab_size)
        assert torch.allclose(static, dynamic, atol=1e-4)
    assert list(window_graph._STEPPERS[lm]) == [("window", 4, 8, 128)]  # type: ignore[index]


def test_a_stacked_cache_selects_and_drops_as_a_per_layer_one() -> None:
    """The static first call's keys come as two stacked tensors; selecting rows (candidates sharing a context)
    and dropping a window must give what the per-layer cache gives."""
    from dice_lsp.engine.transformer import KVCache

    generator = torch.Generator().manual_seed(1)
    keys, values = (torch.randn(3, 2, 4, 10, 8, generator=generator) for _ in range(2))
    stacked = KVCache.of_stacked(keys, values)
    plain = KVCache(3)
    plain.keys, plain.values = [k.clone() for k in keys], [v.clone() for v in values]
    for cache in (stacked, plain):
        cache.select(torch.tensor([1, 1, 0]))
        cache.drop(2, 5)
    assert stacked.stacked is not None and stacked.length == plain.length == 7
    for a, b in zip((*stacked.keys, *stacked.values), (*plain.keys, *plain.values), strict=True):
        assert a is not None and b is not None and torch.equal(a, b)
    assert torch.equal(stacked.stacked[0][2], stacked.keys[2])  # the layers are views of the stack
