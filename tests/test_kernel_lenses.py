"""Resource lenses: one per kernel definition line, however many template instances nvcc compiled from it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from dice_lsp.lsp.compile_checks import CompileChecks
from dice_lsp.toolchain.report import CheckReport, KernelResources, check_source, instance_name

TEMPLATE = """template <typename T, int B>
__global__ void scale(T* x, T s, int n) {
    __shared__ T tile[B];
    int i = blockIdx.x * B + threadIdx.x;
    if (i < n) { tile[threadIdx.x] = x[i] * s; __syncthreads(); x[i] = tile[threadIdx.x]; }
}
template __global__ void scale<float, 128>(float*, float, int);
template __global__ void scale<double, 256>(double*, double, int);
template __global__ void scale<int, 64>(int*, int, int);

__global__ void plain(float* x) { x[threadIdx.x] = 0; }
"""


def lenses_of(report: CheckReport) -> list[tuple[int, str, str | None]]:
    checks = CompileChecks(lambda uri, found: None)
    checks.reports["file:///k.cu"] = report
    return [(lens.range.start.line, lens.command.title, lens.command.tooltip)
            for lens in checks.lenses("file:///k.cu") if lens.command is not None]


@pytest.mark.parametrize(("demangled", "name"), [
    ("void ns::scale<float, 256>(float*, float)", "ns::scale<float, 256>"),
    ("plain(float*)", "plain"),
    ("void k<(int)256>(float*)", "k<(int)256>"),
    ("void k<std::pair<int, int> >(int)", "k<std::pair<int, int> >"),
])
def test_an_instance_is_named_by_its_template_arguments(demangled: str, name: str) -> None:
    assert instance_name(demangled) == name


def test_63_instances_on_one_line_are_one_lens_that_summarises_and_names_them() -> None:
    instances = [KernelResources(f"void k<{n}>(float*)", f"_Z1kILi{n}EEvPf", line=4, registers=16 + n % 7,
                                 shared_bytes=1024 * (n % 3), spill_stores=8 if n == 40 else 0)
                 for n in range(63)]
    report = CheckReport([], [*instances, KernelResources("plain(float*)", "_Z5plainPf", line=9, registers=8)], 1.0)
    [(line, title, tooltip), plain] = lenses_of(report)
    assert line == 4
    assert title == "63 instances · regs 16–22 · smem 0.0–2.0 KB · spills 0–8 · most spills: k<40>"
    assert tooltip is not None
    shown = tooltip.splitlines()
    assert len(shown) == 31 and shown[-1] == "and 33 more"
    assert shown[0] == "k<0>: regs 16 · smem 0.0 KB · spills 0"
    assert plain == (9, "regs 8 · smem 0.0 KB · spills 0", None)


def test_a_compiled_template_gets_one_lens_per_definition(tmp_path: Path) -> None:
    """Real nvcc: register counts are its choice, shared memory is the template arguments'."""
    [(line, title, tooltip), (plain_line, plain_title, _)] = lenses_of(check_source(TEMPLATE, tmp_path))
    assert line == 1 and re.fullmatch(r"3 instances · regs \d+(–\d+)? · smem 0\.2–2\.0 KB · spills 0( · most "
                                      r"regs: scale<\w+, \d+>)?", title), title
    assert tooltip is not None
    assert [row.split(":")[0] for row in tooltip.splitlines()] == [
        "scale<double, 256>", "scale<float, 128>", "scale<int, 64>"]
    assert plain_line == 10 and re.fullmatch(r"regs \d+ · smem 0\.0 KB · spills 0", plain_title), plain_title
