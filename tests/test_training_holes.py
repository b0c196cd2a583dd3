"""Training examples look like editor requests: holes on line/brace boundaries, canvases padded."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from dice_lsp.engine.tokenizer import Tokenizer
from dice_lsp.training.holes import (
    cut_hole,
    fim_example,
    hole_example,
    make_example,
    mode_weights,
    random_example,
)
from dice_lsp.training.train import token_tables

from .conftest import CUDA_SNIPPETS, write_tokenizer


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> tuple[Tokenizer, np.ndarray]:
    folder = tmp_path_factory.mktemp("tok")
    write_tokenizer(folder)
    tok = Tokenizer(folder)
    ids: list[int] = []
    for _ in range(30):
        for snippet in CUDA_SNIPPETS:
            ids += [*tok.encode(snippet), tok.special.eos_id]
    return tok, np.array(ids, dtype=np.uint16)


def cut_spans(tok: Tokenizer, stream: np.ndarray, kind: str, seed: int, tries: int) -> list[tuple[int, int]]:
    """The holes of `kind` that `tries` cuts from the first 400 tokens find (a cut may find none)."""
    tables, rng = token_tables(tok), np.random.default_rng(seed)
    return [span for span in (cut_hole(stream[:400], kind, tables, rng, margin=16) for _ in range(tries)) if span]


def write_pack(tmp_path: Path, stream: np.ndarray) -> Path:
    """A training pack of one train shard and the validation stream, both `stream`."""
    data = tmp_path / "pack"
    data.mkdir()
    stream.tofile(data / "train-00.bin")
    stream.tofile(data / "valid.bin")
    return data


@pytest.mark.parametrize("kind", ["line", "lines"])
def test_line_holes_are_whole_lines(kind: str, setup: tuple[Tokenizer, np.ndarray]) -> None:
    tok, stream = setup
    for start, end in cut_spans(tok, stream, kind, 0, 50):
        before, hole, after = (tok.decode(stream[a:b].tolist()) for a, b in ((0, start), (start, end), (end, 400)))
        assert before.endswith(("\n", " ")), "a hole starts at the beginning of a line (after its indentation)"
        assert after.startswith("\n")
        if kind == "line":
            assert "\n" not in hole
        else:
            assert 1 <= hole.count("\n") <= 4


def test_block_holes_are_the_inside_of_a_brace_pair(setup: tuple[Tokenizer, np.ndarray]) -> None:
    tok, stream = setup
    found = cut_spans(tok, stream, "block", 1, 50)
    for span in found:
        hole = tok.decode(stream[span[0]:span[1]].tolist())
        assert hole.count("{") == hole.count("}")
        assert tok.decode(stream[span[1]:span[1] + 1].tolist()).lstrip().startswith("}")
    assert len(found) > 10


def test_hole_example_lays_out_prefix_canvas_suffix(setup: tuple[Tokenizer, np.ndarray]) -> None:
    tok, stream = setup
    tables = token_tables(tok)
    rng = np.random.default_rng(2)
    examples = [hole_example(stream[:600], "lines", 256, tables, rng) for _ in range(40)]
    examples = [e for e in examples if e is not None]
    assert examples
    for example in examples:
        assert example.ids.shape == example.targets.shape == example.weights.shape == (256,)
        masked = example.ids == tables.mask_id
        assert masked.any()
        assert np.array_equal(example.weights > 0, masked), "loss only where the input was masked"
        assert np.array_equal(example.ids[~masked], example.targets[~masked])
        canvas = np.flatnonzero(masked)
        assert (example.targets[canvas[0]:] == tables.pad_id).any(), "the canvas ends in pad tokens"


def test_random_masking_weights_are_inverse_mask_rate(setup: tuple[Tokenizer, np.ndarray]) -> None:
    tok, stream = setup
    tables = token_tables(tok)
    example = random_example(stream[:128], tables, np.random.default_rng(3))
    masked = example.ids == tables.mask_id
    weights = example.weights[masked]
    assert np.allclose(weights, weights[0]) and weights[0] >= 1 / 128


def test_curriculum_moves_from_random_masking_to_larger_holes(setup: tuple[Tokenizer, np.ndarray]) -> None:
    early, late = mode_weights(0.0), mode_weights(1.0)
    assert early["random"] > late["random"] and early["block"] < late["block"]
    assert abs(sum(early.values()) - 1) < 1e-9 and abs(sum(late.values()) - 1) < 1e-9
    tok, stream = setup
    rng = np.random.default_rng(4)
    kinds = {make_example(stream, 128, 1.0, token_tables(tok), rng).kind for _ in range(60)}
    assert {"random", "line", "block"} <= kinds


@pytest.mark.parametrize("objective", ["diffusion", "ar"])
@pytest.mark.slow
def test_a_short_training_run_learns_and_its_checkpoint_completes(setup: tuple[Tokenizer, np.ndarray],
                                                                  tmp_path: Path, objective: str) -> None:
    from dice_lsp.cli import main
    from dice_lsp.engine import FillRequest, SamplerConfig, fill, load_model

    tok, stream = setup
    data = write_pack(tmp_path, stream)
    out = tmp_path / "run"
    args = ["train", "--data", str(data), "--tokenizer", str(tok.folder), "--out", str(out), "--minutes", "5",
            "--steps", "80", "--batch", "16", "--length", "128", "--hidden", "64", "--layers", "2",
            "--workers", "0", "--log-every", "10", "--lr", "3e-3", "--objective", objective]
    assert main(args) == 0

    log = json.loads((out / "train_log.json").read_text())["log"]
    assert log[-1]["step"] == 80
    first, last = (sum(e["loss"] for e in part) / len(part) for part in (log[:3], log[-3:]))
    assert last < first
    chance = math.log(tok.vocab_size)
    assert log[-1]["val_nats"] < 0.8 * chance, "held-out holes are predicted far better than by chance"
    model = load_model(out, device="cpu")
    assert model.attention == ("causal" if objective == "ar" else "bidirectional")
    result = fill(model, FillRequest("__global__ void add(", ")", max_tokens=8, sampler=SamplerConfig(steps=4)))
    assert isinstance(result.texts[0], str)
    # diffusion: the step budget; autoregressive: one call per token until EOS, at most the region
    assert result.model_calls == 4 if objective == "diffusion" else 1 <= result.model_calls <= 8


def test_fim_examples_hold_the_hole_the_diffusion_canvas_gets(setup: tuple[Tokenizer, np.ndarray]) -> None:
    tok, stream = setup
    tables = token_tables(tok)
    window = stream[:600]
    span = cut_hole(window, "line", tables, np.random.default_rng(9), margin=16)
    ar = fim_example(window, "line", 256, tables, np.random.default_rng(9))
    assert span is not None and ar is not None
    hole = window[span[0]:span[1]]
    sequence = np.concatenate(([ar.ids[0]], ar.targets[ar.weights > 0]))
    prefix_id, suffix_id, middle_id = tables.fim_ids
    assert sequence[0] == prefix_id and list(sequence).count(suffix_id) == 1
    middle = sequence[list(sequence).index(middle_id) + 1:]
    assert list(middle) == [*hole, tables.eos_id]
    n = len(sequence) - 1
    assert (ar.ids[1:n] == ar.targets[:n - 1]).all(), "targets are the next tokens"


def test_midline_holes_are_the_rest_of_a_half_typed_line(setup: tuple[Tokenizer, np.ndarray]) -> None:
    tok, stream = setup
    found = cut_spans(tok, stream, "midline", 5, 60)
    for start, end in found:
        before = tok.decode(stream[:start].tolist())
        typed = before[before.rfind("\n") + 1:]
        assert typed.strip(), "the line already holds some of its content"
        hole = tok.decode(stream[start:end].tolist())
        assert hole and "\n" not in hole
        assert tok.decode(stream[end:end + 1].tolist()).startswith("\n"), "the hole runs to the end of the line"
    assert len(found) > 20


def test_one_line_holes_start_at_the_line_or_after_its_indentation(setup: tuple[Tokenizer, np.ndarray]) -> None:
    tok, stream = setup
    starts = set()
    for span in cut_spans(tok, stream, "line", 6, 200):
        hole = tok.decode(stream[span[0]:span[1]].tolist())
        if hole.strip() and hole != hole.lstrip():
            starts.add("indent")
        elif hole.strip():
            starts.add("content")
    assert starts == {"indent", "content"}, "the editor asks on an empty line after its indentation, too"


@pytest.mark.slow
def test_a_grown_model_trains_on_the_wall_clock_schedule(setup: tuple[Tokenizer, np.ndarray], native_dir: Path,
                                                          tmp_path: Path) -> None:
    from dice_lsp.cli import main
    from dice_lsp.engine import load_model

    _, stream = setup
    data = write_pack(tmp_path, stream)
    out = tmp_path / "grown"
    args = ["train", "--data", str(data), "--tokenizer", str(native_dir), "--out", str(out), "--init",
            str(native_dir), "--layers", "4", "--run-minutes", "0.05", "--minutes", "5", "--batch", "8",
            "--length", "128", "--workers", "0", "--log-every", "5", "--dropout", "0.1", "--curriculum-from", "0.5"]
    assert main(args) == 0
    log = json.loads((out / "train_log.json").read_text())
    assert 0.05 <= log["minutes_done"] < 1.0, "the run ends when its minutes are up"
    assert log["log"][-1]["lr"] < 0.2 * 1e-3, "the schedule has annealed by then"
    model = load_model(out, device="cpu")
    assert model.lm.config.num_hidden_layers == 4


def test_gpu_code_is_weighted_per_token_by_gpu_weight() -> None:
    from dice_lsp.training.holes import window_offset

    rng = np.random.default_rng(0)
    size, gpu_end, span = 100_000, 20_000, 700
    starts = np.array([window_offset(size, span, rng, gpu_end, 4.0) for _ in range(20_000)])
    share = float((starts < gpu_end).mean())
    assert abs(share - 4 * 20_000 / (4 * 20_000 + 80_000)) < 0.02      # 0.5, vs 0.2 unweighted
    assert starts.min() >= 0 and starts.max() <= size - span
    assert not ((starts >= gpu_end - span) & (starts < gpu_end)).any()  # GPU windows stay in GPU code
    plain = np.array([window_offset(size, span, rng) for _ in range(20_000)])
    assert abs(float((plain < gpu_end).mean()) - 0.2) < 0.02
