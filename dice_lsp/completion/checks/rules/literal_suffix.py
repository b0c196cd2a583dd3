"""A literal with a suffix no code may define fails (`0x`, `1.x`: a lexing error for nvcc): user-defined suffixes
start with `_`, and the C++ standard library defines the others (<chrono>, <string>, <string_view>, <complex>)."""

from __future__ import annotations

from tree_sitter import Node

from dice_lsp.completion.checks.rule import construct
from dice_lsp.cuda.names import text_of

STANDARD_SUFFIXES = frozenset({"h", "min", "s", "ms", "us", "ns", "y", "d", "i", "il", "if", "sv"})


def undefinable_suffix(literal: Node) -> bool:
    suffix = next((c for c in literal.named_children if c.type == "literal_suffix"), None)
    word = text_of(suffix) if suffix is not None else "_"
    return not word.startswith("_") and word not in STANDARD_SUFFIXES


RULE = construct("literal suffix", frozenset({"user_defined_literal"}), undefinable_suffix)
