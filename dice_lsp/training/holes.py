"""Training examples for masked-diffusion infilling, shaped like the requests the editor sends.

Each example is a window of `length` tokens from the packed corpus, in one of these shapes:
- `random`: the plain masked-diffusion objective: every token masked with probability t ~ U(0, 1);
- `line`, `midline`, `lines`, `block`: a hole (one line; the rest of a half-typed line; 2-5 lines; the
  inside of a brace pair) cut out of the code and replaced by a canvas a little larger than the hole: the
  hole's tokens, then pad tokens, masked with probability t. Half of the one-line holes start after the
  line's indentation, where the editor's cursor sits on an empty line; a `midline` hole starts after at
  least one token of the line's content and runs to the end of the line, as when the user stops typing.
  The model learns to write the hole and to pad the rest, so a region can end early
  at inference (`pad` means "nothing more here").
The loss weight of a masked token is 1/t (the diffusion ELBO), normalised by the positions that could
have been masked. A curriculum moves weight from random masking and short holes to larger ones.

The autoregressive baseline (`objective="ar"`) sees the same windows and holes as fill-in-the-middle
sequences, `<|fim_prefix|> prefix <|fim_suffix|> suffix <|fim_middle|> hole <|eos|>`, with the usual
next-token loss on every position (plain left-to-right text where the diffusion model gets random masks).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

# The canvas sizes the editor and the evaluation decode with (dice_lsp.cuda.holes), and a few between.
CANVAS_BUCKETS = (8, 16, 24, 32, 48, 64, 96, 128, 192)
MAX_HOLE = CANVAS_BUCKETS[-1]
EARLY = {"random": 0.45, "line": 0.24, "midline": 0.06, "lines": 0.15, "block": 0.1}
LATE = {"random": 0.15, "line": 0.2, "midline": 0.1, "lines": 0.3, "block": 0.25}


@dataclass(frozen=True)
class TokenTables:
    """Per-vocabulary facts the hole finder needs, computed once from the tokenizer."""

    newline: np.ndarray  # bool: the token contains a line break
    blank: np.ndarray  # bool: the token is spaces/tabs only (indentation)
    brace: np.ndarray  # int8: count('{') - count('}')
    mask_id: int
    pad_id: int
    eos_id: int
    separator_id: int  # between files in the packed stream
    fim_ids: tuple[int, int, int]  # <|fim_prefix|>, <|fim_suffix|>, <|fim_middle|>

    @classmethod
    def from_vocab(cls, pieces: list[str], mask_id: int, pad_id: int, eos_id: int, separator_id: int,
                   fim_ids: tuple[int, int, int]) -> TokenTables:
        newline = np.array(["\n" in p for p in pieces], dtype=bool)
        blank = np.array([bool(p) and not p.strip(" \t") for p in pieces], dtype=bool)
        brace = np.array([p.count("{") - p.count("}") for p in pieces], dtype=np.int8)
        return cls(newline, blank, brace, mask_id, pad_id, eos_id, separator_id, fim_ids)


@dataclass
class Example:
    ids: np.ndarray  # int64 [length]: the model input, with masks
    targets: np.ndarray  # int64 [length]: the clean tokens (pads inside a canvas)
    weights: np.ndarray  # float32 [length]: loss weight, 0 where nothing was masked
    kind: str


def mode_weights(progress: float) -> dict[str, float]:
    """Curriculum: interpolate from EARLY to LATE as training progresses (0..1)."""
    p = min(max(progress, 0.0), 1.0)
    return {k: (1 - p) * EARLY[k] + p * LATE[k] for k in EARLY}


def _mask(length: int, rng: np.random.Generator) -> tuple[np.ndarray, float]:
    """Mask each position with probability t ~ U(eps, 1); at least one position is masked."""
    t = float(rng.uniform(1e-3, 1.0))
    masked = rng.random(length) < t
    if not masked.any():
        masked[rng.integers(length)] = True
    return masked, t


def random_example(window: np.ndarray, tables: TokenTables, rng: np.random.Generator) -> Example:
    targets = window.astype(np.int64)
    masked, t = _mask(len(targets), rng)
    ids = np.where(masked, tables.mask_id, targets)
    weights = np.where(masked, 1.0 / t, 0.0).astype(np.float32) / len(targets)
    return Example(ids, targets, weights, "random")


def cut_hole(window: np.ndarray, kind: str, tables: TokenTables, rng: np.random.Generator,
              margin: int) -> tuple[int, int] | None:
    """A [start, end) span of tokens to cut out: whole lines, or the inside of a brace pair."""
    if kind == "block":
        opens = np.flatnonzero(tables.brace[window[margin:-margin]] > 0) + margin
        if len(opens) == 0:
            return None
        start = int(rng.choice(opens)) + 1
        depth = np.cumsum(tables.brace[window[start:]].astype(np.int32))
        closing = np.flatnonzero(depth < 0)
        if len(closing) == 0:
            return None
        end = start + int(closing[0])
    else:
        breaks = np.flatnonzero(tables.newline[window])
        breaks = breaks[(breaks >= margin) & (breaks < len(window) - margin)]
        count = 1 if kind in ("line", "midline") else int(rng.integers(2, 6))
        if len(breaks) <= count:
            return None
        first = int(rng.integers(0, len(breaks) - count))
        start, end = int(breaks[first]) + 1, int(breaks[first + count])
        if kind in ("line", "midline"):
            content = _content_start(window, start, end, tables)
            if kind == "midline":
                if end - content < 2:
                    return None
                start = int(rng.integers(content + 1, end))
            elif rng.random() < 0.5:
                start = content
    if not 0 < end - start <= MAX_HOLE or (window[start:end] == tables.separator_id).any():
        return None
    return start, end


def _content_start(window: np.ndarray, start: int, end: int, tables: TokenTables) -> int:
    """The first token of a line's content: past the indentation tokens that open it."""
    while start < end and tables.blank[window[start]]:
        start += 1
    return start


