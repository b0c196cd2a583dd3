"""Make code compile by re-writing only the lines nvcc rejects.

A round: compile; take the first error not yet tried and every other error near it; mask what nvcc points
at (an error's first round: the token at the error's column plus one mask, or, for an "expected ..." reported
at the start of a line, the end of the line before, where the missing token belongs: one mask inserted after
a word, its last punctuation re-written otherwise, as BPE merges `]` and `;` into one token; its second
round: the whole rejected lines plus a few masks to grow into). An error whose two rounds made nothing
better is left for the next one (nvcc's first error is often a consequence of a later one); any progress
gives every error its rounds again; denoise several candidates with the rest
of the file as context; keep the first candidate with fewer errors than before (never one with as many:
such code drifts without getting closer). A missing header is not re-written. A candidate that empties a
rejected line, or loses a name the user wrote there other than the words nvcc points at, is not taken: deleting
or replacing the user's statement is not repairing it.

A repair says what it changed and why: each kept change is a `Change` (line, text before, text after, the
nvcc error it was made for), since code that compiles after a repair may compute something else
(`float maxval = = ;;` -> `float maxval = 0 ;;`). Its total time is bounded (`budget_s`, the setting
`dice.repairSeconds`): no new round starts past it.
"""

from __future__ import annotations

import difflib
import re
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dice_lsp import engine
from dice_lsp.cuda.functions import enclosing_function
from dice_lsp.engine.fill_types import CancelCheck, Draft, FillRequest
from dice_lsp.engine.sampler_config import SamplerConfig
from dice_lsp.errors import Cancelled
from dice_lsp.optimize.candidates import first_of_each, normalized
from dice_lsp.settings import REPAIR_CANDIDATES, Settings
from dice_lsp.toolchain.flags import CompileFlags
from dice_lsp.toolchain.report import CheckReport, Diagnostic, check_source
from dice_lsp.wording import counted

if TYPE_CHECKING:  # torch loads with the model, not with this module
    from dice_lsp.engine import LoadedModel
    from dice_lsp.toolchain.cache import CompileCache

_WORD = re.compile(r"\w+|[^\w\s]")
_MISSING_FILE = re.compile(r"No such file|cannot open source file")  # nothing to re-write: a header is missing
NEARBY_LINES = 6  # errors this close to the first one are re-written in the same round
ROUNDS_PER_ERROR = 2  # rounds on one error (narrow, then its whole lines) before the next error gets its turn
CONTEXT_LINES = 2  # unmasked lines around the masked ones that the region keeps in place
DEFAULT_SAMPLER = SamplerConfig()
ModelRunner = Callable[[Callable[["LoadedModel"], list[str]]], list[str]]
Check = Callable[[str], CheckReport]


@dataclass(frozen=True)
class Change:
    """One kept re-write: lines from `line` (0-based, in the text before it) read `before`, now `after`."""

    line: int
    before: str
    after: str
    error: str  # the nvcc error it was made for

    def describe(self) -> str:
        return f"line {self.line + 1}: `{self.before}` -> `{self.after}` (for: {self.error})"

    def to_json(self) -> dict[str, Any]:
        return {"line": self.line, "before": self.before, "after": self.after, "error": self.error}


@dataclass
class RepairResult:
    text: str
    rounds: int  # rounds of re-writing spent (0: it compiled as it was)
    report: CheckReport  # nvcc's report on `text`: what still fails, and the kernels' resources
    changes: list[Change] = field(default_factory=list)  # what was changed and why, in order
    stopped: str | None = None  # why it stopped before `rounds` rounds (the time budget), if it did

    @property
    def errors(self) -> list[Diagnostic]:
        return errors_of(self.report)

    @property
    def compiles(self) -> bool:
        return not self.errors

    def to_json(self) -> dict[str, Any]:
        return {"text": self.text, "compiles": self.compiles, "rounds": self.rounds,
                "errors": [d.to_json() for d in self.errors], "changes": [c.to_json() for c in self.changes],
                "summary": self.summary(), "stopped": self.stopped}

    def summary(self) -> str:
        """One line per change (what the CLI prints and the editor's message shows)."""
        return "; ".join(c.describe() for c in self.changes) or "no change"

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> RepairResult:
        """A result a team server sent (`to_json`): its errors become the report (no kernels, no time)."""
        report = CheckReport.from_json({"diagnostics": data["errors"], "kernels": []}, 0.0)
        return cls(data["text"], data["rounds"], replace(report, cached=False),
                   [Change(**c) for c in data["changes"]], data.get("stopped"))


