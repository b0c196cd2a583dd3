"""A fill must parse with no error it is to blame for (tree-sitter's ERROR and MISSING nodes are errors).

- An error that overlaps or touches the fill's span in the new text fails the fill, unless it is exactly an
  error of the base that straddled the hole, shifted by the fill and otherwise left as it was (the hole sits in
  code tree-sitter could not parse anyway), and the fill adds no error inside it in its block. An error the hole
  itself caused in the base (a half-typed line the fill is to finish) is gone once a good fill is in, so it
  excuses nothing.
- An error elsewhere fails the fill unless it lies inside the statement of an error the base had at the
  corresponding (shifted) place: the user's other half-typed code does not fail a good fill (even where the
  fill changes how tree-sitter recovers from it), while an extra `}` that closes the kernel early does (the
  rest of the body then parses as broken code). "Elsewhere" is the whole file: the stray `}` that an unbalanced
  fill leaves lands at the end of the enclosing namespace or file.
- An error that starts on the fill's own line is never excused, nor one in the statement that holds the hole
  (a mid-line fill must finish its line and its statement; a true line that tree-sitter misreads is the rare
  price).
Known limit: a half-typed line right next to the fill (the line before or after) merges with it in
tree-sitter's eyes, and the fill fails; and an unclosed `(` elsewhere can throw tree-sitter's recovery off for
the rest of the file.

Re-masking denoises again every error that touches the fill (`touching`), excused or not.
"""

from __future__ import annotations

from dice_lsp.completion.checks.request import Placed, Request
from dice_lsp.completion.checks.rule import Fault, Rule
from dice_lsp.completion.checks.syntax import LEVELS, errors, inner_errors


def blameless(request: Request, fill: Placed) -> bool:
    """Whether the new text has no parse error the fill is to blame for."""
    size, first, last = len(fill.data), fill.first, fill.last
    straddling = {(request.shift(e.start, size, False), request.shift(e.end, size, True))
                  for e in request.errors if e.start < request.hole < e.end}
    zones = [(request.shift(e.zone_start, size, False), request.shift(e.zone_end, size, True))
             for e in request.errors  # not the hole's own statement: the fill finishes it
             if not e.zone_start <= request.hole <= e.zone_end]
    line_start = request.prefix.rfind(b"\n") + 1
    for error in errors(fill.root):
        if error.end >= first and error.start <= last:  # on the fill: only garbage it sits in, left as it was,
            own_line = line_start <= error.start  # never garbage that starts on the fill's own line
            if (error.start, error.end) not in straddling or own_line:
                return False
            if _breaks_inside(request, fill):  # and the code it sits in not broken more
                return False
        elif not any(low <= error.start and error.end <= high for low, high in zones):  # elsewhere: only old
            return False
    return True


def _breaks_inside(request: Request, fill: Placed) -> bool:
    """Whether the fill sits in an ERROR node with an error inside it that the base does not have, in the block
    (or other statement level) the fill is in."""
    size, first, last = len(fill.data), fill.first, fill.last
    block = fill.root.descendant_for_byte_range(first, max(first, last - 1))
    while block is not None and block.parent is not None and block.type not in LEVELS:
        block = block.parent
    low, high = (first, last) if block is None else (block.start_byte, block.end_byte)
    old = {(request.shift(lo, size, False), request.shift(hi, size, True)) for lo, hi in request.inner_errors}
    return bool(inner_errors(fill.root, low, high) - old)


def touching(fill: Placed) -> list[tuple[int, int]]:
    """The characters of the fill that the new text's parse errors touch."""
    return [fill.span(e.start, e.end) for e in errors(fill.root) if e.end >= fill.first and e.start <= fill.last]


def faults(request: Request, fill: Placed) -> list[Fault]:
    return [] if blameless(request, fill) else [Fault(None)]


RULE = Rule("syntax errors", "parses", faults)
