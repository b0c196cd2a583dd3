"""Cleaning a model's fills before the editor shows them: small named filters, applied in order.

A diffusion model writes a fixed-size canvas, so its fills often run on: they repeat the code after the
hole, close a block the suffix already closes, pad out with repeated text, or lose the indentation.
Each filter takes a fill and the `FillContext` and returns the fixed fill, or None to drop it.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property

from dice_lsp.cuda.functions import braces, enclosing_function
from dice_lsp.cuda.holes import Hole

SUFFIX_LINES = 3  # how many of the suffix's first non-blank lines a fill may repeat
DISTINCT_LINE_CHARS = 8  # a suffix line this long is rare enough to cut at on its own
REPEATED_LINES = 3  # the same line this often in one fill is a loop, not code
MAX_NGRAM = 4  # tokens in a repeated n-gram ...
REPEATED_NGRAM_TOKENS = 16  # ... that runs this many tokens (eight zeros in an initialiser stay under it)

_END = re.compile(r"<\|(?:pad|eos|endoftext)\|>")
_SPECIAL = re.compile(r"<\|[^|<>\s]{1,40}\|>")


@dataclass(frozen=True)
class FillContext:
    """The hole and the document around it: `before` is text[:hole.start], `after` is text[hole.end:]."""

    hole: Hole
    before: str
    after: str

    @cached_property
    def newline(self) -> str:
        return "\r\n" if "\r\n" in self.before or "\r\n" in self.after else "\n"

    @cached_property
    def line_before(self) -> str:
        """The hole's line up to the hole."""
        return self.before[self.before.rfind("\n") + 1:]

    @cached_property
    def unclosed(self) -> int:
        """How many '{' the document leaves open (a fill may close that many)."""
        return sum(1 if b == "{" else -1 for _, b in (*braces(self.before), *braces(self.after)))

    @cached_property
    def function(self) -> tuple[str, int]:
        """The enclosing function's indentation and how many of its braces are open at the hole."""
        function = enclosing_function(self.before, len(self.before))
        if function is None:
            return "", 1
        head_line = self.before[self.before.rfind("\n", 0, function.head) + 1:]
        depth = sum(1 if b == "{" else -1 for _, b in braces(self.before[function.body_open:]))
        return head_line[:len(head_line) - len(head_line.lstrip())], max(1, depth)

    @cached_property
    def unit(self) -> str:
        """One level of indentation, as the document before the hole writes it after a '{'."""
        lines = [line for line in self.before.split("\n")[-200:] if line.strip()]
        if sum(line.startswith("\t") for line in lines) > sum(line.startswith(" ") for line in lines):
            return "\t"
        widths = [len(line) - len(line.lstrip(" ")) for line in lines]
        steps = [inner - outer for line, outer, inner in zip(lines, widths, widths[1:], strict=False)
                 if line.rstrip().endswith("{") and inner > outer]
        return " " * min(8, min(steps, default=4))


Filter = Callable[[str, FillContext], str | None]


def strip_special_tokens(fill: str, ctx: FillContext) -> str | None:
    """Text after a pad/EOS token is not part of the fill; other special tokens are never code."""
    return _SPECIAL.sub("", _END.split(fill, maxsplit=1)[0])


def _brackets(text: str) -> list[int]:
    """Opened minus closed (), [] and {} (a plain count: fills are short)."""
    return [text.count(o) - text.count(c) for o, c in ("()", "[]", "{}")]


def _depth(text: str) -> int:
    return sum(1 if b == "{" else -1 for _, b in braces(text))


def cut_suffix_repeat(fill: str, ctx: FillContext) -> str | None:
    """Cut the part of a fill that writes again the code right after the hole.

    A fill ending with the rest of the hole's line loses it, unless that would open a bracket the fill
    closed. A fill stops at a line equal to one of the suffix's first lines when the rest of the fill is
    that code again, or when the line is long enough to be no coincidence; never where the cut would
    leave a '{' that the fill itself closed open.
    """
    rest = ctx.after.split("\n", 1)[0].strip()
    if rest and fill.rstrip().endswith(rest):
        cut = fill.rstrip()[:-len(rest)]
        if all(abs(c) <= abs(f) for c, f in zip(_brackets(cut), _brackets(fill), strict=True)):
            return cut
    ahead = [line.strip() for line in ctx.after.split("\n") if line.strip()][:SUFFIX_LINES]
    lines = fill.split("\n")
    offset = 0
    for index, line in enumerate(lines):
        remaining = [r.strip() for r in lines[index:] if r.strip()]
        repeats = bool(remaining) and remaining == ahead[:len(remaining)] and line.strip() == remaining[0]
        distinct = bool(ahead) and line.strip() == ahead[0] and len(ahead[0]) >= DISTINCT_LINE_CHARS
        if (repeats or distinct) and _depth(fill[:offset]) <= max(0, _depth(fill)):
            return fill[:offset]
        offset += len(line) + 1
    return fill


def balance_braces(fill: str, ctx: FillContext) -> str | None:
    """Drop trailing '}' the suffix already closes; a body fill ends with one '}' at the function's indent."""
    if ctx.hole.close_brace:
        return _close_body(fill, ctx)
    while True:
        depth, unmatched = 0, []
        for at, brace in braces(fill):
            depth += 1 if brace == "{" else -1
            if depth < 0:
                unmatched.append(at)
                depth = 0
        if len(unmatched) <= max(0, ctx.unclosed) or fill[unmatched[-1] + 1:].strip():
            return fill
        fill = fill[:unmatched[-1]].rstrip()


