"""Candidates from the document (`dice_lsp.completion.sources.document`), golden cases, and what the pipeline does
with them: a line of the file whose neighbours look like the hole's is shown before the model's fill."""

from __future__ import annotations

import pytest

from dice_lsp.complete import PreparedFill, prepare
from dice_lsp.completion.checks import Checks
from dice_lsp.completion.sources.document import candidates
from dice_lsp.engine import EMBEDDED_MODEL, FillResult
from dice_lsp.engine.tokenizer import Tokenizer
from dice_lsp.settings import Settings
from dice_lsp.textdoc import Position

from .lsp_client import ADD_KERNEL

TWO_KERNELS = (
    f"{ADD_KERNEL}\n"
    "__global__ void sub(const float* a, const float* b, float* c, int n) {\n"
    "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "    \n"
    "}\n")
HOLE = Position(7, 4)


def split(text: str, at: Position) -> tuple[str, str]:
    lines = text.split("\n")
    offset = sum(len(line) + 1 for line in lines[:at.line]) + at.character
    return text[:offset], text[offset:]


def test_the_line_after_a_line_like_the_one_above_is_proposed() -> None:
    before, after = split(TWO_KERNELS, HOLE)
    [best, *_] = candidates(before, after)
    assert (best.text, best.source) == ("if (i < n) c[i] = a[i] + b[i];", "document")
    assert best.score == 1.0, "the same line above, the same line below"


def test_a_half_typed_line_gets_what_follows_what_was_typed() -> None:
    text = TWO_KERNELS.replace("    \n}\n", "    if (i < n) c[i] =\n}\n")
    before, after = split(text, Position(7, len("    if (i < n) c[i] =")))
    [best, *_] = candidates(before, after)
    assert best.text == " a[i] + b[i];"


@pytest.mark.parametrize("typed", ["while (", "if (i < n) c[i] = a[i] + b[i];"])
def test_nothing_when_no_line_continues_what_was_typed(typed: str) -> None:
    text = TWO_KERNELS.replace("    \n}\n", f"    {typed}\n}}\n")
    before, after = split(text, Position(7, 4 + len(typed)))
    assert candidates(before, after) == []


def test_a_hole_inside_a_line_gets_nothing_from_the_document() -> None:
    text = TWO_KERNELS.replace("    \n}\n", "    c[i] = ;\n}\n")
    before, after = split(text, Position(7, len("    c[i] = ")))
    assert candidates(before, after) == []


def test_the_lines_next_to_the_hole_are_never_proposed() -> None:
    text = "void f(int* x) {\n    x[0] = 1;\n    \n    x[0] = 1;\n}\n"
    before, after = split(text, Position(2, 4))
    assert all(c.text != "x[0] = 1;" for c in candidates(before, after))


def test_scores_are_ranked_and_bounded() -> None:
    before, after = split(TWO_KERNELS, HOLE)
    found = candidates(before, after, limit=10)
    assert [c.score for c in found] == sorted((c.score for c in found), reverse=True)
    assert all(0.0 <= c.score <= 1.0 for c in found) and len({c.text for c in found}) == len(found)


@pytest.fixture(scope="module")
def prepared() -> PreparedFill:
    found = prepare(Tokenizer(EMBEDDED_MODEL), 512, TWO_KERNELS, HOLE, Settings())
    assert found is not None
    return found


def model(*texts: str) -> FillResult:
    return FillResult(list(texts), 1, [-0.1] * len(texts), [24] * len(texts))


def test_the_documents_line_is_shown_before_the_models_fill(prepared: PreparedFill) -> None:
    completion = prepared.completion(model("if (i < n) c[i] = a[i] * b[i];"))
    assert completion.texts == ["if (i < n) c[i] = a[i] + b[i];", "if (i < n) c[i] = a[i] * b[i];"]
    assert completion.checks == [Checks(True, True, None), Checks(True, True, None)]
    assert completion.sources == ["document", "model"]


def test_without_the_document_source_only_the_model_speaks(prepared: PreparedFill) -> None:
    from dice_lsp.complete import Pipeline

    completion = prepared.completion(model("if (i < n) c[i] = a[i] * b[i];"), pipeline=Pipeline(document=False))
    assert completion.texts == ["if (i < n) c[i] = a[i] * b[i];"]


