"""One request's document and region, parsed once, and each candidate fill placed in it.

A fill is text that replaces the region text[start:end] of a document the user is typing, so the document may
have errors of its own elsewhere. The rules compare the document *with* the fill (the new text) to the document
*without* it (the base: text[:start] + text[end:]), so only what the fill changes can fail it. The base is
parsed once; each fill's new text is parsed incrementally from the base's tree (tree-sitter reuses what the fill
did not touch: the same trees as full parses, at a fraction of the time).

What the rules ask of the base is kept here, computed once per request: its parse errors, the hole's line, the
function around the hole when it parses, its symbol table (`symbols`) and the scope at the hole (`hole_scope`),
the names the code after the hole needs (`typed_line.needed`), and, where tree-sitter gave up on more than the
hole's definition, that definition parsed alone (`alone`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property

from tree_sitter import Node, Point, Tree

from dice_lsp.completion.checks import typed_line
from dice_lsp.completion.checks.hole_scope import HoleScope
from dice_lsp.completion.checks.symbols import SymbolTable
from dice_lsp.completion.checks.syntax import Error, errors, fill_offset, inner_errors, overlapping, point_after
from dice_lsp.cuda.functions import parse, parser, top_level_span
from dice_lsp.toolchain.header_index import NO_HEADERS, HeaderIndex


@dataclass(frozen=True)
class Placed:
    """A fill in the base: the new text's tree, the fill's UTF-8 bytes and the bytes [first, last) it takes in
    the new text."""

    tree: Tree
    data: bytes
    first: int
    last: int

    @property
    def root(self) -> Node:
        return self.tree.root_node

    @cached_property
    def nodes(self) -> list[Node]:
        """Every node that overlaps the fill, outermost first."""
        return list(overlapping(self.root, self.first, self.last))

    def offset(self, byte: int) -> int:
        """The character offset in the fill of the new text's byte `byte`, clamped to the fill."""
        return fill_offset(self.data, self.first, byte)

    def span(self, low: int, high: int) -> tuple[int, int]:
        """The new text's bytes [low, high) as characters of the fill, clamped to it."""
        return self.offset(low), self.offset(high)


STATEMENT_LINES = 8  # how far the hole's statement may run above and below its line (`Request.statement_lines`)


_GOES_ON = tuple(bytes([c]) for c in b"(,=+-*/%&|^?:<[")  # a line that ends so goes on below


def _line_end(data: bytes, at: int, more: int) -> int:
    """The end (before the line break) of the line `more` lines below the one holding byte `at`."""
    end = data.find(b"\n", at)
    for _ in range(more):
        if end < 0:
            break
        end = data.find(b"\n", end + 1)
    return len(data) if end < 0 else end


