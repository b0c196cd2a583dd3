"""The context builder counts tokens of the whole file on every completion; `Tokenizer.counting_starts` gives
exactly one encoding's token starts from line-sized pieces it remembers, so an edited file costs only its
changed lines."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dice_lsp.engine.tokenizer import Tokenizer
from dice_lsp.evals.suite import load_suite

EMBEDDED = Path(__file__).resolve().parents[1] / "dice_lsp" / "models" / "dice-tiny"


@pytest.fixture(scope="module")
def tok() -> Tokenizer:
    return Tokenizer(EMBEDDED)


def suite_texts(count: int) -> list[str]:
    return [file.text for file in list(load_suite("cuda-infill", "dev").files.values())[:count]]


def test_pieces_give_one_encodings_starts_on_real_files(tok: Tokenizer) -> None:
    assert tok._pieces_exact
    for text in suite_texts(40):
        for variant in (text, text.replace("\n", "\r\n"), text.replace("    ", "\t")):
            assert tok.counting_starts(variant) == tok.token_starts(variant)


CODE_CHARS = st.sampled_from(list("ab_x01 \t\n\r{}();=*+-/\\\"'#<>.,:é✓"))


@settings(max_examples=300, deadline=None)
@given(st.lists(CODE_CHARS, max_size=120).map("".join))
def test_pieces_give_one_encodings_starts_on_any_text(text: str) -> None:
    tok = Tokenizer(EMBEDDED)
    assert tok.counting_starts(text) == tok.token_starts(text)


def test_an_edited_file_encodes_only_its_changed_pieces(tok: Tokenizer, monkeypatch: pytest.MonkeyPatch) -> None:
    text = suite_texts(1)[0]
    tok.counting_starts(text)
    asked: list[list[str]] = []
    batch = tok._tok.encode_batch
    monkeypatch.setattr(tok._tok, "encode_batch", lambda pieces, **kw: asked.append(pieces) or batch(pieces, **kw))
    at = text.index("\n", len(text) // 2)
    edited = text[:at] + " x;" + text[at:]
    assert tok.counting_starts(edited) == tok.token_starts(edited)
    assert len(asked) == 1 and len(asked[0]) == 1 and asked[0][0].endswith(" x;")


def test_a_tokenizer_whose_pieces_differ_encodes_the_whole_text(tok: Tokenizer,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    fresh = Tokenizer(EMBEDDED)
    monkeypatch.setattr(Tokenizer, "_piece_starts", lambda self, text: [0])  # pieces that would be wrong
    text = suite_texts(1)[0]
    assert fresh.counting_starts(text) == tok.token_starts(text)