def _close_body(fill: str, ctx: FillContext) -> str | None:
    indent, depth = ctx.function
    for at, brace in braces(fill):
        depth += 1 if brace == "{" else -1
        if depth == 0:
            fill = fill[:at]
            break
    body = fill.rstrip()
    return body + ctx.newline + indent + "}" if body.strip() else None


def fix_indentation(fill: str, ctx: FillContext) -> str | None:
    """Trim trailing whitespace and stray line breaks; re-indent continuation lines that lost the block's indent.

    The first line continues the hole's line, so it neither repeats the indentation already there nor
    starts with a line break, unless the hole is at column 0 or its line is a finished statement.
    """
    lines = [line.rstrip() for line in fill.split("\n")]
    if not ctx.after or ctx.after.startswith(("\n", "\r\n")):
        while lines and not lines[-1]:
            lines.pop()
    if not lines:
        return ""
    keep_break = ctx.before.endswith("\n") or not ctx.before or ctx.line_before.rstrip().endswith((";", "{", "}"))
    dropped = False
    while not keep_break and len(lines) > 1 and not lines[0]:
        lines.pop(0)
        dropped = True
    if dropped or (ctx.line_before and not ctx.line_before.strip()):
        lines[0] = lines[0].lstrip()
    if _inconsistent(lines, ctx):
        lines = _reindent(lines, ctx)
    return ctx.newline.join(lines)


def _levels(lines: list[str], ctx: FillContext) -> tuple[str, list[int]]:
    """The indentation of level 0, and each line's brace level below the hole's line (a closing line is
    one level up; the first line gets 0). A body counts from its function's indentation, since the hole
    may sit on the last line of a multi-line signature."""
    if ctx.hole.close_brace:
        base, depth = ctx.function[0], ctx.function[1] + _depth(lines[0])
    else:
        base, depth, lowest = ctx.hole.indent, 0, 0
        for _, brace in braces(ctx.line_before + lines[0]):  # '} else {' opens a level for the next line
            depth += 1 if brace == "{" else -1
            lowest = min(lowest, depth)
        depth -= lowest
    levels = [0]
    for line in lines[1:]:
        code = line.lstrip()
        levels.append(depth - code.startswith("}"))
        depth += _depth(code)
    return base, levels


def _inconsistent(lines: list[str], ctx: FillContext) -> bool:
    """A continuation line (not blank, preprocessor or closing) shallower than its braces say, or in the
    other indentation character."""
    foreign = " " if ctx.unit == "\t" else "\t"
    base, levels = _levels(lines, ctx)
    for line, level in zip(lines[1:], levels[1:], strict=True):
        indent = line[:len(line) - len(line.lstrip())]
        code = line.lstrip()
        if code and not code.startswith(("#", "}")) and (not indent.startswith(_indent_at(base, level, ctx.unit))
                                                          or foreign in indent):
            return True
    return False


def _reindent(lines: list[str], ctx: FillContext) -> list[str]:
    """Indent each continuation line by its brace depth below the hole's line."""
    last = len(lines) - 1 if ctx.hole.close_brace else len(lines)  # the body's '}' is already placed
    fixed = [lines[0]]
    base, levels = _levels(lines, ctx)
    for index, level in enumerate(levels[1:], start=1):
        code = lines[index].lstrip()
        keep = index >= last or not code or code.startswith("#")
        fixed.append(lines[index] if keep else _indent_at(base, level, ctx.unit) + code)
    return fixed


def _indent_at(base: str, level: int, unit: str) -> str:
    if level >= 0:
        return base + unit * level
    return base[:max(0, len(base) + level * len(unit))]


def _repetitive(fill: str) -> bool:
    """The same line again and again, or a short n-gram repeated over a long stretch (filling the canvas)."""
    lines = Counter(line.strip() for line in fill.split("\n") if any(c.isalnum() for c in line))
    if lines and lines.most_common(1)[0][1] >= REPEATED_LINES:
        return True
    tokens = re.findall(r"\w+|[^\w\s]", fill)
    for n in range(1, MAX_NGRAM + 1):
        run = n
        for at in range(n, len(tokens)):
            run = run + 1 if tokens[at] == tokens[at - n] else n
            if run >= REPEATED_NGRAM_TOKENS and run >= 4 * n:
                return True
    return False


def drop_degenerate(fill: str, ctx: FillContext) -> str | None:
    """Nothing to show, or a loop the model fell into."""
    return None if not fill.strip() or _repetitive(fill) else fill


FILTERS: tuple[Filter, ...] = (strip_special_tokens, cut_suffix_repeat, balance_braces, fix_indentation,
                               drop_degenerate)


def postprocess(fill: str, ctx: FillContext) -> str | None:
    """The fill after every filter, or None when one drops it."""
    result: str | None = fill
    for step in FILTERS:
        if result is None:
            return None
        result = step(result, ctx)
    return result


def clean_candidates(fills: list[str], ctx: FillContext) -> list[str]:
    """Postprocessed fills, without the dropped ones and without duplicates (whitespace aside)."""
    seen: set[str] = set()
    kept = []
    for fill in fills:
        cleaned = postprocess(fill, ctx)
        key = " ".join(cleaned.split()) if cleaned is not None else ""
        if cleaned is not None and key and key not in seen:
            seen.add(key)
            kept.append(cleaned)
    return kept
