"""Kernel rewriting's pieces: finding a kernel and swapping its body, deduplicating rewrites, reading a
model's reply, drafts re-denoised in place, and the strategies `generate` uses per model family."""

from __future__ import annotations

from pathlib import Path

import pytest

from dice_lsp.engine import Draft, FillRequest, LoadedModel, SamplerConfig, fill, load_model
from dice_lsp.engine.infill import draft_rows
from dice_lsp.errors import DiceError, InputError
from dice_lsp.optimize import candidates as gen
from dice_lsp.optimize.candidates import (
    BodyCandidate,
    body_in_answer,
    body_of,
    distinct,
    find_kernel,
    normalized,
    with_body,
)

from .conftest import edit_config

ROOT = Path(__file__).resolve().parents[1]
SAXPY = (ROOT / "examples" / "saxpy.cu").read_text()
SCALE = ("__global__ void scale(float* x, float a, int n) {\n"
         "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
         "    if (i < n) x[i] = a * x[i];\n"
         "}\n")
RENOISE = ["re-noise 30%", "re-noise 60%", "re-noise 100%"]


def parts(text: str, name: str) -> tuple[str, str, str]:
    """(everything up to the body's `{`, the body, everything from its `}`)."""
    kernel = find_kernel(text, name)
    return text[:kernel.body_open + 1], body_of(text, kernel), text[kernel.body_close:]


def test_find_kernel_by_name() -> None:
    kernel = find_kernel(SAXPY, "saxpy_vec4")
    assert kernel.name == "saxpy_vec4" and kernel.is_kernel
    assert SAXPY[kernel.head:].startswith("__global__ void saxpy_vec4(float* y, const float* x, float a, int n) {")
    assert SAXPY[kernel.body_open] == "{" and SAXPY[kernel.body_close] == "}"
    assert SAXPY[kernel.body_close:] == "}\n", "the last kernel's `}` closes the file"


def test_unknown_kernel_is_an_input_error_listing_the_kernels() -> None:
    with pytest.raises(InputError, match=r"no kernel named 'saxpy2' .*\(kernels: saxpy, saxpy_vec4\)"):
        find_kernel(SAXPY, "saxpy2")
    device_only = "__device__ float sq(float x) { return x * x; }\n"
    with pytest.raises(InputError, match=r"\(kernels: none\)"):
        find_kernel(device_only, "sq")


def test_with_body_and_body_of_keep_everything_outside_the_braces() -> None:
    """Non-ASCII text before the kernel and CRLF line ends: offsets are string indices, not bytes."""
    text = "// naïve saxpy — für alle\r\n" + SAXPY.replace("\n", "\r\n")
    kernel = find_kernel(text, "saxpy")
    assert body_of(text, kernel) == ("\r\n    int i = blockIdx.x * blockDim.x + threadIdx.x;\r\n"
                                     "    if (i < n) y[i] = a * x[i] + y[i];\r\n")
    assert with_body(text, kernel, body_of(text, kernel)) == text
    new = "\r\n    // rewritten\r\n    y[0] = a;\r\n"
    changed = with_body(text, kernel, new)
    assert changed[:kernel.body_open + 1] == text[:kernel.body_open + 1]
    assert changed[kernel.body_open + 1 + len(new):] == text[kernel.body_close:]
    assert body_of(changed, find_kernel(changed, "saxpy")) == new
    assert body_of(changed, find_kernel(changed, "saxpy_vec4")) == body_of(text, find_kernel(text, "saxpy_vec4"))


def test_normalized_ignores_comments_and_whitespace() -> None:
    assert normalized("x[i]  =\ta * x[i]; // scale\n  /* done\n */ return;") == "x[i] = a * x[i]; return;"
    assert normalized("  // only a comment\n/* and\n another */\n") == ""


def test_distinct_drops_copies_of_the_original_empties_and_repeats_in_order() -> None:
    original = "\n    if (i < n) x[i] = a * x[i];\n"
    made = [
        BodyCandidate("\n  if (i < n)   x[i] = a * x[i];  // unchanged\n", "re-noise 30%"),
        BodyCandidate("", "re-noise 60%"),
        BodyCandidate("\n    /* nothing */\n", "re-noise 100%"),
        BodyCandidate("\n    if (i < n) x[i] *= a;\n", "signature"),
        BodyCandidate("\n    for (; i < n; i += gridDim.x * blockDim.x) x[i] *= a;\n", "prompted"),
        BodyCandidate("\n\tif (i < n)\n\t\tx[i] *= a; // the same again\n", "re-noise 30%"),
    ]
    assert distinct(made, original) == [made[3], made[4]]


def test_body_in_answer_takes_the_same_named_kernel_from_a_chat_reply() -> None:
    body = "\n    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)\n" \
           "        x[i] *= a;\n"
    faster = f"__global__ void scale(float* x, float a, int n) {{{body}}}\n"
    other = "__global__ void helper(float* x) { x[0] = 0; }\n"
    reply = (f"Here is a helper first:\n```cpp\n{other}```\nand the faster kernel, with a {{grid-stride}} loop:\n"
             f"```cuda\n#include <cuda_runtime.h>\n\n{faster}```\nIt keeps the name and the results.")
    assert body_in_answer(reply, "scale") == body
    assert body_in_answer(reply, "helper") == " x[0] = 0; "


