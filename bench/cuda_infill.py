"""CUDA-Infill: every system of the results page, side by side in one run, then the table and the plot.

    python bench/cuda_infill.py --out docs/bench-logs/infill [--split test] [--limit N] [--kinds ...]
        [--execute] [--systems empty idiom dice-tiny random-sdar] [--model NAME=DIR ...] [--device cuda]

Systems: `empty` and `idiom` (baselines), `dice-tiny` (the embedded model), `random-sdar` (a random tiny
SDAR checkpoint: the block-diffusion path, plumbing only) and any `--model NAME=DIR` checkpoint (an older
dice-tiny, an autoregressive baseline, a DICE/SDAR folder), and `--replay` the fills of reports made
elsewhere (a model run on a CPU machine, executed here). The suite is loaded once; each system's report
is written to OUT/<name>.json as soon as it is done, then OUT/table.md and OUT/cuda_infill.png from all of
them. With `--execute` (a GPU) executable holes are run and verified. docs/BENCHMARK.md has the results.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

from tqdm import tqdm

from dice_lsp.engine import EMBEDDED_MODEL, load_model
from dice_lsp.errors import DiceError
from dice_lsp.evals import report, systems
from dice_lsp.evals.execute import gpu_available
from dice_lsp.evals.results import EvalReport
from dice_lsp.evals.run import evaluate
from dice_lsp.evals.suite import KINDS, load_suite
from dice_lsp.settings import Settings

LABELS = {"dice-tiny": "dice-tiny v2 (embedded)", "random-sdar": "random tiny SDAR (plumbing only)"}


def make_system(name: str, folder: str | None, device: str, settings: Settings) -> systems.System:
    if name == "empty":
        return systems.empty()
    if name == "idiom":
        return systems.idiom()
    if name == "random-sdar":
        folder = str(systems.random_sdar_checkpoint(Path(tempfile.mkdtemp(prefix="dice-random-sdar-"))))
    elif name == "dice-tiny":
        folder = str(EMBEDDED_MODEL)
    model = load_model(folder, device, "auto", False)
    return systems.ModelSystem(name, LABELS.get(name, name), model, settings)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--split", default="test")
    parser.add_argument("--kinds", nargs="+", choices=KINDS)
    parser.add_argument("--limit", type=int)
    parser.add_argument("--execute", action="store_true")
    parser.add_argument("--executable-only", action="store_true")
    parser.add_argument("--systems", nargs="+", default=["empty", "idiom", "dice-tiny", "random-sdar"])
    parser.add_argument("--model", action="append", default=[], metavar="NAME=DIR")
    parser.add_argument("--replay", action="append", default=[], metavar="LABEL=REPORT[,REPORT...]",
                        help="score again the fills of earlier reports (made on another machine)")
    parser.add_argument("--device", default="auto")
    args = parser.parse_args()
    if args.execute and not gpu_available():
        print("cuda_infill: --execute needs a CUDA GPU (none here)", file=sys.stderr)
        return 3
    suite = load_suite("cuda-infill", args.split)
    holes = suite.select(args.kinds, args.limit, executable=args.executable_only)
    settings = Settings()
    named = dict(item.split("=", 1) for item in args.model)
    args.out.mkdir(parents=True, exist_ok=True)
    written = []
    replays = {}
    for item in args.replay:
        label, files = item.split("=", 1)
        reports = [EvalReport.from_json(json.loads(Path(f).read_text(encoding="utf-8"))) for f in files.split(",")]
        replays[reports[0].system] = systems.Replay.from_reports(reports, label)
    for name in [*args.systems, *named, *replays]:
        started = time.time()
        system = replays[name] if name in replays else make_system(name, named.get(name), args.device, settings)
        with tqdm(total=len(holes), desc=name, unit="hole", file=sys.stderr, leave=False) as bar:
            result = evaluate(suite, holes, system, args.execute,
                              {"steps_per_32_tokens": settings.steps, "context_tokens": settings.context_tokens,
                               "device": args.device}, progress=bar.update)
        result = replace(result, wall_s=round(time.time() - started, 1))
        path = args.out / f"{name}.json"
        path.write_text(json.dumps(result.to_json()), encoding="utf-8")
        written.append(result)
        print(f"{name}: {len(holes)} holes in {result.wall_s} s -> {path}", file=sys.stderr)
    (args.out / "table.md").write_text(report.markdown(written) + "\n", encoding="utf-8")
    try:
        report.plot(written, args.out / "cuda_infill.png")
    except DiceError as exc:  # no matplotlib on this machine: `dice-lsp eval table --plot` draws it later
        print(f"cuda_infill: no plot: {exc}", file=sys.stderr)
    print(report.markdown(written))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
