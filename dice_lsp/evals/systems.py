"""The systems CUDA-Infill measures, and how a suite hole becomes the request an editor would send.

A hole is asked for the way a user meets it: the document is the file with the hole's text removed (the
truth is never in it, nor its length), and the cursor is where the hole starts. The file was open before (the
language server starts clang's precompiled preamble when a file opens; here that is waited for, untimed).
- `line` and `midline`: the editor's own rule at the cursor (`dice_lsp.cuda.holes.find_hole`: an emptied
  line, or the end of a half-typed line). Where the rule finds no region the editor shows nothing.
- `lines` and `body`: no cursor rule gives a multi-line canvas on an emptied line, so the region is set
  explicitly at the cursor with a fixed canvas for the kind (the editor's sizes: `LINES_TOKENS`, and the body
  canvas of a kernel or a function), as a `/*@fill*/` marker would, but without the marker's length hint.
Every fill then goes through the product's context builder, sampler settings and clean-up filters
(`dice_lsp.complete`), so a model is measured as the editor would show it: the first cleaned candidate,
or nothing.

Baselines give each metric its meaning: `empty` (never shows anything), `idiom` (always the same common
first line of a kernel), and any checkpoint (`model`): the embedded dice-tiny, an older or an
autoregressive one, or an SDAR/DICE folder. `random_sdar_checkpoint` writes a randomly initialised tiny
SDAR checkpoint with dice-tiny's tokenizer, to exercise the block-diffusion path end to end (plumbing
only: its fills mean nothing).
"""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Protocol

from dice_lsp.complete import PRODUCT, Pipeline, fill_hole, front_end_for
from dice_lsp.completion.sources import Source
from dice_lsp.cuda import holes as editor
from dice_lsp.cuda.functions import enclosing_function
from dice_lsp.engine import EMBEDDED_MODEL, LoadedModel, fill
from dice_lsp.evals.results import EvalReport
from dice_lsp.evals.suite import SuiteHole
from dice_lsp.settings import Settings
from dice_lsp.toolchain.clang import CHECK_TIMEOUT_S, ClangJudge
from dice_lsp.toolchain.flags import CompileFlags

IDIOM = "int i = blockIdx.x * blockDim.x + threadIdx.x;"
LINES_TOKENS = 64  # canvas for 2-5 lines (about 210 characters)
OPEN_WAIT_S = CHECK_TIMEOUT_S + 5  # a preamble build is given up after CHECK_TIMEOUT_S


@dataclass(frozen=True)
class Answer:
    fill: str | None  # what the editor would show; None when it shows nothing
    latency_ms: float
    model_calls: int = 0  # the model calls it took (re-masking rounds included); 0: no model
    confidence: float | None = None  # the show filter's P(right) of what is shown (None: no filter decided)


class System(Protocol):
    name: str
    label: str

    def answer(self, document: str, hole: SuiteHole) -> Answer: ...


def document_for(text: str, hole: SuiteHole) -> str:
    """The file as the user has it when the hole is asked for: the truth removed."""
    return text[:hole.start] + text[hole.end:]


def region_for(document: str, hole: SuiteHole) -> editor.Hole | None:
    """The region the editor fills for `hole` in `document` (cursor at `hole.start`); None: no completion."""
    cursor = hole.start
    if hole.kind in ("line", "midline"):
        return editor.find_hole(document, cursor)
    line_start = document.rfind("\n", 0, cursor) + 1
    before = document[line_start:cursor]
    indent = before if not before.strip() else before[:len(before) - len(before.lstrip())]
    canvas = LINES_TOKENS
    if hole.kind == "body":
        function = enclosing_function(document, cursor)
        canvas = editor.KERNEL_BODY_TOKENS if function is not None and function.is_kernel else editor.BODY_TOKENS
    return editor.Hole(cursor, cursor, "marker", indent, canvas, False)