def checker(folder: Path, flags: CompileFlags, nvcc: Path | None = None, cache: CompileCache | None = None) -> Check:
    """nvcc's report on `text` compiled in `folder`; with `cache`, a text compiled before (the same includes,
    flags and nvcc) is answered from it, as the editor's diagnostics are (a repair's first check of the document
    it was asked for, a rewrite made again)."""
    return lambda text: check_source(text, folder, flags, cache=cache, nvcc=nvcc)


def errors_of(report: CheckReport) -> list[Diagnostic]:
    return [d for d in report.diagnostics if d.severity == "error"]


def repair(run_model: ModelRunner, text: str, check: Check, rounds: int = Settings.repair_rounds,
           candidates: int = REPAIR_CANDIDATES, sampler: SamplerConfig = DEFAULT_SAMPLER,
           cancel: CancelCheck | None = None, said: Callable[[str], None] | None = None,
           budget_s: float | None = None) -> RepairResult:
    """Up to `rounds` rounds of re-writing the rejected lines of `text`, none started after `budget_s`
    seconds; the best text found, its state and the changes made."""
    started = time.monotonic()
    report = check(text)
    errors = errors_of(report)
    spent = 0
    changes: list[Change] = []
    stopped = None
    tried: dict[tuple[int, str], int] = {}  # rounds spent on an error (line, message) since the last progress
    while errors and spent < rounds and not _MISSING_FILE.search(errors[0].message):
        if cancel is not None and cancel():
            raise Cancelled(f"repair cancelled after {spent} rounds")
        if budget_s is not None and time.monotonic() - started >= budget_s:
            stopped = f"stopped after {spent} rounds: the time budget ({budget_s:g} s) is spent"
            break
        targets = [e for e in errors if tried.get((e.line, e.message), 0) < ROUNDS_PER_ERROR]
        if not targets:
            stopped = f"stopped after {spent} rounds: no re-write of any rejected line made fewer errors"
            break
        spent += 1
        first = (targets[0].line, targets[0].message)
        narrow = tried.get(first, 0) == 0
        tried[first] = tried.get(first, 0) + 1
        start, end, spans = region(text, targets, narrow)
        draft = Draft(text[start:end], spans=tuple((lo - start, hi - start) for lo, hi in spans),
                      grow=1 if narrow else 4)
        masked_tokens = sum(hi - lo for lo, hi in spans) // 3 + draft.grow * len(spans)  # ~3 characters a token
        request = FillRequest(text[:start], text[end:], candidates=candidates, draft=draft,
                              sampler=replace(sampler, seed=sampler.seed + spent,
                                              temperature=sampler.temperature or 0.7,
                                              steps=max(sampler.steps, masked_tokens)))
        fills = run_model(partial(_fills, request=request, cancel=cancel))
        base, before = text, len(errors)
        pointed = _pointed_words(text, errors)
        for fill_text in first_of_each(fills, normalized):
            if _empties_a_line(fill_text, draft) or _drops_user_code(fill_text, draft, pointed):
                continue
            attempt = base[:start] + fill_text + base[end:]
            attempt_report = check(attempt)
            found = errors_of(attempt_report)
            if len(found) < len(errors):  # strictly better, or the code would drift without getting closer
                changes += _changes(text, attempt, targets[0].message)
                text, report, errors = attempt, attempt_report, found
                tried.clear()  # lines moved, and an error left may have been a consequence of the fixed one
            if not found:
                break
        if said is not None:
            said(f"repair round {spent}: {counted(before, 'error')} before, {len(errors)} after")
    return RepairResult(text, spent, report, changes, stopped)


def _changes(before: str, after: str, error: str) -> list[Change]:
    """The changed runs of lines between two texts, each made for `error`."""
    old, new = before.splitlines(), after.splitlines()
    return [Change(i1, "\n".join(old[i1:i2]).strip(), "\n".join(new[j1:j2]).strip(), error)
            for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, old, new, autojunk=False).get_opcodes()
            if tag != "equal"]


def _fills(model: LoadedModel, request: FillRequest, cancel: CancelCheck | None) -> list[str]:
    return engine.fill(model, request, cancel).texts


