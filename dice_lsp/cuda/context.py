"""The text the model sees around a hole: a prefix ending right before it and a suffix starting right after.

A small model fills best when the code it needs is close, and its context is short, so the budget goes,
in this order, to: the enclosing function (whole if it fits, else its lines nearest the hole); the file's
`#include` lines; where asked (`similar`), the lines elsewhere in the file that follow a line like the one
above the hole (each with that line: code repeats, and a model may copy a pattern it sees); the
`#define` macros the function uses; the `__device__` functions it calls; the statements launching it
(`name<<<...>>>(...)`, for a kernel); then the code nearest the hole, before and after. Pieces keep their
source order; a `// ...` line stands for code left out. Extra pieces only ever go at the start of the prefix
or the end of the suffix, so the prefix still ends with the text right before the hole and the suffix starts
with the text right after it.

Tokens are counted from one encoding of the whole file (where each token starts), so trying a window
costs a few bisections instead of a tokenizer run: a completion tries dozens of windows.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Callable
from dataclasses import dataclass

from dice_lsp.cuda.functions import (
    Function,
    directives,
    enclosing_function,
    launch_sites,
    names_used,
    parse_functions,
)
from dice_lsp.cuda.holes import Hole
from dice_lsp.cuda.likeness import Line, similarity

Span = tuple[int, int]
SIMILAR_PAIRS = 0  # line pairs like the hole's from outside its function (`build_context`); none by default: the
# embedded model fills no better with them (docs/bench-logs/pipeline/context_2026-12-07), a larger checkpoint may
SIMILAR_AT_LEAST = 0.6  # a pair's first line is this alike to the line above the hole (token Dice)


@dataclass(frozen=True)
class _Lines:
    """Line boundaries of a text, to grow a window around the hole a line at a time."""

    text: str
    starts: list[int]

    @classmethod
    def of(cls, text: str) -> _Lines:
        return cls(text, [0, *(m.end() for m in re.finditer("\n", text))])

    def index(self, offset: int) -> int:
        return bisect.bisect_right(self.starts, offset) - 1

    def start(self, line: int) -> int:
        return self.starts[line]

    def end(self, line: int) -> int:
        """Past the line's line break."""
        return self.starts[line + 1] if line + 1 < len(self.starts) else len(self.text)

    def full(self, span: Span) -> Span:
        """A span widened to whole lines."""
        return self.start(self.index(span[0])), self.end(self.index(max(span[0], span[1] - 1)))


@dataclass(frozen=True)
class _Window:
    """Lines first..last around the hole (the hole itself excluded) and extra pieces outside them."""

    first: int
    last: int
    extras: tuple[Span, ...] = ()


Segment = Span | str  # text of the file, or a `// ...` line standing for code left out


