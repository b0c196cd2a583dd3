"""How alike two lines of code are: the Dice coefficient of their token multisets (words and single punctuation
characters). Blind to whitespace and order, cheap enough for every line of a large file on each keystroke; the
completion's sources rank candidates with it and the model's context picks the file's lines like the hole's."""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from functools import cached_property

TOKEN = re.compile(r"\w+|[^\w\s]")  # a word or one other character: how every source compares code


@dataclass(frozen=True)
class Line:
    text: str  # stripped

    @cached_property
    def tokens(self) -> Counter[str]:
        return Counter(TOKEN.findall(self.text))


def similarity(a: Line, b: Line) -> float:
    """Dice coefficient of the two lines' token multisets: 1.0 for the same tokens, 0.0 for none shared."""
    total = sum(a.tokens.values()) + sum(b.tokens.values())
    if total == 0:
        return 1.0 if a.text == b.text else 0.0
    return 2 * sum((a.tokens & b.tokens).values()) / total
