"""The half-typed line: what the text typed before the cursor on the hole's line means for the names checks.

- The word typed right before the hole is no name yet when it is the start of a longer name of the document or
  of a keyword and written nowhere else (`unfinished_word`): `return num_examp` finished as `num_examp(ptr)`, or
  `ret` finished as `ret.copyTo(dst)`, must not pass on their own half-typed word. A whole name typed once (a
  macro from a header not read here) stays a name.
- The names the code after the hole needs (`needed`): where the function parses, the scope's (`HoleScope.needed`).
  Where the typed text makes tree-sitter read the line with the next ones (a half-typed `for (size_t iter = 0; `
  takes the next lines into its header, `__shared__ ` makes the next line's declaration its own), the
  declarations there are no longer seen as such: the names are read from the base with the typed text blanked
  out, less the names that text writes (the loop variable the typed header declares is not the fill's to
  declare). Where the function does not parse apart from the hole's line, only the name being typed is
  demanded (`typed_declaration`): a needed name the typed word is the start of (`const size_t num_bl` before
  uses of `num_blocks`) must be finished by the fill; and where it does not parse at all (`#ifdef`s through its
  parameter list) the same is read from the words of the definition (`_typed_declaration_by_words`).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from tree_sitter import Node

from dice_lsp.completion.checks.symbols import KEYWORDS
from dice_lsp.cuda.functions import top_level_span
from dice_lsp.cuda.names import words

if TYPE_CHECKING:
    from dice_lsp.completion.checks.request import Request

_TYPING = re.compile(rb"[A-Za-z_]\w*$")  # a word at the end of the text before the hole
TYPED_WORD = re.compile(rb"(?<!\w)[A-Za-z_]\w*\Z")  # the word typed before the cursor, on its line
# a declaration's head typed so far: type words (qualified, templated, pointers) and the start of the name
_DECLARATION_HEAD = re.compile(r"\s*(?:[A-Za-z_][\w:]*(?:<[^;{}()]*>)?[\s*&]+)+[A-Za-z_]\w*")
_NOT_A_TYPE = frozenset({"return", "case", "goto", "else", "do", "delete", "throw", "new", "sizeof", "using",
                         "co_return", "co_yield", "co_await", "template", "typename"})
_PROSE = re.compile(rb'//[^\n]*|/\*.*?\*/|"(?:\\.|[^"\\\n])*"', re.S)  # comments and strings, by regex


def unfinished_word(prefix: bytes, suffix: bytes, data: bytes, names: frozenset[str]) -> str | None:
    """The word typed right before the hole (`prefix` ends with it, `suffix` does not go on with it) when it is
    no name yet: written once in the document (`data`) and the start of a longer name of `names` or of a
    keyword. None otherwise."""
    typing = _TYPING.search(prefix)
    if typing is None or suffix[:1].isalnum() or suffix[:1] == b"_":
        return None
    word = typing.group().decode("utf-8", "replace")
    once = len(re.findall(rb"(?<!\w)" + re.escape(typing.group()) + rb"(?!\w)", data)) == 1
    started = any(name.startswith(word) and name != word for name in (*names, *KEYWORDS))
    return word if once and started else None


def needed(request: Request) -> frozenset[str]:
    """Names the code after the hole uses like local variables that nothing in scope there provides: the
    deleted code declared them, so a fill must (`int tid = ...` before `out[tid] = ...`)."""
    function = request.enclosing
    if function is None:  # no function, or tree-sitter's recovery hides declarations: only the typed name
        return typed_declaration(request)
    if _breaks(request, function):
        return _needed_without_typed_line(request)
    return request.scope.needed


def _breaks(request: Request, function: Node) -> bool:
    """Whether text typed before the cursor goes with an error in or around the function (inside it, only on
    the hole's line, as `Request.enclosing` allows; around it, recovery's ERROR node that holds the rest of the
    file), or reads as one statement with the next line."""
    line_start, line_end = request.hole_line
    if not request.data[line_start:request.hole].strip():
        return False
    if any(e.start < function.end_byte and function.start_byte < e.end for e in request.errors):
        return True
    node = request.tree.root_node.descendant_for_byte_range(request.hole, request.hole)
    while node is not None and node != function:  # the typed text and the next line read as one statement
        if line_start <= node.start_byte < request.hole < node.end_byte and line_end < node.end_byte - 1:
            return True
        node = node.parent
    return False


def _needed_without_typed_line(request: Request) -> frozenset[str]:
    """`needed` as the base with the hole's typed text blanked out sees it, less the names that text writes."""
    if request.blanked.enclosing is None:  # blanked, the function parses no better: by words
        return typed_declaration(request)
    typed = set(re.findall(rb"[A-Za-z_]\w*", request.data[request.hole_line[0]:request.hole]))
    return frozenset(name for name in request.blanked.needed if name.encode() not in typed)


