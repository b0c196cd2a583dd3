"""How optimize ranks its rewrites and what it offers: verified speedup first on a GPU, nvcc's resource
report without one (and then it says the result is unverified)."""

from __future__ import annotations

from pathlib import Path

import pytest

from dice_lsp.optimize import loop
from dice_lsp.optimize.candidates import (
    BodyCandidate,
    dropped_work,
    find_kernel,
    pointer_parameters,
    reachable,
    written,
)
from dice_lsp.optimize.loop import OptimizeReport, OptimizeRequest, Rewrite, optimize, ranked
from dice_lsp.toolchain.report import CheckReport, KernelResources


def rewrite(origin: str, compiled: bool = True, verified: bool = False, speedup: float | None = None,
            registers: int = 32, spills: int = 0, less_work: str | None = None) -> Rewrite:
    resources = KernelResources(origin, "_Z1kv", registers=registers, spill_stores=spills) if compiled else None
    return Rewrite(origin, f"// {origin}\n", compiled=compiled, verified=verified, speedup=speedup,
                   median_ms=1.0 / speedup if speedup else None, reference_ms=1.0 if speedup else None,
                   resources=resources, less_work=less_work)


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


def test_without_a_gpu_compiled_rewrites_rank_by_spills_then_registers_and_none_is_offered() -> None:
    found = [rewrite("spills", spills=64, registers=16), rewrite("broken", compiled=False),
             rewrite("lean", registers=24), rewrite("heavy", registers=96)]
    order = ranked(found, gpu=False)
    assert [r.origin for r in order] == ["lean", "heavy", "spills", "broken"]
    report = OptimizeReport("k", gpu=False, rewrites=order, generated=4)
    assert (report.best, report.draft) == (None, order[0])  # unverified: a draft to read, never an edit
    assert report.summary().startswith("k: nothing to apply: no rewrite could be verified (a GPU verifies")
    assert "none verified (no GPU)" in report.summary()
    assert (report.to_json()["best"], report.to_json()["text"], report.to_json()["draft"]["origin"]) == (
        None, None, "lean")
    untrusted = OptimizeReport("k", gpu=False, rewrites=order, generated=4, unverified="untrusted workspace")
    assert "a GPU verifies" not in untrusted.summary() and "none verified (untrusted workspace)" in untrusted.summary()


def test_nothing_compiled_nothing_offered() -> None:
    report = OptimizeReport("k", gpu=False, rewrites=ranked([rewrite("a", compiled=False)], False))
    assert report.best is None and report.to_json()["best"] is None


SAXPY = ("__global__ void saxpy(float* y, const float* x, float a, int n) {\n"
         "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n    if (i < n) y[i] = a * x[i] + y[i];\n}\n")


def test_a_body_that_does_less_than_the_original_is_named() -> None:
    kernel = find_kernel(SAXPY, "saxpy")
    pointers = pointer_parameters(SAXPY, kernel)
    original = SAXPY[kernel.body_open + 1:kernel.body_close]
    assert pointers == {"y", "x"} and written(original, pointers) == {"y"}
    returns = "does nothing (returns before any work)"
    assert dropped_work(original, "\n    return;\n", pointers) == returns
    assert dropped_work(original, "\n    return;\n    y[0] = a;\n", pointers) == returns
    assert dropped_work(original, "\n", pointers) == "does nothing (empty body)"
    reads = "\n    float v = a * x[0];\n"
    assert dropped_work(original, reads, pointers) == "never writes y, which the original writes"
    assert dropped_work(original, "\n    int i = threadIdx.x;\n    if (i >= n) return;\n    y[i] += a * x[i];\n",
                        pointers) is None  # a guard's return is conditional
    vectorized = "\n    float4* y4 = reinterpret_cast<float4*>(y);\n    y4[0] = {};\n"
    assert dropped_work(original, vectorized, pointers) is None  # written through an alias
    assert reachable("a = 1; // return;\n if (n) { return; } b = 2; return; c = 3;") == (
        "a = 1;  \n if (n) { return; } b = 2; ")
    assert written("atomicAdd(&y[0], 1.0f); z[i] == 2; x[f(i)] = 0;", {"x", "y", "z"}) == {"x", "y"}


def test_without_a_gpu_a_do_nothing_body_never_ranks_first_nor_is_offered() -> None:
    nothing = rewrite("return only", registers=2, less_work="does nothing (returns before any work)")
    order = ranked([nothing, rewrite("real", registers=40)], gpu=False)
    assert [r.origin for r in order] == ["real", "return only"]
    alone = OptimizeReport("k", gpu=False, rewrites=ranked([nothing], False), generated=1)
    assert alone.best is None and alone.to_json()["best"] is None and alone.to_json()["text"] is None
    assert alone.summary() == ("k: no faster rewrite found (1 distinct candidates of 1, 1 compiled, none verified "
                               "(no GPU), 1 doing less work than the original (never offered unverified))")
    gpu = ranked([rewrite("unverified nothing", less_work="does nothing (empty body)"), rewrite("unverified")], True)
    assert [r.origin for r in gpu] == ["unverified", "unverified nothing"]


def test_optimize_without_a_gpu_never_offers_a_do_nothing_body(monkeypatch: pytest.MonkeyPatch) -> None:
    """The loop end to end with a fake model and compiler: `return;` compiles with the fewest registers."""
    monkeypatch.setattr(loop, "gpu_arch", lambda: None)
    made = [BodyCandidate("\n    return;\n", "re-noise 100%"),
            BodyCandidate("\n    float v = a * x[0];\n", "signature")]

    def check(text: str) -> CheckReport:
        registers = 2 if "return;" in text else 4
        return CheckReport([], [KernelResources("saxpy(float*, const float*, float, int)", "_Z5saxpy", 0,
                                                registers)], 1.0)

    report = optimize(lambda job: made, OptimizeRequest(Path("k.cu"), SAXPY, "saxpy"), check)
    assert [r.less_work for r in report.rewrites] == ["does nothing (returns before any work)",
                                                      "never writes y, which the original writes"]
    assert report.best is None and report.to_json()["best"] is None and not report.gpu
    assert "none verified (no GPU)" in report.summary()
