"""Rejection-sampling fine-tuning: which fills are kept, what the collector writes, and how kept fills train.

The model is a fake filler (fixed fills for every request) where the assertion is about the collector's
decisions; one run samples the embedded dice-tiny, one trains a tiny model with kept fills mixed in.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from dice_lsp.cuda.holes import find_hole
from dice_lsp.cuda.postprocess import FillContext
from dice_lsp.engine import EMBEDDED_MODEL
from dice_lsp.engine.fill_types import FillRequest, FillResult
from dice_lsp.engine.tokenizer import Tokenizer
from dice_lsp.evals.suite import load_suite
from dice_lsp.training.corpus import BenchFilter
from dice_lsp.training.rft import (
    HoleTask,
    KeptFill,
    collect_settings,
    collect_to_file,
    corpus_files,
    hole_tasks,
    judge,
    main,
    rft_example,
    token_similarity,
    tokenize_fill,
)
from dice_lsp.training.train import Batches, token_tables

from .conftest import CUDA_SNIPPETS

DECLARE = "int i = blockIdx.x * blockDim.x + threadIdx.x;"
GUARD = "if (i < n) y[i] = s * x[i];"
NEAR = "if (i < n) y[i] = s * x[i] + 1.0f;"  # 2 tokens more than GUARD's 18: similarity 1 - 2/20
KERNEL = ("__global__ void scale(const float* x, float* y, float s, int n) {\n"
          f"    {DECLARE}\n"
          f"    {GUARD}\n"
          "}\n")


def task_for(truth: str, text: str = KERNEL, key: str = "k.cu") -> tuple[HoleTask, FillContext]:
    """The hole the editor meets where `truth` (a line's content) was removed."""
    start = text.index(truth)
    document = text[:start] + text[start + len(truth):]
    hole = find_hole(document, start)
    assert hole is not None and hole.kind == "line"
    return HoleTask(key, document, hole, truth), FillContext(hole, document[:hole.start], document[hole.end:])


@pytest.mark.parametrize("fill", [
    "if (i < n) y[i] = = s * x[i];",  # does not parse
    "if (i < n) y[i] = s * xx[i];",  # an unknown name (similar enough: 17 of 18 tokens)
    "return;",  # parses, names resolve, far from the truth
    "if (i < n) y[i] = s * x[i] * threadIdx.x;",  # close (18 of 22 tokens), resolves, a name the truth lacks
])
def test_a_fill_that_fails_a_check_or_is_far_from_the_truth_is_not_kept(fill: str) -> None:
    task, context = task_for(GUARD)
    assert judge(task, context, [fill], [-0.1]) == []


def test_the_truth_is_kept_with_similarity_one_and_a_near_fill_with_its_similarity() -> None:
    task, context = task_for(GUARD)
    kept = judge(task, context, [GUARD, NEAR, "  " + GUARD], [-0.1, -0.2, -0.3])
    assert [(k.fill, k.similarity, k.exact) for k in kept] == [(GUARD, 1.0, True), (NEAR, 1 - 2 / 20, False)]
    assert kept[0].checks == {"parses": True, "names": True, "types": None, "compiles": None}
    assert kept[0].filled() == KERNEL


def test_token_similarity_counts_c_tokens_not_characters() -> None:
    assert token_similarity("y[i]=s*x[i];", "y[i] = s * x[i];") == 1.0
    assert token_similarity("a = b;", "a = c;") == 0.75
    assert token_similarity("", "") == 1.0


def write_corpus(folder: Path, records: list[dict[str, Any]]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    rows = [{"source": "mine", "path": f"f{n}.cu", "lang": "cuda", "dialect": "cuda", "license": "MIT", **r}
            for n, r in enumerate(records)]
    (folder / "train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (folder / "valid.jsonl").write_text(json.dumps({**rows[0], "path": "valid.cu"}) + "\n")
    return folder


def test_holes_come_from_train_cuda_files_only_and_never_from_the_suite(tmp_path: Path) -> None:
    suite_text = next(iter(load_suite("cuda-infill", "dev").files.values())).text
    corpus = write_corpus(tmp_path / "corpus", [
        {"text": KERNEL},
        {"text": KERNEL.replace("scale", "host_side"), "lang": "cpp"},
        {"text": KERNEL.replace("scale", "closed"), "license": "proprietary"},
        {"text": suite_text, "path": "copied-from-the-suite.cu"},
    ])
    files = corpus_files([corpus])
    assert [key for key, _ in files] == ["mine/f0.cu", "mine/copied-from-the-suite.cu"]
    unfiltered = {t.key for t in hole_tasks(files, 50, seed=0, per_file=5)}
    assert unfiltered == {"mine/f0.cu", "mine/copied-from-the-suite.cu"}, "the suite's file has line holes"
    tasks = list(hole_tasks(files, 50, seed=0, per_file=5, bench=BenchFilter.load()))
    assert sorted(t.truth for t in tasks) == sorted([DECLARE, GUARD])
    assert {t.key for t in tasks} == {"mine/f0.cu"}


def test_mid_line_holes_are_the_rest_of_a_statement_line_after_a_cursor_inside(tmp_path: Path) -> None:
    files = corpus_files([write_corpus(tmp_path / "corpus", [{"text": KERNEL}])])
    lines = [t for t in hole_tasks(files, 50, seed=0, per_file=20)]
    both = [t for t in hole_tasks(files, 50, seed=0, per_file=20, kinds=("line", "midline"))]
    assert sorted(t.truth for t in lines) == sorted([DECLARE, GUARD])
    mid = [t for t in both if t.truth not in (DECLARE, GUARD)]
    assert mid, "no mid-line hole cut"
    for task in mid:  # the document keeps the line's start; the hole is the rest of a true line
        assert any(line.strip().endswith(task.truth.strip()) and line.strip() != task.truth.strip()
                   for line in KERNEL.split("\n"))
        line_start = task.document.rfind("\n", 0, task.hole.start) + 1
        assert task.document[line_start:task.hole.start].strip()  # the cursor is inside a written line


def fake_filler(texts: list[str]) -> Any:
    """Every request filled with `texts` (per canvas), scores falling in order."""
    seen: list[FillRequest] = []

    def run(requests: list[FillRequest]) -> list[FillResult]:
        seen.extend(requests)
        return [FillResult(texts * len(r.canvases), 1, [-0.1 * (n + 1) for n in range(len(texts) * len(r.canvases))],
                           [c for c in r.canvases for _ in texts]) for r in requests]

    run.seen = seen  # type: ignore[attr-defined]
    return run


def test_the_collector_writes_exactly_the_kept_fills(tmp_path: Path) -> None:
    tasks = [task_for(DECLARE)[0], task_for(GUARD)[0]]
    filler = fake_filler([DECLARE, GUARD, NEAR, "return;", "y[i] = = ;"])
    out = tmp_path / "fills.jsonl"
    counts = collect_to_file(tasks, filler, Tokenizer(EMBEDDED_MODEL), 512, collect_settings(3, 1.0, 7), out,
                             batch=2, quiet=True)
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    # DECLARE where `i` is declared again, GUARD and NEAR where `i` is not declared yet: names fail
    assert [(r["truth"], r["fill"], r["similarity"], r["exact"]) for r in rows] == [
        (DECLARE, DECLARE, 1.0, True), (GUARD, GUARD, 1.0, True), (GUARD, NEAR, round(1 - 2 / 20, 4), False)]
    for row, task in zip(rows, [tasks[0], tasks[1], tasks[1]], strict=True):
        assert (row["file"], row["document"], row["start"], row["end"]) == (
            task.key, task.document, task.hole.start, task.hole.end)
        assert row["checks"] == {"parses": True, "names": True, "types": None, "compiles": None}
    requests = filler.seen
    assert len(requests) == 2 and all(r.candidates == 3 and r.sampler.temperature == 1.0 for r in requests)
    assert {r.sampler.seed for r in requests} == {7}, "one batch: one seed"
    assert counts.to_json() | {"seconds": 0, "holes_per_s": 0} == {
        "holes": 2, "fills": 2 * 5 * 2, "kept": 3, "kept_exact": 2, "holes_kept": 2, "hole_keep_rate": 1.0,
        "fill_keep_rate": 0.15, "seconds": 0, "holes_per_s": 0}


def test_a_kept_fill_becomes_an_example_that_decodes_to_its_document_with_the_fill() -> None:
    tok = Tokenizer(EMBEDDED_MODEL)
    tables = token_tables(tok)
    task, _ = task_for(GUARD)
    kept = KeptFill(task.key, task.document, task.hole.start, task.hole.end, NEAR, GUARD, 0.9, False, {}, -0.1)
    item = tokenize_fill(tok, kept)
    rng = np.random.default_rng(0)
    for _ in range(5):
        example = rft_example(item, 512, tables, rng)
        assert example is not None and example.kind == "rft" and len(example.ids) == 512
        canvas = np.flatnonzero(example.weights > 0)
        assert len(canvas) > 0 and (example.ids[canvas] == tables.mask_id).all()
        unmasked = example.ids != tables.mask_id
        assert (example.ids[unmasked] == example.targets[unmasked]).all()
        assert (np.flatnonzero(~unmasked) == canvas).all(), "only canvas positions are masked, each scored"
        assert tok.decode([int(t) for t in example.targets if t != tables.pad_id]) == kept.filled()
        assert kept.filled() == KERNEL.replace(GUARD, NEAR)


def test_a_batch_with_an_rft_share_starts_with_that_many_rft_examples() -> None:
    tok = Tokenizer(EMBEDDED_MODEL)
    tables = token_tables(tok)
    task, _ = task_for(GUARD)
    item = tokenize_fill(tok, KeptFill(task.key, task.document, task.hole.start, task.hole.end, GUARD, GUARD, 1.0,
                                       True, {}, -0.1))
    stream = np.array(tok.encode(KERNEL * 40), dtype=np.uint16)

    class Progress:
        value = 0.5

    batch = next(iter(Batches(stream, tables, 8, 128, 0, Progress(), "diffusion", rft=[item], rft_rows=3)))
    assert [e.kind for e in batch[:3]] == ["rft"] * 3 and "rft" not in {e.kind for e in batch[3:]}
    assert len(batch) == 8


def test_the_cli_says_in_one_line_that_the_model_folder_is_missing(tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "k.cu").write_text(KERNEL)
    missing = tmp_path / "no-model"
    code = main(["collect", "--corpus", str(tmp_path / "k.cu"), "--model", str(missing), "--out",
                 str(tmp_path / "fills.jsonl"), "--quiet"])
    err = capsys.readouterr().err
    assert code == 1 and err == f"error: {missing}: model folder not found\n"


@pytest.mark.slow
def test_a_real_collect_with_the_embedded_model(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    second = KERNEL.replace("scale", "shift").replace("s * x[i]", "x[i] + s")
    corpus = write_corpus(tmp_path / "corpus", [{"text": KERNEL}, {"text": second}])
    out = tmp_path / "fills.jsonl"
    code = main(["collect", "--corpus", str(corpus), "--model", str(EMBEDDED_MODEL), "--out", str(out),
                 "--holes", "3", "--candidates", "2", "--json", "--quiet", "--device", "cpu"])
    counts = json.loads(capsys.readouterr().out)
    assert code == 0 and counts["holes"] == 3
    assert counts["fills"] == 3 * 2 * 2, "a line hole: 2 candidates on each of 2 canvases"
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(rows) == counts["kept"] and sum(r["exact"] for r in rows) == counts["kept_exact"]
    for row in rows:
        assert row["similarity"] >= 0.8 and row["checks"]["parses"] and row["checks"]["names"]
        assert row["document"][:row["start"]] + row["truth"] + row["document"][row["end"]:] in (KERNEL, second)


@pytest.mark.slow
def test_a_short_fine_tune_mixes_kept_fills_into_each_batch(native_dir: Path, tmp_path: Path) -> None:
    from dice_lsp.cli import main as cli

    tok = Tokenizer(native_dir)
    snippet = CUDA_SNIPPETS[0]
    truth = "if (i < n) c[i] = a[i] + b[i];"
    start = snippet.index(truth)
    document = snippet[:start] + snippet[start + len(truth):]
    fills = tmp_path / "fills.jsonl"
    fills.write_text(json.dumps({"file": "s.cu", "document": document, "start": start, "end": start,
                                 "fill": truth, "truth": truth}) + "\n")
    ids: list[int] = []
    for _ in range(30):
        for text in CUDA_SNIPPETS:
            ids += [*tok.encode(text), tok.special.eos_id]
    data = tmp_path / "pack"
    data.mkdir()
    np.array(ids, dtype=np.uint16).tofile(data / "train-00.bin")
    np.array(ids, dtype=np.uint16).tofile(data / "valid.bin")
    out = tmp_path / "rft"
    args = ["train", "--data", str(data), "--tokenizer", str(native_dir), "--out", str(out), "--init",
            str(native_dir), "--steps", "6", "--minutes", "5", "--batch", "8", "--length", "128", "--workers", "0",
            "--log-every", "3", "--rft", str(fills), "--rft-share", "0.25"]
    assert cli(args) == 0
    state = json.loads((out / "train_log.json").read_text())
    assert state["rft"] == {"file": str(fills), "fills": 1, "rows": 2, "share": 0.25}
    assert [entry["rft_share"] for entry in state["log"]] == [0.25, 0.25]
    assert state["step"] == 6


def test_a_fine_tune_refuses_a_missing_rft_file(native_dir: Path, tmp_path: Path) -> None:
    from dice_lsp.training.rft import load_rft

    with pytest.raises(SystemExit, match="no such RFT file"):
        load_rft(tmp_path / "nothing.jsonl", Tokenizer(native_dir), 128)


def test_finetune_needs_the_model_and_its_kept_fills(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["finetune", "--data", str(tmp_path), "--tokenizer", str(tmp_path), "--out", str(tmp_path / "o"),
                 "--rft", str(tmp_path / "fills.jsonl")]) == 2
    assert capsys.readouterr().err == ("error: finetune needs --init (the model collect sampled) and --rft "
                                       "(its kept fills)\n")


def test_a_collection_past_its_minutes_stops_and_keeps_what_it_kept(tmp_path: Path) -> None:
    tasks = [task_for(DECLARE)[0], task_for(GUARD)[0]]
    out = tmp_path / "fills.jsonl"
    # past the bound after the first hole: the second batch is never asked for
    counts = collect_to_file(tasks, fake_filler([DECLARE, GUARD]), Tokenizer(EMBEDDED_MODEL), 512,
                             collect_settings(1, 1.0, 7), out, batch=1, quiet=True, minutes=1e-9)
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert (counts.holes, [r["truth"] for r in rows]) == (1, [DECLARE])
