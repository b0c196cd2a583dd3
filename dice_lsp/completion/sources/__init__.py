"""Where a completion's candidates come from, besides the model: each source proposes text for the hole with a
score in [0, 1] saying how strongly its evidence points at that text. A candidate is judged like a model's fill
(cleaned, checked, ranked); the source and its score are what ranking and the show/withhold decision read.

Every source answers the same question (`Source.candidates`): given the document's text before the cursor
(ending with the hole's line up to the cursor: its indentation, or a half-typed statement) and after it, which
texts would the hole's line end with? For a half-typed line a candidate is only what continues the typed text.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from dice_lsp.cuda.likeness import TOKEN as TOKEN  # how every source compares code

if TYPE_CHECKING:
    from dice_lsp.completion.checks.request import Request


@dataclass(frozen=True)
class Candidate:
    """Text for the hole (what the model's fill would be: no indentation before it), where it came from, and how
    strongly the source's evidence points at it (0..1)."""

    text: str
    source: str  # "document", "workspace", "idiom", "analogue", "rule"
    score: float


class Source(Protocol):
    """A proposer of candidates for a hole on one line (`before` ends at the cursor, `after` starts there);
    `needed`: the names the code after the hole uses that nothing declares (the checks' symbol table), which the
    hole's line most likely declared; `checks`: the request the checks parsed for the hole (its tree and symbol
    table: what a name means there), None where no check ran."""

    def candidates(self, before: str, after: str, limit: int = 3, needed: frozenset[str] = frozenset(),
                   checks: Request | None = None) -> list[Candidate]: ...


@dataclass(frozen=True)
class Proposed:
    """Candidates another process proposed for this very hole, given back as they are: a team server's client
    sends what its workspace index proposes (the server has no copy of the client's workspace)."""

    found: tuple[Candidate, ...]

    def candidates(self, before: str, after: str, limit: int = 3, needed: frozenset[str] = frozenset(),
                   checks: Request | None = None) -> list[Candidate]:
        return list(self.found)
