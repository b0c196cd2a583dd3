"""The sandbox's limits beyond one process's rlimits: no user namespace inside (as root too), what a harness child
writes to disk and keeps in memory as files, and how many confined compiles run at once. Real bubblewrap."""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import tempfile
import threading
from pathlib import Path

import pytest

from dice_lsp import sandbox
from dice_lsp.harness.isolate import run_isolated
from dice_lsp.harness.limits import Limits
from dice_lsp.lifetime import Stopped
from dice_lsp.toolchain.nvcc import find_nvcc

TESTS = Path(__file__).resolve().parent
JOBS = "tests.limits_jobs"
CLONE_NEWUSER = 0x10000000
UNSHARE = ("import ctypes, sys; libc = ctypes.CDLL(None, use_errno=True); "
           f"made = libc.unshare({CLONE_NEWUSER}); print(made, ctypes.get_errno()); sys.exit(made != 0)")


def written(output: str) -> int:
    """The last `wrote N MiB` a job said."""
    said = re.findall(r"wrote (\d+) MiB", output)
    return int(said[-1]) if said else 0


def test_no_user_namespace_can_be_made_inside_the_sandbox(tmp_path: Path) -> None:
    """As root, bubblewrap's --disable-userns was not passed (it refuses --userns-block-fd): `unshare -U` worked."""
    with sandbox.confined(find_nvcc()) as confined, sandbox.owning(tmp_path):
        print(f"server as root: {confined.as_root}")
        for argv in (["unshare", "-U", "true"], ["unshare", "-Ur", "id"], ["python3", "-c", UNSHARE]):
            done = sandbox.run_tool(argv, tmp_path, 30)
            print(argv[:2], done.returncode, done.stdout.strip(), done.stderr.strip())
            assert done.returncode != 0, (argv, done.stdout, done.stderr)
        said = sandbox.run_tool(["python3", "-c", UNSHARE], tmp_path, 30).stdout.split()
        assert said[0] == "-1" and int(said[1]) in (28, 1), said  # ENOSPC (no namespace left) or EPERM
        assert sandbox.run_tool(["id", "-u"], tmp_path, 30).stdout.strip() == str(sandbox.SANDBOX_ID)


def test_bubblewrap_forbids_them_on_the_ordinary_users_path() -> None:
    nvcc = find_nvcc()
    plain = sandbox.Sandbox("bwrap", "prlimit", None, nvcc, ())
    assert "--disable-userns" in plain.command(["true"], Path("/"), sandbox.Jail(sandbox.compile_quota(5)), {}, 3, None)


@pytest.mark.parametrize("confined", [False, True], ids=["cli", "sandbox"])
def test_a_child_that_fills_its_folders_is_killed_at_the_disk_limit(confined: bool) -> None:
    """A child (a client's host code) wrote 2.4 GB into its scratch folder: RLIMIT_FSIZE caps one file, not many."""
    with (sandbox.confined(find_nvcc()) if confined else contextlib.nullcontext()), sandbox.owning(TESTS):
        outcome = run_isolated(f"{JOBS}:write_files", {"mib": 2000}, timeout=120, memory_mb=2048, readable=[TESTS],
                               disk_mb=300)
    print(f"confined={confined}: wrote {written(outcome.output)} MiB; {outcome.failure}")
    assert outcome.failure is not None and re.fullmatch(
        r"wrote \d+ MiB to disk, over the 300 MiB limit \(killed\)", outcome.failure), outcome.failure
    assert outcome.value is None, "it did not run to its end"


def test_a_file_deleted_but_kept_open_counts_and_so_does_a_burst_before_exit() -> None:
    with sandbox.confined(find_nvcc()), sandbox.owning(TESTS):
        hidden = run_isolated(f"{JOBS}:write_deleted_file", {"mib": 2000}, timeout=120, memory_mb=2048,
                              readable=[TESTS], disk_mb=300)
        burst = run_isolated(f"{JOBS}:write_files", {"mib": 400}, timeout=120, memory_mb=2048, readable=[TESTS],
                             disk_mb=300)
    print(f"deleted: wrote {written(hidden.output)} MiB; {hidden.failure}")
    print(f"burst: wrote {written(burst.output)} MiB; {burst.failure}")
    assert hidden.failure is not None and "over the 300 MiB limit (killed)" in hidden.failure, hidden.failure
    assert hidden.value is None, "it did not run to its end"
    assert burst.failure is not None and "over the 300 MiB limit" in burst.failure, "an exit does not hide it"


def test_the_default_disk_limit() -> None:
    assert Limits().disk_mb == 1024
    quiet = run_isolated("tests.harness_jobs:echo", {"n": 1}, timeout=60, memory_mb=2048)
    assert quiet.ok, "a job that writes little is fine"


def test_files_in_the_private_tmp_count_as_memory() -> None:
    """/tmp in the sandbox is a tmpfs (memory): 3.6 GB were written there under a 1 GiB limit."""
    with sandbox.confined(find_nvcc()), sandbox.owning(TESTS):
        outcome = run_isolated(f"{JOBS}:write_files", {"mib": 1500, "folder": "/tmp", "pause": 0.3}, timeout=120,
                               memory_mb=400, readable=[TESTS])
    print(f"/tmp: wrote {written(outcome.output)} MiB; {outcome.failure}")
    assert outcome.failure is not None and "over the 400 MiB limit (killed)" in outcome.failure, outcome.failure
    assert "MiB of it in files" in outcome.failure
    assert outcome.value is None, "it did not run to its end"


