"""CUDA-Infill execution: fills of a saxpy kernel built to cubins here (nvcc, sm_90), verified on a GPU.

The CPU tests stop before any launch: the builds and jobs `prepare` makes, and how `verify` recovers from
a child that ends mid-chunk (with the child replaced by a script). The `gpu` tests launch for real.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from dice_lsp.errors import DiceError
from dice_lsp.evals import execute
from dice_lsp.evals.suite import SuiteFile, SuiteHole
from dice_lsp.harness.isolate import Outcome

TEXT = """#include <cuda_runtime.h>

/* dice:launch
kernel = "saxpy"
sizes = { n = 1048576 }
grid = ["cdiv(n, 256)"]
block = [256]
args = [
  { name = "y", role = "inout", dtype = "float32", shape = ["n"] },
  { name = "x", role = "in", dtype = "float32", shape = ["n"] },
  { name = "a", role = "scalar", dtype = "float32", value = "2.5" },
  { name = "n", role = "scalar", dtype = "int32", value = "n" },
]
*/
__global__ void saxpy(float* y, const float* x, float a, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        y[i] = a * x[i] + y[i];
    }
}
"""
TRUTH = "y[i] = a * x[i] + y[i];"
FILE = SuiteFile("demo/0000", "demo", "saxpy.cu", "MIT", TEXT, True, launch=True, origin="demo:saxpy.cu:saxpy")
START = TEXT.index(TRUTH)
HOLE = SuiteHole("line/000000", "line", FILE.id, START, START + len(TRUTH), "saxpy", False, executable=True)
WRONG = "y[i] = a * x[i] - y[i];"
COMMENT = "// y = a x + y"
UNDEFINED = "y[i] = a * z[i] + y[i];"
FAULT = "y[i + (1 << 30)] = a * x[i] + y[i];"  # far outside any allocation: an illegal address
PAST_END = "y[i + 1] = a * x[i + 1] + y[i + 1];"  # one element past the end, into the canaries


@pytest.fixture
def fresh_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    return tmp_path


def test_no_gpu_is_one_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(execute, "gpu_available", lambda: False)
    with pytest.raises(DiceError, match=r"^--execute needs a CUDA GPU \(none found\)$"):
        execute.execute([(FILE, HOLE, TRUTH)])


@pytest.mark.usefixtures("fresh_cache")
def test_prepare_builds_cubins_and_fails_fills_that_cannot_run() -> None:
    jobs = execute.prepare([(FILE, HOLE, TRUTH), (FILE, HOLE, COMMENT), (FILE, HOLE, UNDEFINED),
                            (FILE, HOLE, WRONG), (FILE, HOLE, "")], "sm_90", workers=2)
    truth, comment, undefined, wrong, empty = jobs
    assert (comment, undefined, empty) == (None, None, None)
    assert truth is not None and wrong is not None
    assert truth["spec"] == TEXT[TEXT.index("dice:launch") + len("dice:launch"):TEXT.index("*/")]
    assert truth["candidate"] == truth["reference"] == wrong["reference"]  # the original was built once
    assert wrong["candidate"]["cubin"] != wrong["reference"]["cubin"]
    for job in (truth, wrong):
        assert job["candidate"]["symbol"] == "_Z5saxpyPfPKffi"
        assert Path(job["candidate"]["cubin"]).read_bytes()[:4] == b"\x7fELF"
    json.dumps(jobs)  # what the child is sent


def test_a_hole_whose_kernel_has_no_spec_is_refused() -> None:
    block = TEXT[TEXT.index("/* dice:launch"):TEXT.index("__global__")]
    text = TEXT.replace('kernel = "saxpy"', 'kernel = "other"') + block.replace('"saxpy"', '"third"')
    two = SuiteFile("demo/0001", "demo", "two.cu", "MIT", text, True, launch=True)
    with pytest.raises(DiceError, match=r"^demo/0001: no launch spec for 'saxpy', the kernel of hole line/000000$"):
        execute.launch_spec(two, HOLE)
    assert execute.launch_spec(FILE, HOLE) == block[len("/* dice:launch"):-len("*/\n")]


def _scripted_child(script: dict[int, list[dict[str, Any]]], calls: list[list[int]]) -> Any:
    """A stand-in for `run_isolated`: the child writes each job's scripted lines (by the job's tag, a pass
    by default); it dies on an `ended` line (that job unrecorded) and stops after a `stop` one."""

    def run(call: str, payload: dict[str, Any], *_args: Any, **_kwargs: Any) -> Outcome:
        assert call == "dice_lsp.evals.execute:verify_chunk"
        tags = [job["tag"] for job in payload["jobs"]]
        calls.append(tags)
        with Path(payload["progress"]).open("a") as log:
            log.write(json.dumps({"ready": True}) + "\n")
            for index, tag in enumerate(tags):
                lines = script.get(tag, [{"passed": True, "detail": ""}])
                for line in lines:
                    if "ended" in line:
                        log.write(json.dumps(line) + "\n")
                        return Outcome(None, "the child process exited with code 3")
                    log.write(json.dumps({"index": index, "stop": False, **line}) + "\n")
                    if line.get("stop"):
                        return Outcome({"verified": index + 1})
        return Outcome({"verified": len(tags)})

    return run


def _jobs(count: int) -> list[dict[str, Any]]:
    return [{"tag": tag, "spec": "", "candidate": {"cubin": f"/b/{tag}/c"}, "reference": {"cubin": "/b/r/c"}}
            for tag in range(count)]


def test_a_fill_that_ends_its_child_fails_and_the_rest_of_its_chunk_runs_again(
        monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[list[int]] = []
    script = {1: [{"passed": False, "detail": "wrong"}], 2: [{"ended": True, "detail": "timed out"}],
              4: [{"passed": False, "detail": "illegal address", "stop": True}]}
    monkeypatch.setattr(execute, "run_isolated", _scripted_child(script, calls))
    monkeypatch.setattr(execute, "CHUNK", 7)
    settled: list[int] = []
    jobs: list[dict[str, Any] | None] = [*_jobs(6)]
    jobs.insert(3, None)  # failed before launch
    verdicts = execute.verify(jobs, settled.append)
    assert verdicts == [True, False, False, False, True, False, True]
    assert calls == [[0, 1, 2, 3, 4, 5], [3, 4, 5], [5]]
    assert settled == [6]


def test_a_child_that_never_starts_is_an_error_not_failed_fills(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(execute, "run_isolated", lambda *_a, **_k: Outcome(None, "the child process crashed"))
    with pytest.raises(DiceError, match="did not start: the child process crashed"):
        execute.verify([*_jobs(2)])


@pytest.mark.gpu
@pytest.mark.usefixtures("fresh_cache")
def test_fills_pass_only_when_verified_and_a_fault_spares_the_others() -> None:
    fills = [TRUTH, FAULT, WRONG, TRUTH, COMMENT, UNDEFINED, PAST_END, "y[i] = y[i] + x[i] * a;"]
    settled: list[int] = []
    verdicts = execute.execute([(FILE, HOLE, fill) for fill in fills], workers=2, progress=settled.append)
    assert verdicts == [True, False, False, True, False, False, False, True]
    assert sum(settled) == len(fills)


@pytest.mark.gpu
@pytest.mark.usefixtures("fresh_cache")
def test_a_kernel_that_never_returns_fails_on_the_watchdog(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(execute, "ITEM_SECONDS", 5.0)
    hang = "volatile float* v = y; while (true) { v[i] += 1.0f; }"
    assert execute.execute([(FILE, HOLE, hang), (FILE, HOLE, TRUTH)], workers=2) == [False, True]
