"""No shell ever sees user text: nvcc runs its sub-steps through one, so flags and paths are checked or renamed.

Each attack is the one found against the product: a `-D` value, a compile_commands.json entry, a folder name
with backticks, a setting, a team-server request. The marker file `ran` must never appear; the user gets one
line naming the refused flag instead.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dice_lsp.settings import Settings
from dice_lsp.toolchain.flags import CompileFlags, FlagError, check_define, flags_for
from dice_lsp.toolchain.report import check_source

KERNEL = "__global__ void k(float* x) { x[0] = VALUE; }\n"
INCLUDER = '#include "values.h"\n__global__ void k(float* x) { x[0] = VALUE; }\n'
WRAPPERS = ["$({})", "`{}`", ";{};", "|{}", "&&{}", "\n{}\n", "$( {} )", "'$({})'", '"$({})"', "\\`{}\\`"]


def dice(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "dice_lsp.cli", *args], capture_output=True, text=True,
                          timeout=300, cwd=cwd)


def test_a_define_that_would_run_a_command_is_refused_with_one_line(tmp_path: Path) -> None:
    (tmp_path / "k.cu").write_text(KERNEL)
    proc = dice("check", str(tmp_path / "k.cu"), "-D", f"VALUE=1$(touch {tmp_path / 'ran'})")
    assert proc.returncode == 2 and not (tmp_path / "ran").exists()
    assert proc.stderr.count("\n") == 1 and "refused" in proc.stderr and "-D'VALUE=1$(touch" in proc.stderr


def test_safe_defines_still_reach_the_compiler(tmp_path: Path) -> None:
    (tmp_path / "k.cu").write_text(KERNEL)
    proc = dice("check", str(tmp_path / "k.cu"), "--json", "-D", "VALUE=-1.5e-3f")
    assert proc.returncode == 0, proc.stderr
    proc = dice("check", str(tmp_path / "k.cu"), "--json")
    assert proc.returncode == 1 and "VALUE" in json.loads(proc.stdout)["diagnostics"][0]["message"]


@pytest.mark.parametrize("entry", [
    {"command": "nvcc -DBUILD_ID=$(touch {ran}) -c k.cu"},
    {"arguments": ["nvcc", "-DY=`touch {ran}`", "-c", "k.cu"]},
    {"arguments": ["nvcc", "-U$(touch {ran})", "-c", "k.cu"]},
    {"arguments": ["nvcc", "-std=c++17;touch {ran}", "-c", "k.cu"]},
    {"arguments": ["nvcc", "--ftz=true;touch {ran}", "-c", "k.cu"]},
    {"arguments": ["nvcc", "-arch", "sm_90`touch {ran}`", "-c", "k.cu"]},
], ids=["define-command", "define-backticks", "undefine", "std", "device-option", "arch"])
def test_a_compilation_database_cannot_run_commands(tmp_path: Path, entry: dict[str, Any]) -> None:
    (tmp_path / "k.cu").write_text(KERNEL.replace("VALUE", "1.0f"))
    ran = tmp_path / "ran"
    spelled = {k: v.format(ran=ran) if isinstance(v, str) else [a.format(ran=ran) for a in v] for k, v in entry.items()}
    (tmp_path / "compile_commands.json").write_text(json.dumps([{"directory": str(tmp_path), "file": "k.cu",
                                                                 **spelled}]))
    proc = dice("check", str(tmp_path / "k.cu"))
    assert not ran.exists()
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1
    assert "compile_commands.json" in proc.stderr and "refused" in proc.stderr


def test_a_folder_named_like_a_command_is_compiled_not_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ran = tmp_path / "ran"
    monkeypatch.setenv("DICE_TEST_MARK", str(ran))  # a name cannot hold a slash: the payload finds its target here
    folder = tmp_path / "kernels`touch $DICE_TEST_MARK`$(touch $DICE_TEST_MARK)"
    folder.mkdir()
    (folder / "k.cu").write_text(INCLUDER)
    (folder / "values.h").write_text("#define VALUE 2.0f\nint broken = ;\n")
    proc = dice("check", str(folder / "k.cu"), "--json", "-I", str(folder))
    assert not ran.exists()
    report = json.loads(proc.stdout)
    [problem] = report["diagnostics"]
    assert problem["message"] == "in values.h:2: expected an expression"
    assert problem["related"][0]["file"] == str(folder / "values.h"), "the header is named as the user knows it"


def test_a_refused_define_setting_keeps_the_previous_value_and_says_which() -> None:
    settings, errors = Settings(defines=("TILE=32",)).updated({"defines": ["OK=1", "X=1$(id>/tmp/f)"]})
    assert settings.defines == ("TILE=32",)
    assert errors == ["dice.defines: -D'X=1$(id>/tmp/f)' refused: its value may hold only letters, digits and "
                      "_ . + - / : , = @ % ^ ~ (no spaces, quotes, $, `, ;, |, &, <, >, parentheses or backslashes)"]


def test_flags_are_checked_whoever_builds_them() -> None:
    with pytest.raises(FlagError, match="a define is NAME or NAME=VALUE"):
        CompileFlags(defines=("1X=2",))
    with pytest.raises(FlagError, match="refused: not a device-code option"):
        CompileFlags(extra=("-Xcompiler=-fPIC;id",))
    with pytest.raises(FlagError, match="an architecture is"):
        CompileFlags(arch="sm_90 -o /tmp/x")
    assert CompileFlags(arch="sm_90a", defines=("A", "B=2", "C=a/b:c,d"), extra=("--use_fast_math",)).defines


def test_a_real_build_database_keeps_its_safe_flags(tmp_path: Path) -> None:
    (tmp_path / "include").mkdir()
    (tmp_path / "compile_commands.json").write_text(json.dumps([{
        "directory": str(tmp_path), "file": "k.cu",
        "command": "/usr/local/cuda/bin/nvcc -DNDEBUG -DTILE=32 -I include -isystem /opt/x --expt-relaxed-constexpr "
                   "-Xcompiler=-fPIC,-Wall -O3 -std=c++20 -gencode arch=compute_80,code=sm_80 -o k.o -c k.cu"}]))
    flags = flags_for(tmp_path / "k.cu", CompileFlags())
    assert flags.defines == ("NDEBUG", "TILE=32") and flags.std == "c++20" and flags.arch == "sm_80"
    assert flags.include_dirs == ((tmp_path / "include").resolve(), Path("/opt/x"))
    assert flags.extra == ("--expt-relaxed-constexpr",)


def test_a_team_server_request_cannot_run_commands(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`check` on the team server with a hostile define, database or file name: refused or compiled, never run."""
    from dice_lsp.jobs.model_host import Ticket
    from dice_lsp.remote.protocol import RemoteError
    from dice_lsp.remote.service import Service, ServiceConfig

    ran = tmp_path / "ran"
    monkeypatch.setenv("DICE_TEST_MARK", str(ran))
    service = Service(ServiceConfig(Settings()))

    async def check(params: dict[str, Any]) -> Any:
        return await service.call("check", params, Ticket(), lambda _message: None)

    try:
        with pytest.raises(RemoteError, match="refused"):
            asyncio.run(check({"text": KERNEL, "settings": {"defines": [f"VALUE=h$(touch {ran}|od -tx1)"]}}))
        database = json.dumps([{"directory": ".", "file": "k.cu", "command": f"nvcc -DVALUE=$(touch {ran}) -c k.cu"}])
        with pytest.raises(Exception, match="refused"):
            asyncio.run(check({"text": KERNEL, "path": "k.cu", "files": {"compile_commands.json": database}}))
        folder = "kernels`touch $DICE_TEST_MARK`|sh"
        report = asyncio.run(check({"text": INCLUDER, "path": f"{folder}/kernel.cu",
                                    "files": {f"{folder}/values.h": "#define VALUE 1.0f\n"}}))
        assert report["diagnostics"] == [] and [k["name"] for k in report["kernels"]] == ["k(float*)"]
    finally:
        service.close()
    assert not ran.exists()


