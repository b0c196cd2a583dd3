"""Verify and benchmark on a real GPU: every problem's good candidate passes, every deliberately bad one is
caught (bench/problems/README.md lists them)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from dice_lsp.harness.bench import BenchReport, KernelResult, bench_file, extension_job, gpu_arch
from dice_lsp.harness.limits import Limits

pytestmark = pytest.mark.gpu
ROOT = Path(__file__).resolve().parents[1]
PROBLEMS = ROOT / "bench" / "problems"
LIMITS = Limits(timeout=45.0, memcheck=False)  # the compute-sanitizer pass has tests of its own below
CAUGHT_BY = {  # flaw -> what the report's `failure` must say
    "wrong": ("differ from the reference",),
    "stale": ("output never written",),
    "oob": ("out of the bounds", "illegal", "failed"),
    "hang": ("timed out",),
    "zero_inputs": ("modifies its input",),
    "hardcoded": ("differ from the reference", "non-finite values", "never written", "out of the bounds", "illegal",
                  "failed"),
    "side_stream": ("rejected: creates streams",),
    "unchecked": ("differ from the reference",),
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
    if candidate.stem in ("good", "limited"):  # limited: refuses a shape outside the problem, verified on its own
        assert kernel.verified, kernel.failure or kernel.flags
        assert kernel.median_ms and kernel.speedup_vs_ref and kernel.max_abs_err is not None
        assert len(kernel.shapes) == 2, kernel.shapes  # every problem here is checked at a second shape
        assert bool(kernel.limitations) == (candidate.stem == "limited"), kernel.limitations
        return
    assert not kernel.verified, f"{candidate.stem} was not caught"
    assert kernel.speedup_vs_ref is None, "a rejected kernel was given a speedup"
    assert kernel.failure and any(phrase in kernel.failure for phrase in CAUGHT_BY[candidate.stem]), kernel.failure


def test_the_extension_path_guards_the_output_it_allocates() -> None:
    """A torch extension that writes 16 KiB past the end of its own output (right values everywhere)."""
    [kernel] = run(PROBLEMS / "kb_relu_scale", PROBLEMS / "kb_relu_scale" / "candidates" / "oob.cu").kernels
    assert not kernel.verified and kernel.speedup_vs_ref is None
    assert kernel.failure is not None
    assert kernel.failure.startswith("the kernel writes out of the bounds of its output (into the guard region "
                                     "after output 0)"), kernel.failure


def test_literal_sizes_in_get_inputs_are_varied() -> None:
    """kb_center_rows writes its sizes as literals inside get_inputs: they are rewritten for a second shape,
    where the candidate with the row length written in fails."""
    problem = PROBLEMS / "kb_center_rows"
    [good] = run(problem, problem / "candidates" / "good.cu").kernels
    assert good.verified and good.shapes == ["(4096, 8192)", "(2049, 4097)"], good
    [hardcoded] = run(problem, problem / "candidates" / "hardcoded.cu").kernels
    assert not hardcoded.verified and hardcoded.failure is not None
    assert "differ from the reference" in hardcoded.failure and "shape (2049, 4097)" in hardcoded.failure


def test_a_kernel_that_refuses_a_shape_outside_the_problem_is_verified_with_that_limitation() -> None:
    """kb_sum_dim's limited candidate TORCH_CHECKs that its rows are whole float4s: at the harness's second shape,
    (1025, 8193), it raises its own error. Verified on the problem's shape and at the next one the reference
    accepts (only the leading size varied), with the refusal reported; the same kernel without its check is
    silently wrong there and rejected."""
    problem = PROBLEMS / "kb_sum_dim"
    [limited] = run(problem, problem / "candidates" / "limited.cu").kernels
    assert limited.verified and limited.failure is None and limited.speedup_vs_ref, limited
    assert limited.shapes == ["(2048, 16384)", "(1025, 16384)"], limited.shapes
    assert limited.limitations == ["refuses shape (1025, 8193): cols must be a multiple of 4"], limited.limitations
    [unchecked] = run(problem, problem / "candidates" / "unchecked.cu").kernels
    assert not unchecked.verified and unchecked.speedup_vs_ref is None and unchecked.failure is not None
    assert "differ from the reference" in unchecked.failure and "shape (1025, 8193)" in unchecked.failure


@pytest.mark.skipif(shutil.which("compute-sanitizer") is None, reason="compute-sanitizer is not on PATH")
def test_the_memcheck_pass_keeps_a_refusal_a_limitation() -> None:
    problem = PROBLEMS / "kb_sum_dim"
    [kernel] = bench_file(problem / "candidates" / "limited.cu", problem / "reference.py",
                          Limits(timeout=300.0)).kernels
    assert kernel.verified and kernel.memcheck == "passed", kernel
    assert kernel.limitations == ["refuses shape (1025, 8193): cols must be a multiple of 4"]


def test_a_rejected_kernel_says_why_and_has_no_speedup() -> None:
    [kernel] = run(PROBLEMS / "kb_softmax", PROBLEMS / "kb_softmax" / "candidates" / "side_stream.cu").kernels
    assert not kernel.verified and kernel.speedup_vs_ref is None and kernel.median_ms is not None
    assert kernel.failure == f"rejected: {'; '.join(kernel.flags)}" and "cudaStreamCreate" in kernel.failure


@pytest.mark.skipif(shutil.which("compute-sanitizer") is None, reason="compute-sanitizer is not on PATH")
def test_the_memcheck_pass_runs_on_a_verified_kernel() -> None:
    problem = PROBLEMS / "elementwise_gelu"
    report = bench_file(problem / "candidates" / "good.cu", problem / "reference.cu", Limits(timeout=120.0))
    [kernel] = report.kernels
    assert kernel.verified and kernel.memcheck == "passed", kernel


@pytest.mark.skipif(shutil.which("compute-sanitizer") is None, reason="compute-sanitizer is not on PATH")
def test_the_memcheck_pass_sees_an_extension_write_past_its_output() -> None:
    """The sanitized run alone (each tensor its own allocation there) catches the 16 KiB overrun."""
    from dice_lsp.harness import bench

    problem = PROBLEMS / "kb_relu_scale"
    candidate = problem / "candidates" / "oob.cu"
    run(problem, candidate)  # builds (or reuses) the extension
    job = {**extension_job(candidate, candidate.read_text(), problem / "reference.py", gpu_arch() or ""), "trials": 1}
    build_dir = Path(job["build_dir"])
    result = bench._memcheck(KernelResult("forward", verified=True), "dice_lsp.harness.extension:run", job,
                             Limits(timeout=300.0), [problem, build_dir])
    # memcheck's own report, or the guard regions of the sanitized run (an overrun into the next tensor's)
    assert not result.verified and result.memcheck is not None, result
    assert result.memcheck.endswith("errors") or result.memcheck == "failed the checks", result
    assert result.failure and (result.failure.startswith("compute-sanitizer memcheck found")
                               or "out of the bounds" in result.failure), result.failure


def test_a_second_benchmark_of_the_same_extension_builds_nothing() -> None:
    """The build folder of a benchmarked extension is found again and left alone: the second benchmark's build
    compiles and links nothing (its library is the first one's), and ninja has no work left."""
    from torch.utils.cpp_extension import LIB_EXT

    problem = PROBLEMS / "kb_relu_scale"
    candidate = problem / "candidates" / "good.cu"
    run(problem, candidate)
    job = extension_job(candidate, candidate.read_text(), problem / "reference.py", gpu_arch() or "")
    build_dir, source = Path(job["build_dir"]), Path(job["source"])
    library = build_dir / f"{job['name']}{LIB_EXT}"
    before = (library.stat().st_mtime_ns, source.stat().st_mtime_ns, source.stat().st_ino)
    [kernel] = run(problem, candidate).kernels
    assert kernel.verified, kernel
    assert (library.stat().st_mtime_ns, source.stat().st_mtime_ns, source.stat().st_ino) == before
    plan = subprocess.run(["ninja", "-n", "-C", str(build_dir)], capture_output=True, text=True, check=True)
    assert "no work to do" in plan.stdout, plan.stdout


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
