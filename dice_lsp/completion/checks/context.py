"""One request's checks: the document parsed once, every rule (`rules.RULES`) asked about each candidate fill.

A fill passes `parses` when no `parses` rule finds a fault, judged in the top-level definition that holds the
hole, parsed alone, where tree-sitter gave up on more than that definition (`Request.alone`); it passes `names`
when no `names` rule does. `faults` gives the characters of a fill that failed rules blame, for re-masking to
denoise again; the accessors per names rule say what is wrong, for the user and for the renames
(`dice_lsp.cuda.renames`).
"""

from __future__ import annotations

from collections.abc import Sequence

from dice_lsp.completion.checks import Checks
from dice_lsp.completion.checks.request import Request
from dice_lsp.completion.checks.rule import Check, Fault, Rule
from dice_lsp.completion.checks.rules import RULES, arity, redeclared, syntax_errors, undeclared
from dice_lsp.completion.checks.rules import unknown_names as unknown_rule
from dice_lsp.toolchain.header_index import NO_HEADERS, HeaderIndex


def _rules(check: Check) -> tuple[Rule, ...]:
    return tuple(rule for rule in RULES if rule.check == check)


_PARSES, _NAMES = _rules("parses"), _rules("names")


class CheckContext:
    """One request's document and region, parsed once; ask it about each candidate fill.

    `headers`: the header index (`dice_lsp.toolchain.header_index`); `local_headers`: texts of the workspace's
    own headers that the document includes (the caller reads them only in a trusted workspace).
    """

    def __init__(self, text: str, start: int, end: int, headers: HeaderIndex = NO_HEADERS,
                 local_headers: Sequence[str] = ()) -> None:
        self.request = Request(text, start, end, headers, local_headers)

    def _judged(self, fill: str) -> Request:
        """The request a fill's parse is judged in: the document's, or its definition's alone."""
        request = self.request
        while (alone := request.alone(fill)) is not None:
            request = alone
        return request

    def faults_of(self, rules: Sequence[Rule], fill: str) -> list[Fault]:
        """The faults `rules` find with `fill` in the document (parse rules: in the request `_judged` gives)."""
        request = self._judged(fill) if all(rule.check == "parses" for rule in rules) else self.request
        placed = request.place(fill)
        return [fault for rule in rules for fault in rule.faults(request, placed)]

    def parses(self, fill: str) -> bool:
        """Whether the document with `fill` in the region parses with no error the fill is to blame for, and
        none of the constructs the rules reject."""
        request = self._judged(fill)
        placed = request.place(fill)
        return not any(rule.faults(request, placed) for rule in _PARSES)

    def failed_rule(self, fill: str) -> str | None:
        """The name of the first `parses` rule that rejects `fill` (what the user is told), None when all pass."""
        request = self._judged(fill)
        placed = request.place(fill)
        return next((rule.name for rule in _PARSES if rule.faults(request, placed)), None)

    def error_spans(self, fill: str) -> list[tuple[int, int]]:
        """Character ranges of the fill that parse errors touch or the parses rules blame (what re-masking
        denoises again)."""
        request = self._judged(fill)
        placed = request.place(fill)
        spans = syntax_errors.touching(placed) + [
            fault.span for rule in _PARSES for fault in rule.faults(request, placed) if fault.span is not None]
        return list(dict.fromkeys(spans))

    def unknown_names(self, fill: str) -> list[tuple[int, str]]:
        """Names the fill uses that resolve nowhere, as (offset in the fill, name); empty: all resolve."""
        return unknown_rule.unknown(self.request, self.request.place(fill))

    def undeclared(self, fill: str) -> list[str]:
        """Names the code after the hole needs declared that the fill does not declare."""
        return undeclared.undeclared(self.request, self.request.place(fill))

    def redeclared(self, fill: str) -> list[tuple[int, str]]:
        """Names a statement of the fill declares that its block (or the function's parameters) already has,
        as (offset in the fill, name): `int n = ...` in a kernel that takes `n`."""
        return redeclared.redeclared(self.request, self.request.place(fill))

    def wrong_arity(self, fill: str) -> list[tuple[int, str]]:
        """Calls the fill writes or finishes with a number of arguments no declaration takes, as (offset in the
        fill, name)."""
        return arity.wrong_arity(self.request, self.request.place(fill))

    def declarations(self, fill: str) -> list[tuple[int, str]]:
        """Names the fill's own statements declare in the hole's block, as (offset in the fill, name)."""
        return redeclared.declarations(self.request.place(fill))

    @property
    def needed(self) -> frozenset[str]:
        """Names the code after the hole uses that nothing in scope declares: the hole's code most likely
        declared them."""
        return self.request.needed

    @property
    def names_in_scope(self) -> frozenset[str]:
        """Names a fill may use at the hole without declaring them (not the headers' thousands): what a misspelt
        name may have meant (`dice_lsp.cuda.renames`)."""
        return self.request.scope.names_in_scope

    def faults(self, fill: str) -> list[tuple[int, int]]:
        """Character ranges of the fill that a cheap check rejects: what the parses rules blame when it does not
        parse, the names at fault, and all of it when it leaves a name the code after it needs undeclared."""
        spans = self.error_spans(fill) if not self.parses(fill) else []
        placed = self.request.place(fill)
        spans += [fault.span for rule in _NAMES for fault in rule.faults(self.request, placed)
                  if fault.span is not None]
        return sorted(set(spans))

    def check(self, fill: str) -> Checks:
        """Both cheap checks of one fill (`compiles` and `types` are left to the caller: they need nvcc, clang)."""
        placed = self.request.place(fill)
        return Checks(self.parses(fill), not any(rule.faults(self.request, placed) for rule in _NAMES))


def parses(text: str, start: int, end: int, fill: str) -> bool:
    """Whether `fill` in place of text[start:end] parses with no error the fill is to blame for; for several
    fills of one request, build one `CheckContext`."""
    return CheckContext(text, start, end).parses(fill)

