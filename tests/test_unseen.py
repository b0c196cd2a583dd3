"""bench/unseen.py: a real-code file the corpus holds (a copy, a near copy, one built of copied windows) is seen;
a file of the same idioms written anew is not. And bench/real_code.py's requests carry the truth they removed."""

from __future__ import annotations

import importlib.util
import random
import sys
from pathlib import Path
from types import ModuleType

from dice_lsp.training.suite_build import CorpusIndex

BENCH = Path(__file__).resolve().parents[1] / "bench"


def _load(name: str) -> ModuleType:
    sys.path.insert(0, str(BENCH))
    try:
        spec = importlib.util.spec_from_file_location(name, BENCH / f"{name}.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module  # its dataclasses resolve their annotations through it
        spec.loader.exec_module(module)
        return module
    finally:
        sys.path.remove(str(BENCH))


def _kernel(name: str, body: list[str]) -> str:
    return "\n".join([f"__global__ void {name}(const float* x, float* y, int n) {{", *body, "}", ""])


BODY = [f"    float v{k} = x[(blockIdx.x * blockDim.x + threadIdx.x) * {k + 2} % n] * {k}.5f;" for k in range(100)]
OTHER = [f"    double w{k} = y[threadIdx.y + {k}] - {k * 7}.0;" for k in range(100)]


def test_copies_and_near_copies_are_seen_and_new_code_is_not(tmp_path: Path) -> None:
    unseen = _load("unseen")
    index = CorpusIndex.from_texts([_kernel("scale", BODY)])
    (tmp_path / "copy.cu").write_text(_kernel("scale", BODY).replace("    ", "  "))  # whitespace aside
    (tmp_path / "near.cu").write_text(_kernel("scale", [*BODY[:99], "    float extra = 0.0f;"]))
    (tmp_path / "half.cu").write_text(_kernel("mixed", BODY[:50] + OTHER[:50]))
    (tmp_path / "new.cu").write_text(_kernel("other", OTHER))
    verdicts = {path.name: unseen.verdict(index, path) for path in sorted(tmp_path.iterdir())}
    assert verdicts["copy.cu"].exact and verdicts["copy.cu"].seen
    assert not verdicts["near.cu"].exact and verdicts["near.cu"].near and verdicts["near.cu"].seen
    assert not verdicts["half.cu"].exact and 0.3 < verdicts["half.cu"].share < 0.7 and verdicts["half.cu"].seen
    assert verdicts["new.cu"].share == 0.0 and not verdicts["new.cu"].seen


def test_real_code_requests_keep_what_they_removed() -> None:
    real_code = _load("real_code")
    text = _kernel("k", ["    int i = blockIdx.x * blockDim.x + threadIdx.x;", "    if (i < n) y[i] = x[i];"])
    lines = text.split("\n")
    for kind, document, cursor, truth in real_code.requests(text, random.Random(3)):
        if kind == "emptied":
            assert document.split("\n")[cursor.line].strip() == ""
            assert lines[cursor.line].strip() == truth
        elif kind == "midline":
            assert document.split("\n")[cursor.line] + truth == lines[cursor.line]
        else:
            assert truth is None
    assert real_code.exact("    ", "int i=0;  \n", "int i = 0;") and not real_code.exact("", "int i = 1;", "int i = 0;")
    assert not real_code.exact("    int", "i = 0;", " i = 0;")  # `inti`: not the line it was