def test_weak_evidence_leaves_the_model_alone() -> None:
    text = ("__global__ void k(float* y, int n) {\n    int i = threadIdx.x;\n    y[i] = 0;\n}\n"
            "void host(float* y) {\n    cudaDeviceSynchronize();\n    \n}\n")
    prepared = prepare(Tokenizer(EMBEDDED_MODEL), 512, text, Position(6, 4), Settings())
    assert prepared is not None
    completion = prepared.completion(model("cudaFree(y);"))
    assert completion.texts == ["cudaFree(y);"]


# ------------------------------------------------------------------------------------------- runs of lines
AXES = ("__global__ void k(float* v, int nx, int ny, int nz) {\n"
        "    int ix = blockIdx.x * blockDim.x + threadIdx.x;\n"
        "    int iy = blockIdx.y * blockDim.y + threadIdx.y;\n"
        "    {typed}\n"
        "}\n")


@pytest.mark.parametrize(("typed", "expected"), [
    ("", "int iz = blockIdx.z * blockDim.z + threadIdx.z;"),
    ("int iz = ", "blockIdx.z * blockDim.z + threadIdx.z;"),
])
def test_the_next_axis_of_a_run_is_proposed(typed: str, expected: str) -> None:
    from dice_lsp.completion.sources import analogue

    text = AXES.replace("{typed}", typed)
    before, after = split(text, Position(3, 4 + len(typed)))
    assert analogue.candidates(before, after) == [analogue.Candidate(expected, "analogue", 1.0)]


@pytest.mark.parametrize(("first", "second", "expected"), [
    ("a0 = in[0];", "a1 = in[1];", "a2 = in[2];"),
    ("s.x = p.x - q.x;", "s.y = p.y - q.y;", "s.z = p.z - q.z;"),
    ("float a = x[i];", "float b = x[i + 1];", None),  # `i` -> `i + 1` is no one-token step
    ("out[0] = a.x;", "out[1] = b.y;", "out[2] = c.z;"),  # a -> b is a letter step; x -> y an axis step
    ("sum += a;", "sum += b;", "sum += c;"),
    ("int n = 1;", "int n = 1;", None),  # the same line twice: no run
    ("int i = 3;", "int i = 5;", None),  # a jump of two is not a step
])
def test_a_run_steps_every_changed_token_once_more(first: str, second: str, expected: str | None) -> None:
    from dice_lsp.completion.sources import analogue

    before, after = f"void f() {{\n    {first}\n    {second}\n    ", "\n}\n"
    found = analogue.candidates(before, after)
    assert [c.text for c in found] == ([] if expected is None else [expected])


def test_a_run_the_code_below_completes_is_not_proposed() -> None:
    from dice_lsp.completion.sources import analogue

    text = AXES.replace("{typed}", "\n    int iz = blockIdx.z * blockDim.z + threadIdx.z;")
    before, after = split(text, Position(3, 4))
    assert analogue.candidates(before, after) == []


# ------------------------------------------------------------------------------------ names adapted to the hole
def test_pairing_renames_one_to_one_and_keeps_builtins() -> None:
    from dice_lsp.completion.adapt import pairing, renamed

    renames = pairing(["int r = blockIdx.y * blockDim.y + threadIdx.y;", "int c = blockIdx.x;"],
                      ["int row = blockIdx.y * blockDim.y + threadIdx.y;", "int col = blockIdx.x;"])
    assert renames == {"r": "row", "c": "col"}
    assert renamed("if (r < m && c < n) out[r * n + c] = p.x;", renames) == (
        "if (row < m && col < n) out[row * n + col] = p.x;")
    assert pairing(["int a = b;"], ["int a = a;"]) is None, "b -> a while a stays a: not one to one"
    assert pairing(["s.x = 1;"], ["s.y = 1;"]) is None, "a member is never renamed"
    assert pairing(["int a;"], ["float a;"]) is None, "a keyword or type differs: another shape"


def test_a_like_kernel_with_other_names_gives_its_line_renamed() -> None:
    text = ("__global__ void add(const float* a, float* out, int n) {\n"
            "    int idx = blockIdx.x * blockDim.x + threadIdx.x;\n"
            "    if (idx < n) out[idx] = a[idx] + 1.0f;\n"
            "}\n"
            "__global__ void twice(const float* x, float* y, int count) {\n"
            "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
            "    \n"
            "}\n")
    before, after = split(text, Position(6, 4))
    found = candidates(before, after)
    adapted = [c for c in found if getattr(c, "adapted", False)]
    # the names the context pairs up are renamed (idx -> i); the others stay, for the checks to judge
    assert [(c.text, c.score) for c in adapted] == [("if (i < n) out[i] = a[i] + 1.0f;", 1.0)]
