"""How optimize ranks its rewrites and what it offers: verified speedup first on a GPU, nvcc's resource
report without one (and then it says the result is unverified)."""

from __future__ import annotations

from dice_lsp.optimize.loop import OptimizeReport, Rewrite, ranked
from dice_lsp.toolchain.report import KernelResources


def rewrite(origin: str, compiled: bool = True, verified: bool = False, speedup: float | None = None,
            registers: int = 32, spills: int = 0) -> Rewrite:
    resources = KernelResources(origin, "_Z1kv", registers=registers, spill_stores=spills) if compiled else None
    return Rewrite(origin, f"// {origin}\n", compiled=compiled, verified=verified, speedup=speedup,
                   median_ms=1.0 / speedup if speedup else None, reference_ms=1.0 if speedup else None,
                   resources=resources)


def test_on_a_gpu_the_fastest_verified_rewrite_comes_first() -> None:
    found = [rewrite("unverified but fast", speedup=9.0), rewrite("slower", verified=True, speedup=1.3),
             rewrite("broken", compiled=False), rewrite("fastest", verified=True, speedup=2.5)]
    order = ranked(found, gpu=True)
    assert [r.origin for r in order] == ["fastest", "slower", "unverified but fast", "broken"]
    report = OptimizeReport("k", gpu=True, rewrites=order, generated=6)
    assert report.best is order[0] and (report.compiled, report.verified, report.faster) == (3, 2, 2)
    assert report.summary().startswith("k: 2.50× faster (1.0000 ms → 0.4000 ms, verified; fastest)")


def test_on_a_gpu_a_verified_rewrite_that_is_not_faster_is_not_offered() -> None:
    report = OptimizeReport("k", gpu=True, rewrites=ranked([rewrite("same", verified=True, speedup=0.97)], True))
    assert report.best is None and report.summary().startswith("k: no faster rewrite found")


def test_without_a_gpu_compiled_rewrites_rank_by_spills_then_registers_and_are_unverified() -> None:
    found = [rewrite("spills", spills=64, registers=16), rewrite("broken", compiled=False),
             rewrite("lean", registers=24), rewrite("heavy", registers=96)]
    order = ranked(found, gpu=False)
    assert [r.origin for r in order] == ["lean", "heavy", "spills", "broken"]
    report = OptimizeReport("k", gpu=False, rewrites=order, generated=4)
    assert report.best is order[0]
    assert "unverified" in report.summary() and "none verified (no GPU)" in report.summary()
    assert report.to_json()["best"]["origin"] == "lean"


def test_nothing_compiled_nothing_offered() -> None:
    report = OptimizeReport("k", gpu=False, rewrites=ranked([rewrite("a", compiled=False)], False))
    assert report.best is None and report.to_json()["best"] is None
