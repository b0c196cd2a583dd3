"""How counts read in what users see: `1 error`, `2 errors`, `0 warnings`."""

from __future__ import annotations


def counted(count: int, noun: str, plural: str | None = None) -> str:
    """`count` and `noun`, the noun in the plural unless the count is exactly one (`plural` when it is not
    the noun and an s)."""
    return f"{count} {noun if count == 1 else plural or noun + 's'}"
