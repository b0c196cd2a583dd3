"""A candidate that refuses a shape the problem never uses, with an error of its own (a TORCH_CHECK on its sizes),
is limited, not wrong: it is verified on the problem's shapes and the refusal is reported. Wrong values, a
failure on the device or a changed input at any shape still reject it.

No GPU here: the harness's checks run on CPU tensors with Python stand-ins for the extension's `forward`, and the
benchmark's child processes are a fake runner that answers as the GPU host's would. tests/test_harness_gpu.py
runs a real extension that TORCH_CHECKs its shape."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch

from dice_lsp import cli
from dice_lsp.errors import DiceError
from dice_lsp.harness import bench
from dice_lsp.harness.bench import KernelResult, _result
from dice_lsp.harness.extension import _Checker, check_other_shapes, is_refusal
from dice_lsp.harness.isolate import Outcome
from dice_lsp.optimize.loop import OptimizeReport, Rewrite

REFUSAL = "cols must be a multiple of 4"
OLD_NS = 1_000_000_000 * 1_000_000_000  # 2001-09-09: a modification time no write made today can have


class SumRows(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.sum(dim=1)


def limited(x: torch.Tensor) -> torch.Tensor:
    """A kernel that only handles whole float4s, and says so (as TORCH_CHECK words it, with torch's own line)."""
    if x.shape[1] % 4:
        raise RuntimeError(f"{REFUSAL}\nException raised from forward at source.cu:41 (most recent call first):")
    return x.sum(dim=1)


def silent(x: torch.Tensor) -> torch.Tensor:
    """The same kernel without the check: it drops the last columns of a row that is not whole float4s."""
    return x[:, : x.shape[1] // 4 * 4].sum(dim=1)


def crashes(x: torch.Tensor) -> torch.Tensor:
    if x.shape[1] % 4:
        raise RuntimeError("CUDA error: misaligned address\nCompile with `TORCH_USE_CUDA_DSA` to enable "
                           "device-side assertions.")
    return x.sum(dim=1)


def zeroes_then_refuses(x: torch.Tensor) -> torch.Tensor:
    if x.shape[1] % 4:
        x.zero_()
        raise RuntimeError(REFUSAL)
    return x.sum(dim=1)


def checker(forward: Callable[..., Any]) -> _Checker:
    return _Checker(SumRows(), forward, [], torch.Generator().manual_seed(0), guard_outputs=False)


def inputs(rows: int, cols: int) -> list[Any]:
    return [torch.randn(rows, cols, generator=torch.Generator().manual_seed(rows * cols))]


def test_a_refused_shape_is_a_limitation_and_the_next_shape_is_verified() -> None:
    """(5, 9) is the problem's sizes halved plus one, (5, 16) its leading size alone."""
    shapes, limitations = check_other_shapes(checker(limited), "(8, 16)", iter([inputs(5, 9), inputs(5, 16)]))
    assert shapes == ["(8, 16)", "(5, 16)"]
    assert limitations == [f"refuses shape (5, 9): {REFUSAL}"]


def test_a_kernel_that_refuses_every_other_shape_is_verified_at_the_problem_s_only() -> None:
    shapes, limitations = check_other_shapes(checker(limited), "(8, 16)", iter([inputs(5, 9), inputs(5, 7)]))
    assert shapes == ["(8, 16)"]
    assert limitations == [f"refuses shape (5, 9): {REFUSAL}", f"refuses shape (5, 7): {REFUSAL}"]


def test_no_later_shape_is_made_once_one_passes() -> None:
    made: list[str] = []

    def others() -> Any:
        for shape in ((5, 16), (5, 9)):
            made.append(str(shape))
            yield inputs(*shape)

    assert check_other_shapes(checker(limited), "(8, 16)", others()) == (["(8, 16)", "(5, 16)"], [])
    assert made == ["(5, 16)"]


@pytest.mark.parametrize(("forward", "failure"), [
    (silent, "output 0: 5 of 5 elements differ from the reference"),
    (crashes, "the kernel failed: CUDA error: misaligned address (at=shape (5, 9))"),
    (zeroes_then_refuses, "the kernel modifies its input 0 (at=shape (5, 9))"),
])
def test_wrong_output_a_device_failure_or_a_changed_input_still_reject(forward: Callable[..., Any],
                                                                      failure: str) -> None:
    with pytest.raises(DiceError) as error:
        check_other_shapes(checker(forward), "(8, 16)", iter([inputs(5, 9), inputs(5, 16)]))
    assert str(error.value).startswith(failure), error.value


def test_at_the_problem_s_own_shape_a_refusal_is_a_failure() -> None:
    with pytest.raises(DiceError) as error:
        checker(limited).check(inputs(8, 18), "trial 0")
    assert str(error.value) == f"the kernel failed: {REFUSAL} (at=trial 0)"


def test_what_counts_as_a_refusal() -> None:
    assert is_refusal(RuntimeError(REFUSAL)) and is_refusal(ValueError("x must be 2-D"))
    assert is_refusal(IndexError("dim 2 out of range")) and is_refusal(TypeError("expected a float tensor"))
    assert not is_refusal(RuntimeError("CUDA error: an illegal memory access was encountered"))
    assert not is_refusal(RuntimeError("CUDA driver error: invalid argument"))
    assert not is_refusal(RuntimeError("CUBLAS_STATUS_EXECUTION_FAILED when calling `cublasSgemm`"))
    assert not is_refusal(torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB"))
    assert not is_refusal(ZeroDivisionError("division by zero"))


ANSWER = {"verified": True, "max_abs_err": 1e-6, "max_rel_err": 1e-5, "flags": [], "speedup": 4.0,
          "shapes": ["(2048, 16384)", "(1025, 16384)"],
          "limitations": [f"refuses shape (1025, 8193): {REFUSAL}"],
          "candidate": {"median_ms": 0.05, "spread_pct": 1.0}, "reference": {"median_ms": 0.2}}


def test_the_result_keeps_the_limitations_and_the_speedup() -> None:
    result = _result(KernelResult("forward"), ANSWER, None, True)
    assert result.verified and result.speedup_vs_ref == 4.0 and result.failure is None
    assert result.limitations == [f"refuses shape (1025, 8193): {REFUSAL}"]
    assert KernelResult(**result.to_json()) == result  # what a team server sends comes back whole
    older = {k: v for k, v in ANSWER.items() if k != "limitations"}  # a child without limitations
    assert _result(KernelResult("forward"), older, None, True).limitations == []


@pytest.fixture
def fake_gpu_host(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, dict[str, Any]]]:
    """`bench` as on a GPU host whose children answer at once: the build succeeds, the run gives ANSWER. The
    jobs the children were given are recorded, with the build folder's source file as the build found it."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setattr(bench, "gpu_arch", lambda: "sm_90")
    which = shutil.which
    monkeypatch.setattr(shutil, "which", lambda name: None if name == "compute-sanitizer" else which(name))
    jobs: list[tuple[str, dict[str, Any]]] = []

    def run_isolated(call: str, payload: dict[str, Any], *args: object, **kwargs: object) -> Outcome:
        source = os.stat(payload["source"])
        jobs.append((call, {**payload, "source_stat": (source.st_mtime_ns, source.st_ino)}))
        return Outcome({"built": payload["name"]} if call.endswith(":build") else dict(ANSWER))

    monkeypatch.setattr(bench, "run_isolated", run_isolated)
    return jobs


@pytest.fixture
def sum_dim(tmp_path: Path) -> Path:
    folder = tmp_path / "problem"
    folder.mkdir()
    (folder / "sum_dim.py").write_text("import torch\n\ndef get_inputs():\n    return [torch.randn(2048, 16384)]\n")
    (folder / "sum_dim.cu").write_text("#include <torch/extension.h>\n// forward(x): x.sum(dim=1)\n")
    return folder / "sum_dim.cu"


def test_bench_reports_the_limitation_in_json_and_in_words(fake_gpu_host: list[Any], sum_dim: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["bench", str(sum_dim), "--json"]) == 0
    [kernel] = json.loads(capsys.readouterr().out)["kernels"]
    assert kernel["verified"] and kernel["speedup_vs_ref"] == 4.0
    assert kernel["limitations"] == [f"refuses shape (1025, 8193): {REFUSAL}"]
    assert kernel["shapes"] == ["(2048, 16384)", "(1025, 16384)"]
    assert cli.main(["bench", str(sum_dim)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[1].split()[0] == "forward" and lines[1].endswith("verified")
    assert lines[2:] == [f"{'':24} shapes: (2048, 16384) | (1025, 16384)",
                         f"{'':24} limited: refuses shape (1025, 8193): {REFUSAL}",
                         f"{'':24} memcheck: skipped: compute-sanitizer is not on PATH"]


def test_a_second_bench_finds_the_same_build_folder_untouched(fake_gpu_host: list[Any], sum_dim: Path) -> None:
    """The build job the second time is the first one's, and its source file was not written again."""
    bench.bench_file(sum_dim)
    [(_, first)] = [(call, job) for call, job in fake_gpu_host if call.endswith(":build")]
    os.utime(first["source"], ns=(OLD_NS, OLD_NS))  # any write from now on would give it today's time
    bench.bench_file(sum_dim)
    [_, second] = [job for call, job in fake_gpu_host if call.endswith(":build")]
    assert second == {**first, "source_stat": (OLD_NS, first["source_stat"][1])}
    assert first["cuda_flags"] == ["-O3", "-gencode=arch=compute_90,code=sm_90"]
    assert Path(first["source"]).read_text() == sum_dim.read_text()


def test_the_optimize_summary_names_the_best_rewrite_s_limitation() -> None:
    best = Rewrite("re-noise 0.5", "x", compiled=True, verified=True, speedup=2.0, median_ms=0.5, reference_ms=1.0,
                   limitations=[f"refuses shape (1025, 8193): {REFUSAL}"])
    report = OptimizeReport("sum_dim", gpu=True, rewrites=[best], generated=1)
    assert report.summary() == ("sum_dim: 2.00× faster (1.0000 ms → 0.5000 ms, verified; limited: refuses shape "
                                f"(1025, 8193): {REFUSAL}; re-noise 0.5); 1 distinct candidates of 1, 1 compiled, "
                                "1 verified, 1 faster")
    assert Rewrite.from_json(best.to_json(), "x") == best
