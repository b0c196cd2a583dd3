"""Verify and benchmark on a real GPU: every problem's good candidate passes, every deliberately bad one is
caught (bench/problems/README.md lists them)."""

from __future__ import annotations

from pathlib import Path

import pytest

from dice_lsp.harness.bench import BenchReport, Limits, bench_file

pytestmark = pytest.mark.gpu
ROOT = Path(__file__).resolve().parents[1]
PROBLEMS = ROOT / "bench" / "problems"
LIMITS = Limits(timeout=45.0)
CAUGHT_BY = {  # flaw -> what the report must say
    "wrong": ("differ from the reference",),
    "stale": ("differ from the reference", "wrote nothing"),
    "oob": ("out of the bounds", "illegal", "failed"),
    "hang": ("timed out",),
    "zero_inputs": ("modifies its input",),
    "hardcoded": ("differ from the reference", "out of the bounds", "illegal", "failed"),
    "side_stream": ("creates streams",),
}


def candidates() -> list[pytest.param]:  # type: ignore[valid-type]
    found = []
    for candidate in sorted(PROBLEMS.glob("*/candidates/*.cu")):
        problem = candidate.parents[1]
        found.append(pytest.param(problem, candidate, id=f"{problem.name}-{candidate.stem}"))
    return found


def run(problem: Path, candidate: Path) -> BenchReport:
    reference = problem / "reference.py" if (problem / "reference.py").is_file() else problem / "reference.cu"
    return bench_file(candidate, reference, LIMITS)


@pytest.mark.parametrize(("problem", "candidate"), candidates())
def test_good_candidates_pass_and_bad_ones_are_caught(problem: Path, candidate: Path) -> None:
    report = run(problem, candidate)
    assert report.gpu and report.compile_ok, report.diagnostics
    [kernel] = report.kernels
    if candidate.stem == "good":
        assert kernel.verified, kernel.failure or kernel.flags
        assert kernel.median_ms and kernel.speedup_vs_ref and kernel.max_abs_err is not None
        return
    said = " ".join([kernel.failure or "", *kernel.flags])
    assert not kernel.verified, f"{candidate.stem} was not caught"
    assert any(phrase in said for phrase in CAUGHT_BY[candidate.stem]), said


def test_a_file_with_its_own_reference_kernel(tmp_path: Path) -> None:
    report = bench_file(ROOT / "examples" / "saxpy.cu", None, LIMITS)
    [kernel] = report.kernels
    assert kernel.name == "saxpy_vec4" and kernel.verified and kernel.reference_ms and kernel.speedup_vs_ref
    assert kernel.max_abs_err is not None and kernel.max_abs_err < 1e-3


def kernel_level_problems() -> list[Path]:
    return sorted(p.parent for p in PROBLEMS.glob("*/reference.cu"))


@pytest.mark.parametrize("problem", kernel_level_problems(), ids=lambda p: p.name)
def test_a_rewritten_body_is_verified_against_the_original_kernel(problem: Path) -> None:
    """What the optimize loop does with its rewrites: one that is right (the good candidate, which keeps the
    kernel's name and parameters) is verified against the original kernel and is faster; a body that
    writes nothing is not verified."""
    from dice_lsp.harness.bench import bench_rewrite
    from dice_lsp.harness.spec import find_specs
    from dice_lsp.optimize.candidates import find_kernel, with_body

    reference = problem / "reference.cu"
    text = reference.read_text()
    name = find_specs(text)[0][0].kernel
    result = bench_rewrite(reference, (problem / "candidates" / "good.cu").read_text(), name, limits=LIMITS)
    assert result.verified, result.failure or result.flags
    assert result.speedup_vs_ref is not None and result.speedup_vs_ref > 1.0
    idle = bench_rewrite(reference, with_body(text, find_kernel(text, name), "\n    return;\n"), name, limits=LIMITS)
    assert not idle.verified and idle.failure