@dataclass
class Constant:
    """A baseline that shows the same text at every hole (or nothing, for the empty text)."""

    name: str
    label: str
    text: str

    def answer(self, document: str, hole: SuiteHole) -> Answer:
        return Answer(self.text if self.text.strip() else None, 0.0)


@dataclass
class ModelSystem:
    """A checkpoint asked through the editor's path with the product's settings."""

    name: str
    label: str
    model: LoadedModel
    settings: Settings
    pipeline: Pipeline = PRODUCT
    opened: bool = True  # the file was open before the completion: clang's preamble is built, untimed
    workspace: Callable[[SuiteHole], tuple[Source, ...]] | None = None  # the hole's workspace (its project's files)

    def answer(self, document: str, hole: SuiteHole) -> Answer:
        if self.opened and self.pipeline.front_end:
            self.open(document)
        started = time.perf_counter()
        region = region_for(document, hole)
        if region is None:
            return Answer(None, (time.perf_counter() - started) * 1000)
        settings = self.settings
        if region.kind == "marker":  # an explicit canvas: let it be as large as the kind asks
            settings = replace(settings, max_canvas=max(settings.max_canvas, region.canvas_tokens))
        front_end = front_end_for(document, None, CompileFlags(), settings) if self.pipeline.front_end else None
        sources = self.workspace(hole) if self.workspace is not None else ()
        completion = fill_hole(self.model, document, region, settings, lambda request: fill(self.model, request),
                               pipeline=self.pipeline, front_end=front_end, sources=sources)
        elapsed = (time.perf_counter() - started) * 1000
        texts = completion.texts
        shown = texts[0] if texts and texts[0].strip() else None
        confidence = completion.confidences[0] if shown is not None and completion.confidences else None
        return Answer(shown, elapsed, completion.model_calls, confidence)

    def open(self, document: str) -> None:
        """What the language server does when the editor opens a file (`DiceServer.warm_front_end`), waited for:
        clang's precompiled preamble of the file (the holes of one file share it)."""
        judge = front_end_for(document, None, CompileFlags(), self.settings)
        if isinstance(judge, ClangJudge):
            judge.open(wait=OPEN_WAIT_S)


@dataclass
class Replay:
    """The fills of earlier reports, by hole id: scores again (e.g. executed on a GPU machine) fills that a
    model made elsewhere. A hole no report has is not shown."""

    name: str
    label: str
    fills: dict[str, tuple[str | None, float]]

    @classmethod
    def from_reports(cls, reports: list[EvalReport], label: str | None = None) -> Replay:
        fills = {row.hole: (row.fill, float(row.latency_ms)) for report in reports for row in report.fills}
        first = reports[0]
        return cls(first.system, label or first.label, fills)

    def answer(self, document: str, hole: SuiteHole) -> Answer:
        fill, latency = self.fills.get(hole.id, (None, 0.0))
        return Answer(fill, latency)


def empty() -> Constant:
    return Constant("empty", "empty fill", "")


def idiom() -> Constant:
    return Constant("idiom", f"constant idiom `{IDIOM}`", IDIOM)


def random_sdar_checkpoint(folder: Path, seed: int = 0) -> Path:
    """A tiny randomly initialised SDAR checkpoint (Qwen3 layout, block size 4) with dice-tiny's tokenizer."""
    import torch
    from transformers import Qwen3Config, Qwen3ForCausalLM

    folder.mkdir(parents=True, exist_ok=True)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(EMBEDDED_MODEL / name, folder / name)
    vocab = json.loads((EMBEDDED_MODEL / "config.json").read_text())["vocab_size"]
    config = Qwen3Config(vocab_size=vocab, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, head_dim=16, max_position_embeddings=1024,
                         rms_norm_eps=1e-6, tie_word_embeddings=False)
    torch.manual_seed(seed)
    Qwen3ForCausalLM(config).save_pretrained(str(folder))
    saved = json.loads((folder / "config.json").read_text())
    saved.update(model_type="sdar", block_size=4)
    (folder / "config.json").write_text(json.dumps(saved))
    return folder
