"""`dice-lsp complete` as a user runs it: a real process, real files, real checkpoints."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from dice_lsp.textdoc import MAX_SOURCE_BYTES
from dice_lsp.toolchain.clang import find_clang

from .test_cli_optimize import fake_dice

KERNEL = "__global__ void scale(float* x, float s, int n) {\n    int i = blockIdx.x;\n    \n}\n"

TYPES = True if find_clang() is not None else None  # clang's front end, where installed (CI installs it)
CHECKS_LINE = f"[checks: parses ✓ · names ✓ · {'types ✓ · ' if TYPES else ''}compiles ✓]"


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "dice_lsp.cli", *args], capture_output=True, text=True,
                          timeout=120)


def run_here(capsys: pytest.CaptureFixture[str], *args: str) -> subprocess.CompletedProcess[str]:
    """`dice-lsp ARGS` in this process (`cli.main`), for the plumbing tests of what the command answers; the
    real process around it (its torch import and model load, its exit code and streams) is what the end-to-end
    tests here run, on the same command."""
    from dice_lsp import cli

    capsys.readouterr()
    code = cli.main(list(args))
    out, err = capsys.readouterr()
    return subprocess.CompletedProcess(["dice-lsp", *args], code, out, err)


@pytest.fixture()
def kernel_file(tmp_path: Path) -> Path:
    path = tmp_path / "scale.cu"
    path.write_text(KERNEL)
    return path


@pytest.mark.parametrize("family", ["native", "sdar"])
def test_json_output_has_items_ranges_checks_model_and_latency(family: str, kernel_file: Path, native_dir: Path,
                                                               sdar_dir: Path) -> None:
    """A random checkpoint writes garbage: nothing is shown, and the reply says why."""
    model = native_dir if family == "native" else sdar_dir
    proc = run("complete", str(kernel_file), "--line", "2", "--character", "4", "--json", "--model", str(model),
               "--candidates", "2", "--steps", "4", "--max-tokens", "8", "--device", "cpu")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["items"] == [] and data["withheld"].startswith("no fill passed the checks (")
    assert data["hole"] == "line" and data["model"] == model.name and data["device"] == "cpu"
    assert data["latency_ms"] > 0


FOR_HEADER = ("__global__ void fill_ones(float* out, int n) {\n"
              "    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; \n"
              "        out[i] = 1.0f;\n    }\n}\n")


def test_a_grid_loop_stepping_by_one_is_never_shown(tmp_path: Path) -> None:
    """dice-tiny ends this grid-stride loop's header with `i++) {`: it compiles, but every thread would redo the
    elements of the threads after it. The checks reject it (re-masking finds nothing better): nothing is shown,
    not even to a user who asks for whatever passes the checks, and the reply says why."""
    path = tmp_path / "fill_ones.cu"
    path.write_text(FOR_HEADER)
    at = ["complete", str(path), "--line", "1", "--character", "63", "--steps", "4", "--json"]
    for extra in ((), ("--min-confidence", "0")):
        proc = run(*at, *extra)
        assert proc.returncode == 0, proc.stderr
        data = json.loads(proc.stdout)
        assert data["items"] == [], data["items"]
        assert re.fullmatch(r"no fill passed the checks \(\d+ tried; the best (does not parse|fails the rule: .+)\)",
                            data["withheld"]), data["withheld"]


# the host code of a vector add, the last copy half-typed (`cudaMemcpy(h_out, `): its destination is the host's output
MEMCPY = """#include <cuda_runtime.h>
#include <stdlib.h>

__global__ void vector_add(float *out, const float *a, const float *b, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = a[i] + b[i];
}