def _context_split(window: np.ndarray, start: int, end: int, context: int,
                   rng: np.random.Generator) -> tuple[int, int] | None:
    """How many tokens before and after the hole fill `context` (10-50% after), or None if too few."""
    suffix_len = min(len(window) - end, int(context * rng.uniform(0.1, 0.5)))
    prefix_len = min(start, context - suffix_len)
    suffix_len = context - prefix_len
    return None if suffix_len > len(window) - end else (prefix_len, suffix_len)


def hole_example(window: np.ndarray, kind: str, length: int, tables: TokenTables,
                 rng: np.random.Generator) -> Example | None:
    """Cut a hole from `window` (longer than `length`) and lay out prefix + canvas + suffix."""
    span = cut_hole(window, kind, tables, rng, margin=16)
    if span is None:
        return None
    start, end = span
    hole = window[start:end].astype(np.int64)
    fits = [b for b in CANVAS_BUCKETS if len(hole) <= b <= length // 2]
    if not fits:
        return None
    canvas_len = fits[0] if len(fits) == 1 or rng.random() < 0.7 else fits[1]
    split = _context_split(window, start, end, length - canvas_len, rng)
    if split is None:
        return None
    prefix_len, suffix_len = split
    canvas = np.full(canvas_len, tables.pad_id, dtype=np.int64)
    canvas[: len(hole)] = hole
    masked, t = _mask(canvas_len, rng)
    prefix = window[start - prefix_len:start].astype(np.int64)
    suffix = window[end:end + suffix_len].astype(np.int64)
    targets = np.concatenate((prefix, canvas, suffix))
    ids = targets.copy()
    ids[prefix_len:prefix_len + canvas_len] = np.where(masked, tables.mask_id, canvas)
    weights = np.zeros(length, dtype=np.float32)
    weights[prefix_len:prefix_len + canvas_len] = np.where(masked, 1.0 / t, 0.0) / canvas_len
    return Example(ids, targets, weights, kind)


def fim_example(window: np.ndarray, kind: str, length: int, tables: TokenTables,
                rng: np.random.Generator) -> Example | None:
    """The autoregressive twin of `hole_example`: the same kind of hole as a fill-in-the-middle sequence.

    `ids[i]` is the input and `targets[i]` the token after it; every real position carries loss.
    """
    span = cut_hole(window, kind, tables, rng, margin=16)
    if span is None:
        return None
    start, end = span
    middle = window[start:end].astype(np.int64)
    split = _context_split(window, start, end, length - len(middle) - 4, rng)
    if split is None:
        return None
    prefix_len, suffix_len = split
    prefix, suffix = tables.fim_ids[0], tables.fim_ids[1]
    sequence = np.concatenate(([prefix], window[start - prefix_len:start], [suffix], window[end:end + suffix_len],
                               [tables.fim_ids[2]], middle, [tables.eos_id])).astype(np.int64)
    return _next_token_example(sequence, length, kind)


def _next_token_example(sequence: np.ndarray, length: int, kind: str) -> Example:
    """Inputs sequence[:-1] and targets sequence[1:], padded to `length`, loss on every real position."""
    ids = np.full(length, 0, dtype=np.int64)
    targets = np.zeros(length, dtype=np.int64)
    weights = np.zeros(length, dtype=np.float32)
    n = min(length, len(sequence) - 1)
    ids[:n], targets[:n], weights[:n] = sequence[:n], sequence[1:n + 1], 1.0 / length
    return Example(ids, targets, weights, kind)


def window_offset(size: int, span: int, rng: np.random.Generator, gpu_end: int = 0,
                  gpu_weight: float = 1.0) -> int:
    """Where a window of `span` tokens starts in a stream of `size`. The pack puts GPU code first
    (`[0, gpu_end)`); `gpu_weight` makes a window from there that many times as likely per token as
    one from the C/C++ after it. Without a GPU region (or weight 1) every start is equally likely."""
    host = size - gpu_end
    if gpu_end <= span or host <= span or gpu_weight == 1.0:
        return int(rng.integers(0, size - span))
    p_gpu = gpu_weight * gpu_end / (gpu_weight * gpu_end + host)
    if rng.random() < p_gpu:
        return int(rng.integers(0, gpu_end - span))
    return int(rng.integers(gpu_end, size - span))


def window_span(length: int) -> int:
    """Tokens a training window reads: the example's `length`, room for the largest hole, and a margin."""
    return length + MAX_HOLE + 64


@dataclass(frozen=True)
class WindowSampler:
    """Window starts drawn per file weight: a start falls in file i with probability proportional to
    weight_i x the tokens of file i that can start a window, uniform within them.

    Files are the pack's index (offset, length; the separator after a file counts as its token); a file's
    starts are clipped to [0, size - span) so every window fits in the stream. A window may run on into the
    next file, as the unweighted sampler's do. Drawing is one binary search over cumulative weights.
    """

    files: np.ndarray  # int64: each kept file's place in the index
    begins: np.ndarray  # int64: first window start of each file with weight > 0 and room for a start
    counts: np.ndarray  # int64: how many starts it has
    weights: np.ndarray  # float64: its weight per token
    cumulative: np.ndarray  # float64: running sum of weights * counts

    @classmethod
    def build(cls, offsets: np.ndarray, lengths: np.ndarray, weights: np.ndarray, size: int,
              span: int) -> WindowSampler:
        last = size - span  # exclusive bound on starts
        begins = np.minimum(np.asarray(offsets, dtype=np.int64), last)
        ends = np.minimum(np.asarray(offsets, dtype=np.int64) + np.asarray(lengths, dtype=np.int64) + 1, last)
        counts = ends - begins
        keep = (counts > 0) & (np.asarray(weights) > 0)
        if not keep.any():
            raise ValueError("every file that can start a window has weight 0")
        kept = np.asarray(weights, dtype=np.float64)[keep]
        return cls(np.flatnonzero(keep), begins[keep], counts[keep], kept, np.cumsum(kept * counts[keep]))

    def draw(self, rng: np.random.Generator) -> int:
        u = rng.random() * float(self.cumulative[-1])
        i = min(int(np.searchsorted(self.cumulative, u, side="right")), len(self.cumulative) - 1)
        return int(self.begins[i] + rng.integers(self.counts[i]))

    def shares(self, labels: np.ndarray) -> dict[str, float]:
        """Expected share of windows per label (`labels`: one per file given to `build`, e.g. its dialect)."""
        mass = self.weights * self.counts
        kept = np.asarray(labels)[self.files]
        return {str(k): float(mass[kept == k].sum() / self.cumulative[-1]) for k in np.unique(labels)}


def make_example(stream: np.ndarray, length: int, progress: float, tables: TokenTables,
                 rng: np.random.Generator, objective: str = "diffusion", gpu_end: int = 0,
                 gpu_weight: float = 1.0, sampler: WindowSampler | None = None) -> Example:
    """One training example from a random place in `stream` (drawn by `sampler` when given, else GPU code
    weighted by `gpu_weight`, see `window_offset`), shaped by the curriculum."""
    weights = mode_weights(progress)
    kinds = list(weights)
    kind = kinds[int(rng.choice(len(kinds), p=np.array([weights[k] for k in kinds])))]
    span = window_span(length)
    drawn = sampler.draw(rng) if sampler is not None else None
    offset = window_offset(len(stream), span, rng, gpu_end, gpu_weight) if drawn is None else drawn
    window = stream[offset:offset + span]
    shaped = fim_example if objective == "ar" else hole_example
    if kind != "random":
        for _ in range(4):
            example = shaped(window, kind, length, tables, rng)
            if example is not None:
                return example
    if objective == "ar":
        return _next_token_example(window[:length + 1].astype(np.int64), length, "random")
    return random_example(window[:length], tables, rng)
