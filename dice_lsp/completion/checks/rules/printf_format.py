"""A printf-family call whose literal format asks for another number of values than it is given fails
(`printf("<%d, %d> %s");`): undefined behaviour, and compilers warn. A format with a `%` this does not read (a
macro's, a typo) gets no verdict."""

from __future__ import annotations

import re

from tree_sitter import Node

from dice_lsp.completion.checks.rule import construct
from dice_lsp.cuda.names import text_of

_FORMAT_AT = {"printf": 0, "fprintf": 1, "sprintf": 1, "snprintf": 2}
_CONVERSION = re.compile(r"%(?:%|[-+ #0]*(\*|\d+)?(?:\.(\*|\d+)?)?(?:hh|h|ll|l|j|z|t|L)?([diouxXeEfFgGaAcspn])?)")


def format_mismatch(call: Node) -> bool:
    function, arguments = call.child_by_field_name("function"), call.child_by_field_name("arguments")
    at = _FORMAT_AT.get(text_of(function)) if function is not None else None
    if at is None or arguments is None or function is None or function.type != "identifier":
        return False
    values = [a for a in arguments.named_children if a.type != "comment"]
    if len(values) <= at or values[at].type != "string_literal":
        return False
    wanted = 0
    for match in _CONVERSION.finditer(text_of(values[at])):
        if match.group() == "%%":
            continue
        if match.group(3) is None:
            return False  # not a conversion this reads: no verdict
        wanted += 1 + (match.group(1) == "*") + (match.group(2) == "*")
    return wanted != len(values) - at - 1


RULE = construct("printf format", frozenset({"call_expression"}), format_mismatch)