int main()
{
    const int N = 1 << 20;
    size_t bytes = N * sizeof(float);
    float *h_a = (float *)malloc(bytes);
    float *h_b = (float *)malloc(bytes);
    float *h_out = (float *)malloc(bytes);
    float *d_a, *d_b, *d_out;
    cudaMalloc((void **)&d_a, bytes);
    cudaMalloc((void **)&d_b, bytes);
    cudaMalloc((void **)&d_out, bytes);
    cudaMemcpy(d_a, h_a, bytes, cudaMemcpyHostToDevice);
    cudaMemcpy(d_b, h_b, bytes, cudaMemcpyHostToDevice);
    vector_add<<<(N + 255) / 256, 256>>>(d_out, d_a, d_b, N);
    cudaMemcpy(h_out,‸
    cudaFree(d_a);
    free(h_out);
    return 0;
}
""".replace("‸", " ")  # the cursor after the typed `, `


def test_the_embedded_model_finishes_a_copy_and_says_which_checks_it_passed(tmp_path: Path,
                                                                         capsys: pytest.CaptureFixture[str]) -> None:
    """End to end: dice-tiny, the pipeline's checks, clang and nvcc. dice-tiny finishes `cudaMemcpy(h_out, ` with the
    copy above it (`h_b, bytes, cudaMemcpyHostToDevice);`), which compiles but copies the wrong way; the product
    shows the copy back from `h_out`'s device partner with the size it was allocated with (the rules source), with
    every check passed; a user who asks for whatever passes the checks (`--min-confidence 0`) also gets the model's
    fill, ranked below it as unlikely. (The JSON in a process of its own, the other two in this one.)"""
    path = tmp_path / "vector_add.cu"
    path.write_text(MEMCPY)
    at = ["complete", str(path), "--line", "23", "--character", "22"]
    proc = run(*at, "--json")
    human = run_here(capsys, *at)
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    [item] = data["items"]
    assert (item["text"], item["source"]) == ("d_out, bytes, cudaMemcpyDeviceToHost);", "rule")
    assert item["checks"] == {"parses": True, "names": True, "types": TYPES, "compiles": True}
    assert human.stdout == "d_out, bytes, cudaMemcpyDeviceToHost);\n"
    assert f"{CHECKS_LINE[:-1]} · what the kernel's structure implies · P(right) 0." in human.stderr
    proc = run_here(capsys, *at, "--json", "--min-confidence", "0")
    assert proc.returncode == 0, proc.stderr
    items = json.loads(proc.stdout)["items"]
    assert [i["text"] for i in items] == ["d_out, bytes, cudaMemcpyDeviceToHost);",
                                          "h_b, bytes, cudaMemcpyHostToDevice);"]
    assert items[1]["source"] == "model" and items[1]["confidence"] < items[0]["confidence"]


def test_human_output_says_why_nothing_is_shown(kernel_file: Path, native_dir: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    """(In this process: the human output of a real process is checked by the embedded model's tests here.)"""
    proc = run_here(capsys, "complete", str(kernel_file), "--line", "2", "--character", "4", "--model",
                    str(native_dir), "--steps", "2", "--max-tokens", "6", "--seed", "3")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "" and "dice-lsp: no completion shown: no fill passed the checks" in proc.stderr


@pytest.mark.parametrize(("args", "message"), [
    (("missing.cu", "--line", "0", "--character", "0"), "no such file"),
    (("{kernel}", "--line", "9", "--character", "0"), "line 9 is outside the file"),
    (("{kernel}", "--line", "1", "--character", "99"), "character 99 is outside line 1"),
    (("{binary}", "--line", "0", "--character", "0"), "not UTF-8 text"),
    (("{kernel}", "--line", "0", "--character", "0", "--model", "{empty}"), "no config.json"),
    (("{kernel}", "--line", "-1", "--character", "0"), "must not be negative"),
    (("{kernel}", "--line", "0", "--character", "0", "--device", "cuda:7"), "cuda"),
    (("{kernel}", "--line", "0", "--character", "0", "--temperature", "nan"), "dice.temperature: must be a finite"),
    (("/dev/zero", "--line", "0", "--character", "0"), "/dev/zero: not a regular file (a character device)"),
    (("{fifo}", "--line", "0", "--character", "0"), "not a regular file (a FIFO)"),  # open() would wait for ever
    (("{huge}", "--line", "0", "--character", "0"), f"{MAX_SOURCE_BYTES + 1} bytes, over the limit"),
])
def test_bad_input_is_one_line_on_stderr_and_exit_2(args: tuple[str, ...], message: str, kernel_file: Path,
                                                    tmp_path: Path, native_dir: Path) -> None:
    binary = tmp_path / "blob.cu"
    binary.write_bytes(b"\xff\xfe\x00kernel")
    empty = tmp_path / "empty_model"
    empty.mkdir()
    fifo = tmp_path / "pipe.cu"
    os.mkfifo(fifo)
    huge = tmp_path / "huge.cu"
    with huge.open("wb") as handle:
        handle.truncate(MAX_SOURCE_BYTES + 1)  # sparse: no disk written
    filled = [a.format(kernel=kernel_file, binary=binary, empty=empty, fifo=fifo, huge=huge) for a in args]
    if "--model" not in filled:
        filled += ["--model", str(native_dir)]
    proc = run("complete", *filled)
    assert proc.returncode == 2
    assert proc.stdout == ""
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], proc.stderr


EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "vector_add.cu"
AT_THE_EMPTY_LINE = ("--line", "7", "--character", "4", "--json", "--max-tokens", "16")


def test_the_embedded_model_is_the_default() -> None:
    """What dice-tiny writes here is not fixed (the tests below fix it with a fake model): this one checks
    which model and region the demo uses, and that an empty answer always comes with its reason."""
    proc = run("complete", str(EXAMPLE), *AT_THE_EMPTY_LINE)
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["model"] == "dice-tiny" and data["device"] == "cpu" and data["hole"] == "line"
    assert (data["withheld"] is None) == bool(data["items"])


def test_no_region_at_the_cursor_is_said_in_both_outputs() -> None:
    """Line 3 of the example is its `#include`: no region to fill there, and both outputs say so (an answer with
    no item and no reason left a script guessing)."""
    why = ("no region to fill at line 2, character 0 (an empty or unfinished line in a function, a selection, a "
           "/*@fill*/ marker, or after an open '{')")
    data = json.loads(run("complete", str(EXAMPLE), "--line", "2", "--character", "0", "--json").stdout)
    assert (data["items"], data["hole"], data["withheld"]) == ([], None, why)
    human = run("complete", str(EXAMPLE), "--line", "2", "--character", "0")
    assert (human.returncode, human.stdout, human.stderr.strip()) == (0, "", f"dice-lsp: {why}")


def test_the_example_shows_a_fill_that_parses_resolves_and_compiles(tmp_path: Path) -> None:
    """`make demo`'s contract, with a model that writes a good line: that line, exactly, over the empty line,
    with every check passed (nvcc included)."""
    code, data, stderr = fake_dice(tmp_path, ["if (i < n) c[i] = a[i] + b[i];"], "complete", str(EXAMPLE),
                                   *AT_THE_EMPTY_LINE)
    assert code == 0, stderr
    assert data["items"] == [{"text": "if (i < n) c[i] = a[i] + b[i];",
                              "range": {"start": {"line": 7, "character": 4}, "end": {"line": 7, "character": 4}},
                              "checks": {"parses": True, "names": True, "types": TYPES, "compiles": True},
                              "source": "model", "confidence": None}]
    assert (data["hole"], data["withheld"], data["model"]) == ("line", None, "dice-tiny")


def test_the_example_shows_nothing_but_the_reason_when_no_fill_parses(tmp_path: Path) -> None:
    """A fill that does not parse is re-masked and denoised once more (a second model call); when that does not
    parse either, nothing is shown and the reason is given."""
    code, data, stderr = fake_dice(tmp_path, ["c[i] = a[i] +"], "complete", str(EXAMPLE), *AT_THE_EMPTY_LINE)
    assert code == 0, stderr
    assert (data["items"], data["hole"]) == ([], "line")
    assert data["withheld"] == "no fill passed the checks (1 tried; the best does not parse)"
    assert (tmp_path / "calls.log").read_text().splitlines() == ["generation 1 started", "generation 2 started"]


@pytest.mark.parametrize(("text", "line", "character", "hole", "end"), [
    ("__global__ void k(float* x) {\n    x[0] = /*@fill*/;\n}\n", 1, 11, "marker", {"line": 1, "character": 20}),
    ("__global__ void k(float* x) {\n    ", 1, 4, "body", {"line": 1, "character": 4}),
    ("__global__ void k(float* x) {\n    x[0] = 1.0f;\n}\n", 1, 6, None, {"line": 1, "character": 6}),
])
def test_the_region_comes_from_the_hole_at_the_cursor(tmp_path: Path, native_dir: Path, text: str, line: int,
                                                      character: int, hole: str | None, end: dict[str, int],
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    """(In this process: the JSON of a real process is checked by test_json_output_has_items_ranges_checks_model_and_
    latency, on the same checkpoint.)"""
    path = tmp_path / "k.cu"
    path.write_text(text)
    proc = run_here(capsys, "complete", str(path), "--line", str(line), "--character", str(character), "--json",
                    "--model", str(native_dir), "--steps", "2")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["hole"] == hole
    if hole is None:
        assert data["items"] == []
    for item in data["items"]:
        assert item["range"]["end"] == end


def test_the_files_own_line_is_shown_and_said_to_come_from_it(tmp_path: Path) -> None:
    """A second kernel like the first: its empty line gets the first kernel's line (the model writes garbage), with
    every check passed and `source: document`; the human output says it came from the file."""
    from .test_completion_sources import TWO_KERNELS

    path = tmp_path / "two.cu"
    path.write_text(TWO_KERNELS)
    at = ("--line", "7", "--character", "4")
    code, data, stderr = fake_dice(tmp_path, ["c[i] = = ;;"], "complete", str(path), *at, "--json")
    assert code == 0, stderr
    [item] = data["items"]
    assert (item["text"], item["source"]) == ("if (i < n) c[i] = a[i] + b[i];", "document")
    assert item["checks"] == {"parses": True, "names": True, "types": TYPES, "compiles": True}
    code, text, stderr = fake_dice(tmp_path, ["c[i] = = ;;"], "complete", str(path), *at)
    assert code == 0 and text == "if (i < n) c[i] = a[i] + b[i];\n"
    assert "compiles ✓ · from this file]" in stderr



def test_complete_compiles_with_the_files_flags(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`complete` hands clang and nvcc the flags `check` would use: the file's compile_commands.json, then -I/-D."""
    from dice_lsp import cli, complete
    from dice_lsp.jobs.api import CompleteJob
    from dice_lsp.jobs.local import LocalJobs
    from dice_lsp.jobs.model_host import Ticket
    from dice_lsp.settings import Settings
    from dice_lsp.textdoc import Position

    (tmp_path / "compile_commands.json").write_text(json.dumps([{
        "directory": str(tmp_path), "file": "k.cu", "arguments": ["nvcc", "-DFROM_DB=1", "-c", "k.cu"]}]))
    (path := tmp_path / "k.cu").write_text(EXAMPLE.read_text())
    seen = []
    monkeypatch.setattr(complete, "nvcc_compiler", lambda text, folder, flags, *a, **k: seen.append(flags))
    monkeypatch.setattr(complete, "front_end_for", lambda text, folder, flags, *a, **k: seen.append(flags))
    args = cli.build_parser().parse_args(["complete", str(path), "--line", "7", "--character", "4", "--arch",
                                          "sm_80", "-I", str(tmp_path / "inc"), "-D", "TILE=32"])
    document = cli.file_document(args, path.read_text(), Settings())
    compiler, front_end = cli.command_judges(document, True)
    LocalJobs.completing(CompleteJob(document, Position(7, 4), compiler, front_end), Ticket())  # the judges made
    assert len(seen) == 2 and seen[0] == seen[1]
    assert seen[0].defines == ("FROM_DB=1", "TILE=32") and seen[0].arch == "sm_80"
    assert seen[0].include_dirs == ((tmp_path / "inc").resolve(),)


def test_the_first_line_of_a_vector_add_kernel_is_its_thread_index(tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """The line every kernel starts with, which the code below needs (`i`) and nothing declares: the embedded
    model's product shows the thread index, said to come from the kernel's structure, with every check passed."""
    path = tmp_path / "vector_add.cu"
    path.write_text("#include <cuda_runtime.h>\n\n"
                    "__global__ void vectorAdd(const float *a, const float *b, float *c, int n)\n{\n"
                    "    \n    if (i < n) {\n        c[i] = a[i] + b[i];\n    }\n}\n")
    done = run_here(capsys, "complete", str(path), "--line", "4", "--character", "4", "--json")
    assert done.returncode == 0, done.stderr
    [item] = json.loads(done.stdout)["items"]
    assert (item["text"], item["source"]) == ("int i = blockIdx.x * blockDim.x + threadIdx.x;", "rule")
    assert item["checks"] == {"parses": True, "names": True, "types": TYPES, "compiles": True}
    done = run_here(capsys, "complete", str(path), "--line", "4", "--character", "4")
    assert done.stdout == "int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    assert "compiles ✓ · what the kernel's structure implies · P(right)" in done.stderr