def region(text: str, errors: list[Diagnostic], narrow: bool) -> tuple[int, int, list[tuple[int, int]]]:
    """The text to re-denoise for the first error (and those near it): (start, end, masked spans).

    Narrow: the token nvcc points at (for "expected ..." at the start of a line, the end of the line
    before, where the missing token belongs). Otherwise each rejected line's code, indentation kept; a line
    of braces alone is never masked. The region adds a couple of lines of context either side, inside the
    enclosing function's body when the spans are.
    """
    lines = text.splitlines(keepends=True)
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line))
    first = min(e.line for e in errors)
    spans = sorted({span for e in errors if e.line - first <= NEARBY_LINES and e.line < len(lines)
                    for span in _spans(lines, starts, e, narrow)})
    if not spans:  # only braces were rejected: take the line as it is
        number = min(first, len(lines) - 1)
        spans = [(starts[number], starts[number] + len(lines[number].rstrip("\r\n")))]
    numbers = [_line_of(starts, lo) for lo, _ in spans]
    start = starts[max(0, min(numbers) - CONTEXT_LINES)]
    end = starts[min(len(lines), max(numbers) + CONTEXT_LINES + 1)]
    function = enclosing_function(text, spans[0][0])
    if function is not None and function.body_open < spans[0][0] and spans[-1][1] <= function.body_close:
        start, end = max(start, function.body_open + 1), min(end, function.body_close)
    return start, max(end, spans[-1][1]), spans


def _spans(lines: list[str], starts: list[int], error: Diagnostic, narrow: bool) -> list[tuple[int, int]]:
    line = lines[error.line].rstrip("\r\n")
    indent = len(line) - len(line.lstrip())
    missing = error.message.startswith("expected") and error.character <= indent
    if narrow:
        if missing:  # the end of the line before, where the missing token belongs
            above = _previous_code_line(lines, error.line)
            code = lines[above].rstrip()
            end = starts[above] + len(code)
            # after a word, insert; after punctuation, re-write it: BPE merges `]` and `;` into one token
            return [(end, end)] if code[-1:].isalnum() or code[-1:] == "_" else [(end - 1, end)]
        word = _word_at(line, error.character)
        return [(starts[error.line] + word.start(), starts[error.line] + word.end())] if word else []
    numbers = {error.line} | ({_previous_code_line(lines, error.line)} if missing else set())
    found = []
    for number in sorted(numbers):
        code = lines[number].rstrip()
        if code.strip(" \t{}();"):
            lead = len(code) - len(code.lstrip())
            found.append((starts[number] + lead, starts[number] + len(code)))
    return found


def _word_at(line: str, character: int) -> re.Match[str] | None:
    """The token nvcc's column points at (or the first after it)."""
    return next((m for m in _WORD.finditer(line) if m.end() > character), None)


def _previous_code_line(lines: list[str], number: int) -> int:
    """The nearest line above `number` with something on it (where a missing `;` or `)` belongs)."""
    for candidate in range(min(number, len(lines)) - 1, -1, -1):
        if lines[candidate].strip():
            return candidate
    return number


def _line_of(starts: list[int], offset: int) -> int:
    return max(i for i, start in enumerate(starts) if start <= offset) if offset else 0


def _pointed_words(text: str, errors: list[Diagnostic]) -> set[str]:
    """The words nvcc's errors point at (the token at or after each error's column): what a repair may
    replace or drop."""
    lines = text.splitlines()
    words = (_word_at(lines[error.line], error.character) for error in errors if error.line < len(lines))
    return {word.group() for word in words if word is not None}


_NAME = re.compile(r"[A-Za-z_]\w*")


def _drops_user_code(fill_text: str, draft: Draft, pointed: set[str]) -> bool:
    """Whether the fill loses a name the user wrote in the re-denoised region other than the ones nvcc points
    at: a repair changes what the compiler rejects and keeps the rest of the statement (with `scale_factor`
    undefined, `float inv = rsqrtf(sum) * scale_factor;` may lose `scale_factor`, never `inv`, `rsqrtf` or
    `sum`; `__syncthreads();` in its place is not a repair)."""
    kept = Counter(_NAME.findall(fill_text))
    return any(kept[name] < count for name, count in Counter(
        name for name in _NAME.findall(draft.text) if name not in pointed).items())


def _empties_a_line(fill_text: str, draft: Draft) -> bool:
    """Whether the fill has fewer non-blank lines than the draft: a rejected line was deleted, not fixed."""
    return sum(bool(line.strip()) for line in fill_text.splitlines()) < sum(
        bool(line.strip()) for line in draft.text.splitlines())
