"""Infilling evaluation on held-out CUDA files: does the model write the code that was cut out?

    dice-lsp eval infill [--json] [--model DIR] [--heldout FILE] [--holes N]

Holes are cut from `__global__` kernels (found with tree-sitter): one statement line, 2-5 consecutive
lines, or a whole kernel body. Each is filled the way the editor fills a selection: the same context
builder, sampler settings and post-processing filters (`dice_lsp.complete.fill_hole`), from a fixed-size
canvas (the real length is not given to the model), and scored: exact match (whitespace-normalised),
edit similarity, empty fills, balanced braces, and nvcc compile-only of the filled file. A compile only
counts for a non-empty fill (splicing nothing into a hole often compiles too), in a file that compiles
as it is, inside a kernel that is not a template (nvcc does not check an uninstantiated template's body).
"""

from __future__ import annotations

import difflib
import json
import random
import re
import statistics
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from dice_lsp.complete import fill_hole
from dice_lsp.cuda import holes as editor
from dice_lsp.cuda.functions import parse_functions
from dice_lsp.engine import LoadedModel, fill
from dice_lsp.settings import Settings
from dice_lsp.toolchain.nvcc import compile_source

DEFAULT_HELDOUT = Path(__file__).resolve().parents[2] / "bench" / "heldout" / "kernels.jsonl"


@dataclass(frozen=True)
class HoleKind:
    name: str
    canvas: int  # tokens given to the model (the editor's sizes for a line and a kernel body)
    max_chars: int  # longer holes would not fit the canvas (~3.3 characters per token)


KINDS = (HoleKind("line", editor.LINE_TOKENS, 72), HoleKind("lines", 64, 200),
         HoleKind("body", editor.KERNEL_BODY_TOKENS, 600))


@dataclass(frozen=True)
class Hole:
    kind: str
    file: int
    start: int
    end: int
    checkable: bool  # inside a kernel that is not a template: nvcc checks what is filled in


@dataclass
class Score:
    kind: str
    exact: bool
    similarity: float
    empty: bool
    balanced: bool
    compiles: bool | None
    latency_ms: float
    fill: str = field(repr=False)
    truth: str = field(repr=False)