PAYLOADS = st.builds(lambda wrapper: wrapper.format("touch $DICE_TEST_MARK"), st.sampled_from(WRAPPERS))
HOSTILE = st.builds(lambda a, b, c: a + b + c, st.text(max_size=8), PAYLOADS, st.text(max_size=8))


@settings(max_examples=300, deadline=None)
@given(st.one_of(HOSTILE, st.text(max_size=24)))
def test_any_accepted_define_is_plain_text_to_a_shell(define: str) -> None:
    """Whatever check_define lets through is a word a POSIX shell leaves as it is."""
    try:
        accepted = check_define(define)
    except FlagError:
        return
    quoted = subprocess.run(["sh", "-c", 'printf %s "$1"', "sh", accepted], capture_output=True, text=True)
    unquoted = subprocess.run(["sh", "-c", f"printf %s {accepted}"], capture_output=True, text=True, cwd="/")
    assert unquoted.stdout == quoted.stdout == accepted


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(name=st.one_of(st.builds(lambda a, p: a + p, st.text(st.characters(exclude_characters="/\0"), max_size=6),
                                PAYLOADS),
                      st.text(st.characters(exclude_characters="/\0", exclude_categories=["Cs"]),
                              min_size=1, max_size=16)))
def test_no_folder_name_reaches_a_shell(tmp_path: Path, name: str) -> None:
    """A folder of any name (a clone keeps them): its header is found, and nothing in the name runs."""
    if name in (".", ".."):
        return
    marker = tmp_path / "MARKER"
    folder = tmp_path / name
    folder.mkdir(exist_ok=True)
    (folder / "values.h").write_text("#define VALUE 3.0f\n")
    os.environ["DICE_TEST_MARK"] = str(marker)  # what a payload in the name would touch, had a shell run it
    try:
        report = check_source(INCLUDER, folder, CompileFlags(include_dirs=(folder,)))
    finally:
        del os.environ["DICE_TEST_MARK"]
    assert report.diagnostics == [] and len(report.kernels) == 1
    assert not marker.exists()


