"""The whole optimize loop over the kernel-level problems in bench/problems, with a model (GPU for timing).

For each problem: `dice_lsp.optimize.optimize` on the kernel of its `reference.cu` (generate, dedupe,
compile, repair, verify against the original and time, rank), then one row: candidates generated →
distinct → compiled (of which repaired) → verified → faster, the best verified speedup and the wall time.

    python bench/optimize_problems.py [--model DIR] [--candidates 8] [--rounds 3] [--json OUT.json]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from dice_lsp.engine import load_model  # noqa: E402
from dice_lsp.harness.limits import Limits  # noqa: E402
from dice_lsp.harness.spec import find_specs  # noqa: E402
from dice_lsp.optimize import OptimizeRequest, checker, optimize  # noqa: E402
from dice_lsp.settings import Settings  # noqa: E402
from dice_lsp.toolchain.flags import CompileFlags  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--problems", type=Path, default=ROOT / "bench" / "problems")
    parser.add_argument("--model", help="checkpoint folder (default: the embedded dice-tiny)")
    parser.add_argument("--device", default="auto")
    parser.add_argument("--candidates", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    model = load_model(args.model, args.device, "auto")
    sampler = Settings(seed=args.seed).sampler_config()
    rows: list[dict[str, Any]] = []
    for reference in sorted(args.problems.glob("*/reference.cu")):
        text = reference.read_text()
        kernel = find_specs(text)[0][0].kernel
        flags = CompileFlags()
        started = time.perf_counter()
        request = OptimizeRequest(path=reference, text=text, kernel=kernel, candidates=args.candidates,
                                  rounds=args.rounds, sampler=sampler, flags=flags, limits=Limits())
        report = optimize(lambda job: job(model), request, checker(reference.parent, flags),
                          said=lambda message, name=reference.parent.name: print(f"{name}: {message}", file=sys.stderr))
        best = max((r.speedup or 0.0 for r in report.rewrites if r.verified), default=None)
        rows.append({"problem": reference.parent.name, "kernel": kernel, "generated": report.generated,
                     "distinct": len(report.rewrites), "compiled": report.compiled,
                     "repaired": sum(r.compiled and r.repair_rounds > 0 for r in report.rewrites),
                     "verified": report.verified, "faster": report.faster, "best_speedup": best,
                     "wall_s": time.perf_counter() - started, "gpu": report.gpu,
                     "failures": [r.failure for r in report.rewrites if r.failure][:4]})
        if args.json:
            args.json.write_text(json.dumps(rows, indent=1))
    print(f"{'problem':18} {'generated':>9} {'distinct':>8} {'compiled':>8} {'(repaired)':>10} {'verified':>8} "
          f"{'faster':>6} {'best':>7} {'wall s':>7}")
    for r in rows:
        best = f"{r['best_speedup']:.2f}x" if r["best_speedup"] else "-"
        print(f"{r['problem'][:18]:18} {r['generated']:>9} {r['distinct']:>8} {r['compiled']:>8} {r['repaired']:>10} "
              f"{r['verified']:>8} {r['faster']:>6} {best:>7} {r['wall_s']:>7.1f}")
    counted = ("generated", "distinct", "compiled", "repaired", "verified", "faster")
    total = {k: sum(r[k] for r in rows) for k in counted}
    print(f"{'total':18} {total['generated']:>9} {total['distinct']:>8} {total['compiled']:>8} {total['repaired']:>10} "
          f"{total['verified']:>8} {total['faster']:>6}")
    print(f"model {model.name} on {model.device}; {args.candidates} candidates, {args.rounds} repair rounds; "
          f"GPU: {'yes' if rows and rows[0]['gpu'] else 'no (nothing verified)'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