def test_the_private_tmp_is_never_larger_than_the_memory_limit(tmp_path: Path) -> None:
    with sandbox.confined(find_nvcc()), sandbox.owning(TESTS), sandbox.owning(tmp_path):
        small = run_isolated(f"{JOBS}:tmp_size", {}, timeout=60, memory_mb=300, readable=[TESTS])
        large = run_isolated(f"{JOBS}:tmp_size", {}, timeout=60, memory_mb=Limits.memory_mb, readable=[TESTS])
        compile_ = sandbox.run_tool(["df", "-m", "/tmp"], tmp_path, 30)
    assert small.value == {"mib": 300} and large.value == {"mib": sandbox.child_quota(60).tmp_mb}
    assert compile_.stdout.splitlines()[1].split()[1] == str(sandbox.COMPILE_TMP_MB), compile_.stdout


def test_memfds_count_as_memory() -> None:
    with sandbox.confined(find_nvcc()), sandbox.owning(TESTS):
        outcome = run_isolated(f"{JOBS}:write_memfds", {"mib": 1500, "pause": 0.2}, timeout=120, memory_mb=400,
                               readable=[TESTS])
    print(f"memfd: wrote {written(outcome.output)} MiB; {outcome.failure}")
    assert outcome.failure is not None and "over the 400 MiB limit (killed)" in outcome.failure, outcome.failure
    assert outcome.value is None, "it did not run to its end"


def test_the_number_of_concurrent_compiles_is_sized_from_memory() -> None:
    quota = sandbox.compile_quota(60)
    each = (quota.address_space_mb or 0) + quota.tmp_mb
    assert each == 5120
    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    assert sandbox.compile_slots(quota) == max(1, memory // 2 // (each << 20)) or sandbox._memory_bytes() < memory
    print(f"{memory >> 20} MiB of memory: {sandbox.compile_slots(quota)} compiles at once")


def test_concurrent_confined_compiles_never_exceed_the_bound(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each compile may take 4 GiB of address space: 4 concurrent `#include "/dev/zero"` checks took 8 GiB."""
    bound = 2
    monkeypatch.setattr(sandbox, "compile_slots", lambda quota: bound)
    (slots := tmp_path / "slots").mkdir(mode=0o700)
    monkeypatch.setattr(sandbox, "_slots_folder", lambda: slots)  # not those of other dice-lsp processes here
    spans: list[tuple[float, float]] = []
    errors: list[BaseException] = []

    def compile_(n: int) -> None:
        folder = tmp_path / str(n)
        folder.mkdir()
        try:
            with sandbox.owning(folder):
                done = sandbox.run_tool(["sh", "-c", "date +%s.%N; sleep 1; date +%s.%N"], folder, 60)
            start, end = (float(t) for t in done.stdout.split())
            spans.append((start, end))
        except BaseException as exc:
            errors.append(exc)

    with sandbox.confined(find_nvcc()):
        threads = [threading.Thread(target=compile_, args=(n,)) for n in range(6)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    assert not errors, errors
    overlap = max(sum(1 for s, e in spans if s <= t < e) for t, _ in spans)
    print(f"6 compiles, at most {overlap} at once")
    assert len(spans) == 6 and overlap <= bound
    assert overlap == bound, "up to the bound they do run together"


def test_a_slots_folder_another_user_could_hold_is_not_used(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tempfile, "gettempdir", lambda: str(tmp_path))
    mine = sandbox._slots_folder()
    assert mine == tmp_path / f"dice-compile-slots-uid{os.geteuid()}" and (mine.stat().st_mode & 0o777) == 0o700
    mine.rmdir()
    mine.mkdir(mode=0o777)
    mine.chmod(0o777)  # as one another user made: anyone may lock its files
    assert sandbox._slots_folder() != mine


def test_a_compile_waiting_for_a_slot_times_out_or_is_cancelled(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sandbox, "compile_slots", lambda quota: 1)
    (slots := tmp_path / "slots").mkdir(mode=0o700)
    monkeypatch.setattr(sandbox, "_slots_folder", lambda: slots)
    (scratch := tmp_path / "scratch").mkdir()
    with sandbox.confined(find_nvcc()), sandbox.owning(scratch):
        holder = threading.Thread(target=sandbox.run_tool, args=(["sleep", "3"], scratch, 30))
        holder.start()
        try:
            threading.Event().wait(0.5)
            with pytest.raises(subprocess.TimeoutExpired):
                sandbox.run_tool(["true"], scratch, 1)
            cancel = threading.Event()
            cancel.set()
            with pytest.raises(Stopped):
                sandbox.run_tool(["true"], scratch, 30, cancel=cancel)
        finally:
            holder.join()
        assert sandbox.run_tool(["true"], scratch, 30).returncode == 0, "free again"

