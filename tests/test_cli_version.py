"""`dice-lsp --version` / `dice-lsp version`: the version and the tools found, and which clang the completions'
front-end check picks when several are installed."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from dice_lsp import __version__
from dice_lsp.cli import version_text, versions
from dice_lsp.toolchain.clang import clang_version, find_clang


def fake_clang(folder: Path, name: str, version: str) -> Path:
    path = folder / name
    path.write_text(f"#!/bin/sh\necho 'Debian clang version {version}'\necho 'Target: x86_64-pc-linux-gnu'\n")
    path.chmod(0o755)
    return path


def test_the_newest_clang_that_reads_cuda_13_headers_is_picked(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    old = fake_clang(tmp_path, "clang++", "14.0.6")
    monkeypatch.setenv("PATH", str(tmp_path))
    assert find_clang() == old  # the only one
    newest = fake_clang(tmp_path, "clang++-19", "19.1.7")
    fake_clang(tmp_path, "clang++-16", "16.0.6")
    fake_clang(tmp_path, "clang++-14", "14.0.6")
    assert find_clang() == newest  # before the unversioned (Debian's 14) and older ones
    assert clang_version(newest) == "19.1.7"
    assert find_clang(str(old)) == old  # dice.clang wins


def test_version_text_says_what_is_missing_or_too_old(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake_clang(tmp_path, "clang++", "14.0.6")
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv("CUDA_HOME", raising=False)
    monkeypatch.delenv("CUDA_PATH", raising=False)
    found = versions()
    assert found["clang"] == {"path": str(tmp_path / "clang++"), "version": "14.0.6", "recommended": False}
    text = version_text(found)
    assert text.splitlines()[0].startswith(f"dice-lsp {__version__} (Python ")
    assert (f"clang: {tmp_path / 'clang++'} (14.0.6; CUDA 13's CUB, Thrust and cooperative groups need clang >= 15)"
            in text.splitlines())
    (tmp_path / "clang++").unlink()
    assert "clang: not found (the completions' front-end check is off: install clang-19 or set dice.clang)" in (
        version_text(versions()).splitlines())


def test_version_on_the_command_line() -> None:
    human = subprocess.run([sys.executable, "-m", "dice_lsp.cli", "--version"], capture_output=True, text=True,
                           check=True).stdout
    assert human.splitlines()[0].startswith(f"dice-lsp {__version__} ")
    assert any(line.startswith("clang: ") for line in human.splitlines())
    machine = json.loads(subprocess.run([sys.executable, "-m", "dice_lsp.cli", "version", "--json"],
                                        capture_output=True, text=True, check=True).stdout)
    assert machine["dice-lsp"] == __version__ and set(machine) == {"dice-lsp", "python", "nvcc", "clang"}
