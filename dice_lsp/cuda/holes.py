"""Where a completion request's region is: the span of the document the model's fill replaces.

A diffusion model fills a whole region between a prefix and a suffix, so a request needs the region's
end as well as its start, and a canvas size (how many mask tokens the model gets; it may end early with
pad tokens, never write more). The rules, tried in order:

(a) a non-empty selection: rewrite exactly that range;
(b) a hole marker `/*@fill*/` (spaces allowed inside) on the cursor's line or around the cursor;
(c) the cursor on an empty or unfinished line inside a function body, up to where existing code resumes;
(d) the cursor in a function body whose `}` is not written yet, with nothing of the body after it: the rest
    of the body. Nothing of the body follows when only whitespace does, or new top-level code on a later
    line: code at column 0 that is not a directive or a `}`, or, at any indentation, a definition that
    cannot sit inside a body (a function, a template, a namespace, `extern "C"`), alone or behind
    `#define`/`#include` lines. Such a definition ends the body even where a later `}` (a namespace's)
    makes tree-sitter call the body closed: the `}` the user has not written yet belongs to the fill.

Canvas sizes (tokens; dice-tiny's tokenizer averages ~3.3 characters of CUDA per token):
- LINE_TOKENS: one statement is 10-20 tokens; 24 leaves room without inviting a second line.
- a marker or selection: the replaced text's length in tokens x REWRITE_GROWTH (room for a longer
  rewrite), clamped to [REWRITE_MIN_TOKENS, REWRITE_MAX_TOKENS] (128 is what a held-out body needs).
- EMPTY_LINE_TOKENS: an empty line may become one or two statements; END_OF_BLOCK_TOKENS when the next
  code closes the block, where users usually write what finishes it.
- BODY_TOKENS / KERNEL_BODY_TOKENS: a helper's body vs a kernel's (the evaluation's body holes use 192).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from dice_lsp.cuda.functions import enclosing_function, in_comment_or_string, is_comment, open_braces, parser

CHARS_PER_TOKEN = 3.3
LINE_TOKENS = 24
REWRITE_GROWTH = 1.5
REWRITE_MIN_TOKENS = 16
REWRITE_MAX_TOKENS = 128
EMPTY_LINE_TOKENS = 24
END_OF_BLOCK_TOKENS = 32
BODY_TOKENS = 128
KERNEL_BODY_TOKENS = 192

LINE_CANVASES = (12,)  # shorter canvases a line hole also tries (docs/PERFORMANCE.md: chosen on the dev split)

_MARKER = re.compile(r"/\*\s*@fill\s*\*/")
# top-level items that cannot be inside a function body, and the directives that may stand before them
_DEFINITIONS = frozenset({"function_definition", "template_declaration", "namespace_definition",
                          "linkage_specification"})
_TOP_DIRECTIVES = frozenset({"comment", "preproc_def", "preproc_function_def", "preproc_include"})
_TEMPLATE = re.compile(r"template\s*<")
LOOKAHEAD_CHARS = 4000  # how much of the code after a cursor is parsed to tell whether it is top-level code


@dataclass(frozen=True)
class Hole:
    start: int  # string offsets into the document text: the region the fill replaces
    end: int
    kind: Literal["selection", "marker", "line", "body"]
    indent: str  # indentation of the line the fill starts on (for the indentation filter)
    canvas_tokens: int  # canvas size to give the model
    close_brace: bool  # True when the fill must also close an unclosed '{' (kind "body")


def canvas_lengths(hole: Hole) -> tuple[int, ...]:
    """The canvas lengths to fill side by side: a line hole also tries the shorter `LINE_CANVASES` (a canvas
    much longer than the statement invites filler); other holes keep their one canvas."""
    if hole.kind != "line":
        return (hole.canvas_tokens,)
    return tuple(sorted({*(n for n in LINE_CANVASES if n < hole.canvas_tokens), hole.canvas_tokens}))


def find_markers(text: str) -> list[tuple[int, int]]:
    """Spans of every hole marker written as a comment (not inside a string or another comment)."""
    return [m.span() for m in _MARKER.finditer(text) if is_comment(text, *m.span())]


def find_hole(text: str, cursor: int, selection: tuple[int, int] | None = None) -> Hole | None:
    """The region to fill for a request at `cursor`, or None where no rule applies."""
    cursor = max(0, min(cursor, len(text)))
    if selection is not None:
        start, end = sorted(max(0, min(i, len(text))) for i in selection)
        if start < end:
            return Hole(start, end, "selection", _indent(text, start), _rewrite_canvas(text[start:end]), False)
    marker = _marker_at(text, cursor)
    if marker is not None:
        start, end = marker
        return Hole(start, end, "marker", _indent(text, start), _rewrite_canvas(text[start:end]), False)
    if in_comment_or_string(text, cursor):
        return None
    function = enclosing_function(text, cursor)
    if function is None:
        return None
    before = text[:cursor].encode("utf-8")
    if not text[cursor:].strip() and open_braces(before, len(before)) == 0:
        return None  # the end of the file with every brace closed: top level (tree-sitter may have lost the file)
    if _at_end_of_body(text, cursor, function.closed):
        canvas = KERNEL_BODY_TOKENS if function.is_kernel else BODY_TOKENS
        return Hole(cursor, _blank_run_end(text, cursor), "body", _indent(text, cursor), canvas, True)
    return _line_hole(text, cursor)


def _rewrite_canvas(replaced: str) -> int:
    tokens = round(len(replaced) / CHARS_PER_TOKEN * REWRITE_GROWTH)
    return max(REWRITE_MIN_TOKENS, min(REWRITE_MAX_TOKENS, tokens))


def _line_start(text: str, offset: int) -> int:
    return text.rfind("\n", 0, offset) + 1


def _line_end(text: str, offset: int) -> int:
    """End of the line's content: before its '\\n' (or '\\r\\n'), never before `offset`."""
    end = text.find("\n", offset)
    end = len(text) if end < 0 else end
    return max(offset, end - 1 if text[end - 1:end] == "\r" else end)


