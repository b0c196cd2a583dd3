"""Where a fill meets the text around it: token healing at the prefix, pads ending a region early."""

from __future__ import annotations

import pytest
import torch

from dice_lsp.engine import EMBEDDED_MODEL, SamplerConfig
from dice_lsp.engine.infill import after_overlap, heal_prefix
from dice_lsp.engine.sampling import Denoiser
from dice_lsp.engine.tokenizer import SpecialTokens, Tokenizer


@pytest.fixture(scope="module")
def tok() -> Tokenizer:
    return Tokenizer(EMBEDDED_MODEL)


@pytest.mark.parametrize(("prefix", "overlap"), [
    ("    int i = threadIdx.x;\n    ", " "),  # an indented empty line: the last space opens the next token
    ("    int i = blockId", " blockId"),  # half an identifier is rewritten whole by the model
    ("    foo(a, ", " "),
    ("    foo(", ""),
    ("", ""),
    ("__global__ void k() {\n", ""),
    ("    // \u200b note, é, 中文\n    int i = 0;\n    ", " "),  # characters of several byte tokens
    ("    float d = 1.f; // 1 µs\n    int i = blockId", " blockId"),
])
def test_heal_prefix_leaves_the_text_the_model_rewrites(tok: Tokenizer, prefix: str, overlap: str) -> None:
    ids, tail = heal_prefix(tok, prefix)
    assert tail == overlap
    assert tok.decode(ids) + tail == prefix


def test_healed_tokens_are_those_of_the_text_followed_by_code(tok: Tokenizer) -> None:
    prefix = "int i = threadIdx.x;\n    "
    ids, _ = heal_prefix(tok, prefix)
    assert tok.encode(prefix + "if (i < n) {}")[: len(ids)] == ids
    assert tok.encode(prefix) != ids, "plain encoding ends in a whitespace token never seen before code"


@pytest.mark.parametrize(("text", "overlap", "shown"), [
    ("eor = 0;", "e", "or = 0;"),  # the tail written again: what follows it (the name check judges `_storageor`)
    (" blockIdx.x;", " blockId", "x.x;"),
    ("or = 0;", "e", ""),  # written over the tail: after `_storage` it would read `_storageor`, no one's word
    ("_t = true;", "e", ""),
    ("exp.x);", "x", ""),
    (") = col_sum[i];", " i", ") = col_sum[i];"),  # a closer after the typed word: placed after it
    (" * 2;", "x", " * 2;"),
    ("if (i < n) {", " ", "if (i < n) {"),  # a healed space: no word to glue onto
    ("c[i] = 0;", "", "c[i] = 0;"),
])
def test_a_region_is_placed_after_the_typed_text_unless_it_glues_onto_its_word(text: str, overlap: str,
                                                                                shown: str) -> None:
    assert after_overlap(text, overlap) == shown


def test_a_confident_pad_is_committed_before_a_doubtful_token() -> None:
    special = SpecialTokens(mask_id=2, pad_id=0, eos_id=1)
    denoiser = Denoiser(SamplerConfig(steps=4), special, torch.device("cpu"))
    tokens = torch.tensor([[7, 0, 0, 9]])
    confidence = torch.tensor([[0.2, 0.99, 0.98, 0.3]])
    masked = torch.ones_like(tokens, dtype=torch.bool)
    chosen = denoiser.choose(tokens, confidence, masked, steps_left=2)  # quota: 2 of 4
    assert chosen.tolist() == [[False, True, True, False]]
    assert denoiser.choose(tokens, confidence, masked, steps_left=1).all(), "the last step commits everything"