def typed_declaration(request: Request) -> frozenset[str]:
    """Where a half-typed line merges with the next in tree-sitter's eyes (`const size_t num_bl` before
    `const size_t grid = ...`), the function does not parse apart from the hole's line and the scope cannot
    tell. Then: the names the code after the hole needs, as the base with that line's typed text blanked out
    sees them, that the word typed before the cursor is the start of (`num_blocks`): the user is typing their
    declaration, so the fill must finish it (`_size = 0;`, which declares `num_bl_size`, does not)."""
    line_start = request.hole_line[0]
    typed = TYPED_WORD.search(request.data, line_start, request.hole)
    if typed is None:
        return frozenset()
    word = typed.group().decode("ascii")
    if request.blanked.enclosing is None:  # no parse even without the typed text (macro-laden)
        return _typed_declaration_by_words(request, line_start, word)
    return frozenset(name for name in request.blanked.needed if name.startswith(word) and name != word)


def _typed_declaration_by_words(request: Request, line_start: int, word: str) -> frozenset[str]:
    """`typed_declaration` where the function does not parse at all (OpenMM's kernels, `#ifdef`s through their
    parameter lists; tree-sitter cannot say what is declared where): by words. The line typed so far is a
    declaration's head (`real tempEn`, `__shared__ real fr`), and the code after the hole, in the definition that
    holds it, uses exactly one longer name that `word` starts, written nowhere before this line and not declared
    where it is first written (`energy += tempEnergy;`): that is the name being typed, so the fill must finish
    it. (Before this line, only the text of blocks still open counts: the same name declared in an earlier,
    closed block is another variable.)"""
    data, hole = request.data, request.hole
    head = data[line_start:hole].decode("utf-8", "replace")
    if _DECLARATION_HEAD.fullmatch(head) is None or head.split()[0] in _NOT_A_TYPE:
        return frozenset()
    span = top_level_span(data, hole) or _column_zero_span(data, hole)
    if span is None:
        return frozenset()
    after = _PROSE.sub(b" ", data[hole:span[1]])
    before = _open_blocks_text(_PROSE.sub(b" ", data[span[0]:line_start]))
    names = {name for name in words(after) if name.startswith(word) and name != word}
    found = [name for name in names if name not in request.headers.globals and not re.search(
        rb"(?<!\w)" + name.encode() + rb"(?!\w)", before)]
    if len(found) != 1:
        return frozenset()
    first = re.search(rb"(?<![\w.>:])" + found[0].encode() + rb"(?!\w)", after)
    statement = after[:first.start()].rsplit(b";", 1)[-1].rsplit(b"}", 1)[-1].rsplit(b"{", 1)[-1] if first else b""
    if first is None or _DECLARATION_HEAD.fullmatch(statement.decode("utf-8", "replace") + "x"):
        return frozenset()  # written first in a declaration of its own: not the typed one
    return frozenset(found)


def _column_zero_span(data: bytes, at: int) -> tuple[int, int] | None:
    """Where braces cannot say (`#if`s through a parameter list), the definition around byte `at` as code is laid
    out: from the last line before it that starts with a word at column 0 to the first `}` at column 0 after it."""
    start = max((m.start() for m in re.finditer(rb"^[A-Za-z_]", data[:at], re.M)), default=None)
    end = re.compile(rb"^\}", re.M).search(data, at)
    return (start, end.end()) if start is not None and end is not None else None


def _open_blocks_text(data: bytes) -> bytes:
    """`data` (code from a definition's start) without the blocks that open and close within it: what is still
    in scope at its end, by braces alone."""
    opened: list[int] = []
    closed: list[tuple[int, int]] = []
    for match in re.finditer(rb"[{}]", data):
        if match.group() == b"{":
            opened.append(match.start())
        elif opened:
            start = opened.pop()
            while closed and closed[-1][0] > start:  # blocks inside this one
                closed.pop()
            closed.append((start, match.end()))
    kept, at = [], 0
    for start, end in closed:
        kept.append(data[at:start])
        at = end
    return b" ".join([*kept, data[at:]])
