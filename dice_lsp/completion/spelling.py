"""Candidates that say the same thing in another order are one candidate, spelt the way the user's code spells it.

A thread's index is `blockIdx.x * blockDim.x + threadIdx.x` in a textbook, `blockDim.x * blockIdx.x + threadIdx.x`
or `threadIdx.x + blockIdx.x * blockDim.x` in many projects. The rules and the idiom bank write the textbook
order, the document and the workspace write the project's; the filter should weigh them as one candidate with
both votes, and the editor should show the project's spelling (a user who writes `blockDim.x * blockIdx.x` wants
to read it so).

`key` is a candidate's text with the operands of each chain of `+` or `*` put in one order, where that cannot
change what the code means: every operand of the chain is one of CUDA's built-in index variables
(`threadIdx.x`, ...), a plain name or a number, and at least one is a built-in (so the chain is integer index
arithmetic, not a product of a user's matrices). Anything else is left as written; a text that does not parse
(a loop's header counts with the body it opens closed) keys as its whitespace-normalised self.
"""

from __future__ import annotations

from functools import lru_cache

from tree_sitter import Node

from dice_lsp.cuda.functions import parser

_BUILTINS = frozenset({b"threadIdx", b"blockIdx", b"blockDim", b"gridDim"})
_COMMUTING = frozenset({"+", "*"})


def _builtin(node: Node) -> bool:
    argument = node.child_by_field_name("argument")
    return node.type == "field_expression" and argument is not None and argument.text in _BUILTINS


def _leaf(node: Node) -> bool:
    return node.type in ("identifier", "number_literal") or _builtin(node)


def _chain(node: Node, operator: str) -> list[Node]:
    """The operands of the chain of `operator` that `node` heads (`a + b + c` -> a, b, c)."""
    found = node.child_by_field_name("operator") if node.type == "binary_expression" else None
    if found is not None and found.type == operator:
        left, right = node.child_by_field_name("left"), node.child_by_field_name("right")
        if left is not None and right is not None:
            return _chain(left, operator) + _chain(right, operator)
    return [node]


def _canonical(node: Node) -> str | None:
    """The chain at `node` with its operands in order (each operand canonical too), or None where it is no such
    chain of index arithmetic."""
    operator = node.child_by_field_name("operator")
    if node.type != "binary_expression" or operator is None or operator.type not in _COMMUTING:
        return None
    written, builtin = [], False
    for operand in _chain(node, operator.type):
        inner = _canonical(operand)
        if inner is None and not _leaf(operand):
            return None
        builtin = builtin or inner is not None or _builtin(operand)
        written.append(inner if inner is not None else " ".join((operand.text or b"").decode().split()))
    if not builtin:
        return None
    return "(" + f" {operator.type} ".join(sorted(written)) + ")"


def _rewrite(node: Node, data: bytes) -> str:
    """`node`'s text with each chain of index arithmetic canonical."""
    canonical = _canonical(node)
    if canonical is not None:
        return canonical
    if not node.children:
        return data[node.start_byte:node.end_byte].decode("utf-8", "replace")
    return " ".join(_rewrite(child, data) for child in node.children)


@lru_cache(maxsize=4096)
def key(text: str) -> str:
    """What `text` says, up to whitespace and the order of the operands of index arithmetic (see the module)."""
    plain = " ".join(text.split())
    if "+" not in text and "*" not in text:
        return plain
    opens = plain.count("{") - plain.count("}")
    data = (text + "}" * opens).encode("utf-8") if opens > 0 else text.encode("utf-8")  # a header opens a body
    tree = parser().parse(data)
    if tree.root_node.has_error:
        return plain
    return " ".join(_rewrite(tree.root_node, data).split())
