"""Load on the team server: N editors completing at once over loopback, against one editor alone.

    python bench/server_load.py [--clients 8] [--seconds 30] [--device cpu] [--model FOLDER] [--json out.json]

Starts `dice-lsp serve` twice, with batching (`--max-batch-rows 32`) and without (`--max-batch-rows 1`),
both kept up, and drives one at a time for a bounded time with 1 client or N clients, each sending one
completion after another (the next as soon as the last returns, as an editor whose user keeps typing
would). Phases run in the order A1 B1 AN BN BN AN B1 A1 and each row pools its two phases, so a drift
of the machine (clocks warming up, caches) weighs on both servers alike; before them each server answers 5 s of
1 editor and 5 s of N, untimed (steady state: shapes and graphs made once per server). The requests are the
held-out kernels with 1-3 lines removed and the cursor on the emptied line (bench/lsp_latency.py's holes),
with the editor's default settings. Prints throughput, p50/p95 round trip and the rows the batched
server's fill scheduler ran per model call (from its status: fills join a running batch between
denoising steps, so "fills per batch" no longer measures anything; the unbatched server fills alone),
and where a completion's time went on the server (its status `completion_time`, means per completion):
"worker ms" in the completion workers (prepare, checks, clang), "model ms" waiting for fills (queue and
denoising), "server ms" the whole handler (the rest is the hops between processes and threads; the
round trip adds the event loop and the socket).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from lsp_latency import holes

from dice_lsp.address import parse_address
from dice_lsp.remote.client import RemoteClient


def start_server(batch_rows: int, device: str, model: str | None = None) -> tuple[subprocess.Popen[str], str]:
    """A team server on a free loopback port; unconfined where bubblewrap is missing (the bench sends completions
    only: no client code is compiled or run), which the output says."""
    unconfined = ["--unsafe-no-sandbox"] if shutil.which("bwrap") is None else []
    if unconfined:
        print("bench: no bubblewrap here: servers run with --unsafe-no-sandbox", file=sys.stderr)
    process = subprocess.Popen(
        [sys.executable, "-m", "dice_lsp.cli", "serve", "--port", "0", "--json", "--device", device,
         "--max-batch-rows", str(batch_rows), *(["--model", model] if model else []), *unconfined],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    assert process.stdout is not None
    line = process.stdout.readline()
    if not line:
        raise SystemExit(f"bench: the server did not start (exit {process.wait()}); run `dice-lsp serve --port 0 "
                         f"--json --device {device}` to see why")
    return process, json.loads(line)["listening"]


async def run_clients(url: str, cases: list[tuple[str, int, int, int]], clients: int,
                      seconds: float, settings: dict[str, Any] | None = None) -> dict[str, Any]:
    """`clients` closed-loop editors for `seconds`: round trips, wall time and the server's step counts."""
    connections = [RemoteClient(parse_address(url)) for _ in range(clients + 1)]
    before = await connections[-1].call("status")
    deadline = time.perf_counter() + seconds
    latencies: list[float] = []

    async def editor(index: int) -> None:
        turn = index
        while time.perf_counter() < deadline:
            text, line, character, _ = cases[turn % len(cases)]
            turn += clients
            started = time.perf_counter()
            await connections[index].call("complete", {"text": text, "line": line, "character": character,
                                                       "settings": settings or {}})
            latencies.append((time.perf_counter() - started) * 1000)

    began = time.perf_counter()
    await asyncio.gather(*(editor(i) for i in range(clients)))
    wall = time.perf_counter() - began
    after = await connections[-1].call("status")
    for connection in connections:
        await connection.close()
    timing = {key: (after.get("completion_time") or {}).get(key, 0) - (before.get("completion_time") or {}).get(key, 0)
              for key in ("completions", "worker_s", "model_s", "total_s")}
    return {"latencies": latencies, "wall_s": wall, "fills": after["fills"] - before["fills"], "timing": timing,
            "steps": after.get("fill_steps", 0) - before.get("fill_steps", 0),
            "step_rows": after.get("step_rows", 0) - before.get("step_rows", 0)}


