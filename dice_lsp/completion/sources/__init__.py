"""Where a completion's candidates come from, besides the model: each source proposes text for the hole with a
score in [0, 1] saying how strongly its evidence points at that text. A candidate is judged like a model's fill
(cleaned, checked, ranked); the source and its score are what ranking and the show/withhold decision read."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Candidate:
    """Text for the hole (what the model's fill would be: no indentation before it), where it came from, and how
    strongly the source's evidence points at it (0..1)."""

    text: str
    source: str  # "document", ...
    score: float
