"""Pass or fail of fills in executable CUDA-Infill holes, on the local GPU: verification only, no timing.

A fill passes when it is substantive, the filled file builds to a cubin for the local GPU, and the filled
kernel (the one its file's `dice:launch` spec names, which holds the hole) is verified against the same
kernel of the original file by the harness's checks (`harness.kernel_level.verify`: every verification
size, `TRIALS` trials each with fresh inputs, poisoned outputs, canaries around every buffer).

Two stages, made for about a thousand fills:

1. `prepare` builds the cubins with `workers` nvcc processes at once (`harness.build.build_cubin`, cached
   on disk by text, flags and nvcc): each original file once, each distinct filled text once. A fill that
   is not substantive, does not build, or no longer defines its kernel fails here.
2. `verify` runs the built pairs in child processes (`harness.isolate.run_isolated`), `CHUNK` pairs per
   child in one CUDA context, `CHILDREN` children at a time. The child appends one JSON line per pair to
   a progress file the parent reads afterwards, and a watchdog thread ends it when one pair runs past
   `ITEM_SECONDS`. A pair that faults (an illegal address leaves the context unusable: the child records
   it and stops) or hangs (the watchdog ends the child, or the parent kills it, with the pair unrecorded)
   fails, and the rest of its chunk runs again in a fresh child.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from dice_lsp.errors import DiceError
from dice_lsp.evals.score import is_substantive
from dice_lsp.evals.suite import SuiteFile, SuiteHole
from dice_lsp.harness.bench import gpu_arch
from dice_lsp.harness.build import Build, build_cubin
from dice_lsp.harness.isolate import run_isolated
from dice_lsp.harness.limits import Limits
from dice_lsp.harness.spec import find_specs, parse_spec
from dice_lsp.toolchain.flags import CompileFlags
from dice_lsp.toolchain.scratch import run_folder

LOG = logging.getLogger("dice_lsp.evals.execute")
CHUNK = 48  # pairs verified in one child (one CUDA context)
CHILDREN = 2  # children verifying at once
ITEM_SECONDS = 20.0  # one pair's verification, all sizes and trials
START_SECONDS = 120.0  # a fresh child: importing torch, creating the context
TRIALS = Limits.trials  # the harness's random-input trials per size
Item = tuple[SuiteFile, SuiteHole, str]
Job = dict[str, Any]  # {"spec": TOML text, "candidate": {cubin, symbol}, "reference": {cubin, symbol}}
ItemProgress = Callable[[int], object]  # told how many items are done so far


def gpu_available() -> bool:
    import torch

    return bool(torch.cuda.is_available())


def require_gpu() -> None:
    """The CLI's check before `--execute`."""
    if not gpu_available():
        raise DiceError("--execute needs a CUDA GPU (none found)")


def execute(items: list[Item], workers: int = 16, progress: ItemProgress | None = None) -> list[bool]:
    """Whether each fill passes (see the module's docstring); `progress(n)` after every n fills settled."""
    require_gpu()
    arch = gpu_arch()
    assert arch is not None  # a GPU is there
    jobs = prepare(items, arch, workers)
    if progress is not None:
        progress(sum(job is None for job in jobs))
    return verify(jobs, progress)


def launch_spec(file: SuiteFile, hole: SuiteHole) -> str:
    """The TOML text of the spec for the hole's kernel (the file's only spec when it names another)."""
    specs = find_specs(file.text)
    for spec, text in specs:
        if spec.kernel == hole.function:
            return text
    if len(specs) == 1:
        return specs[0][1]
    raise DiceError(f"{file.id}: no launch spec for {hole.function!r}, the kernel of hole {hole.id}")


def prepare(items: list[Item], arch: str, workers: int = 16) -> list[Job | None]:
    """A verification job per item, or None where the fill already failed (see the module's docstring)."""
    flags = CompileFlags(arch=arch)
    filled = [file.text[:hole.start] + fill + file.text[hole.end:] if is_substantive(fill) else None
              for file, hole, fill in items]
    sources = sorted({f.text for f, _, _ in items} | {text for text in filled if text is not None})
    with ThreadPoolExecutor(max(1, workers)) as pool:
        builds = dict(zip(sources, pool.map(lambda source: build_cubin(source, None, flags), sources), strict=True))
    jobs: list[Job | None] = []
    for (file, hole, _), text in zip(items, filled, strict=True):
        original = builds[file.text]
        if not original.ok:
            LOG.warning("%s: the original file does not build for %s; its fills fail", file.id, arch)
        jobs.append(_job(file, hole, builds[text], original) if text is not None and original.ok else None)
    return jobs


def _job(file: SuiteFile, hole: SuiteHole, build: Build, original: Build) -> Job | None:
    spec = launch_spec(file, hole)
    kernel = parse_spec(spec).kernel
    if not build.ok or build.cubin is None or original.cubin is None:
        return None
    try:
        candidate = {"cubin": str(build.cubin), "symbol": build.mangled(kernel)}
    except DiceError:
        return None  # the fill broke the kernel's definition
    return {"spec": spec, "candidate": candidate,
            "reference": {"cubin": str(original.cubin), "symbol": original.mangled(kernel)}}


