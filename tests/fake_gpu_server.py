"""`dice-lsp` (the language server on stdio) on a pretend GPU machine, for tests that must see whether a
GPU run was *attempted* on a machine without one.

Every GPU check answers `sm_90`, and every benchmark or verification of a kernel is only written down, one
line each, to the file `$DICE_FAKE_GPU_LOG` (nothing is built or run): `optimize gpu_arch` when the
optimize loop asks for a GPU, `bench gpu_arch` when the server does before a benchmark on save,
`bench_file NAME` and `bench_rewrite KERNEL` when a file or a rewrite would have run on it.

Run as `python -m tests.fake_gpu_server [dice-lsp arguments]`.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

from dice_lsp import cli
from dice_lsp.harness import bench
from dice_lsp.optimize import loop

LOG = Path(os.environ["DICE_FAKE_GPU_LOG"])


def note(line: str) -> None:
    with LOG.open("a", encoding="utf-8") as log:
        log.write(line + "\n")


def gpu_arch_for(who: str) -> Any:
    def gpu_arch() -> str:
        note(f"{who} gpu_arch")
        return "sm_90"

    return gpu_arch


def bench_file(path: Path, *_args: Any, **_kwargs: Any) -> bench.BenchReport:
    note(f"bench_file {path.name}")
    return bench.BenchReport(True, True, [], [], "fake GPU: nothing was run")


def bench_rewrite(_original: Path, _rewritten: str, kernel: str, *_args: Any, **_kwargs: Any) -> bench.KernelResult:
    note(f"bench_rewrite {kernel}")
    return bench.KernelResult(kernel, failure="fake GPU: nothing was run")


bench.gpu_arch = gpu_arch_for("bench")  # the jobs look both up at each call (`dice_lsp.jobs.local`)
bench.bench_file = bench_file
loop.gpu_arch = gpu_arch_for("optimize")  # type: ignore[attr-defined]
loop.bench_rewrite = bench_rewrite  # type: ignore[attr-defined]

if __name__ == "__main__":
    sys.exit(cli.main(sys.argv[1:]))
