"""What the show/withhold filter reads about a candidate: cheap numbers, each computed in microseconds.

A candidate is a cleaned text for the hole with the evidence of every source that proposed it (the model's mean
log-probability, the document's and the workspace's context similarity, the idiom bank's share, a run of lines'
step) and the checks it passed. The features say how strong and how many those votes are, how the candidate
relates to the lines around the hole (classic wrong fills: a repeat of a neighbour, a declaration of a name the
rest of the function never uses, a copy of a line the function already has), what the hole is (typed text,
size of the file, in a kernel or not) and what the function still lacks: a kernel uses every parameter it takes,
so a candidate that uses the parameters and locals no other line uses yet (`dice_lsp.completion.scope`) is more
likely the missing line. Missing values are NaN: the booster treats them as their own branch.

`FEATURES` names the columns in order; the filter stores the names it was trained with and refuses a mismatch.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING

from dice_lsp.completion.lexing import declared_name
from dice_lsp.completion.scope import FunctionScope
from dice_lsp.completion.sources import TOKEN, Candidate
from dice_lsp.cuda.likeness import Line, similarity

if TYPE_CHECKING:
    from dice_lsp.completion.checks.request import Request

SOURCES = ("model", "document", "workspace", "idiom", "analogue", "rule")
_THREAD_BUILTINS = re.compile(r"\b(?:threadIdx|blockIdx|blockDim|gridDim)\b")

FEATURES: tuple[str, ...] = (
    "from_model", "from_document", "from_workspace", "from_idiom", "from_analogue", "from_rule",  # who proposed it
    "model_logprob", "document_score", "document_adapted", "workspace_score", "workspace_files", "workspace_rivals",
    "idiom_score", "idiom_files", "idiom_projects", "idiom_share", "idiom_total", "idiom_typed_names",
    "idiom_below_files", "idiom_below_share", "idiom_below_total", "idiom_declares_files", "idiom_declares_share",
    "idiom_declares_total", "idiom_sides", "idiom_scope_bound", "idiom_scope_alternatives",
    "analogue_score", "rule_kind",
    "sources", "model_rank", "model_best", "model_margin", "model_fills",
    "parses", "names", "renamed",
    "chars", "tokens", "repeats_above", "repeats_below", "declares", "declared_uses_below", "code_below",
    "copies_above", "copies_below",
    "typed_chars", "typed_tokens", "file_lines", "candidates",
    "in_kernel", "thread_builtins", "unused_names", "uses_unused",
)


@dataclass(frozen=True)
class Hole:
    """What the features need of the hole: the document's text before and after the cursor, and the request its
    checks parsed (`checks.request.Request`: the function's scope is read from its symbol table; None: parsed
    here)."""

    before: str
    after: str
    checks: Request | None = field(default=None, compare=False, repr=False)

    @cached_property
    def typed(self) -> str:
        """What the hole's line holds before the cursor (its indentation stripped)."""
        return self.before[self.before.rfind("\n") + 1:].lstrip()

    @cached_property
    def above(self) -> Line:
        """The nearest non-blank line above the hole's line (computed once per hole, not per candidate)."""
        lines = self.before.split("\n")[:-1][::-1]
        return Line(next((line.strip() for line in lines if line.strip()), ""))

    @cached_property
    def below(self) -> Line:
        """The nearest non-blank line below the hole's line."""
        lines = self.after.split("\n")[1:]
        return Line(next((line.strip() for line in lines if line.strip()), ""))

    @cached_property
    def rest_of_function(self) -> str:
        """The text after the hole's line up to the end of the function around it, as far as lines tell: the
        first line that starts with `}` in column 0."""
        rest = self.after.split("\n")[1:]
        end = next((i for i, line in enumerate(rest) if line.startswith("}")), len(rest))
        return "\n".join(rest[:end])

    @cached_property
    def function_above(self) -> str:
        """The text of the function around the hole above the hole's line, as far as lines tell: back to the
        nearest line that starts in column 0 with code (its signature), that line included."""
        lines = self.before.split("\n")[:-1]
        start = next((i for i in range(len(lines) - 1, -1, -1)
                      if lines[i][:1] not in ("", " ", "\t", "{", "#", "/", "*")), 0)
        return "\n".join(lines[start:])

    @cached_property
    def keys_above(self) -> Counter[str]:
        """The lines of `function_above`, white space removed, counted (a candidate's copies there)."""
        return _line_keys(self.function_above)

    @cached_property
    def keys_below(self) -> Counter[str]:
        """The same of `rest_of_function`."""
        return _line_keys(self.rest_of_function)

    @cached_property
    def code_below(self) -> list[str]:
        """The code lines of `rest_of_function`, stripped (no blank or comment-only lines)."""
        lines = (line.strip() for line in self.rest_of_function.split("\n"))
        return [line for line in lines if line and not line.startswith(("//", "/*", "*"))]

    @cached_property
    def scope(self) -> FunctionScope:
        """The names of the function around the hole and how often its other lines use them."""
        return FunctionScope.of(self.before, self.after, self.checks)

    @cached_property
    def lines(self) -> int:
        return self.before.count("\n") + self.after.count("\n") + 1


def _line_keys(text: str) -> Counter[str]:
    keys = Counter("".join(line.split()) for line in text.split("\n"))
    keys.pop("", None)
    return keys


@dataclass(frozen=True)
class Evidence:
    """One candidate as the filter sees it."""

    text: str
    votes: Mapping[str, float]  # source -> its score for this text (the model's: mean log-probability)
    parses: bool
    names: bool
    renamed: bool = False  # its names were repaired (`dice_lsp.cuda.renames`)
    support: Mapping[str, float] = field(default_factory=dict)  # `SUPPORT` values its sources gave