def test_body_in_answer_from_a_bare_or_cut_off_reply_and_none_when_missing() -> None:
    body = "\n    int i = threadIdx.x;\n    if (i < n) x[i] = a * x[i];\n"
    faster = f"__global__ void scale(float* x, float a, int n) {{{body}}}\n"
    assert body_in_answer(faster, "scale") == body
    assert body_in_answer(f"```cuda\n{faster}", "scale") == body, "an answer cut off before its closing fence"
    assert body_in_answer(f"```cuda\n{faster}```", "saxpy") is None
    assert body_in_answer("I would unroll the loop.", "scale") is None
    assert body_in_answer("```cuda\n__global__ void scale(float* x, float a, int n) {\n    x[0] = a;\n", "scale") \
        is None, "a kernel whose body never closes is not taken"


@pytest.mark.parametrize("family", ["native", "sdar"])
def test_draft_without_noise_or_spans_is_returned_unchanged(family: str, native_dir: Path, sdar_dir: Path) -> None:
    model = load_model(native_dir if family == "native" else sdar_dir, device="cpu", dtype="float32")
    prefix, body, suffix = parts(SCALE, "scale")
    rows = draft_rows(model, Draft(body), "", rows=3, seed=0)
    assert rows.tolist() == [model.tokenizer.encode(body)] * 3
    request = FillRequest(prefix, suffix, candidates=2, sampler=SamplerConfig(temperature=1.0), draft=Draft(body))
    assert fill(model, request).texts == [body, body]


def test_spans_mask_the_tokens_they_overlap_plus_grow_masks(native_dir: Path) -> None:
    model = load_model(native_dir, device="cpu", dtype="float32")
    tok, mask = model.tokenizer, model.special.mask_id
    _, body, _ = parts(SCALE, "scale")
    word = body.index(" blockDim")
    assert len(tok.encode(" blockDim")) == 1
    before, after = tok.encode(body[:word]), tok.encode(body[word + 9:])
    assert tok.encode(body) == [*before, *tok.encode(" blockDim"), *after], "the word is one token in place"

    lock = body.index("lockDim")  # two characters inside the token: the whole token is masked
    rows = draft_rows(model, Draft(body, spans=((lock, lock + 2),), grow=3), "", rows=2, seed=5)
    assert rows.tolist() == [[*before, *[mask] * (1 + 3), *after]] * 2

    end = body.index(" +", word)  # ` blockDim.x`: three tokens, the span ends where ` +` begins
    rows = draft_rows(model, Draft(body, spans=((word, end),), grow=0), "", rows=1, seed=0)
    assert rows.tolist() == [[*before, *[mask] * 3, *tok.encode(body[end:])]]

    whole = draft_rows(model, Draft(body, noise=1.0), "", rows=2, seed=0)
    assert whole.tolist() == [[mask] * len(tok.encode(body))] * 2, "noise alone adds no masks to grow into"


@pytest.mark.parametrize("family", ["native", "sdar"])
def test_fill_keeps_the_draft_outside_the_masked_tokens(family: str, native_dir: Path, sdar_dir: Path) -> None:
    model = load_model(native_dir if family == "native" else sdar_dir, device="cpu", dtype="float32")
    prefix, body, suffix = parts(SCALE, "scale")
    lo = body.index("blockIdx")
    hi = lo + len("blockIdx")
    draft = Draft(body, spans=((lo, hi),))
    request = FillRequest(prefix, suffix, candidates=3, sampler=SamplerConfig(steps=4, temperature=1.0), draft=draft)
    texts = fill(model, request).texts
    assert len(texts) == 3
    for text in texts:  # the word's token may carry the space before it
        assert text.startswith(body[:lo].rstrip(" ")) and text.endswith(body[hi:]), text


def test_causal_model_refuses_a_draft(native_dir: Path, tmp_path: Path) -> None:
    model = load_model(edit_config(native_dir, tmp_path, attention="causal"), device="cpu", dtype="float32")
    assert model.attention == "causal"
    prefix, body, suffix = parts(SCALE, "scale")
    with pytest.raises(DiceError, match="cannot re-denoise a draft"):
        fill(model, FillRequest(prefix, suffix, draft=Draft(body, noise=0.3)))


def generated(model: LoadedModel, count: int) -> tuple[list[BodyCandidate], list[str]]:
    said: list[str] = []
    made = gen.generate(model, SCALE, find_kernel(SCALE, "scale"), count, SamplerConfig(steps=4), said=said.append)
    assert all(isinstance(c.body, str) for c in made)
    return made, said


def test_generate_on_a_bidirectional_model_renoises_and_fills_behind_the_signature(native_dir: Path) -> None:
    made, said = generated(load_model(native_dir, device="cpu", dtype="float32"), 4)
    assert sorted(c.origin for c in made) == sorted([*RENOISE, "signature"])
    assert len(said) == 4, "one progress message per strategy"
    assert all(c.body.startswith("\n") for c in made if c.origin == "signature"), "the body opens below the {"


def test_generate_on_a_block_model_also_asks_for_a_rewrite(sdar_dir: Path) -> None:
    """The fixture's window is 256 tokens: the answer is bounded by it. Random weights: answers rarely hold
    a kernel."""
    made, said = generated(load_model(sdar_dir, device="cpu", dtype="float32"), 5)
    origins = [c.origin for c in made]
    assert sorted(o for o in origins if o != "prompted") == sorted([*RENOISE, "signature"])
    assert len(said) == 5, "re-noise at three strengths, signature, prompted"


def test_generate_on_a_causal_model_does_not_renoise(native_dir: Path, tmp_path: Path) -> None:
    causal = edit_config(native_dir, tmp_path, attention="causal")
    made, said = generated(load_model(causal, device="cpu", dtype="float32"), 2)
    assert "signature" in {c.origin for c in made} and {c.origin for c in made} <= {"signature", "prompted"}
    assert len(said) == 2, "signature, prompted"

