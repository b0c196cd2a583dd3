"""The compile cache and the build cache keep only what the source decided, never break a compile, and stay
bounded: transient failures are not kept, unwritable or damaged caches are warnings and misses, a flood of
compiler output is not stored, and old builds are evicted.

A fake `nvcc` (a shell script) stands in for the compiler: it fails the way the machine makes nvcc fail
while a `fail` file exists, and otherwise compiles cleanly (writing the object or cubin it is asked for).
"""

from __future__ import annotations

import errno
import logging
import os
import time
from pathlib import Path

import pytest

from dice_lsp.errors import DiceError
from dice_lsp.harness import build as builds
from dice_lsp.harness.build import build_cubin, builds_root, evict
from dice_lsp.toolchain import cache as compile_cache
from dice_lsp.toolchain.cache import CompileCache, cache_key
from dice_lsp.toolchain.flags import DEFAULT_FLAGS
from dice_lsp.toolchain.report import check_source

SOURCE = "__global__ void k(float* x) { x[0] = 1; }\n"
KILLED = "kill -9 $$"
DISK_FULL = "echo \"nvcc fatal   : Could not open output file '/tmp/tmpxft_1': No space left on device\" >&2; exit 1"
# what the real nvcc 13 says when TMPDIR is full
TMP_FULL = "echo 'nvcc fatal   : Failed to preprocess host compiler properties.' >&2; exit 1"


def fake_nvcc(folder: Path, failure: str = KILLED, success: str = "") -> Path:
    """`nvcc` that runs `failure` while `folder/fail` exists; else runs `success` and writes its -o file."""
    script = folder / "bin" / "nvcc"
    script.parent.mkdir(parents=True, exist_ok=True)
    script.write_text(f'#!/bin/sh\ncase "$1" in --version) echo "fake nvcc 1.0"; exit 0;; esac\n'
                      f'if [ -e {folder}/fail ]; then {failure}; fi\n'
                      'out=""; prev=""; for a in "$@"; do [ "$prev" = "-o" ] && out="$a"; prev="$a"; done\n'
                      f'printf image > "$out"\n{success}\n')
    script.chmod(0o755)
    return script


@pytest.fixture(autouse=True)
def own_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))


def errors(report_json: dict[str, object]) -> list[str]:
    return [d["message"] for d in report_json["diagnostics"] if d["severity"] == "error"]  # type: ignore[attr-defined, index]


@pytest.mark.parametrize("failure", [KILLED, DISK_FULL, TMP_FULL],
                         ids=["killed-by-a-signal", "temp-dir-full", "temp-dir-full-at-start"])
def test_a_compile_the_machine_broke_is_reported_and_never_cached(failure: str, tmp_path: Path) -> None:
    nvcc = fake_nvcc(tmp_path, failure)
    cache = CompileCache(tmp_path / "c.msgpack")
    (tmp_path / "fail").touch()
    broken = check_source(SOURCE, tmp_path, DEFAULT_FLAGS, cache, nvcc)
    assert broken.errors == 1 and not broken.cached
    (tmp_path / "fail").unlink()
    fixed = check_source(SOURCE, tmp_path, DEFAULT_FLAGS, cache, nvcc)
    assert (fixed.errors, fixed.cached) == (0, False), "the failure was not replayed from the cache"
    again = check_source(SOURCE, tmp_path, DEFAULT_FLAGS, cache, nvcc)
    assert (again.errors, again.cached) == (0, True)


def test_a_timeout_is_transient(tmp_path: Path) -> None:
    from dice_lsp.toolchain.nvcc import compile_source

    result = compile_source(SOURCE, nvcc=fake_nvcc(tmp_path, success="sleep 30"), timeout=0.5)
    assert (result.ok, result.transient) == (False, True)


@pytest.mark.parametrize("shape", ["folder-in-its-place", "file-as-its-folder"])
def test_a_cache_that_cannot_be_written_warns_once_and_compiles(shape: str, tmp_path: Path,
                                                                caplog: pytest.LogCaptureFixture) -> None:
    if shape == "folder-in-its-place":
        path = tmp_path / "c.msgpack"
        path.mkdir()
    else:
        (tmp_path / "file").write_text("")
        path = tmp_path / "file" / "c.msgpack"
    nvcc = fake_nvcc(tmp_path, success="echo 'source.cu(1): error: boom' >&2; exit 2")
    cache = CompileCache(path)
    with caplog.at_level(logging.WARNING, logger="dice_lsp.cache"):
        reports = [check_source(SOURCE, tmp_path, DEFAULT_FLAGS, cache, nvcc) for _ in range(2)]
    assert [(r.errors, r.cached, r.diagnostics[0].message) for r in reports] == [(1, False, "boom")] * 2
    assert len([r for r in caplog.records if r.levelno == logging.WARNING]) == 1, caplog.text


