"""How far to trust the harness's timings (GPU only).

For each problem in bench/problems (kernel-level ones) and examples/saxpy.cu: the reference kernel timed
5 times by the harness (spread of the 5 medians, max over min minus one), and the speedup of the good
candidate over the reference by the harness and by triton.testing.do_bench (median), side by side.

    python bench/harness_timing.py [--problems bench/problems] [--json OUT.json]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from dice_lsp.harness.build import build_cubin  # noqa: E402
from dice_lsp.harness.cuda_driver import Driver  # noqa: E402
from dice_lsp.harness.kernel_level import Kernel, rotating  # noqa: E402
from dice_lsp.harness.spec import find_specs  # noqa: E402
from dice_lsp.harness.timing import Timer  # noqa: E402
from dice_lsp.toolchain.flags import CompileFlags  # noqa: E402


def pairs(problems: Path) -> list[tuple[str, Path, str, Path, str]]:
    """(name, reference file, reference kernel, candidate file, candidate kernel)."""
    found = [("saxpy (example)", ROOT / "examples" / "saxpy.cu", "saxpy", ROOT / "examples" / "saxpy.cu", "saxpy_vec4")]
    for reference in sorted(problems.glob("*/reference.cu")):
        good = reference.parent / "candidates" / "good.cu"
        specs = find_specs(reference.read_text())
        if good.is_file() and specs:
            found.append((reference.parent.name, reference, specs[0][0].kernel, good, specs[0][0].kernel))
    return found


def kernel(driver: Driver, path: Path, name: str, spec_source: Path, arch: str) -> Kernel:
    text = path.read_text()
    build = build_cubin(text, path.parent, CompileFlags(arch=arch))
    if not build.ok:
        raise SystemExit(f"{path} does not compile:\n{build.output}")
    specs = {s.kernel: s for s, _ in find_specs(text)} | {s.kernel: s for s, _ in find_specs(spec_source.read_text())}
    spec = specs.get(name) or next(iter(specs.values()))
    return Kernel(driver, spec, str(build.cubin), build.mangled(name))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--problems", type=Path, default=ROOT / "bench" / "problems")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    if not torch.cuda.is_available():
        print("no CUDA GPU: nothing to time", file=sys.stderr)
        return 3
    import triton.testing

    torch.empty(1, device="cuda")
    major, minor = torch.cuda.get_device_capability()
    arch = f"sm_{major}{minor}"
    driver, timer = Driver(), Timer()
    generator = torch.Generator(device="cuda").manual_seed(0)
    rows: list[dict[str, Any]] = []
    for name, ref_path, ref_name, cand_path, cand_name in pairs(args.problems):
        reference = kernel(driver, ref_path, ref_name, ref_path, arch)
        candidate = kernel(driver, cand_path, cand_name, ref_path, arch)
        ref_launch = rotating(reference, reference.spec, generator)
        cand_launch = rotating(candidate, reference.spec, generator)
        repeats = [timer.time(ref_launch).median_ms for _ in range(5)]
        ours = repeats[-1] / timer.time(cand_launch).median_ms

        def counted(launch: Any) -> Any:
            calls = iter(range(1 << 30))
            return lambda: launch(next(calls))

        ref_triton = triton.testing.do_bench(counted(ref_launch), warmup=25, rep=400, return_mode="median")
        cand_triton = triton.testing.do_bench(counted(cand_launch), warmup=25, rep=400, return_mode="median")
        theirs = ref_triton / cand_triton
        rows.append({"problem": name, "ref_ms": repeats, "spread_pct": 100 * (max(repeats) / min(repeats) - 1),
                     "speedup_harness": ours, "speedup_triton": theirs,
                     "disagreement_pct": 100 * abs(ours / theirs - 1), "ref_ms_triton": ref_triton})
        print(f"{name}: done", file=sys.stderr, flush=True)
    print(f"{'problem':22} {'ref ms (median of 5)':>20} {'spread of 5':>11} {'speedup':>8} {'do_bench':>8} {'diff':>6}")
    for r in rows:
        print(f"{r['problem'][:22]:22} {sorted(r['ref_ms'])[2]:>20.4f} {r['spread_pct']:>10.2f}% "
              f"{r['speedup_harness']:>7.2f}x {r['speedup_triton']:>7.2f}x {r['disagreement_pct']:>5.1f}%")
    print(f"GPU: {torch.cuda.get_device_name()}; worst spread {max(r['spread_pct'] for r in rows):.2f}% "
          f"(target <= 2%), worst disagreement with do_bench {max(r['disagreement_pct'] for r in rows):.1f}% "
          "(target <= 5%)")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
