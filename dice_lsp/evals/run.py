"""One system over (part of) the CUDA-Infill suite: ask every hole, score every fill, summarise per kind.

Holes are asked one after another in suite order (the latency is the editor path's, one request at a time).
Scoring is independent of the system: tree-sitter parse, nvcc compile-only where the hole's file compiles on
its own and its function is not a template, and with `execute` (a GPU) the harness's verification of every
executable hole's filled kernel against the original. Compiles run in a thread pool: nvcc is a subprocess.
The report (`results.EvalReport`) keeps every fill, so that a table can be re-made and a fill looked at without
re-running.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import Any

from dice_lsp.evals.execute import ItemProgress
from dice_lsp.evals.execute import execute as execute_fills
from dice_lsp.evals.results import EvalReport, FillRow
from dice_lsp.evals.score import FillScore, score_fill
from dice_lsp.evals.stats import summarise
from dice_lsp.evals.suite import Suite, SuiteHole
from dice_lsp.evals.systems import Answer, System, document_for


def ask(suite: Suite, holes: list[SuiteHole], system: System, progress: ItemProgress | None = None) -> list[Answer]:
    """The system's answer at every hole, in order."""
    answers = []
    for hole in holes:
        answers.append(system.answer(document_for(suite.text(hole), hole), hole))
        if progress is not None:
            progress(1)
    return answers


def compile_checked(suite: Suite, hole: SuiteHole) -> bool:
    """Whether nvcc can judge a fill of `hole`: its file compiles alone and its function is not a template."""
    return suite.files[hole.file].compiles is True and not hole.template


def score(suite: Suite, holes: list[SuiteHole], answers: list[Answer], workers: int | None = None,
          progress: ItemProgress | None = None) -> list[FillScore]:
    def one(index: int) -> FillScore:
        hole = holes[index]
        result = score_fill(suite.text(hole), hole, answers[index].fill, compile_check=compile_checked(suite, hole))
        if progress is not None:
            progress(1)
        return result

    with ThreadPoolExecutor(max_workers=workers or os.cpu_count() or 2) as pool:
        return list(pool.map(one, range(len(holes))))


def run_execution(suite: Suite, holes: list[SuiteHole], answers: list[Answer],
                  scores: list[FillScore]) -> list[FillScore]:
    """Scores with `passes` set for executable holes (verified on the GPU); others unchanged."""
    indices = [i for i, hole in enumerate(holes) if hole.executable]
    items = [(suite.files[holes[i].file], holes[i], answers[i].fill or "") for i in indices]
    verdicts = execute_fills(items) if items else []
    updated = list(scores)
    for i, passed in zip(indices, verdicts, strict=True):
        updated[i] = replace(scores[i], passes=bool(passed) and scores[i].substantive)
    return updated


def evaluate(suite: Suite, holes: list[SuiteHole], system: System, execute: bool = False,
             settings: dict[str, Any] | None = None, progress: ItemProgress | None = None) -> EvalReport:
    """The report of `system` on `holes`: per-kind summary with intervals, and every fill."""
    answers = ask(suite, holes, system, progress)
    scores = score(suite, holes, answers)
    if execute:
        scores = run_execution(suite, holes, answers, scores)
    rows = list(zip(holes, scores, [a.latency_ms for a in answers], strict=True))
    return EvalReport(
        suite=suite.name, split=suite.split, system=system.name, label=system.label, executed=execute,
        settings=settings or {}, holes=len(holes), kinds=summarise(rows),
        fills=[FillRow(h.id, h.kind, a.fill, round(a.latency_ms, 1), a.model_calls, s, a.confidence)
               for h, s, a in zip(holes, scores, answers, strict=True)])