def verify(jobs: list[Job | None], progress: ItemProgress | None = None) -> list[bool]:
    """Run the jobs in children, `CHUNK` to a child and `CHILDREN` at once; None is a failure."""
    passed = [False] * len(jobs)
    ready = {index: job for index, job in enumerate(jobs) if job is not None}
    pending = list(ready)
    chunks = [pending[at:at + CHUNK] for at in range(0, len(pending), CHUNK)]
    with ThreadPoolExecutor(CHILDREN) as pool:
        futures = [pool.submit(_run_chunk, [ready[i] for i in chunk]) for chunk in chunks]
        for chunk, future in zip(chunks, futures, strict=True):
            for index, verdict in zip(chunk, future.result(), strict=True):
                passed[index] = verdict
            if progress is not None:
                progress(len(chunk))
    return passed


def _run_chunk(jobs: list[Job]) -> list[bool]:
    """Verdicts for `jobs`, run in one child, then in fresh ones after each pair that ended a child."""
    verdicts: list[bool] = []
    while len(verdicts) < len(jobs):
        rest = jobs[len(verdicts):]
        recorded, stopped = _run_child(rest)
        verdicts += recorded
        if len(recorded) < len(rest) and not stopped:
            verdicts.append(False)  # the child ended while verifying this pair (it hung, or was killed)
    return verdicts


def _run_child(jobs: list[Job]) -> tuple[list[bool], bool]:
    """The verdicts one child recorded, in order, and whether it stopped itself after a fault (else, when
    some are missing, it ended on the first of those)."""
    cubins = {Path(job[who]["cubin"]).parent.parent for job in jobs for who in ("candidate", "reference")}
    with run_folder("verify") as folder:
        log = Path(folder) / "progress.jsonl"
        log.touch()
        payload = {"jobs": jobs, "progress": str(log), "trials": TRIALS, "item_seconds": ITEM_SECONDS}
        outcome = run_isolated("dice_lsp.evals.execute:verify_chunk", payload,
                               START_SECONDS + ITEM_SECONDS * len(jobs), Limits().memory_mb,
                               readable=sorted(cubins), writable=[Path(folder)])
        lines = [json.loads(line) for line in log.read_text().splitlines() if line.endswith("}")]
    if not any(line.get("ready") for line in lines):
        raise DiceError(f"the verification child did not start: {outcome.failure or 'no reason given'}")
    results = [line for line in lines if "index" in line]
    for line in results:
        if not line["passed"]:
            LOG.debug("fill failed verification: %s", line["detail"])
    stopped = any(line["stop"] for line in results)
    if len(results) < len(jobs):
        why = "a fault" if stopped else next((line["detail"] for line in lines if "ended" in line), outcome.failure)
        LOG.info("a verification child ended early (%s); the rest of its chunk runs again", why)
    return [bool(line["passed"]) for line in results], stopped


class _Log:
    """The progress file, written one flushed JSON line at a time (from two threads)."""

    def __init__(self, path: Path) -> None:
        self.handle = path.open("a", encoding="utf-8")
        self.lock = threading.Lock()

    def write(self, record: dict[str, Any]) -> None:
        with self.lock:
            self.handle.write(json.dumps(record) + "\n")
            self.handle.flush()


class _Watchdog(threading.Thread):
    """Ends the child when the pair being verified runs past its time (a kernel that never returns)."""

    def __init__(self, log: _Log, seconds: float) -> None:
        super().__init__(daemon=True)
        self.log, self.seconds = log, seconds
        self.deadline: float | None = None

    def run(self) -> None:
        while True:
            time.sleep(0.1)
            deadline = self.deadline
            if deadline is not None and time.monotonic() > deadline:
                self.log.write({"ended": True, "detail": f"timed out after {self.seconds:g} s"})
                os._exit(3)


def verify_chunk(payload: dict[str, Any]) -> dict[str, Any]:
    """The child's job: verify each pair of `jobs` in this process's context, recording each verdict;
    stops after a pair that left the context unusable."""
    import torch

    from dice_lsp.harness import kernel_level
    from dice_lsp.harness.cuda_driver import Driver

    log = _Log(Path(payload["progress"]))
    torch.empty(1, device="cuda")  # makes torch's context current for the driver calls
    driver = Driver()
    log.write({"ready": True})
    watchdog = _Watchdog(log, float(payload["item_seconds"]))
    watchdog.start()
    references: dict[tuple[str, str, str], kernel_level.Kernel] = {}
    for index, job in enumerate(payload["jobs"]):
        watchdog.deadline = time.monotonic() + watchdog.seconds
        try:
            spec = parse_spec(job["spec"])
            key = (job["spec"], job["reference"]["cubin"], job["reference"]["symbol"])
            if key not in references:
                references[key] = kernel_level.Kernel(driver, spec, **job["reference"])
            reference = references[key]
            candidate = kernel_level.Kernel(driver, spec, **job["candidate"])
            generator = torch.Generator(device="cuda").manual_seed(0)
            kernel_level.verify(driver, spec, candidate, reference, generator, int(payload["trials"]))
            passed, detail = True, ""
        except Exception as exc:  # the fill's failure: a wrong result, a fault, a torch error after one
            passed, detail = False, str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        watchdog.deadline = None
        stop = not passed and driver.lib.cuCtxSynchronize() != 0  # a fault: the context is unusable
        log.write({"index": index, "passed": passed, "detail": detail, "stop": stop})
        if stop:
            return {"verified": index + 1}
    return {"verified": len(payload["jobs"])}
