"""Compilers outside the team server's sandbox (the editor, the CLI) have the sandbox's compile limits too: an
address space of COMPILE_ADDRESS_SPACE_MB and a largest file. `#include "/dev/zero"` ends in an error within
seconds instead of growing nvcc's preprocessor to all of the machine's memory (it reached 8 GiB under a 12 GiB
guard before, in ~22 s, and would have gone on). The real nvcc and the real clang.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from dice_lsp import sandbox
from dice_lsp.errors import DiceError
from dice_lsp.sandbox import COMPILE_ADDRESS_SPACE_MB, Jail, child_quota, compile_quota, run_tool, spawn

ROOT = Path(__file__).resolve().parents[1]
MIB = 1 << 20
GUARD = 3 * COMPILE_ADDRESS_SPACE_MB * MIB  # the address space of the process under test: should the limit fail,
# a compile of /dev/zero stops there instead of taking the machine (without a limit it has no end)
LIMITS = "import resource; print(*(resource.getrlimit(r)[0] for r in (resource.RLIMIT_AS, resource.RLIMIT_FSIZE)))"
ZERO = '#include "/dev/zero"\n__global__ void k(float* x) { x[threadIdx.x] = 1.0f; }\n'


def limits(stdout: str) -> tuple[int, int]:
    address_space, file_size = (int(v) for v in stdout.split())
    return address_space, file_size


def test_an_unconfined_compile_has_the_sandboxs_address_space_and_file_size_limits(tmp_path: Path) -> None:
    assert sandbox.mode() == "off"
    proc = run_tool([sys.executable, "-c", LIMITS], tmp_path, 60)
    assert proc.returncode == 0, proc.stderr
    assert limits(proc.stdout) == (COMPILE_ADDRESS_SPACE_MB * MIB, compile_quota(60).file_mb * MIB)


def test_the_limits_hold_without_prlimit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sandbox, "_prlimit", lambda: None)
    proc = run_tool([sys.executable, "-c", LIMITS], tmp_path, 60)
    assert proc.returncode == 0, proc.stderr
    assert limits(proc.stdout) == (COMPILE_ADDRESS_SPACE_MB * MIB, compile_quota(60).file_mb * MIB)


def test_a_lower_limit_of_the_server_is_kept(tmp_path: Path) -> None:
    """A limit the user gave dice-lsp (`ulimit -f`) is one its compilers may not raise: kept, and they run."""
    lower = 512 * MIB
    script = textwrap.dedent(f"""
        import resource, sys
        from pathlib import Path
        resource.setrlimit(resource.RLIMIT_FSIZE, ({lower}, {lower}))
        from dice_lsp.sandbox import run_tool
        proc = run_tool([sys.executable, "-c", {LIMITS!r}], Path.cwd(), 60)
        print(proc.returncode, proc.stdout.strip(), proc.stderr.strip()[-300:])
    """)
    done = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.stdout.split() == ["0", str(COMPILE_ADDRESS_SPACE_MB * MIB), str(lower)], done.stdout + done.stderr


def test_a_compiler_cannot_write_a_file_past_the_limit(tmp_path: Path) -> None:
    big = compile_quota(60).file_mb * MIB + 1
    proc = run_tool([sys.executable, "-c", f"f = open('big', 'wb'); f.seek({big - 1}); f.write(b'x'); f.close()"],
                    tmp_path, 60)
    assert proc.returncode != 0 and "File too large" in proc.stderr
    assert (tmp_path / "big").stat().st_size < big


def test_a_harness_child_keeps_its_virtual_reservations(tmp_path: Path) -> None:
    """A CUDA program reserves far more address space than it uses: harness children are watched by resident
    memory (`harness.isolate`), not limited here."""
    out = tmp_path / "limits.txt"
    with out.open("w") as output:
        child = spawn([sys.executable, "-c", LIMITS], tmp_path, Jail(child_quota(60), (tmp_path,)), output, output)
        child.popen.wait(60)
    assert limits(out.read_text())[0] == resource.getrlimit(resource.RLIMIT_AS)[0]


def guarded(script: str) -> dict[str, Any]:
    """Run `script` (Python that prints one JSON line) in a process whose address space is `GUARD`, and read
    what it printed: the peak resident memory of its compilers is its children's peak."""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(ROOT)},
                          preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_AS, (GUARD, GUARD)))
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def test_nvcc_on_an_include_of_dev_zero_ends_in_an_out_of_memory_error() -> None:
    from dice_lsp.toolchain.nvcc import find_nvcc

    try:
        find_nvcc()
    except DiceError as exc:
        pytest.skip(f"no nvcc here ({exc})")
    found = guarded(textwrap.dedent(f"""
        import json, resource, time
        from dice_lsp.toolchain.nvcc import compile_source
        started = time.monotonic()
        result = compile_source({ZERO!r}, timeout=120)
        print(json.dumps({{"ok": result.ok, "output": result.output, "transient": result.transient,
                          "seconds": time.monotonic() - started,
                          "peak": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024}}))
    """))
    assert not found["ok"] and not found["transient"] and "timed out" not in found["output"]
    assert "memory" in found["output"], found["output"]
    assert found["peak"] < COMPILE_ADDRESS_SPACE_MB * MIB, f"nvcc grew to {found['peak'] >> 20} MiB"


def test_clangs_check_of_an_include_of_dev_zero_stays_under_the_memory_limit() -> None:
    """clang reads a character device as empty where its size says 0 (clang 14), or fails within the limit:
    either way the check ends at once, with a verdict or none, and no clang run grows past the limit."""
    from dice_lsp.toolchain.clang import clang_judge
    from dice_lsp.toolchain.flags import CompileFlags

    base = "#include <cstdio>\n" + ZERO.replace("{ ", '{\n#include "/dev/zero"\n  ')
    judge = clang_judge(base, None, CompileFlags(), patient=True)
    if judge is None or judge.front is None:
        reason = "no clang that reads the CUDA headers (apt-get install clang)"
        if os.environ.get("CI"):
            pytest.fail(reason)
        pytest.skip(reason)
    found = guarded(textwrap.dedent(f"""
        import json, resource, time
        from dice_lsp.toolchain.clang import clang_judge
        from dice_lsp.toolchain.flags import CompileFlags
        base = {base!r}
        started = time.monotonic()
        judge = clang_judge(base, None, CompileFlags(), patient=True)
        judge.open(wait=60)
        verdict = judge(base.replace("1.0f", "2.0f"))
        print(json.dumps({{"verdict": verdict, "seconds": time.monotonic() - started,
                          "peak": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024}}))
    """))
    assert found["verdict"] in (True, None)
    assert found["peak"] < COMPILE_ADDRESS_SPACE_MB * MIB, f"clang grew to {found['peak'] >> 20} MiB"
