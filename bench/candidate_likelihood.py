"""Does the model's likelihood of the other sources' candidates earn a place among the show filter's features?

The issue's evidence: a small model that cannot write a line often recognises it (`__syncthreads();` where it
belongs scores near 0). Here every candidate row of `show_filter collect` (dev, corpus-valid, idioms-dev) gets the
embedded model's mean log-probability of its tokens and of the pad that ends it, each token guessed with part of
the candidate in place: `--passes` rows per candidate, row p masking the tokens at positions ≡ p (mod passes); 2
is two model calls' worth on a request, `--passes 40` is the pseudo-log-likelihood (each token alone). The context
is computed once per hole with the region masked (the engine's context-cache approximation), the candidates' rows
over it. Then the filter's out-of-fold protocol (`show_filter.out_of_fold`, files kept together) runs with and
without the new columns (the likelihood; its rank and margin among the hole's candidates), and the table gives
show rate, exact and completed code at the thresholds reaching 65 / 80 / 90% precision on the dev suite's holes.

    python bench/candidate_likelihood.py --passes 2 --out docs/bench-logs/pipeline/likelihood_2026-12-07
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import torch

from dice_lsp.complete import fill_request
from dice_lsp.completion import features
from dice_lsp.engine import EMBEDDED_MODEL, FillRequest, LoadedModel, load_model
from dice_lsp.engine.infill import in_place_context, region_of
from dice_lsp.engine.sampling import _ContextCache
from dice_lsp.evals.marked import load_marked
from dice_lsp.evals.suite import load_suite
from dice_lsp.evals.systems import document_for, region_for
from dice_lsp.settings import Settings
from dice_lsp.training import show_filter

SPLITS = {"dev": "dev", "corpus-valid": "data/corpus/valid.jsonl", "idioms-dev": "bench/idioms-dev"}
TARGETS = (0.65, 0.8, 0.9)


def likelihoods(model: LoadedModel, request: FillRequest, texts: list[str], passes: int) -> list[float]:
    """Each text's mean log-probability as the region's fill (its tokens and the pad that ends it), `passes` rows
    per text, row p guessing the tokens at positions ≡ p (mod passes) with the others in place."""
    tok, special = model.tokenizer, model.special
    region = region_of(model, request, None)
    prefix, suffix, overlap = in_place_context(model, request, region)
    lo = len(prefix)
    rows, guesses, owner = [], [], []
    for number, text in enumerate(texts):
        ids = tok.encode(overlap + text)
        if len(ids) > region:
            continue
        filled = ids + [special.pad_id] * (region - len(ids))
        for part in range(passes):
            hidden = [i for i in range(min(len(ids) + 1, region)) if i % passes == part]
            if hidden:
                row = list(filled)
                for i in hidden:
                    row[i] = special.mask_id
                rows.append(prefix + row + suffix)
                guesses.append([(i, filled[i]) for i in hidden])
                owner.append(number)
    if not rows:
        return [math.nan] * len(texts)
    x = torch.tensor(rows, dtype=torch.long, device=model.device)
    with torch.inference_mode():
        cache = _ContextCache(model.lm, None, special.mask_id, -lo)
        cache.logits(lo, lo + region, x)  # the context's call: every row alike with the region masked
        logp = torch.log_softmax(cache.logits(lo, lo + region, x).float(), dim=-1)
    total, count = [0.0] * len(texts), [0] * len(texts)
    for row, (number, guessed) in enumerate(zip(owner, guesses, strict=True)):
        for i, token in guessed:
            total[number] += float(logp[row, i, token])
            count[number] += 1
    return [t / c if c else math.nan for t, c in zip(total, count, strict=True)]


def score_rows(name: str, split: str, folder: Path, passes: int, model: LoadedModel) -> dict[str, dict[str, float]]:
    """{hole: {candidate text: likelihood}} for the rows of data/show-filter/NAME.jsonl.gz."""
    texts: dict[str, list[str]] = {}
    for r in show_filter.read_rows(folder / f"{name}.jsonl.gz"):
        if r.features:
            texts.setdefault(r.hole, []).append(r.text)
    suite = (show_filter.corpus_suite(Path(split)) if split.endswith(".jsonl")
             else load_marked(Path(split), compile_check=False) if Path(split).is_dir()
             else load_suite("cuda-infill", split))
    holes = {h.id: h for h in suite.select(["line", "midline"], None)}
    settings, out, began = Settings(), {}, time.perf_counter()
    for done, (hole_id, candidates) in enumerate(texts.items(), 1):
        hole = holes[hole_id]
        document = document_for(suite.text(hole), hole)
        region = region_for(document, hole)
        assert region is not None
        request, _ = fill_request(model.tokenizer, model.window, document, region, settings)
        out[hole_id] = dict(zip(candidates, likelihoods(model, request, candidates, passes), strict=True))
        if done % 100 == 0:
            print(f"  {name}: {done}/{len(texts)} holes, {time.perf_counter() - began:.0f} s", file=sys.stderr)
    return out


def with_likelihood(rows: list[show_filter.Row], scores: dict[str, dict[str, float]]) -> list[show_filter.Row]:
    """Rows with three columns more: the likelihood, its rank among the hole's candidates, its margin over the best
    other."""
    by_hole: dict[str, list[float]] = {}
    for r in rows:
        if r.features:
            by_hole.setdefault(r.hole, []).append(scores.get(r.hole, {}).get(r.text, math.nan))
    out = []
    for r in rows:
        if not r.features:
            out.append(r)
            continue
        mine = scores.get(r.hole, {}).get(r.text, math.nan)
        others = list(by_hole[r.hole])
        others.remove(mine) if not math.isnan(mine) else None
        others = [o for o in others if not math.isnan(o)]
        rank = float(sum(o > mine for o in others)) if not math.isnan(mine) else math.nan
        margin = mine - max(others) if others and not math.isnan(mine) else math.nan
        out.append(replace(r, features=[*r.features, mine, rank, margin]))
    return out


def operating_points(rows: list[show_filter.Row], names: tuple[str, ...]) -> dict[str, Any]:
    """Out of fold with `names` as the feature columns: per group of holes, the points reaching each target."""
    import numpy as np

    show_filter.FEATURES = names  # `_fit` names the booster's columns from it
    candidates = [r for r in rows if r.features]
    raw = show_filter.out_of_fold(candidates)
    xs, ys = show_filter.isotonic(raw, [r.exact for r in candidates])
    calibrated = iter(float(np.interp(p, xs, ys)) for p in raw)
    chances = [next(calibrated) if r.features else -1.0 for r in rows]
    out: dict[str, Any] = {}
    for group, keep in (("dev", lambda r: "/" in r.file and not r.file.startswith("corpus/")),
                        ("idioms-dev", lambda r: "/" not in r.file)):
        kept = [(r, c) for r, c in zip(rows, chances, strict=True) if keep(r)]
        holes = show_filter.by_hole([r for r, _ in kept], [c for _, c in kept])
        points = show_filter.curve(holes, sorted({round(c, 4) for _, c in kept if c >= 0}))
        out[group] = {"holes": len(holes)}
        for target in TARGETS:
            reaching = [p for p in points if not math.isnan(p.precision) and p.precision >= target]
            best = min(reaching, key=lambda p: p.threshold) if reaching else None
            out[group][f"{target:.2f}"] = None if best is None else best.__dict__
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--passes", type=int, default=2, help="rows per candidate (40: each token alone)")
    parser.add_argument("--rows", type=Path, default=Path("data/show-filter"), help="show_filter collect's rows")
    parser.add_argument("--out", type=Path, required=True, help="folder for scores.json and table.md")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    model = load_model(EMBEDDED_MODEL, "cpu", "auto", False)
    rows, scores, began = [], {}, time.perf_counter()
    for name, split in SPLITS.items():
        rows += show_filter.read_rows(args.rows / f"{name}.jsonl.gz")
        scores.update(score_rows(name, split, args.rows, args.passes, model))
    seconds = time.perf_counter() - began
    (args.out / f"scores_passes{args.passes}.json").write_text(json.dumps(scores))
    base = tuple(features.FEATURES)
    results = {"without": operating_points(rows, base),
               "with likelihood, rank, margin": operating_points(with_likelihood(rows, scores),
                                                                 (*base, "likelihood", "likelihood_rank",
                                                                  "likelihood_margin"))}
    lines = [f"passes {args.passes}, {len(scores)} holes scored in {seconds:.0f} s (2 CPU cores, other jobs running)",
             "", "| features | holes | " + " | ".join(f"at {t:.0%} precision: shown / exact / completed"
                                                   for t in TARGETS) + " |",
             "|---|---|" + "---|" * len(TARGETS)]
    for label, groups in results.items():
        for group, found in groups.items():
            cells = [("—" if found[f"{t:.2f}"] is None else "{shown:.1%} / {exact:.1%} / {completed:.1%}".format(
                **found[f"{t:.2f}"])) for t in TARGETS]
            lines.append(f"| {label} | {group} ({found['holes']}) | " + " | ".join(cells) + " |")
    (args.out / f"table_passes{args.passes}.md").write_text("\n".join(lines) + "\n")
    (args.out / f"results_passes{args.passes}.json").write_text(json.dumps(results, indent=1))
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
