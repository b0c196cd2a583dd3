"""What a fill is asked and what it gives back: plain values, no torch (the editor, the CLI and the team
server build and read them without loading the engine; `dice_lsp.engine.infill` runs them)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from dice_lsp.engine.sampler_config import SamplerConfig
from dice_lsp.errors import DiceError

CancelCheck = Callable[[], bool]  # True: stop between denoising steps
StepProgress = Callable[[int], None]  # told the steps done so far


@dataclass(frozen=True)
class Draft:
    """Text already in the region, denoised again where it is re-masked.

    noise: the share of its tokens masked at random (a fresh draw per candidate);
    spans: character ranges of `text` whose tokens are masked, each followed by `grow` more masks so the
        rewrite may be longer than what it replaces (masks the model fills with pad vanish); an empty
        range inserts `grow` masks where it is (after the token that ends there);
    over_fill: the draft is the in-place fill of this request's hole just made (a re-masking round): denoise
        it over that fill's context keys where they are kept (`engine.contexts`: window steps only, the draft
        in the fill's canvas ending in pads) instead of computing the context again around the draft.
    """

    text: str
    noise: float = 0.0
    spans: tuple[tuple[int, int], ...] = ()
    grow: int = 4
    over_fill: bool = False

    def __post_init__(self) -> None:
        if not 0.0 <= self.noise <= 1.0:
            raise DiceError("noise must be in [0, 1]")


@dataclass(frozen=True)
class FillRequest:
    """A region to fill between `prefix` and `suffix`.

    max_tokens: the canvas, in tokens (the fill may end earlier with pad/EOS, never run longer).
    lengths: canvases to try side by side (in-place fills of a bidirectional model; each at most
        `max_tokens`): a one-line hole in 8, 16 and 24 tokens, say. The model fills a canvas too large for
        the code it means with filler, one too small with a cut statement; each canvas's fills are scored
        and the caller picks. Empty: `max_tokens` alone. Other families stop on their own and use `max_tokens`.
    candidates: fills per canvas (distinct only when sampling).
    """

    prefix: str
    suffix: str
    max_tokens: int = 64
    candidates: int = 1
    sampler: SamplerConfig = field(default_factory=SamplerConfig)
    draft: Draft | None = None  # region text to re-mask and denoise, instead of a region of masks
    lengths: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        if self.max_tokens < 1:
            raise DiceError("max_tokens must be at least 1")
        if self.candidates < 1:
            raise DiceError("candidates must be at least 1")
        if any(not 1 <= length <= self.max_tokens for length in self.lengths):
            raise DiceError(f"each of lengths must be in [1, max_tokens={self.max_tokens}]")

    @property
    def canvases(self) -> tuple[int, ...]:
        return tuple(sorted(set(self.lengths))) or (self.max_tokens,)

    @property
    def rows(self) -> int:
        """Rows of a denoising batch this request takes."""
        return self.candidates * len(self.canvases)


@dataclass(frozen=True)
class FillResult:
    """The fills (by canvas, then candidate), the model calls spent, and per fill the canvas it had and its
    score: the mean log-probability the model gave the tokens it committed, up to and with the first pad/EOS
    (the decision to end); higher is more confident."""

    texts: list[str]
    model_calls: int
    scores: list[float] = field(default_factory=list)
    canvases: list[int] = field(default_factory=list)
