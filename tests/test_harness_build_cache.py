"""A torch extension's build folder is found again, and left as ninja needs it: the same source with the same
flags gets the same folder, and its source file is never rewritten with the same bytes (a rewrite gives it a
new modification time, and ninja then compiles everything again: a minute on the GPU host). No GPU needed:
the folder is made ready here, and the build itself is ninja's with a C++ extension for the CPU."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from dice_lsp.harness.bench import extension_job, extension_key
from dice_lsp.harness.build import write_if_changed
from dice_lsp.harness.isolate import run_isolated
from dice_lsp.harness.limits import Limits

KERNEL = '#include <torch/extension.h>\n#include "helper.cuh"\ntorch::Tensor forward(torch::Tensor x) { return x; }\n'
OLD_NS = 1_000_000_000 * 1_000_000_000  # 2001-09-09: a modification time no write made today can have


@pytest.fixture
def problem(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A kernel with a local header and its reference, with dice-lsp's cache under tmp_path."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    folder = tmp_path / "src"
    folder.mkdir()
    (folder / "k.cu").write_text(KERNEL)
    (folder / "helper.cuh").write_text("#define HELPER 1\n")
    (folder / "k.py").write_text("def get_inputs(): return []\n")
    return folder


def job(folder: Path, text: str = KERNEL, arch: str = "sm_90") -> dict[str, object]:
    return extension_job(folder / "k.cu", text, folder / "k.py", arch, Limits())


def test_the_same_source_is_not_written_again(problem: Path) -> None:
    first = job(problem)
    source = Path(str(first["source"]))
    assert source.read_text() == KERNEL and Path(str(first["build_dir"])) == source.parent
    os.utime(source, ns=(OLD_NS, OLD_NS))  # any write from now on would give it today's time
    inode = source.stat().st_ino
    assert job(problem) == first
    assert (source.stat().st_mtime_ns, source.stat().st_ino) == (OLD_NS, inode)


def test_a_source_that_differs_in_the_folder_is_written(problem: Path) -> None:
    source = Path(str(job(problem)["source"]))
    source.write_text(KERNEL[:20])  # cut short (a full disk, another program)
    os.utime(source, ns=(OLD_NS, OLD_NS))
    job(problem)
    assert source.read_text() == KERNEL and source.stat().st_mtime_ns != OLD_NS


def test_write_if_changed_says_whether_it_wrote(tmp_path: Path) -> None:
    path = tmp_path / "f"
    assert write_if_changed(path, b"one") and path.read_bytes() == b"one"
    os.utime(path, ns=(OLD_NS, OLD_NS))
    assert not write_if_changed(path, b"one") and path.stat().st_mtime_ns == OLD_NS
    assert write_if_changed(path, b"two") and path.read_bytes() == b"two"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["f"]  # no temporary file left


def test_the_folder_depends_on_the_content_and_the_flags_only(problem: Path, tmp_path: Path) -> None:
    """Where the file lies does not count (a team server's request folder is new every time); what it compiles
    to does: its text, its local headers' content, the GPU it is built for."""
    elsewhere = tmp_path / "elsewhere"
    shutil.copytree(problem, elsewhere)
    same = job(problem)["build_dir"]
    assert job(elsewhere)["build_dir"] == same
    assert job(problem, arch="sm_80")["build_dir"] != same
    assert job(problem, KERNEL + "// changed\n")["build_dir"] != same
    (elsewhere / "helper.cuh").write_text("#define HELPER 2\n")
    assert job(elsewhere)["build_dir"] != same
    first = job(problem)
    assert first["name"] == f"dice_ext_{Path(str(first['build_dir'])).name}"
    assert first["cuda_flags"] == ["-O3", "-gencode=arch=compute_90,code=sm_90"]
    assert extension_key(KERNEL, problem, ["-O3"]) != extension_key(KERNEL, problem, ["-O2"])


# pybind11 alone (torch's include folders carry it), not <torch/extension.h>: what is tested is ninja's plan and the
# library's time, and ATen's headers made each build ~20 s of CPU where this one takes ~4 s
CPU_EXTENSION = ("#include <pybind11/pybind11.h>\n"
                 "int forward(int x) { return x * 2; }\n"
                 "PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def(\"forward\", &forward); }\n")


def ninja_plan(folder: Path) -> str:
    return subprocess.run(["ninja", "-n", "-C", str(folder)], capture_output=True, text=True, check=True).stdout


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("ninja") is None or shutil.which("c++") is None,
                    reason="needs ninja and a C++ compiler (torch's extension builds)")
def test_a_second_build_of_the_same_source_is_a_no_op_for_ninja(tmp_path: Path) -> None:
    """The harness's own build child, twice, on a CPU extension in a folder prepared the harness's way: the
    second build compiles nothing (the library is the first build's), and ninja has nothing left to do."""
    from torch.utils.cpp_extension import LIB_EXT

    folder = tmp_path / "ext"
    folder.mkdir()
    source = folder / "source.cpp"
    payload = {"source": str(source), "name": "dice_ext_cpu_cache_test", "build_dir": str(folder), "includes": [],
               "cuda_flags": []}
    library = folder / f"dice_ext_cpu_cache_test{LIB_EXT}"

    def build() -> None:
        write_if_changed(source, CPU_EXTENSION.encode())
        outcome = run_isolated("dice_lsp.harness.extension:build", payload, 600, Limits().memory_mb,
                               writable=[folder])
        assert outcome.ok, f"{outcome.failure}\n{outcome.output}"

    build()
    built = library.stat().st_mtime_ns
    build()
    assert library.stat().st_mtime_ns == built
    assert "no work to do" in ninja_plan(folder)
    later = built + 1_000_000_000
    os.utime(source, ns=(later, later))  # what writing the same bytes again did: ninja would build it all again
    assert "no work to do" not in ninja_plan(folder)
