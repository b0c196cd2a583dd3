"""The harness's child processes: a hanging, crashing or memory-hungry job is killed and reported, and the
caller carries on."""

from __future__ import annotations

import os
from pathlib import Path

from dice_lsp.harness.isolate import run_isolated
from dice_lsp.toolchain.scratch import PREFIX

JOBS = "tests.harness_jobs"


def test_a_result_comes_back_and_printed_output_stays_out_of_it() -> None:
    outcome = run_isolated(f"{JOBS}:echo", {"n": 3}, timeout=60, memory_mb=2048)
    assert outcome.ok and outcome.value == {"got": {"n": 3}}
    assert "kernel printf" in outcome.output


def test_a_hanging_job_is_killed_at_the_timeout() -> None:
    outcome = run_isolated(f"{JOBS}:hang", {}, timeout=2, memory_mb=2048)
    assert not outcome.ok and outcome.failure == "timed out after 2 s (killed)"
    assert 2 <= outcome.seconds < 20


def test_a_crash_is_reported_by_signal() -> None:
    outcome = run_isolated(f"{JOBS}:segfault", {}, timeout=60, memory_mb=2048)
    assert outcome.failure == "the child process crashed (SIGSEGV)"


def test_memory_over_the_limit_is_killed() -> None:
    outcome = run_isolated(f"{JOBS}:hog_memory", {"mib": 1500}, timeout=60, memory_mb=400)
    assert outcome.failure is not None and "over the 400 MiB limit (killed)" in outcome.failure
    assert outcome.seconds < 30, "killed while growing, not after the job's sleep"


def test_expected_and_unexpected_failures_are_one_line() -> None:
    assert run_isolated(f"{JOBS}:wrong_kernel", {}, 60, 2048).failure == (
        "output 'y' differs from the reference: max abs err 3.2")
    unexpected = run_isolated(f"{JOBS}:raises", {"zero": 0}, 60, 2048)
    assert unexpected.failure == "ZeroDivisionError: integer division or modulo by zero"
    assert "Traceback" in unexpected.output


def test_nothing_is_left_running() -> None:
    run_isolated(f"{JOBS}:hang", {}, timeout=1, memory_mb=2048)
    mine = os.getpgrp()
    # this process's jobs only (their scratch folders carry its pid): other test runs on the machine have their own
    ours = f"{PREFIX}child-{os.getpid()}-".encode()
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                cmdline = Path(f"/proc/{entry.name}/cmdline").read_bytes()
            except OSError:
                continue
            assert not (b"dice_lsp.harness.child" in cmdline and ours in cmdline
                        and os.getpgid(int(entry.name)) != mine), "a killed job's process survived"