def test_a_full_disk_keeps_the_diagnostics(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                           caplog: pytest.LogCaptureFixture) -> None:
    def full(_cache: CompileCache, _entries: object) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(CompileCache, "_write", full)
    nvcc = fake_nvcc(tmp_path, success="echo 'source.cu(1): error: boom' >&2; exit 2")
    with caplog.at_level(logging.WARNING, logger="dice_lsp.cache"):
        report = check_source(SOURCE, tmp_path, DEFAULT_FLAGS, CompileCache(tmp_path / "c.msgpack"), nvcc)
    assert [d.message for d in report.diagnostics] == ["boom"]
    assert "No space left on device" in caplog.text


def test_a_cache_entry_of_another_shape_is_compiled_again(tmp_path: Path) -> None:
    nvcc = fake_nvcc(tmp_path)
    cache = CompileCache(tmp_path / "c.msgpack")
    key = cache_key(SOURCE, (tmp_path, *DEFAULT_FLAGS.include_dirs), (*DEFAULT_FLAGS.arguments(), "-Xptxas -v"), nvcc)
    cache.put(key, {"diagnostics": [{"range": 3}], "kernels": "none"})
    report = check_source(SOURCE, tmp_path, DEFAULT_FLAGS, cache, nvcc)
    assert (report.errors, report.cached) == (0, False)
    assert check_source(SOURCE, tmp_path, DEFAULT_FLAGS, cache, nvcc).cached, "the entry was replaced"


def test_a_flood_of_compiler_output_is_cut_short_and_stored_within_the_entry_limit(tmp_path: Path) -> None:
    """64 MiB of errors: the report keeps only the first ones, and that report (not the flood) is what the
    cache stores, under its per-entry limit; asking again answers from the cache, the same report."""
    flood = "yes 'source.cu(1): error: boom' | head -c 67108864 >&2; exit 2"
    path = tmp_path / "c.msgpack"
    nvcc = fake_nvcc(tmp_path, success=flood)
    report = check_source(SOURCE, tmp_path, DEFAULT_FLAGS, CompileCache(path), nvcc)
    assert 0 < report.errors < 20_000 and report.diagnostics[0].message == "boom"
    assert path.is_file() and 0 < path.stat().st_size <= compile_cache.MAX_ENTRY_BYTES
    again = check_source(SOURCE, tmp_path, DEFAULT_FLAGS, CompileCache(path), nvcc)
    assert again.cached and (again.errors, again.diagnostics) == (report.errors, report.diagnostics)


def test_the_compile_cache_is_bounded_in_bytes(tmp_path: Path) -> None:
    cache = CompileCache(tmp_path / "c.msgpack", max_bytes=350_000)
    for n in range(5):
        cache.put(f"key{n}", {"output": "x" * 100_000})
    assert [cache.get(f"key{n}") is not None for n in range(5)] == [False, False, True, True, True]


def build_folder(nvcc: Path, folder: Path) -> Path:
    key = cache_key(SOURCE, [folder], ("cubin", *DEFAULT_FLAGS.arguments()), nvcc)
    return builds_root() / key[:32]


def test_a_transient_build_failure_is_not_kept(tmp_path: Path) -> None:
    nvcc = fake_nvcc(tmp_path)
    (tmp_path / "fail").touch()
    failed = build_cubin(SOURCE, tmp_path, DEFAULT_FLAGS, nvcc)
    assert (failed.ok, failed.cubin, failed.cached) == (False, None, False)
    assert not build_folder(nvcc, tmp_path).exists()
    (tmp_path / "fail").unlink()
    built = build_cubin(SOURCE, tmp_path, DEFAULT_FLAGS, nvcc)
    assert built.ok and not built.cached and built.cubin is not None and built.cubin.read_bytes() == b"image"
    assert build_cubin(SOURCE, tmp_path, DEFAULT_FLAGS, nvcc).cached


@pytest.mark.parametrize("damage", ["a-file", "another-schema", "a-folder-for-build-json", "no-cubin"])
def test_a_damaged_build_entry_is_built_again(damage: str, tmp_path: Path) -> None:
    nvcc = fake_nvcc(tmp_path)
    target = build_folder(nvcc, tmp_path)
    target.parent.mkdir(parents=True)
    if damage == "a-file":
        target.write_text("not a build")
    else:
        target.mkdir()
        if damage == "a-folder-for-build-json":
            (target / "build.json").mkdir()
        else:
            (target / "build.json").write_text('{"ok": true}' if damage == "another-schema"
                                               else '{"ok": true, "output": "", "kernels": []}')
    built = build_cubin(SOURCE, tmp_path, DEFAULT_FLAGS, nvcc)
    assert built.ok and not built.cached and built.cubin is not None and built.cubin.read_bytes() == b"image"
    assert build_cubin(SOURCE, tmp_path, DEFAULT_FLAGS, nvcc).cached