class _Builder:
    def __init__(self, text: str, hole: Hole, budget: int, token_starts: Callable[[str], list[int]]) -> None:
        self.text, self.hole, self.budget = text, hole, budget
        self.starts = token_starts(text)
        self.markers = self._markers(text)  # once: each `_gap` asks, and a scan of a large file is not free
        self.marker_tokens = {marker: len(token_starts(marker)) for marker in self.markers}
        self.lines = _Lines.of(text)

    @staticmethod
    def _markers(text: str) -> tuple[str, str]:
        newline = "\r\n" if "\r\n" in text else "\n"
        return "// ..." + newline, newline + "// ..." + newline

    def tokens(self, span: Span) -> int:
        """Tokens starting inside `span` of the file."""
        return bisect.bisect_left(self.starts, span[1]) - bisect.bisect_left(self.starts, span[0])

    def segments(self, window: _Window) -> tuple[list[Segment], list[Segment]]:
        left = (self.lines.start(window.first), self.hole.start)
        right = (self.hole.end, self.lines.end(window.last))
        before = [(s, min(e, left[0])) for s, e in window.extras if s < left[0]]
        after = [(max(s, right[1]), e) for s, e in window.extras if e > right[1]]
        return (self._join([*before, left], 0, self.hole.start),
                self._join([right, *after], self.hole.end, len(self.text)))

    def render(self, window: _Window) -> tuple[str, str]:
        prefix, suffix = self.segments(window)
        return self._text(prefix), self._text(suffix)

    def _text(self, segments: list[Segment]) -> str:
        return "".join(s if isinstance(s, str) else self.text[s[0]:s[1]] for s in segments)

    def _join(self, spans: list[Span], start: int, end: int) -> list[Segment]:
        """The spans in source order; a `// ...` line for each stretch of skipped code."""
        parts: list[Segment] = []
        position = start
        for first, last in sorted(spans):
            if first > position:
                parts.append(self._gap(position, first, parts))
            if last > position:
                parts.append((max(first, position), last))
                position = last
        if position < end:
            parts.append(self._gap(position, end, parts))
        return parts

    def _gap(self, start: int, end: int, parts: list[Segment]) -> Segment:
        if not self.text[start:end].strip():
            return start, end
        previous = parts[-1] if parts else None
        at_line_start = previous is None or (self._text([previous]).endswith("\n"))
        return self.markers[0 if at_line_start else 1]

    def fits(self, window: _Window) -> bool:
        prefix, suffix = self.segments(window)
        size = sum(self.marker_tokens[s] if isinstance(s, str) else self.tokens(s) for s in (*prefix, *suffix))
        return size <= self.budget

    def grow(self, window: _Window, steps: int, top: int, bottom: int) -> _Window:
        """The window after `steps` more lines, taken alternately above and below, within top..bottom."""
        above, below = window.first - top, bottom - window.last
        up, down = min(above, (steps + 1) // 2), min(below, steps // 2)
        up, down = min(above, steps - down), min(below, steps - up)
        return _Window(window.first - up, window.last + down, window.extras)

    def widest(self, window: _Window, top: int, bottom: int) -> _Window:
        """The most lines around `window` (which fits) that still fit the budget."""
        low, high = 0, (window.first - top) + (bottom - window.last)
        while low < high:
            middle = (low + high + 1) // 2
            if self.fits(self.grow(window, middle, top, bottom)):
                low = middle
            else:
                high = middle - 1
        return self.grow(window, low, top, bottom)

    def trimmed(self) -> tuple[str, str]:
        """When not even the hole's own lines fit: the most characters either side that do."""
        start, end = self.hole.start, self.hole.end
        low, high = 0, max(start, len(self.text) - end)
        while low < high:
            middle = (low + high + 1) // 2
            if self.tokens((max(0, start - middle), start)) + self.tokens((end, end + middle)) <= self.budget:
                low = middle
            else:
                high = middle - 1
        return self.text[max(0, start - low):start], self.text[end:end + low]


def build_context(text: str, hole: Hole, budget_tokens: int,
                  token_starts: Callable[[str], list[int]], similar: int = SIMILAR_PAIRS) -> tuple[str, str]:
    """(prefix, suffix) for the model: about `budget_tokens` together, counted with `token_starts` (the
    tokenizer's token start offsets of a text); `similar`: at most this many line pairs like the hole's (the
    pair's first line like the line above the hole) from outside the enclosing function."""
    builder = _Builder(text, hole, budget_tokens, token_starts)
    lines = builder.lines
    window = _Window(lines.index(hole.start), lines.index(hole.end))
    if not builder.fits(window):
        return builder.trimmed()
    function = enclosing_function(text, hole.start)
    if function is not None:
        top = min(window.first, lines.index(function.head))
        bottom = max(window.last, lines.index(max(function.head, _function_end(function) - 1)))
        whole = _Window(top, bottom)
        window = whole if builder.fits(whole) else builder.widest(window, top, bottom)
    extras: tuple[Span, ...] = ()
    for piece in _related(text, function, _similar_pairs(text, lines, hole, window, similar)):
        candidate = _Window(window.first, window.last, (*extras, lines.full(piece)))
        if builder.fits(candidate):
            extras = candidate.extras
    window = builder.widest(_Window(window.first, window.last, extras), 0, len(lines.starts) - 1)
    return builder.render(window)


def _function_end(function: Function) -> int:
    return function.body_close + 1 if function.closed else function.body_close


def _similar_pairs(text: str, lines: _Lines, hole: Hole, window: _Window, count: int) -> list[Span]:
    """Up to `count` spans of two lines outside `window`: a line like the nearest code line above the hole
    (token Dice similarity at least `SIMILAR_AT_LEAST`, most alike first, then nearest) and the code line after
    it, which is what the hole may repeat."""
    if count <= 0:
        return []
    above_line = next((i for i in range(lines.index(hole.start) - 1, -1, -1)
                       if text[lines.start(i):lines.end(i)].strip()), None)
    if above_line is None:
        return []
    above = Line(text[lines.start(above_line):lines.end(above_line)].strip())
    if len(above.tokens) < 2:  # a lone brace or word is like too much
        return []
    hole_line = lines.index(hole.start)
    scored = []
    total = len(lines.starts)
    for i in range(total):
        if window.first <= i <= window.last:
            continue
        content = text[lines.start(i):lines.end(i)].strip()
        if not content or content.startswith(("//", "/*", "*", "#")):
            continue
        score = similarity(above, Line(content))
        if score >= SIMILAR_AT_LEAST:
            after = next((j for j in range(i + 1, total) if text[lines.start(j):lines.end(j)].strip()), None)
            if after is not None and not window.first <= after <= window.last:
                scored.append((-score, abs(i - hole_line), i, after))
    return [(lines.start(i), lines.end(after)) for _, _, i, after in sorted(scored)[:count]]


def _related(text: str, function: Function | None, similar: list[Span]) -> list[Span]:
    """Pieces of the file the function depends on, most useful first (`similar`: the line pairs like the
    hole's, after the includes)."""
    found = directives(text)
    pieces = [(d.start, d.end) for d in found if d.kind == "include"] + similar
    if function is None:
        return pieces
    used = names_used(text, function.head, _function_end(function))
    pieces += [(d.start, d.end) for d in found if d.kind == "define" and d.name in used]
    pieces += [(f.head, f.body_close + 1) for f in parse_functions(text)
               if "__device__" in f.qualifiers and f.name in used and f.head != function.head]
    if function.is_kernel:
        pieces += launch_sites(text, function.name)
    return pieces
