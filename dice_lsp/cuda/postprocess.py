"""Cleaning a model's fills before the editor shows them: small named filters, applied in order.

A diffusion model writes a fixed-size canvas, so its fills often run on: they repeat the code after the
hole, close a block the suffix already closes, pad out with repeated text, or lose the indentation; on a
line hole they go on past the statement (`float maxval = = ;;`, `out[i] = tile[x];];`) or close brackets
nobody opened. Each filter takes a fill and the `FillContext` and returns the fixed fill, or None to drop
it. The order (`FILTERS`) matters:

1. `strip_special_tokens`: the model's own markers go first, so every later filter sees code; then
   `strip_retyped_word`: a fill that writes again the word typed before the cursor loses that part, so
   every later filter (and the neighbour-repeat one, which reads the line with what was typed) sees the
   line as it will read.
2. `cut_suffix_repeat` and 3. `balance_braces`: what the code after the hole already has (its lines, its
   '}'), judged on the whole fill; a body fill gets its closing '}' here.
4. `fix_indentation`: trims and re-indents every line, so later filters see the document's layout.
5. `drop_degenerate`: a fill that loops is dropped whole, before a cut could leave a plausible first line
   of it (the model that looped is not trusted with that line either).
6. `cut_line_at_statement_end`: a line hole gets one line, ended at its statement's ';'; and
   `cut_marker_at_its_line`: a marker with code after it on its line gets that line's part only.
7. `balance_brackets`: ')' and ']' with no opener, on what is left (a ';' cut in 6 may already have
   removed them); the openers it may close are counted over the document up to the hole, not only the
   hole's line, since a call or a `for (` header may be split over lines.
   Then `close_open_brackets`: a one-line statement that ends in ';' with its own '(' or '[' still open
   gets them closed before the ';' (after 7, so only what is really missing is added).
8. `drop_block_closer`: a fill that closes the block the hole is in (`} else {`, `} if (i < n) {` on an
   empty line: they parse, and move the code after the hole into another block) is dropped, judged on
   what 6 and 7 left of it (a `c[i] = 0; } else {` may be cut back to its good first statement) —
   except where it opens another before it ends: in a region marked or selected, or `} else {` where the
   cursor sits dedented between two lines of a deeper block.
9. `drop_neighbour_repeat`, `drop_comment_only` and `drop_unreachable_jump`: last, so the fill judged is the
   one the editor would show (a repeat of the line above, no code, or a jump with code after it in its block).

Brackets and ';' are counted by a plain scan (`_marks`) that skips comments, literals and preprocessor
lines (except the macro a hole is in), so it works on fragments and half-typed files.
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
    def open_brackets(self) -> str:
        """The (, [ and { still open at the hole, innermost last (`_open_stack`)."""
        return _open_stack(self.before)

    @cached_property
    def open_at_line(self) -> str:
        """The (, [ and { still open where the hole's line starts."""
        return _open_stack(self.before[:len(self.before) - len(self.line_before)])

    @cached_property
    def line_above(self) -> str:
        """The nearest non-blank line above the hole's line."""
        above = self.before[:len(self.before) - len(self.line_before)]
        return next((line for line in reversed(above.split("\n")) if line.strip()), "")

    @cached_property
    def line_below(self) -> str:
        """The nearest non-blank line below the hole's line (the rest of the hole's line is not one)."""
        return next((line for line in self.after.split("\n")[1:] if line.strip()), "")

    @cached_property
    def dedented(self) -> bool:
        """The cursor sits on an empty line left of both its neighbours' indentation (tabs as 4 columns;
        preprocessor lines, often at column 0, are no neighbours): the user has stepped out of the block
        the lines above and below are in."""
        if self.line_before.strip() or self.after.split("\n", 1)[0].strip():
            return False
        above = reversed(self.before[:len(self.before) - len(self.line_before)].split("\n")[-200:])
        below = self.after.split("\n")[1:200]
        column = len(self.line_before.expandtabs(4))
        for lines in (above, below):
            line = next((line for line in lines if line.strip() and not line.lstrip().startswith("#")), "")
            if len(line.expandtabs(4)) - len(line.expandtabs(4).lstrip()) <= column:
                return False
        return True

    @cached_property
    def several_per_line(self) -> bool:
        """The line above or below the hole's line holds more than one statement: the document's style."""
        return any(_statement_end("", "", line) is not None for line in (self.line_above, self.line_below))

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


_TYPED_WORD = re.compile(r"(?<!\w)[A-Za-z_]\w*\Z")
_FIRST_WORD = re.compile(r"\w+")


def strip_retyped_word(fill: str, ctx: FillContext) -> str | None:
    """A fill on a half-typed line that writes again the word typed before the cursor loses that part:
    `_st` typed and `_storage_x = 0;` filled shows `orage_x = 0;` (the line reads `_storage_x = 0;`, not
    `_st_storage_x = 0;`); `_storage` typed and `_storage.x++;` filled shows `.x++;`.

    Ghost text after a half-typed word continues that word, so the fill is read as the whole word again
    when its first word starts with the typed one, unless the glued word (typed + the fill's first word) is
    a word of the document (`s` typed, `s_` filled, and the file has `ss_`: the fill completes that name).
    A fill that glues onto the typed word without repeating it (`_storage` + `or = 0;`) is left to the
    name check, which judges the whole identifier the line then holds (`_storageor`).
    """
    if ctx.hole.kind != "line":
        return fill
    typed = _TYPED_WORD.search(ctx.line_before)
    first = _FIRST_WORD.match(fill)
    if typed is None or first is None or not first.group().startswith(typed.group()):
        return fill
    glued = re.compile(rf"(?<!\w){re.escape(typed.group() + first.group())}(?!\w)")
    if glued.search(ctx.before) or glued.search(ctx.after):
        return fill
    return fill[len(typed.group()):]


def _brackets(text: str) -> list[int]:
    """Opened minus closed (), [] and {} (a plain count: fills are short)."""
    return [text.count(o) - text.count(c) for o, c in ("()", "[]", "{}")]


def _depth(text: str) -> int:
    return sum(1 if b == "{" else -1 for _, b in braces(text))


_CODE = re.compile(r"""//[^\n]*|/\*.*?(?:\*/|\Z)|"(?:\\.|[^"\\\n])*"?|'(?:\\.|[^'\\\n])*'?"""
                   r"|^[ \t]*#(?:\\\r?\n|[^\n])*|[()\[\]{};]", re.DOTALL | re.MULTILINE)
_OPENER = {")": "(", "]": "[", "}": "{"}
_CLOSERS_RUN = re.compile(r"[\s)\]]*")


def _marks(text: str, end_in_directive: bool = False) -> list[tuple[int, str]]:
    """Offsets of the brackets and ';' that are code: not in comments, literals or preprocessor lines.
    With `end_in_directive`, a directive that runs to the end of `text` (the hole is in a macro's body)
    is code: its brackets, alone, are the context."""
    marks = []
    for match in _CODE.finditer(text):
        token = match.group()
        if len(token) == 1 and token in "()[]{};":
            marks.append((match.start(), token))
        elif end_in_directive and match.end() == len(text) and token.lstrip(" \t").startswith("#"):
            body = match.start() + token.index("#") + 1
            marks = [(body + at, mark) for at, mark in _marks(text[body:])]
    return marks


def _close(stack: list[str], closer: str) -> int:
    """How many entries of `stack` (innermost last) `closer` closes: a '}' up to its '{'; a ')' or ']'
    up to its opener, if one is open inside the innermost '{'; else 0 (a stray closer changes nothing)."""
    opener = _OPENER[closer]
    floor = 0  # a ')' or ']' closes nothing outside the innermost '{'
    if opener != "{" and "{" in stack:
        floor = len(stack) - stack[::-1].index("{")
    for at in range(len(stack) - 1, floor - 1, -1):
        if stack[at] == opener:
            return len(stack) - at
    return 0


def _open_stack(text: str) -> str:
    """The brackets `text` leaves open, innermost last. Stray or mismatched closers in broken code are
    skipped and a '}' also closes the brackets left open inside its block, so one mistake does not
    outlive its block."""
    stack: list[str] = []
    for _, mark in _marks(text, end_in_directive=True):
        if mark in "([{":
            stack.append(mark)
        elif mark != ";":
            del stack[len(stack) - _close(stack, mark):]
    return "".join(stack)


def _uncomment(text: str) -> str:
    """`text` with its comments blanked out."""
    return _CODE.sub(lambda m: " " * len(m.group()) if m.group().startswith(("//", "/*")) else m.group(), text)


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


def _line_key(line: str) -> tuple[str, ...]:
    """What a line says, for telling near-duplicates apart: its words in order, a word repeated right after
    itself counted once; whitespace, punctuation and operators left out (`int int = = =`, `int  int = =;`
    and `int int int = = = =` are one line; `c[0] = a[0];` and `c[1] = a[1];` are two)."""
    found = re.findall(r"\w+", line)
    return tuple(word for at, word in enumerate(found) if at == 0 or word != found[at - 1])


def _repetitive(fill: str) -> bool:
    """The same line (or near-duplicates of it, `_line_key`) again and again, or a short n-gram repeated
    over a long stretch (filling the canvas)."""
    lines = Counter(key for key in map(_line_key, fill.split("\n")) if key)
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


def cut_line_at_statement_end(fill: str, ctx: FillContext) -> str | None:
    """A line hole gets one line: the fill's first line, up to the ';' that ends its statement.

    A ';' ends the statement when no bracket is open at it, counting from the start of the hole's line
    (what the line typed before the hole, and the '(' or '[' a statement from the lines above left open,
    as in a `for (` header split over lines), not in literals or comments. The line is not cut before a
    comment or before closers of blocks the lines above opened (`return x; });` ends a lambda argument).
    A first line ending in '{' keeps the fill as it is, the block it opens included; one ending in '\\'
    (a macro goes on) is kept whole. On an empty line the model may start with a line break: the first
    line with code is taken, at the hole's indentation; after a finished statement such a line break
    stays (the fill is the next line).

    Some code writes several statements on a line on purpose: the line is not cut when the line above or
    below does so too (the document's style: `readTsdf(...); if (weight == 0) return 0;` in rows), nor
    before a lone `break;` (`case 1: r -= 1; break;`). What is left is rare in real code (10 of the
    14,808 dev lines, such as `n.x = normal.x; n.y = normal.y; n.z = normal.z;`) and common in runoff.
    """
    if ctx.hole.kind != "line":
        return fill
    lines = fill.split("\n")
    first = next((index for index, line in enumerate(lines) if line.strip()), None)
    if first is None:
        return None
    head, stack, prefix, line = ctx.line_before, ctx.open_at_line, "", lines[first]
    if first and not ctx.line_before.strip():
        indent = ctx.hole.indent
        line = (indent[len(ctx.line_before):] if indent.startswith(ctx.line_before) else "") + line.strip()
    elif first and ctx.line_before.rstrip().endswith((";", "{", "}")):
        head, stack, prefix = "", ctx.open_brackets, ctx.newline
    elif first:
        line = line.lstrip()
    code = _uncomment(line).rstrip()
    if code.endswith("{"):
        return fill if not first else prefix + "\n".join([line, *lines[first + 1:]]).rstrip()
    cut = _statement_end(stack, head, line)
    if code.endswith("\\") or cut is None or ctx.several_per_line or line[cut:].strip() == "break;":
        return prefix + line.rstrip()
    return prefix + line[:cut].rstrip()


def cut_marker_at_its_line(fill: str, ctx: FillContext) -> str | None:
    """A marker with code after it on its line stands for a piece of that line: the fill is its first line
    with code (a marker's canvas invites more), and, where code before the marker starts the statement, it
    ends before the first ';' that would end that statement at the marker's level (the rest of the line ends
    it: `x[i] = /*@fill*/;` takes `a[i]`, not `a[i]; x[j] = 0;`). A ';' inside brackets, the fill's own or
    those open at the marker (`for (/*@fill*/)`, a lambda's body), stays. A marker followed on its line by the
    `}` that closes its block (`{ /*@fill*/ }`, a body removed whole) stands for that block's statements: not
    cut."""
    rest = ctx.after.split("\n", 1)[0].strip()
    if ctx.hole.kind != "marker" or not rest or rest.startswith("}"):
        return fill
    line = next((line.strip() for line in fill.split("\n") if line.strip()), "")
    if not ctx.line_before.strip():
        return line or None
    head = ctx.line_before
    stack = list(ctx.open_at_line)
    level = None  # the stack's depth at the marker
    for at, mark in _marks(head + line):
        if level is None and at >= len(head):
            level = len(stack)
        if mark in "([{":
            stack.append(mark)
        elif mark != ";":
            del stack[len(stack) - _close(stack, mark):]
        elif at >= len(head) and len(stack) <= (level or 0) and stack[-1:] in ([], ["{"]):
            return line[:at - len(head)].rstrip() or None
    return line or None


def _statement_end(open_at_line: str, head: str, line: str) -> int | None:
    """Where in `line` (typed after `head` on a line that starts with `open_at_line` open) to cut: after
    the first ';' at statement level that more code follows; None: nowhere."""
    text = head + line
    stack = list(open_at_line)
    outer = len(stack)  # stack[:outer] was open before the line
    for at, mark in _marks(text):
        if mark in "([{":
            stack.append(mark)
        elif mark != ";":
            del stack[len(stack) - _close(stack, mark):]
            outer = min(outer, len(stack))
        elif at >= len(head) and (not stack or (stack[-1] == "{" and len(stack) <= outer)):
            rest = _uncomment(text[at + 1:]).strip()
            if not rest:
                return None
            if not (set(rest) <= set(")]};, \t") and _closes_outer(stack[:outer], rest)):
                return at + 1 - len(head)
    return None


def _closes_outer(stack: list[str], rest: str) -> bool:
    """`rest` (closers, ';' and ',') closes, innermost first, blocks and brackets the lines above opened."""
    closers = [mark for mark in rest if mark in _OPENER]
    for closer in closers:
        if not stack or stack.pop() != _OPENER[closer]:
            return False
    return bool(closers)


def balance_brackets(fill: str, ctx: FillContext) -> str | None:
    """Take out the ')' and ']' that close nothing; drop a fill that closes a bracket with the wrong kind.

    The openers a fill may close are its own and those open at the hole (the hole's line, or a call
    split over lines), less those the rest of the hole's line closes (`f(/*@fill*/);`: the ')' after
    the hole is the call's, so the fill must not close it). A run of stray closers before a ';' goes
    (`foo(a, b));` -> `foo(a, b);`, `x[i];];` -> `x[i];`); elsewhere the fill is cut before the first
    stray closer (a body fill gets its '}' back). A closer of the wrong kind (`f(a]`) drops the fill.
    """
    available = list(ctx.open_brackets)
    for closer in _stray_closers(ctx.after.split("\n", 1)[0]):
        if not available or available[-1] != _OPENER[closer]:
            break
        available.pop()
    own: list[str] = []
    kept, start, skip = [], 0, -1
    for at, mark in _marks(fill):
        if at < skip or mark == ";":
            continue
        if mark in "([{":
            own.append(mark)
        elif own:
            if own[-1] != _OPENER[mark]:
                return None
            own.pop()
        elif mark == "}":
            del available[len(available) - _close(available, mark):]
        elif available and available[-1] == _OPENER[mark]:
            available.pop()
        elif available and available[-1] != "{":
            return None
        else:
            run = _CLOSERS_RUN.match(fill, at)
            end = run.end() if run else at
            if fill[end:end + 1] != ";":
                kept.append(fill[start:at])
                cut = "".join(kept).rstrip()
                if ctx.hole.close_brace:
                    return _close_body(cut, ctx)
                return cut or None
            kept.append(fill[start:at].rstrip())
            statement_ended = "".join(kept).rstrip().endswith(";") or not "".join(kept).strip()
            start = skip = end + 1 if statement_ended else end
    result = "".join(kept) + fill[start:]
    return result if result.strip() not in ("", "}") else None


def _stray_closers(text: str) -> list[str]:
    """The closers in `text` that close nothing opened in it, in order."""
    stack: list[str] = []
    stray = []
    for _, mark in _marks(text):
        if mark in "([{":
            stack.append(mark)
        elif mark != ";":
            if stack and stack[-1] == _OPENER[mark]:
                stack.pop()
            else:
                stray.append(mark)
    return stray


_CONTROL_HEAD = re.compile(r"\s*(?:\}\s*)?(?:else\s+)?(?:if|for|while|switch|catch)\b")


def close_open_brackets(fill: str, ctx: FillContext) -> str | None:
    """Close the '(' and '[' a one-line fill opened and left open before its final ';', innermost first
    (`return (code >> (nbits - 3 * (level + 1));` gets its last ')', `int o = f(a, g(b);` its two).

    The model often ends the statement one closer short; the ';' says where the statement ends, so the
    missing closers can only go there. Only on a line hole (the end of an empty or half-typed line), for a
    fill that is one line of code ending in its only ';', and only for an expression, declaration or
    return statement: a control head (`if (x == 0;`, `for (int i = 0; i++)`, `while (`, `switch (`, also
    when the head was typed before the hole) is no statement to close (`if (x == 0);` is an empty `if`),
    so it stays as it is for the parse check and re-masking. Only the fill's own brackets: those open
    before the hole (`foo(` typed, a call split over lines, a marker's `f(/*@fill*/);`) belong to the
    user's code, and a fill with a '{' of its own (an initialiser list, a lambda) is left alone.
    """
    if ctx.hole.kind != "line" or ctx.after.split("\n", 1)[0].strip():
        return fill
    lines = fill.split("\n")
    code = [index for index, line in enumerate(lines) if line.strip()]
    if len(code) != 1:
        return fill
    index = code[0]
    line = lines[index]
    statement = (ctx.line_before if index == 0 else "") + line
    if _CONTROL_HEAD.match(statement) or statement.lstrip().startswith("#"):
        return fill
    marks = _marks(line)
    ends = [at for at, mark in marks if mark == ";"]
    if len(ends) != 1 or _uncomment(line[ends[0] + 1:]).strip():
        return fill
    own: list[str] = []
    for _, mark in marks:
        if mark in "([{":
            own.append(mark)
        elif mark in _OPENER and own:  # a closer with no own opener closes a bracket typed before the hole
            if own[-1] != _OPENER[mark]:
                return fill
            own.pop()
    if not own or "{" in own:
        return fill
    closers = "".join(")" if opener == "(" else "]" for opener in reversed(own))
    lines[index] = line[:ends[0]].rstrip() + closers + line[ends[0]:]
    return "\n".join(lines)


def drop_block_closer(fill: str, ctx: FillContext) -> str | None:
    """Drop a fill that closes a block it did not open, unless the document leaves that many blocks open
    (`unclosed`: a block the user has not closed yet is the fill's to close). A body hole's own '}' is
    placed by `balance_braces`.

    Where a fill may close the block and open another before it ends (the code after it then still
    lands in a block at the hole's depth, and the parse check judges the structure):
    - a region the user marked or selected: several lines asked for explicitly may end one block and
      start the next (`x = 0;` / `} else {` / `y = 1;` on three lines, or `}` / `if (ok) {`);
    - on a line hole, `} else {` and `} else if (...) {` where the cursor sits dedented between two
      lines of a deeper block: the user has stepped out of an `if`'s block with code below still in it."""
    if ctx.hole.close_brace:
        return fill
    limit = -max(0, ctx.unclosed)
    explicit = ctx.hole.kind in ("marker", "selection")
    depth = 0
    for offset, brace in braces(fill):
        depth += 1 if brace == "{" else -1
        if depth < limit and not (explicit or (_ELSE_AFTER.match(fill, offset + 1) and ctx.dedented)):
            return None
    return fill if depth >= limit else None


_ELSE_AFTER = re.compile(r"\s*else\b")


TRIVIAL_LINES = frozenset({"}", "{", "};", "else", "}else{", "else{", "break;", "continue;", "return;",
                           "__syncthreads();", "__syncwarp();", "__threadfence();"})


def drop_neighbour_repeat(fill: str, ctx: FillContext) -> str | None:
    """Drop a fill whose first line writes again the line just above it, or which, whole, writes again
    the line just below the hole's line.

    A fill that goes on the hole's line is judged with what was typed before it (and, for one line, the
    rest of the line); one that starts with a line break, by its first line with code. Lines compare
    without whitespace. Lines that are often right twice (`}`, `break;`, `__syncthreads();`, ...) never
    count; on a line hole only a complete statement (ending in ';', at statement level) does, so an
    argument list or a table of data repeating a row stays.
    """
    lines = fill.split("\n")
    first = next((index for index, line in enumerate(lines) if line.strip()), None)
    if first is None:
        return fill
    one_line = not any(rest.strip() for rest in lines[first + 1:])
    if first == 0:
        line, above, open_before = ctx.line_before + lines[0], ctx.line_above, ctx.open_at_line
        if one_line:
            line += ctx.after.split("\n", 1)[0]
    else:
        line, above = lines[first], ctx.line_before if ctx.line_before.strip() else ctx.line_above
        open_before = ctx.open_brackets

    def repeats(line: str, neighbour: str) -> bool:
        key = "".join(line.split())
        if key != "".join(neighbour.split()) or key in TRIVIAL_LINES:
            return False
        return ctx.hole.kind != "line" or (key.endswith(";") and open_before[-1:] in ("", "{"))

    return None if repeats(line, above) or (one_line and repeats(line, ctx.line_below)) else fill


def drop_comment_only(fill: str, ctx: FillContext) -> str | None:
    """Drop a fill with no code outside its comments, where the cursor asked for code (a line or a body).

    The cursor is never in a comment there (no region is offered inside one), so a comment-only fill is
    not what the user is typing: on real files they were `// thread`, `// run run`, commented-out code
    (`// int row = 1`) and `// ...` (the context's mark for code left out, copied). A marker or a selection
    may be a comment being rewritten: those keep theirs, unless they say nothing (`//`, `/* */`).
    """
    if _uncomment(fill).strip():
        return fill
    if ctx.hole.kind not in ("line", "body") and re.sub(r"//|/\*|\*/|\s", "", fill):
        return fill
    return None


_JUMP = re.compile(r"(?:return|break|continue|goto)\b")
_REACHABLE_AFTER_JUMP = re.compile(r"[}#]|(?:case\b|default\s*:)|[A-Za-z_]\w*\s*:(?!:)")
_BRACELESS_HEAD = re.compile(r"(?:\)|\belse)$")


def drop_unreachable_jump(fill: str, ctx: FillContext) -> str | None:
    """Drop a one-line fill of a line hole that is a bare `return`, `break`, `continue` or `goto` with a statement
    after it in the same block: that code could never run (`return val;` in the middle of a reduction).

    The jump is kept where it does not end its line (`return f<T>(` goes on below), where the next code line
    closes the block, is a `case`/`default`/label or a preprocessor line, where nothing follows, and where the
    line above is a brace-less `if (...)`/`for (...)`/`else` head that makes the jump conditional."""
    if ctx.hole.kind != "line" or "\n" in fill.strip():
        return fill
    line = (ctx.line_before + fill + ctx.after.split("\n", 1)[0]).strip()
    if not _JUMP.match(line) or not line.endswith(";") or _BRACELESS_HEAD.search(ctx.line_above.strip()):
        return fill
    code = (text.strip() for text in ctx.after.split("\n")[1:])
    below = next((text for text in code if text and not text.startswith(("//", "/*", "*"))), "")
    return fill if not below or _REACHABLE_AFTER_JUMP.match(below) else None


FILTERS: tuple[Filter, ...] = (strip_special_tokens, strip_retyped_word, cut_suffix_repeat, balance_braces,
                               fix_indentation, drop_degenerate, cut_line_at_statement_end, cut_marker_at_its_line,
                               balance_brackets, close_open_brackets, drop_block_closer, drop_neighbour_repeat,
                               drop_comment_only, drop_unreachable_jump)


def postprocess(fill: str, ctx: FillContext, filters: tuple[Filter, ...] = FILTERS) -> str | None:
    """The fill after every filter, or None when one drops it."""
    result: str | None = fill
    for step in filters:
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