class Request:
    """One request's document and region, parsed once; ask it to place each candidate fill.

    `headers`: the header index (`dice_lsp.toolchain.header_index`); `local_headers`: texts of the workspace's
    own headers that the document includes (the caller reads them only in a trusted workspace).
    """

    def __init__(self, text: str, start: int, end: int, headers: HeaderIndex = NO_HEADERS,
                 local_headers: Sequence[str] = (), statement: tuple[int, int] | None = None) -> None:
        if not 0 <= start <= end <= len(text):
            raise ValueError(f"bad region [{start}, {end}) for a text of {len(text)} characters")
        self.text, self.start, self.end = text, start, end
        self.headers = headers
        self.local_headers = tuple(local_headers)
        self.base = text[:start] + text[end:]
        self.prefix = text[:start].encode("utf-8")
        self.suffix = text[end:].encode("utf-8")
        self.data = self.prefix + self.suffix  # the base's bytes
        self.hole = len(self.prefix)  # the hole's byte offset in the base
        self._hole_point = point_after(Point(0, 0), self.prefix)
        # the base is the request's text itself when the region is empty (the editor's case): parsed once
        self.tree = parse(self.base).tree if self.base == text else parser().parse(self.data)
        self.errors = errors(self.tree.root_node)
        self._last: tuple[str, Placed] | None = None
        self._alone_requests: dict[tuple[int, int], Request] = {}
        self._alone_for: dict[str, Request | None] = {}
        if statement is not None:  # the lines of the hole's statement, as a request of the same bytes found them
            self.__dict__["statement_lines"] = statement

    # -- the fill in the base

    def place(self, fill: str) -> Placed:
        """The new text with `fill` in the region, parsed incrementally from the base's tree (the last one is
        kept: the rules ask about one fill in turn)."""
        if self._last is not None and self._last[0] == fill:
            return self._last[1]
        data = fill.encode("utf-8")
        tree = self.tree.copy()
        tree.edit(start_byte=self.hole, old_end_byte=self.hole, new_end_byte=self.hole + len(data),
                  start_point=self._hole_point, old_end_point=self._hole_point,
                  new_end_point=point_after(self._hole_point, data))
        placed = Placed(parser().parse(self.prefix + data + self.suffix, tree), data, self.hole,
                        self.hole + len(data))
        self._last = (fill, placed)
        return placed

    def shift(self, byte: int, size: int, end: bool) -> int:
        """A base byte offset in the new text: after the hole it moves by the fill's size (an end offset at
        the hole stays before the fill, a start offset moves after it)."""
        return byte + size if (byte > self.hole or (byte == self.hole and not end)) else byte

    @cached_property
    def inner_errors(self) -> set[tuple[int, int]]:
        """The base's errors inside another error (`syntax.inner_errors`)."""
        return inner_errors(self.tree.root_node, 0, len(self.data))

    # -- where tree-sitter gave up on more than the hole's definition

    @cached_property
    def lost(self) -> list[Error]:
        """The base's errors the hole sits in."""
        return [e for e in self.errors if e.start < self.hole < e.end]

    @cached_property
    def _base_span(self) -> tuple[int, int] | None:
        return top_level_span(self.data, self.hole) if self.lost else None

    def alone(self, fill: str) -> Request | None:
        """The region in the top-level definition that holds it, parsed alone, when the base's error around the
        hole spans more than that definition (top-level macro calls such as `DEFINE_OP(float, sum, +);` can make
        the whole file one ERROR node, which would excuse any fill); None when the document's tree will do. The
        definition's span is the larger of the ones found in the base and in the text with `fill` in (whose
        braces may open or close it)."""
        if not self.lost:
            return None
        if fill not in self._alone_for:
            self._alone_for[fill] = self._alone_of(fill)
        return self._alone_for[fill]

    def _alone_of(self, fill: str) -> Request | None:
        data = fill.encode("utf-8")
        spans = [] if self._base_span is None else [self._base_span]
        filled = top_level_span(self.prefix + data + self.suffix, self.hole)
        if filled is not None:  # in the base's offsets: a definition the fill closes ends at the hole
            spans.append((filled[0], max(self.hole, filled[1] - len(data))))
        if not spans:
            return None
        low, high = min(span[0] for span in spans), max(span[1] for span in spans)
        if not any(e.start < low or e.end > high for e in self.lost):
            return None
        if (low, high) not in self._alone_requests:
            prefix = self.prefix[low:].decode("utf-8", "replace")
            text = prefix + self.suffix[:high - self.hole].decode("utf-8", "replace")
            self._alone_requests[(low, high)] = Request(text, len(prefix), len(prefix))
        return self._alone_requests[(low, high)]

    # -- the base around the hole

    @cached_property
    def hole_line(self) -> tuple[int, int]:
        """The byte range of the hole's line in the base (its start, and its end before the line break)."""
        start = self.data.rfind(b"\n", 0, self.hole) + 1
        end = self.data.find(b"\n", self.hole)
        return start, len(self.data) if end < 0 else end

    @cached_property
    def statement_lines(self) -> tuple[int, int]:
        """The byte range of the lines the hole's statement spans in the base: the hole's line, widened up while
        the line above ends mid-expression (`(`, `,`, an operator), and down to the statement's end (`;`, `{` or
        `}`) when the code below closes a parenthesis or bracket it did not open (`float2 ` typed before a call
        whose arguments go on below: the fill opens it), at most `STATEMENT_LINES` lines each way. Without the
        fill those lines do not parse, and the error is the hole's. (Code below that is whole stays out: when the
        fill ends the statement, the base runs the hole's line into the next statement, and tree-sitter's
        recovery there would hide its declarations.)"""
        line_start, line_end = self.hole_line
        data = self.data
        low = line_start
        for _ in range(STATEMENT_LINES):  # up, a line at a time, while the line above goes on
            above = data.rfind(b"\n", 0, low - 1) + 1 if low else 0
            line = data[above:low - 1].strip() if low else b""
            if line[-1:] not in _GOES_ON or line.startswith(b"#"):
                break
            low = above
        depth, closes, at, limit = 0, False, self.hole, _line_end(data, line_end, STATEMENT_LINES)
        while at < limit:  # down, to the statement's end
            byte = data[at]
            depth += (byte in b"([") - (byte in b")]")
            closes = closes or depth < 0
            if byte in b"{}" or (byte == 0x3B and depth <= 0):  # ;
                return low, max(line_end, _line_end(data, at, 0)) if closes else line_end
            at += 1
        return low, line_end

    @cached_property
    def enclosing(self) -> Node | None:
        """The base's function definition around the hole, when it parses apart from the hole's statement (None
        otherwise: tree-sitter's recovery would hide or invent declarations)."""
        function = self.tree.root_node.descendant_for_byte_range(self.hole, self.hole)
        while function is not None and function.type != "function_definition":
            function = function.parent
        if function is None:
            return None
        low, high = self.statement_lines
        if any(function.start_byte <= e.start and e.end <= function.end_byte and not (
                low <= e.start and e.end <= high + 1) for e in self.errors):
            return None
        return function

    @cached_property
    def blanked(self) -> Request:
        """The base with the text typed on the hole's line blanked out (same bytes: offsets hold; the hole's
        statement spans the lines it spans with that text)."""
        line_start = self.hole_line[0]
        blanked = (self.prefix[:line_start] + b" " * (self.hole - line_start)).decode("utf-8", "replace")
        return Request(blanked + self.suffix.decode("utf-8", "replace"), len(blanked), len(blanked),
                       self.headers, self.local_headers, self.statement_lines)

    # -- names

    @cached_property
    def symbols(self) -> SymbolTable:
        """The base's declarations and written names, with the headers as the outer scope."""
        return SymbolTable(self.tree.root_node, self.data, self.headers, self.local_headers)

    @cached_property
    def scope(self) -> HoleScope:
        """The document's names as seen from the hole."""
        return HoleScope(self.symbols, self.hole, self.enclosing, self.hole_line, tuple(self.errors),
                         lambda: self.document_names)

    @cached_property
    def document_names(self) -> frozenset[str]:
        """Names written in the document, less the word being typed at the hole when it is no name yet
        (`typed_line.unfinished_word`)."""
        word = typed_line.unfinished_word(self.prefix, self.suffix, self.data, self.symbols.names)
        return self.symbols.names - {word} if word else self.symbols.names

    @cached_property
    def needed(self) -> frozenset[str]:
        """Names the code after the hole uses that nothing in scope declares: the hole's code most likely
        declared them (`typed_line.needed`)."""
        return typed_line.needed(self)
