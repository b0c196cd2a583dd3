"""bench/plots.py draws every plot of docs/PERFORMANCE.md from the committed logs (no timing, no model)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

pytest.importorskip("matplotlib")

BENCH = Path(__file__).resolve().parents[1] / "bench"


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("plots", BENCH / "plots.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("plots", module)
    spec.loader.exec_module(module)
    return module


plots = _load()


@pytest.mark.parametrize("draw", plots.PLOTS, ids=lambda d: d.__name__)
def test_each_plot_is_drawn_from_the_committed_logs_as_a_png(draw: object, tmp_path: Path) -> None:
    out = draw(plots.LOGS, tmp_path)  # type: ignore[operator]
    assert out.parent == tmp_path and out.suffix == ".png"
    data = out.read_bytes()
    assert len(data) > 1000 and data.startswith(b"\x89PNG\r\n\x1a\n")


def test_the_risk_coverage_run_is_a_test_run_with_a_curve_and_not_an_ablation() -> None:
    folder = plots.newest_test_run(plots.LOGS)
    assert folder.name.startswith("test_") and not folder.name.endswith("_no_twins")
    assert any(folder.glob("*.curve.json"))


def test_the_log_parsers_read_what_the_benches_print() -> None:
    variants, floor = plots.replay_times(
        "replay ms, alternating: Triton step kernels and products 5.209 5.207 5.204; torch operations 6.6 6.7 6.5\n"
        "floor: 3.91 ms per step (the weights read once at the copy bandwidth)\n")
    assert variants == {"Triton step kernels and products": 5.207, "torch operations": 6.6} and floor == 3.91
    sections = plots.markdown_sections("== new1 (x)\n| request | n | p50 ms |\n|---|---|---|\n| a | 20 | 395 |\n")
    assert sections == {"new1": [["a", "20", "395"]]}