def _indent(text: str, offset: int) -> str:
    """Leading whitespace of the line holding `offset`."""
    line = text[_line_start(text, offset):_line_end(text, offset)]
    return line[:len(line) - len(line.lstrip())]


def _marker_at(text: str, cursor: int) -> tuple[int, int] | None:
    """The marker around the cursor, else the one nearest to it on the cursor's line."""
    first, last = _line_start(text, cursor), _line_end(text, cursor)
    near = [(s, e) for s, e in find_markers(text) if s <= last and e >= first]
    return min(near, key=lambda span: max(0, span[0] - cursor, cursor - span[1]), default=None)


def _at_end_of_body(text: str, cursor: int, closed: bool) -> bool:
    """Rule (d): nothing of the body follows the cursor (only whitespace, or top-level code on a later line).
    A body tree-sitter calls closed qualifies only when a definition follows."""
    rest = text[cursor:].lstrip()
    if not rest:
        return not closed
    code = len(text) - len(rest)
    if "\n" not in text[cursor:code]:
        return False
    if _definition_follows(text[code:code + LOOKAHEAD_CHARS], code + LOOKAHEAD_CHARS >= len(text)):
        return True
    return not closed and text[code - 1] == "\n" and rest[0] not in "}#"


def _definition_follows(code: str, whole: bool) -> bool:
    """`code` starts with a definition no function body can hold, perhaps behind `#define`/`#include` lines
    and comments (or with such directives only, up to the end of the file: `whole`)."""
    if _TEMPLATE.match(code):
        return True
    directives = False
    for item in parser().parse(code.encode("utf-8")).root_node.named_children:
        if item.type in _DEFINITIONS:
            return True
        if item.type not in _TOP_DIRECTIVES:
            return False
        directives = directives or item.type != "comment"
    return directives and whole


def _blank_run_end(text: str, cursor: int) -> int:
    """End of the cursor's line and of the blank lines after it; the line break before code stays."""
    end = _line_end(text, cursor)
    while end < len(text):
        following = _line_end(text, text.find("\n", end) + 1)
        if text[end:following].strip():
            break
        end = following
    return end


def _line_hole(text: str, cursor: int) -> Hole | None:
    """Rule (c): an empty line (and the blank lines after it) or the tail of an unfinished line."""
    start, end = _line_start(text, cursor), _line_end(text, cursor)
    if text[cursor:end].strip():
        return None
    if text[start:cursor].strip():
        return Hole(cursor, end, "line", _indent(text, cursor), LINE_TOKENS, False)
    end = _blank_run_end(text, cursor)
    closes_block = text[end:].lstrip().startswith("}")
    canvas = END_OF_BLOCK_TOKENS if closes_block else EMPTY_LINE_TOKENS
    return Hole(cursor, end, "line", _indent(text, cursor), canvas, False)
