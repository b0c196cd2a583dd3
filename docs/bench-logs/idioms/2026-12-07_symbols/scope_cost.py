"""What the function's scope costs a request: per one-line hole of the dev split (the first N of each kind), the
show filter's features of the hole's truth and the idiom bank's lookup, after the request's checks have run (the
checks' table is built by then: what the pipeline pays on top of them), and the same with the request's checks
built first (cold: the parse included). Runs on whichever `dice_lsp` is imported (a worktree's, for before).

    PYTHONPATH=. python docs/bench-logs/idioms/2026-12-07_symbols/scope_cost.py --holes 50
"""

from __future__ import annotations

import argparse
import inspect
import statistics
import time

from dice_lsp.completion import features
from dice_lsp.completion.checks.context import CheckContext
from dice_lsp.completion.scope import FunctionScope
from dice_lsp.completion.sources.idioms import IdiomBank
from dice_lsp.evals.suite import load_suite
from dice_lsp.evals.systems import document_for, region_for


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--holes", type=int, default=50, help="holes of each kind (line, midline)")
    args = parser.parse_args()
    suite = load_suite("cuda-infill", "dev")
    bank = IdiomBank.load()
    takes_checks = "checks" in inspect.signature(FunctionScope).parameters
    warm: list[float] = []
    cold: list[float] = []
    for hole in suite.select(["line", "midline"], args.holes):
        text = suite.text(hole)
        document = document_for(text, hole)
        region = region_for(document, hole)
        if region is None:
            continue
        before, after = document[:region.start], document[region.end:]
        truth = hole.truth(text).strip()
        for times, built_first in ((cold, False), (warm, True)):
            began = time.perf_counter()
            checker = CheckContext(before + after, len(before), len(before))
            if built_first:
                checker.check(truth)  # what the pipeline's checks do before the features and the lookup
                _ = checker.needed
                began = time.perf_counter()
            extra = {"checks": checker.request} if takes_checks else {}
            hole_view = features.Hole(before, after, **extra)
            features.row(features.Evidence(truth, {}, True, True), hole_view, [], 1)
            bank.lookup(before, after, needed=checker.needed, **extra)
            times.append(time.perf_counter() - began)
    for name, times in (("after the checks", warm), ("cold (request parsed too)", cold)):
        print(f"{name}: {len(times)} holes, median {1000 * statistics.median(times):.2f} ms, "
              f"mean {1000 * statistics.mean(times):.2f} ms, p90 {1000 * sorted(times)[int(0.9 * len(times))]:.2f} ms")


if __name__ == "__main__":
    main()
