"""LSP positions over text: what a client may send past a line's end."""

from __future__ import annotations

import pytest

from dice_lsp.errors import InputError
from dice_lsp.textdoc import Position, clamped, offset_at

TEXT = "int a;\r\nfloat \U0001F600;\nx"  # a CRLF line, a line with a character of two UTF-16 units


@pytest.mark.parametrize(("given", "means"), [
    (Position(0, 3), Position(0, 3)),
    (Position(0, 7), Position(0, 6)),  # past the end of a CRLF line: its end, before the line break
    (Position(1, 2**31 - 1), Position(1, 9)),  # 6 + 2 units + ";"
    (Position(2, 5), Position(2, 1)),
    (Position(3, 0), Position(3, 0)),  # a line past the text: left for offset_at to refuse
])
def test_a_character_past_the_line_end_means_the_line_end(given: Position, means: Position) -> None:
    assert clamped(TEXT, given) == means


def test_a_clamped_position_is_an_offset_and_a_line_past_the_text_is_refused() -> None:
    assert offset_at(TEXT, clamped(TEXT, Position(1, 1000))) == TEXT.index("\nx")
    with pytest.raises(InputError, match="line 3 is outside the file"):
        offset_at(TEXT, clamped(TEXT, Position(3, 0)))
