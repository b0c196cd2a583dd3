"""`dice-lsp complete` as a user runs it: a real process, real files, real checkpoints."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

KERNEL = "__global__ void scale(float* x, float s, int n) {\n    int i = blockIdx.x;\n    \n}\n"


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "dice_lsp.cli", *args], capture_output=True, text=True,
                          timeout=120)


@pytest.fixture()
def kernel_file(tmp_path: Path) -> Path:
    path = tmp_path / "scale.cu"
    path.write_text(KERNEL)
    return path


@pytest.mark.parametrize("family", ["native", "sdar"])
def test_json_output_has_items_ranges_model_and_latency(family: str, kernel_file: Path, native_dir: Path,
                                                        sdar_dir: Path) -> None:
    model = native_dir if family == "native" else sdar_dir
    proc = run("complete", str(kernel_file), "--line", "2", "--character", "4", "--json", "--model", str(model),
               "--candidates", "2", "--steps", "4", "--max-tokens", "8", "--device", "cpu")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert len(data["items"]) == 2
    for item in data["items"]:
        assert isinstance(item["text"], str)
        assert item["range"] == {"start": {"line": 2, "character": 4}, "end": {"line": 2, "character": 4}}
    assert data["model"] == model.name
    assert data["device"] == "cpu"
    assert data["latency_ms"] > 0


def test_human_output_prints_the_completion(kernel_file: Path, native_dir: Path) -> None:
    args = ("complete", str(kernel_file), "--line", "2", "--character", "4", "--model", str(native_dir),
            "--steps", "2", "--max-tokens", "6", "--seed", "3")
    proc = run(*args)
    as_json = run(*args, "--json")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == json.loads(as_json.stdout)["items"][0]["text"] + "\n"


@pytest.mark.parametrize(("args", "message"), [
    (("missing.cu", "--line", "0", "--character", "0"), "no such file"),
    (("{kernel}", "--line", "9", "--character", "0"), "line 9 is outside the file"),
    (("{kernel}", "--line", "1", "--character", "99"), "character 99 is outside line 1"),
    (("{binary}", "--line", "0", "--character", "0"), "not UTF-8 text"),
    (("{kernel}", "--line", "0", "--character", "0", "--model", "{empty}"), "no config.json"),
    (("{kernel}", "--line", "-1", "--character", "0"), "must not be negative"),
    (("{kernel}", "--line", "0", "--character", "0", "--device", "cuda:7"), "cuda"),
])
def test_bad_input_is_one_line_on_stderr_and_exit_2(args: tuple[str, ...], message: str, kernel_file: Path,
                                                    tmp_path: Path, native_dir: Path) -> None:
    binary = tmp_path / "blob.cu"
    binary.write_bytes(b"\xff\xfe\x00kernel")
    empty = tmp_path / "empty_model"
    empty.mkdir()
    filled = [a.format(kernel=kernel_file, binary=binary, empty=empty) for a in args]
    if "--model" not in filled:
        filled += ["--model", str(native_dir)]
    proc = run("complete", *filled)
    assert proc.returncode == 2
    assert proc.stdout == ""
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], proc.stderr


def test_the_embedded_model_is_the_default_and_fills_the_example() -> None:
    example = Path(__file__).resolve().parent.parent / "examples" / "vector_add.cu"
    proc = run("complete", str(example), "--line", "7", "--character", "4", "--json", "--max-tokens", "16")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["model"] == "dice-tiny" and data["device"] == "cpu"
    text = data["items"][0]["text"]
    assert text.strip(), "the embedded model writes code into an empty kernel line"
    assert "<|" not in text, "no special token leaks into the completion"


@pytest.mark.parametrize(("text", "line", "character", "hole", "end"), [
    ("__global__ void k(float* x) {\n    x[0] = /*@fill*/;\n}\n", 1, 11, "marker", {"line": 1, "character": 20}),
    ("__global__ void k(float* x) {\n    ", 1, 4, "body", {"line": 1, "character": 4}),
    ("__global__ void k(float* x) {\n    x[0] = 1.0f;\n}\n", 1, 6, None, {"line": 1, "character": 6}),
])
def test_the_region_comes_from_the_hole_at_the_cursor(tmp_path: Path, native_dir: Path, text: str, line: int,
                                                      character: int, hole: str | None, end: dict[str, int]) -> None:
    path = tmp_path / "k.cu"
    path.write_text(text)
    proc = run("complete", str(path), "--line", str(line), "--character", str(character), "--json",
               "--model", str(native_dir), "--steps", "2")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["hole"] == hole
    if hole is None:
        assert data["items"] == []
    for item in data["items"]:
        assert item["range"]["end"] == end
