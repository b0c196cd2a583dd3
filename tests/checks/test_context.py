"""The checks of a request as the completion asks them: both verdicts of a fill, the spans re-masking denoises
again, and every rule with its golden cases."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

from dice_lsp.completion.checks import Checks
from dice_lsp.completion.checks import rules as rules_package
from dice_lsp.completion.checks.context import CheckContext, parses
from dice_lsp.completion.checks.rules import RULES
from tests.checks.documents import BODY, BODY_FILL, BROKEN_ELSEWHERE, INDEXING, KERNEL, MIDLINE, context

MUST_PASS = {  # fill: (document, why)
    "__syncthreads();": (KERNEL, "a barrier, a CUDA built-in"),
    "float v = __ldg(&in[i]);": (KERNEL, "a read-only load of a parameter, declaring a new local"),
    "atomicAdd(&out[0], acc);": (KERNEL, "an atomic on a parameter with a local"),
    "for (int k = 0; k < n; ++k) acc += in[k];": (KERNEL, "a loop whose variable the fill declares"),
    "float4 q = vec[i];\n    acc += q.x + q.y * q.w;": (KERNEL, "a float4 and its members"),
    "__shared__ typename cub::BlockReduce<float, 256>::TempStorage temp;\n"
    "    acc = cub::BlockReduce<float, 256>(temp).Sum(acc);": (KERNEL, "cub's block reduction, the file includes cub"),
    "acc += sq(in[i]) * BLOCK;": (KERNEL, "a __device__ function and a macro of the file"),
    "if (i < n) {\n        acc = in[i];\n    } else {\n        acc = 0.0f;\n    }": (KERNEL, "blocks open and close"),
    "acc = in[i];": (BROKEN_ELSEWHERE, "the half-typed line is in another function"),
    "in[i] * 2.0f;": (MIDLINE, "finishes the half-typed line"),
    "];": (INDEXING, "closes the indexing expression and the statement"),
    BODY_FILL: (BODY, "a whole body that closes the kernel before the next one"),
}


@pytest.mark.parametrize("fill", list(MUST_PASS))
def test_fills_that_pass(fill: str) -> None:
    document, why = MUST_PASS[fill]
    checks = context(document)
    assert checks.check(fill) == Checks(True, True, None), why
    assert checks.faults(fill) == [], why


@pytest.mark.parametrize(("line", "fill", "ok"), [
    ("    float y = 1.", "x / 2;", False),  # the literal `1.x` is the fill's doing
    ("    float y = 1.", "5f / 2;", True),
    ("    int ", "n = 0;", False),  # `n` is the kernel's parameter: declared twice
    ("    int ", "m = 0;", True),
])
def test_a_midline_fill_is_judged_with_the_start_of_its_line(line: str, fill: str, ok: bool) -> None:
    text = f"__global__ void k(float* out, int n) {{\n{line}\n    out[0] = 0.f;\n}}\n"
    at = text.index(line) + len(line)
    assert CheckContext(text, at, at).check(fill).passed == (2 if ok else 1)


def test_faults_are_what_re_masking_denoises_again() -> None:
    checks = context("__global__ void k(float* out, int n) {\n    ‸\n    out[0] = tid;\n}\n")
    assert checks.faults("int tid = 0;") == []
    assert checks.faults("int n = 1;") == [(0, 10), (4, 5)]  # `tid` left undeclared (all of it), `n` twice
    assert checks.faults("foo(1);") == [(0, 3), (0, 7)]  # an unknown name, and `tid` undeclared
    assert checks.faults("out[n];") == [(0, 7)]  # a statement that does nothing


def test_offsets_are_string_indices_past_non_ascii_text() -> None:
    checks = context(KERNEL.replace("// the square of x", "// le carré de x, ½"))
    assert checks.parses("/* é */ int j = threadIdxx.x;")
    assert not checks.parses("/* é */ float maxval = = ;;")


def test_the_plain_function_matches_the_context() -> None:
    cursor = KERNEL.index("‸")
    text = KERNEL.replace("‸", "")
    assert parses(text, cursor, cursor, "__syncthreads();")
    assert not parses(text, cursor, cursor, "float maxval = = ;;")


def test_checks_result() -> None:
    result = Checks(parses=True, names=False, compiles=None)
    assert result.passed == 1
    assert result.to_json() == {"parses": True, "names": False, "types": None, "compiles": None}
    assert Checks(True, True, None, True).passed == 3 and Checks(True, True, None, False).passed == 2
    assert Checks(True, True, True).passed == 3


def test_every_rule_is_asked_and_has_its_golden_cases() -> None:
    """A rule is one module of `rules/` with a `RULE` listed in `RULES`, and its golden cases in
    tests/checks/test_<module>.py."""
    folder = Path(rules_package.__file__).parent
    modules = sorted(path.stem for path in folder.glob("*.py") if path.stem != "__init__")
    assert [importlib.import_module(f"{rules_package.__name__}.{m}").RULE in RULES for m in modules] == [
        True] * len(modules)
    assert len(RULES) == len(modules) == len({rule.name for rule in RULES})
    here = Path(__file__).parent
    assert [m for m in modules if not (here / f"test_{m}.py").is_file()] == []
