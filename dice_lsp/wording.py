"""How counts read in what users see (`1 error`, `2 errors`, `0 warnings`), and the one type of a callback
that tells the user how long work is going (`Said`: one line of text per step)."""

from __future__ import annotations

from collections.abc import Callable

Said = Callable[[str], None]  # a one-line progress message ("compiling 3 candidates"); a count is not one


def counted(count: int, noun: str, plural: str | None = None) -> str:
    """`count` and `noun`, the noun in the plural unless the count is exactly one (`plural` when it is not
    the noun and an s)."""
    return f"{count} {noun if count == 1 else plural or noun + 's'}"