def normalise(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


def _is_statement(line: str) -> bool:
    stripped = line.strip()
    return len(stripped) > 3 and not stripped.startswith(("//", "/*", "*", "#")) and stripped not in ("{", "}")


def _statement_lines(text: str, body_open: int, body_close: int) -> list[tuple[int, int] | None]:
    """(content start, content end) of each line strictly inside a body; None for non-statements."""
    offset = text.find("\n", body_open, body_close) + 1
    if offset == 0:
        return []
    spans: list[tuple[int, int] | None] = []
    for line in text[offset:body_close].split("\n")[:-1]:
        content = offset + len(line) - len(line.lstrip())
        spans.append((content, offset + len(line.rstrip())) if _is_statement(line) else None)
        offset += len(line) + 1
    return spans


def holes_in(text: str, file: int) -> dict[str, list[Hole]]:
    """Candidate holes of each kind in one file's kernels (string offsets into `text`)."""
    found: dict[str, list[Hole]] = {k.name: [] for k in KINDS}
    for kernel in (f for f in parse_functions(text) if f.is_kernel):
        checkable = kernel.head == kernel.start
        found["body"].append(Hole("body", file, kernel.body_open + 1, kernel.body_close, checkable))
        lines = _statement_lines(text, kernel.body_open, kernel.body_close)
        for i, span in enumerate(lines):
            if span is None:
                continue
            found["line"].append(Hole("line", file, *span, checkable))
            for last in range(i + 1, min(i + 5, len(lines))):  # runs of 2 to 5 lines
                if (end := lines[last]) is not None:
                    found["lines"].append(Hole("lines", file, span[0], end[1], checkable))
    return found


def sample_holes(texts: list[str], per_kind: int, seed: int) -> list[Hole]:
    """Up to `per_kind` holes of each kind, spread over files, reproducibly."""
    rng = random.Random(seed)
    pools: dict[str, list[Hole]] = {k.name: [] for k in KINDS}
    for index, text in enumerate(texts):
        for name, holes in holes_in(text, index).items():
            pools[name].extend(holes)
    chosen: list[Hole] = []
    for kind in KINDS:
        pool = [h for h in pools[kind.name] if h.end - h.start <= kind.max_chars]
        rng.shuffle(pool)
        chosen.extend(pool[:per_kind])
    return chosen


def score_hole(model: LoadedModel, text: str, hole: Hole, compiles_as_is: bool, settings: Settings) -> Score:
    kind = next(k for k in KINDS if k.name == hole.kind)
    prefix, truth, suffix = text[:hole.start], text[hole.start:hole.end], text[hole.end:]
    line = prefix[prefix.rfind("\n") + 1:]
    region = editor.Hole(hole.start, hole.end, "selection", line[:len(line) - len(line.lstrip())], kind.canvas, False)
    started = time.perf_counter()
    fills, _ = fill_hole(model, text, region, replace(settings, max_canvas=kind.canvas, candidates=1),
                         lambda request: fill(model, request))
    latency = (time.perf_counter() - started) * 1000
    filled = fills[0] if fills else ""
    empty = not filled.strip()
    compiles = None
    if compiles_as_is and hole.checkable and not empty:
        compiles = compile_source(prefix + filled + suffix).ok
    return Score(hole.kind, normalise(filled) == normalise(truth),
                 difflib.SequenceMatcher(None, filled, truth, autojunk=False).ratio(), empty,
                 filled.count("{") == filled.count("}") and filled.count("(") == filled.count(")"),
                 compiles, latency, filled, truth)


def summarise(scores: list[Score]) -> dict[str, dict[str, Any]]:
    table: dict[str, dict[str, Any]] = {}
    for kind in KINDS:
        rows = [s for s in scores if s.kind == kind.name]
        if not rows:
            continue
        compiled = [s.compiles for s in rows if s.compiles is not None]
        table[kind.name] = {
            "holes": len(rows), "canvas_tokens": kind.canvas,
            "exact_match": sum(s.exact for s in rows) / len(rows),
            "edit_similarity": statistics.mean(s.similarity for s in rows),
            "empty": sum(s.empty for s in rows) / len(rows),
            "balanced": sum(s.balanced for s in rows) / len(rows),
            "compiled": sum(compiled), "compile_checked": len(compiled),
            "latency_p50_ms": statistics.median(s.latency_ms for s in rows),
        }
    return table


def markdown(table: dict[str, dict[str, Any]]) -> str:
    lines = ["| hole | holes | exact match | edit similarity | empty | balanced | compiles (non-empty) | p50 ms |",
             "|---|---|---|---|---|---|---|---|"]
    for kind, row in table.items():
        compiles = f"{row['compiled']}/{row['compile_checked']}" if row["compile_checked"] else "n/a"
        lines.append(f"| {kind} | {row['holes']} | {row['exact_match']:.1%} | {row['edit_similarity']:.2f} | "
                     f"{row['empty']:.1%} | {row['balanced']:.1%} | {compiles} | {row['latency_p50_ms']:.0f} |")
    return "\n".join(lines)


def run_eval(model: LoadedModel, heldout: Path, per_kind: int, seed: int, settings: Settings,
             progress: Any = None) -> dict[str, Any]:
    records = [json.loads(line) for line in heldout.read_text(encoding="utf-8").splitlines() if line.strip()]
    texts = [r["text"] for r in records]
    holes = sample_holes(texts, per_kind, seed)
    compiles_as_is = {i: compile_source(texts[i]).ok for i in sorted({h.file for h in holes})}
    scores = []
    for hole in holes:
        scores.append(score_hole(model, texts[hole.file], hole, compiles_as_is[hole.file], settings))
        if progress is not None:
            progress(1)
    return {"model": model.name, "heldout": str(heldout), "files": len(texts),
            "settings": {"steps_per_32_tokens": settings.steps, "context_tokens": settings.context_tokens},
            "files_compiling_as_is": sum(compiles_as_is.values()), "kinds": summarise(scores),
            "samples": [asdict(s) for s in scores[:: max(1, len(scores) // 12)]]}
