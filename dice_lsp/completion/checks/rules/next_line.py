"""A one-line fill on an empty line that ends wanting an operand (`int n =`, `x +`, `f(`) fails when its statement
takes in the next line of code, which in the base is a statement of its own with no error: `int64_t end =` then
`seg.offset = cur;` parses as one declaration. A next line the base could not place (the rest of a call split
over lines) may be what the fill was to open, and is left alone. The fault is the token that wants an operand.
"""

from __future__ import annotations

import re

from dice_lsp.completion.checks.request import Placed, Request
from dice_lsp.completion.checks.rule import Fault, Rule
from dice_lsp.completion.checks.syntax import statement

# tokens an expression cannot end with (`<`/`>` may close a template's head, `:` a label: not here)
_WANTS_OPERAND = frozenset({"=", "+", "-", "*", "/", "%", "^", "|", "&", "||", "&&", "<<", ">>", "?", "(", "[", "!",
                            "~", "==", "!=", "<=", ">=", "+=", "-=", "*=", "/=", "%=", "&=", "|=", "^=", "<<=", ">>="})


def faults(request: Request, fill: Placed) -> list[Fault]:
    if b"\n" in fill.data or request.prefix[request.prefix.rfind(b"\n") + 1:].strip():
        return []
    leaves = [n for n in fill.nodes
              if n.child_count == 0 and not n.is_missing and n.end_byte <= fill.last and n.type != "comment"]
    end = max(leaves, key=lambda n: n.end_byte, default=None)
    if end is None or end.type not in _WANTS_OPERAND:
        return []
    following = request.suffix.find(b"\n")  # the fill has one line: the next line starts after this break
    if following < 0 or statement(end).end_byte <= fill.last + following:
        return []
    code = re.search(rb"\S", request.suffix[following + 1:])
    if code is None:
        return []
    below = request.tree.root_node.descendant_for_byte_range(*(2 * [request.hole + following + 1 + code.start()]))
    held = statement(below) if below is not None else None
    if held is None or held.has_error or held.is_error:
        return []
    return [Fault(fill.span(end.start_byte, end.end_byte))]


RULE = Rule("takes the next line", "parses", faults)
