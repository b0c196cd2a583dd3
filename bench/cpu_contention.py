"""One completion's fill on the CPU while other processes are busy: how the model's threads wait matters more than
how many there are.

    python bench/cpu_contention.py [--holes 10] [--busy 0 1 2] [--configs product "one thread"] [--json out.json]

Each configuration runs in a fresh process (the OpenMP runtime reads its settings once, when torch loads it) that
fills the same held-out holes (bench/lsp_latency.py's, editor defaults) with dice-tiny on the CPU, while `--busy`
other processes spin on the cores (as an editor, clang, nvcc or a build would keep them busy). Configurations:
the product (half the cores' threads, `engine.device.cpu_threads`, which wait sleeping: dice_lsp/__init__.py);
as many threads as cores (torch's default), waiting sleeping, as OpenMP's default has them (torch loaded
before dice_lsp: they spin a while, then sleep; the product's before) or always spinning
(OMP_WAIT_POLICY=ACTIVE); and one thread. Rows alternate
in the order of the list and then back (ABCCBA) so a drift of the machine weighs on all alike; p50 and mean over
both passes.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

CHILD = """
import json, sys, time
{first}
sys.path.insert(0, {bench!r})
from lsp_latency import holes
from dice_lsp.complete import prepare
from dice_lsp.engine import fill, load_model
from dice_lsp.settings import Settings
from dice_lsp.textdoc import Position
import torch
model, settings = load_model(None), Settings()
requests = [p.request for text, line, character, _ in holes({holes}, seed=3)
            if (p := prepare(model.tokenizer, model.window, text, Position(line, character), settings, None))]
fill(model, requests[0])  # first-call costs
times = []
for request in requests:
    started = time.perf_counter()
    fill(model, request)
    times.append((time.perf_counter() - started) * 1000)
print(json.dumps({{"threads": torch.get_num_threads(), "ms": times}}))
"""
CONFIGS: dict[str, dict[str, str]] = {  # name: environment changes ("torch first": torch loads before dice_lsp)
    "product": {},
    "all cores' threads, which sleep while waiting": {"OMP_NUM_THREADS": str(os.cpu_count() or 2)},
    "all cores' threads, OpenMP's default wait (spin a while, then sleep)": {
        "torch first": "1", "OMP_NUM_THREADS": str(os.cpu_count() or 2)},
    "all cores' threads, which always spin": {"OMP_WAIT_POLICY": "ACTIVE", "OMP_NUM_THREADS": str(os.cpu_count() or 2)},
    "one thread": {"OMP_NUM_THREADS": "1"},
}


def spin(until: float) -> None:
    while time.time() < until:
        pass


def run(config: dict[str, str], holes: int) -> dict[str, object]:
    env = {key: value for key, value in os.environ.items()
           if key not in ("OMP_WAIT_POLICY", "OMP_NUM_THREADS", "GOMP_SPINCOUNT")}
    first = "import torch" if config.get("torch first") else ""
    code = CHILD.format(first=first, bench=str(Path(__file__).resolve().parent), holes=holes)
    changes = {key: value for key, value in config.items() if key != "torch first"}
    done = subprocess.run([sys.executable, "-c", code], env={**env, **changes, "HF_HUB_OFFLINE": "1"},
                          capture_output=True, text=True, timeout=1800)
    if done.returncode != 0:
        raise SystemExit(f"bench: a fill process failed: {done.stderr.strip().splitlines()[-1:]}")
    result: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--holes", type=int, default=10)
    parser.add_argument("--busy", type=int, nargs="+", default=[0, 1, 2], help="other busy processes per row")
    parser.add_argument("--configs", nargs="+", choices=list(CONFIGS), default=list(CONFIGS),
                        help="configurations to run (default: all)")
    parser.add_argument("--json", type=Path, help="also write the rows here")
    args = parser.parse_args()
    names = list(args.configs)
    times: dict[tuple[int, str], list[float]] = {}
    threads: dict[str, object] = {}
    for busy in args.busy:
        spinners = [multiprocessing.Process(target=spin, args=(time.time() + 3600,)) for _ in range(busy)]
        for process in spinners:
            process.start()
        try:
            for name in [*names, *reversed(names)]:
                result = run(CONFIGS[name], args.holes)
                threads[name] = result["threads"]
                times.setdefault((busy, name), []).extend(result["ms"])  # type: ignore[arg-type]
                print(f"busy {busy}: {name}: done", file=sys.stderr, flush=True)
        finally:
            for process in spinners:
                process.terminate()
    rows = [{"busy": busy, "config": name, "threads": threads[name], "fills": len(times[busy, name]),
             "p50_ms": round(statistics.median(times[busy, name]), 1),
             "mean_ms": round(statistics.mean(times[busy, name]), 1)} for busy in args.busy for name in names]
    print(f"cores: {os.cpu_count()}")
    print("| other busy processes | configuration | threads | fills | p50 ms | mean ms |\n|---|---|---|---|---|---|")
    for row in rows:
        print(f"| {row['busy']} | {row['config']} | {row['threads']} | {row['fills']} | {row['p50_ms']} "
              f"| {row['mean_ms']} |")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
