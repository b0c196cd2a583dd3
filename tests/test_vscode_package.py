"""`vsce package` in client-vscode builds the extension first (`vscode:prepublish`), as every extension does."""

from __future__ import annotations

import json
import shutil
import subprocess
import zipfile
from pathlib import Path

import pytest

CLIENT = Path(__file__).resolve().parents[1] / "client-vscode"
MANIFEST = json.loads((CLIENT / "package.json").read_text())


def test_prepublish_compiles_the_entry_point_the_manifest_names() -> None:
    scripts = MANIFEST["scripts"]
    assert scripts["vscode:prepublish"] == "npm run compile"
    entry = MANIFEST["main"].removeprefix("./")
    assert f"--outfile={entry}" in scripts["compile"].split()
    assert "npm run compile" not in scripts["package"]  # vsce runs vscode:prepublish itself: once is enough


@pytest.mark.skipif(not (CLIENT / "node_modules").is_dir() or shutil.which("npx") is None,
                    reason="client-vscode's node_modules are not installed (npm ci)")
def test_plain_vsce_package_builds_a_vsix_with_the_compiled_extension(tmp_path: Path) -> None:
    copy = tmp_path / "client-vscode"
    shutil.copytree(CLIENT, copy, ignore=shutil.ignore_patterns("node_modules", "out", "*.vsix"))
    (copy / "node_modules").symlink_to(CLIENT / "node_modules")
    proc = subprocess.run(["npx", "vsce", "package", "-o", "plain.vsix"], cwd=copy, capture_output=True, text=True,
                          stdin=subprocess.DEVNULL, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    with zipfile.ZipFile(copy / "plain.vsix") as vsix:
        assert "extension/" + MANIFEST["main"].removeprefix("./") in vsix.namelist()
