"""Candidates from the document itself: code repeats, and the line a hole needs is often already in the file.

For a hole on one line, the document's other lines are candidates. A line is proposed when the lines around it
look like the lines around the hole: the nearest non-blank line above (weighed most: what comes next is mostly
decided there) and below. For a half-typed line only lines that begin with what was typed are candidates, and
the candidate is what follows it. Similarity is over code tokens (words and punctuation), as a multiset: fast
enough for every line of a large file on each keystroke (a few milliseconds for 5,000 lines), and blind to
indentation.
"""

from __future__ import annotations

from dataclasses import dataclass

from dice_lsp.completion.adapt import pairing, renamed
from dice_lsp.completion.sources import Candidate
from dice_lsp.cuda.likeness import Line, similarity

SOURCE = "document"
ABOVE_WEIGHT = 0.7  # the line above a hole says more about it than the line below
MAX_CANDIDATES = 3


def _neighbours(lines: list[Line], index: int, skip: int | None = None) -> tuple[Line | None, Line | None]:
    """The nearest non-blank lines above and below `index` (never the line `skip`: the hole's own)."""
    above = next((lines[i] for i in range(index - 1, -1, -1) if lines[i].text and i != skip), None)
    below = next((lines[i] for i in range(index + 1, len(lines)) if lines[i].text and i != skip), None)
    return above, below


def context_score(above: float, below: float) -> float:
    """How much a line's context looks like the hole's, from the similarities of the two lines above and of the
    two lines below (0.0 where either is missing); shared with the workspace source, so scores compare."""
    return ABOVE_WEIGHT * above + (1 - ABOVE_WEIGHT) * below


def _context_score(hole: tuple[Line | None, Line | None], other: tuple[Line | None, Line | None]) -> float:
    above, below = ((similarity(mine, theirs) if mine is not None and theirs is not None else 0.0)
                    for mine, theirs in zip(hole, other, strict=True))
    return context_score(above, below)


def candidates(before: str, after: str, limit: int = MAX_CANDIDATES) -> list[Candidate]:
    """Lines of the document (`before` the hole + `after` it) proposed for a hole that ends its line, best first.

    `before` ends with the hole's line up to the cursor (its indentation, or a half-typed statement); `after`
    starts with what follows the cursor on that line, which must be blank (a hole in the middle of a line has no
    line of the file to copy)."""
    head_start = before.rfind("\n") + 1
    typed = before[head_start:].lstrip()
    rest_end = after.find("\n")
    if after[:rest_end if rest_end >= 0 else len(after)].strip():
        return []
    above_text = before[:head_start].split("\n")[:-1] if head_start else []
    below_text = after[rest_end + 1:].split("\n") if rest_end >= 0 else []
    lines = [Line(t.strip()) for t in (*above_text, typed, *below_text)]
    hole = len(above_text)
    context = _neighbours(lines, hole, skip=hole)
    best: dict[str, float] = {}
    adapted: dict[str, float] = {}
    for index, line in enumerate(lines):
        if index == hole or not line.text or line is context[0] or line is context[1]:
            continue  # the line just above or below: a repeat, never the answer
        if context[0] is not None and line.text == context[0].text:
            continue
        theirs = _neighbours(lines, index, skip=hole)
        if line.text.startswith(typed) and len(line.text) > len(typed):
            score = _context_score(context, theirs)
            text = line.text[len(typed):]
            best[text] = max(score, best.get(text, -1.0))
        found = _adapted(lines, index, hole, context, theirs, typed)
        if found is not None and found[0] not in best:
            adapted[found[0]] = max(found[1], adapted.get(found[0], -1.0))
    ranked = sorted(best.items(), key=lambda item: -item[1])[:limit]
    renamed_ = sorted(((t, s) for t, s in adapted.items() if t not in best), key=lambda item: -item[1])[:limit]
    return ([Candidate(text, SOURCE, round(score, 4)) for text, score in ranked]
            + [AdaptedCandidate(text, SOURCE, round(score, 4)) for text, score in renamed_])


@dataclass(frozen=True)
class AdaptedCandidate(Candidate):
    """A line of the document with its identifiers renamed to the hole's (`dice_lsp.completion.adapt`)."""

    adapted: bool = True


def _second_above(lines: list[Line], index: int, skip: int) -> Line | None:
    """The second nearest non-blank line above `index` (never the line `skip`)."""
    found = [i for i in range(index - 1, -1, -1) if lines[i].text and i != skip][1:2]
    return lines[found[0]] if found else None


def _adapted(lines: list[Line], index: int, hole: int, context: tuple[Line | None, Line | None],
             theirs: tuple[Line | None, Line | None], typed: str) -> tuple[str, float] | None:
    """Line `index` renamed to the hole's names (`adapt.pairing` of the lines around it and around the hole: the
    line above must have the hole's shape, the second above and the one below join when theirs agree), as the
    rest after `typed`, with its context score once renamed; None when no name differs or it does not continue
    `typed`."""
    if context[0] is None or theirs[0] is None or len(context[0].tokens) != len(theirs[0].tokens):
        return None
    renames = pairing([theirs[0].text], [context[0].text])
    if renames is None:
        return None
    pairs = [(theirs[1], context[1]), (_second_above(lines, index, hole), _second_above(lines, hole, hole))]
    for their_line, my_line in pairs:
        if their_line is not None and my_line is not None:
            more = pairing([theirs[0].text, their_line.text], [context[0].text, my_line.text])
            renames = more if more is not None else renames
    if not renames:
        return None
    text = renamed(lines[index].text, renames)
    if not text.startswith(typed) or len(text) == len(typed) or text == lines[index].text:
        return None
    moved = tuple(None if line is None else Line(renamed(line.text, renames)) for line in theirs)
    return text[len(typed):], _context_score(context, (moved[0], moved[1]))
