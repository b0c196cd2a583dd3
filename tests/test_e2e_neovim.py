"""A client nobody here wrote: headless Neovim's built-in LSP client gets a completion from dice-lsp."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from .lsp_client import INDEX_LINE, TWO_KERNELS

SCRIPT = Path(__file__).resolve().parent / "e2e" / "nvim_complete.lua"

pytestmark = pytest.mark.skipif(shutil.which("nvim") is None, reason="Neovim is not installed (apt-get install neovim)")


def test_neovim_requests_and_prints_a_completion(tmp_path: Path) -> None:
    source = tmp_path / "kernel.cu"
    source.write_text(TWO_KERNELS)  # the second kernel's index line, which the product shows from the first
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "DICE_FILE": str(source), "DICE_LINE": "6", "DICE_CHARACTER": "4",
           "DICE_LSP_CMD": json.dumps([sys.executable, "-m", "dice_lsp.cli"])}
    proc = subprocess.run(["nvim", "--headless", "-n", "-u", "NONE", "-c", f"luafile {SCRIPT}"], env=env,
                          capture_output=True, text=True, timeout=180)
    lines = [line for line in (proc.stdout + proc.stderr).splitlines() if line.startswith(("COMPLETION", "ERROR"))]
    assert proc.returncode == 0 and lines, proc.stdout + proc.stderr
    completion = json.loads(lines[0].removeprefix("COMPLETION "))
    assert completion["text"] == INDEX_LINE
    assert completion["range"]["start"] == {"line": 6, "character": 4}