def test_a_full_disk_while_keeping_a_build_is_a_failed_build_with_its_messages(tmp_path: Path,
                                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    def full(_scratch: Path, _target: Path) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(builds, "_store", full)
    built = build_cubin(SOURCE, tmp_path, DEFAULT_FLAGS, fake_nvcc(tmp_path, success="echo 'a warning' >&2"))
    assert (built.ok, built.cached, built.cubin) == (False, False, None)
    kept = f"cannot keep the build in {builds_root()}: No space left on device"
    assert built.output.splitlines() == ["a warning", kept]
    assert list(builds_root().iterdir()) == [], "no scratch folder left behind"


def aged(root: Path, name: str, megabytes: int, age_s: float) -> Path:
    folder = root / name
    folder.mkdir(parents=True)
    (folder / "source.cubin").write_bytes(b"\0" * (megabytes << 20))
    moment = time.time() - age_s
    os.utime(folder, (moment, moment))
    return folder


def test_old_and_excess_builds_are_evicted_least_recently_used_first(tmp_path: Path) -> None:
    root = tmp_path / "builds"
    hour, day = 3600.0, 86400.0
    ancient = aged(root, "ancient", 1, 40 * day)
    old, older = aged(root, "old", 1, 3 * hour), aged(root, "older", 1, 4 * day)
    recent = aged(root, "recent", 1, 2 * hour)
    in_use = aged(root, "in-use", 1, 60.0)
    leftover = aged(root, ".build-crashed", 1, 2 * day)
    evict(root, keep=in_use, max_bytes=(5 << 20) // 2, max_age_s=30 * day)
    assert sorted(p.name for p in root.iterdir()) == ["in-use", "recent"]
    assert not any(p.exists() for p in (ancient, old, older, leftover))
    assert recent.exists()


def test_a_new_build_evicts_builds_unused_for_too_long(tmp_path: Path) -> None:
    stale = aged(builds_root(), "0" * 32, 1, builds.MAX_AGE_S + 3600)
    assert build_cubin(SOURCE, tmp_path, DEFAULT_FLAGS, fake_nvcc(tmp_path)).ok
    assert not stale.exists()


def test_an_nvcc_whose_version_hangs_is_one_line_naming_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`dice-lsp check` ended with a traceback when `nvcc --version` (part of the cache key) never answered."""
    nvcc = tmp_path / "bin" / "nvcc"
    nvcc.parent.mkdir()
    nvcc.write_text('#!/bin/sh\ncase "$1" in --version) exec sleep 60;; esac\nexit 0\n')
    nvcc.chmod(0o755)
    monkeypatch.setattr(compile_cache, "VERSION_TIMEOUT_S", 1.0)
    with pytest.raises(DiceError) as error:
        check_source(SOURCE, tmp_path, DEFAULT_FLAGS, CompileCache(tmp_path / "c.msgpack"), nvcc)
    assert str(error.value) == (f"{nvcc} --version did not answer within 1 s; is that nvcc installed whole? "
                                "(dice.nvcc chooses another)")


def test_torch_extension_builds_are_evicted_like_kernel_builds(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each benchmarked torch extension left ~16 MB in the cache for good; its folder is now bounded as builds are."""
    from dice_lsp.harness import bench
    from dice_lsp.harness.isolate import Outcome
    from dice_lsp.harness.limits import Limits
    from dice_lsp.toolchain.cache import cache_folder

    stale = aged(cache_folder("extensions"), "f" * 16, 16, builds.MAX_AGE_S + 3600)
    built: list[Path] = []

    def build(call: str, job: dict[str, str], *_args: object, **_kwargs: object) -> Outcome:
        built.append(Path(job["build_dir"]))
        return Outcome(None, "build failed (a stand-in for the 60 s torch build)")

    monkeypatch.setattr(bench, "gpu_arch", lambda: "sm_90")
    monkeypatch.setattr(bench, "run_isolated", build)
    (ref := tmp_path / "ref.py").write_text("")
    report = bench._bench_extension(tmp_path / "k.cu", SOURCE, ref, Limits(), lambda _said: None)
    assert report.reason == "does not compile" and built and built[0].parent == stale.parent
    assert not stale.exists() and built[0].exists()