def row(server: str, clients: int, phases: list[dict[str, Any]]) -> dict[str, Any]:
    latencies = sorted(ms for phase in phases for ms in phase["latencies"])
    wall, steps = sum(p["wall_s"] for p in phases), sum(p["steps"] for p in phases)
    done = sum(p["timing"]["completions"] for p in phases)
    return {"server": server, "clients": clients, "requests": len(latencies), "wall_s": round(wall, 2),
            "throughput_rps": round(len(latencies) / wall, 2), "p50_ms": round(statistics.median(latencies), 1),
            "p95_ms": round(latencies[min(len(latencies) - 1, int(0.95 * len(latencies)))], 1),
            "rows_per_step": round(sum(p["step_rows"] for p in phases) / steps, 2) if steps else None,
            **{f"{part}_ms": round(1000 * sum(p["timing"][f"{part}_s"] for p in phases) / done, 1) if done else None
               for part in ("worker", "model", "total")}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=30.0, help="per phase")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--model", help="a checkpoint folder (default: the embedded model)")
    parser.add_argument("--json", type=Path, help="also write the rows here")
    parser.add_argument("--type-check", action=argparse.BooleanOptionalAction, default=True,
                        help="the completions' clang front-end check (dice.typeCheck; default: on, as editors ask)")
    args = parser.parse_args()
    cases = holes(200)
    settings = {} if args.type_check else {"typeCheck": False}
    servers = {"batched": start_server(32, args.device, args.model),
               "unbatched": start_server(1, args.device, args.model)}
    phases: dict[tuple[str, int], list[dict[str, Any]]] = {}
    n = args.clients
    order = [("batched", 1), ("unbatched", 1), ("batched", n), ("unbatched", n)]
    try:
        for _, url in servers.values():  # warm-up: model loaded, first-call costs paid at both batch sizes (the
            for clients in (1, n):  # batched server's step shapes and CUDA graphs are made per rows and columns)
                asyncio.run(run_clients(url, cases, clients, 5.0, settings))
        for label, clients in [*order, *reversed(order)]:
            phase = asyncio.run(run_clients(servers[label][1], cases, clients, args.seconds, settings))
            phases.setdefault((label, clients), []).append(phase)
            print(f"{label} x{clients}: {len(phase['latencies'])} requests", file=sys.stderr)
    finally:
        for process, _ in servers.values():
            process.terminate()
            process.wait(timeout=30)
    rows = [row(label, clients, phases[label, clients]) for label, clients in order]
    print(f"{'server':10} {'clients':>7} {'requests':>8} {'req/s':>7} {'p50 ms':>8} {'p95 ms':>8} {'rows/step':>9} "
          f"{'worker ms':>9} {'model ms':>8} {'server ms':>9}")
    for line in rows:
        print(f"{line['server']:10} {line['clients']:>7} {line['requests']:>8} {line['throughput_rps']:>7} "
              f"{line['p50_ms']:>8} {line['p95_ms']:>8} {line['rows_per_step'] or '-':>9} "
              f"{line['worker_ms'] or '-':>9} {line['model_ms'] or '-':>8} {line['total_ms'] or '-':>9}")
    by = {(r["server"], r["clients"]): r for r in rows}
    print(f"throughput, {n} clients vs 1 (batched): "
          f"{by['batched', n]['throughput_rps'] / by['batched', 1]['throughput_rps']:.2f}x; "
          f"batched vs unbatched at {n} clients: "
          f"{by['batched', n]['throughput_rps'] / by['unbatched', n]['throughput_rps']:.2f}x throughput, "
          f"p95 {by['unbatched', n]['p95_ms'] / by['batched', n]['p95_ms']:.2f}x lower")
    unbatched = by["unbatched", n]
    if unbatched["model_ms"] and unbatched["total_ms"]:
        share = unbatched["model_ms"] / unbatched["total_ms"]
        print(f"unbatched at {n} clients: the model (queue and denoising) is {100 * share:.0f}% of a completion's "
              f"server time; a model that took no time would make it at most {1 / (1 - share):.2f}x shorter")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