# A source's evidence beyond its score, by the candidate attribute that carries it (`support`): a document line
# adapted to the hole's names (`adapt`); the workspace's count of files with the line after a like context and of
# other lines whose context scores the same; the idiom bank's files and projects, share of the key's continuations,
# the key's count, and whether the typed text named what the key did not (the key above the hole); the files, share and
# count of the key below it; the same of the declarations of a name the code below needs; how many of the three
# proposed the text; the rule that wrote a rule's line.
SUPPORT = {"document_adapted": ("document", "adapted"), "workspace_files": ("workspace", "files"),
           "workspace_rivals": ("workspace", "rivals"), "idiom_files": ("idiom", "files"),
           "idiom_projects": ("idiom", "projects"), "idiom_share": ("idiom", "share"),
           "idiom_total": ("idiom", "total"), "idiom_typed_names": ("idiom", "typed_names"),
           "idiom_below_files": ("idiom", "below_files"), "idiom_below_share": ("idiom", "below_share"),
           "idiom_below_total": ("idiom", "below_total"), "idiom_declares_files": ("idiom", "declares_files"),
           "idiom_declares_share": ("idiom", "declares_share"), "idiom_declares_total": ("idiom", "declares_total"),
           "idiom_sides": ("idiom", "sides"), "idiom_scope_bound": ("idiom", "scope_bound"),
           "idiom_scope_alternatives": ("idiom", "scope_alternatives"), "rule_kind": ("rule", "rule_index")}


def support(candidate: Candidate) -> dict[str, float]:
    """The `SUPPORT` values `candidate` carries (none for a source that keeps only a score)."""
    found = {}
    for name, (source, attribute) in SUPPORT.items():
        value = getattr(candidate, attribute, None)
        if candidate.source == source and isinstance(value, int | float):
            found[name] = float(value)
    return found


def row(candidate: Evidence, hole: Hole, model_scores: Sequence[float], candidates: int) -> list[float]:
    """The feature values of `candidate` in `FEATURES` order; `model_scores`: the mean log-probabilities of every
    cleaned model fill at this hole, best first (the candidate's own among them if the model proposed it)."""
    votes = candidate.votes
    nan = math.nan
    typed = hole.typed
    line = typed + candidate.text
    declared = declared_name(line)
    model = votes.get("model")
    rank = model_scores.index(model) if model is not None and model in model_scores else nan
    best = model_scores[0] if model_scores else nan
    margin = model_scores[0] - model_scores[1] if len(model_scores) > 1 else nan
    values: dict[str, float] = {
        **{f"from_{source}": float(source in votes) for source in SOURCES},
        "model_logprob": nan if model is None else model,
        "document_score": votes.get("document", nan),
        "workspace_score": votes.get("workspace", nan),
        "document_adapted": candidate.support.get("document_adapted", nan),
        "workspace_files": candidate.support.get("workspace_files", nan),
        "workspace_rivals": candidate.support.get("workspace_rivals", nan),
        "idiom_score": votes.get("idiom", nan),
        "idiom_files": candidate.support.get("idiom_files", nan),
        "idiom_projects": candidate.support.get("idiom_projects", nan),
        "idiom_share": candidate.support.get("idiom_share", nan),
        "idiom_total": candidate.support.get("idiom_total", nan),
        "idiom_typed_names": candidate.support.get("idiom_typed_names", nan),
        **{name: candidate.support.get(name, nan) for name in
           ("idiom_below_files", "idiom_below_share", "idiom_below_total", "idiom_declares_files",
            "idiom_declares_share", "idiom_declares_total", "idiom_sides", "idiom_scope_bound",
            "idiom_scope_alternatives")},
        "analogue_score": votes.get("analogue", nan),
        "rule_kind": candidate.support.get("rule_kind", nan),  # which rule wrote it (`sources.rules.RULES`)
        "sources": float(len(votes)),
        "model_rank": float(rank),
        "model_best": best,
        "model_margin": margin,
        "model_fills": float(len(model_scores)),
        "parses": float(candidate.parses),
        "names": float(candidate.names),
        "renamed": float(candidate.renamed),
        "chars": float(len(candidate.text.strip())),
        "tokens": float(len(TOKEN.findall(candidate.text))),
        "repeats_above": similarity(Line(line), hole.above),
        "repeats_below": similarity(Line(line), hole.below),
        "declares": float(declared is not None),
        # a declared name the rest of the function never uses is a classic wrong fill, where code follows
        "declared_uses_below": (nan if declared is None else
                                float(len(re.findall(rf"\b{re.escape(declared)}\b", hole.rest_of_function)))),
        "code_below": float(any(not set(code) <= set("{}") for code in hole.code_below)),
        # the very line written elsewhere in the function: a copy of a line the user already has is rarely
        # what the hole held (`out[...] = tile[...]` again, from two lines below)
        "copies_above": float(hole.keys_above["".join(line.split())]),
        "copies_below": float(hole.keys_below["".join(line.split())]),
        "typed_chars": float(len(typed)),
        "typed_tokens": float(len(TOKEN.findall(typed))),
        "file_lines": float(hole.lines),
        "candidates": float(candidates),
        # what a kernel's lines are made of, and the parameters and locals no other line uses yet (`scope`)
        "in_kernel": float(hole.scope.is_kernel),
        "thread_builtins": float(len(_THREAD_BUILTINS.findall(candidate.text))),
        "unused_names": float(len(hole.scope.unused)),
        "uses_unused": float(hole.scope.unused_in(line)),
    }
    return [values[name] for name in FEATURES]
