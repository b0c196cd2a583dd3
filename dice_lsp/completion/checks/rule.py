"""What a rule is: one reason to withhold a fill, asked of the fill placed in the request's document.

A rule belongs to one verdict of `Checks` (`parses` or `names`) and answers with its faults: where in the fill it
rejects it (what re-masking denoises again), and for a names rule the name at fault; no fault, the rule passes.
Most rules are about one construct (`construct`): a predicate on the nodes of a few kinds that overlap the fill.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from tree_sitter import Node

if TYPE_CHECKING:
    from dice_lsp.completion.checks.request import Placed, Request

Check = Literal["parses", "names"]


@dataclass(frozen=True)
class Fault:
    """Where a rule rejects a fill: the characters [start, end) of the fill to denoise again (None: no one place
    is to blame), and the name at fault for a names rule."""

    span: tuple[int, int] | None
    name: str = ""


@dataclass(frozen=True)
class Rule:
    """A rule: its name, the verdict it belongs to, and what it finds wrong with a fill placed in a request."""

    name: str
    check: Check
    faults: Callable[[Request, Placed], list[Fault]]


def construct(name: str, kinds: frozenset[str], rejects: Callable[[Node], bool]) -> Rule:
    """A `parses` rule on constructs: every node of one of `kinds` that overlaps the fill (on a mid-line fill,
    `1.` before it and `x` from it count) and that `rejects` is a fault, its span the construct's."""

    def faults(request: Request, fill: Placed) -> list[Fault]:
        return [Fault(fill.span(node.start_byte, node.end_byte)) for node in fill.nodes
                if node.type in kinds and rejects(node)]

    return Rule(name, "parses", faults)
