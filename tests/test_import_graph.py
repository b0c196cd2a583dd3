"""The package's layers: no folder of `dice_lsp` (nor a top-level module) imports, through any chain, one that
imports it back. A cycle between folders is how a layer starts leaning on the one above it (settings ↔ remote,
cuda ↔ toolchain, evals ↔ training were such cycles); the engine imports nothing of the product but its errors."""

from __future__ import annotations

import ast
import itertools
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "dice_lsp"


def _unit(parts: tuple[str, ...]) -> str:
    """The folder a module lives in (its first part under the package), or the top-level module itself."""
    return parts[0] if (PACKAGE / parts[0]).is_dir() else parts[0].removesuffix(".py")


def import_graph() -> dict[str, dict[str, str]]:
    """unit -> {unit it imports: one file that does}; every import of the package, lazy ones inside functions too."""
    graph: dict[str, dict[str, str]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        unit = _unit(path.relative_to(PACKAGE).parts)
        edges = graph.setdefault(unit, {})
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                modules = [node.module]
                if node.module == "dice_lsp":  # `from dice_lsp import errors`
                    modules = [f"dice_lsp.{alias.name}" for alias in node.names]
            elif isinstance(node, ast.Import):
                modules = [alias.name for alias in node.names]
            else:
                continue
            for module in modules:
                parts = module.split(".")
                if parts[0] != "dice_lsp" or len(parts) < 2:
                    continue
                first = parts[1] if (PACKAGE / parts[1]).is_dir() else f"{parts[1]}.py"
                target = _unit((first,))
                if target != unit:
                    edges.setdefault(target, str(path.relative_to(PACKAGE.parent)))
    return graph


def cycle(graph: dict[str, dict[str, str]]) -> list[str] | None:
    """One cycle of `graph` as the units along it (first repeated last), or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(unit: str) -> list[str] | None:
        state[unit] = 1
        path.append(unit)
        for target in graph.get(unit, {}):
            if state.get(target) == 1:
                return [*path[path.index(target):], target]
            if target not in state and (found := visit(target)) is not None:
                return found
        path.pop()
        state[unit] = 2
        return None

    for unit in sorted(graph):
        if unit not in state and (found := visit(unit)) is not None:
            return found
    return None


def test_no_folder_or_top_module_imports_one_that_imports_it_back() -> None:
    graph = import_graph()
    found = cycle(graph)
    where = [] if found is None else [f"{a} -> {b} ({graph[a][b]})" for a, b in itertools.pairwise(found)]
    assert found is None, "import cycle: " + "; ".join(where)


def test_the_engine_imports_only_the_errors_of_the_product() -> None:
    assert set(import_graph()["engine"]) == {"errors"}


def test_a_cycle_is_found_and_named() -> None:
    """The search itself: a two-step and a three-step cycle are found, a chain is not one."""
    assert cycle({"a": {"b": "x"}, "b": {"a": "y"}}) == ["a", "b", "a"]
    assert cycle({"a": {"b": "x"}, "b": {"c": "y"}, "c": {"a": "z"}}) == ["a", "b", "c", "a"]
    assert cycle({"a": {"b": "x"}, "b": {"c": "y"}, "c": {}}) is None
