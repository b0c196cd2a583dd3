"""A call the fill writes or finishes must pass a number of arguments one of the callee's declarations takes
(defaults and `...` counted; `args...` stands for any number): to a function the document declares outside
bodies (and the headers, the local headers and function-like macros do not), `find_total(expert)` for a
three-parameter `find_total`; or to a CUDA function of the headers (runtime, driver, intrinsics, atomics) that
the document does not declare again, `cudaMemcpy(params.h())`, `__shfl_down_sync(v, 1)`. Not the headers' other
functions: projects overload `max`, `norm` or `round` in headers not read here. (An overload in a header that is
not at hand can make a true call fail.)
"""

from __future__ import annotations

import re

from dice_lsp.completion.checks.request import Placed, Request
from dice_lsp.completion.checks.rule import Fault, Rule
from dice_lsp.cuda.names import text_of

_CUDA_API = re.compile(r"(cuda|cu[A-Z]|__|atomic)")  # runtime, driver, intrinsics: what projects do not overload


def wrong_arity(request: Request, fill: Placed) -> list[tuple[int, str]]:
    """Calls the fill writes or finishes with a number of arguments no declaration takes, as (offset in the
    fill, name)."""
    symbols, header = request.symbols, request.headers.arity
    if not symbols.arities and not header:
        return []
    found = []
    for node in fill.nodes:
        callee = node.child_by_field_name("function") if node.type == "call_expression" else None
        if callee is not None and callee.type == "template_function":
            callee = callee.child_by_field_name("name")
        if callee is not None and callee.type == "qualified_identifier" and (
                callee.child_by_field_name("scope") is None):  # `::max(...)`: the global one
            callee = callee.child_by_field_name("name")
        arguments = node.child_by_field_name("arguments")
        if callee is None or callee.type != "identifier" or arguments is None or arguments.has_error or any(
                child.type == "parameter_pack_expansion" for child in arguments.named_children):
            continue  # (`args...` stands for any number of arguments)
        name = text_of(callee)
        count = sum(1 for child in arguments.named_children if child.type != "comment")
        if name in symbols.arities:
            counts = symbols.arities[name]
        elif (name in header and _CUDA_API.match(name) and name not in symbols.functions
              and name not in symbols.local_names):
            counts = [header[name]]
        else:
            continue
        if not any(low <= count <= high for low, high in counts):
            found.append((fill.offset(callee.start_byte), name))
    return found


def faults(request: Request, fill: Placed) -> list[Fault]:
    return [Fault((at, at + len(name)), name) for at, name in wrong_arity(request, fill)]


RULE = Rule("arity", "names", faults)
