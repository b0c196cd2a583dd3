"""`dice-lsp check` latency: bare nvcc vs a cold check vs a cached check, on the same file, in one run.

    python bench/check_latency.py [--repeats 7] [FILE]

Bare nvcc is the same command the check runs (compile only, -Xptxas -v, in a temporary directory); the
check adds parsing, demangling and the cache key; a cached check answers from the compile cache.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from dice_lsp.toolchain.cache import CompileCache
from dice_lsp.toolchain.flags import DEFAULT_FLAGS
from dice_lsp.toolchain.nvcc import SOURCE_NAME, nvcc_command
from dice_lsp.toolchain.report import check_source

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "vector_add.cu"


def timed(run: object, repeats: int) -> list[float]:
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        run()  # type: ignore[operator]
        times.append((time.perf_counter() - started) * 1000)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("file", nargs="?", type=Path, default=EXAMPLE)
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    text = args.file.read_text()
    folder = args.file.resolve().parent

    def bare() -> None:
        with tempfile.TemporaryDirectory() as scratch:
            path = Path(scratch) / SOURCE_NAME
            path.write_text(text)
            subprocess.run(nvcc_command(path, DEFAULT_FLAGS, folder, ptxas_verbose=True), capture_output=True)

    with tempfile.TemporaryDirectory() as cache_dir:
        cache = CompileCache(Path(cache_dir) / "cache.msgpack")
        check_source(text, folder, cache=cache)  # fills the cache (and warms the disk)
        rows = [("bare nvcc", timed(bare, args.repeats)),
                ("dice-lsp check, cold (no cache)", timed(lambda: check_source(text, folder), args.repeats)),
                ("dice-lsp check, cached", timed(lambda: check_source(text, folder, cache=cache), args.repeats))]
    base = statistics.median(rows[0][1])
    print(f"file: {args.file.name}, {args.repeats} runs each")
    print("| run | p50 ms | min ms | vs bare nvcc |")
    print("|---|---|---|---|")
    for name, values in rows:
        p50 = statistics.median(values)
        print(f"| {name} | {p50:.1f} | {min(values):.1f} | {p50 / base - 1:+.1%} |")


if __name__ == "__main__":
    main()