@pytest.mark.asyncio
async def test_opening_a_file_under_a_hostile_database_shows_the_refusal_and_runs_nothing(
        client: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The editor attack: a cloned repository's compile_commands.json holds `-DBUILD_ID=$(...)`; opening a .cu
    (in a workspace the user trusts, so its database is read) shows why nothing was compiled."""
    from .lsp_client import FAST, diagnostics_for, open_document, start

    ran = tmp_path / "ran"
    (tmp_path / "compile_commands.json").write_text(json.dumps([{
        "directory": str(tmp_path), "file": "k.cu", "command": f"nvcc -DBUILD_ID=$(touch {ran}) -c k.cu"}]))
    await start(client, configuration={**FAST, "trusted": True}, workspace=tmp_path)
    uri = (tmp_path / "k.cu").as_uri()
    open_document(client, KERNEL.replace("VALUE", "1.0f"), uri)
    [refusal] = await diagnostics_for(client, uri)
    assert refusal.range.start.line == 0 and refusal.code == "flags"
    assert refusal.message.startswith(f"{tmp_path / 'compile_commands.json'}: -D'BUILD_ID=$(touch")
    assert not ran.exists()


def test_a_team_server_takes_flags_only_from_the_request(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A compile_commands.json above the server's temporary folders (another user's, in /tmp) is not the request's:
    its defines never apply."""
    import tempfile

    from dice_lsp.jobs.model_host import Ticket
    from dice_lsp.remote.service import Service, ServiceConfig

    (tmp_path / "compile_commands.json").write_text(json.dumps([{
        "directory": str(tmp_path), "file": "kernel.cu", "command": "nvcc -DVALUE=2.0f -c kernel.cu"}]))
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    service = Service(ServiceConfig(Settings()))
    try:
        report = asyncio.run(service.call("check", {"text": KERNEL}, Ticket(), lambda _message: None))
    finally:
        service.close()
    [undefined] = report["diagnostics"]
    assert 'identifier "VALUE" is undefined' in undefined["message"]


def test_an_include_of_stdin_reads_nothing_and_never_blocks(tmp_path: Path) -> None:
    """A compiler's stdin is closed: `#include "/dev/stdin"` is an empty file, not a compile that waits for ever
    (and a language server whose workers all wait)."""
    report = check_source('#include "/dev/stdin"\n' + KERNEL.replace("VALUE", "1.0f"), tmp_path)
    assert report.diagnostics == [] and [k.name for k in report.kernels] == ["k(float*)"]
