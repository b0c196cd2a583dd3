"""Identifiers adapted to the hole: a line copied from elsewhere, with its names renamed to the hole's.

Code repeats with other names: a second kernel like the first, with `r`/`c` where the first had `row`/`col`. When
the lines around a candidate line and the lines around the hole have the same shape (the same tokens but for
identifiers), the identifiers that differ pair up (`r` -> `row`); the candidate is proposed with them renamed. A
pairing must be one to one and the same wherever a name occurs; keywords, CUDA's built-in variables and
members after `.`/`->` are never renamed (the shapes must agree on them). Nothing is adapted when no pair differs.
"""

from __future__ import annotations

import re

from dice_lsp.completion.sources import TOKEN

_NAME = re.compile(r"[A-Za-z_]\w*")
_FIXED_WORDS = """
    if else for while do return break continue switch case default goto sizeof typedef struct class union enum
    const volatile static extern inline unsigned signed int float double char bool void auto long short size_t
    true false nullptr this template typename new delete operator namespace using
    threadIdx blockIdx blockDim gridDim warpSize x y z w
"""
FIXED = frozenset(_FIXED_WORDS.split())  # keywords, types and CUDA's built-ins: never renamed


def _names(tokens: list[str]) -> list[tuple[int, str]]:
    """The renamable identifiers of a token list, with their positions."""
    found = []
    for index, token in enumerate(tokens):
        after = tokens[index - 1] if index > 0 else ""
        member = after == "." or (after == ">" and index > 1 and tokens[index - 2] == "-")
        if _NAME.fullmatch(token) and token not in FIXED and not token.startswith("__") and not member:
            found.append((index, token))
    return found


def pairing(theirs: list[str], mine: list[str]) -> dict[str, str] | None:
    """The renaming that turns the lines `theirs` (around the candidate) into `mine` (around the hole), line by
    line; None when some pair of lines differs in shape or a name would pair with two."""
    forward: dict[str, str] = {}
    backward: dict[str, str] = {}
    for their_line, my_line in zip(theirs, mine, strict=True):
        one, two = TOKEN.findall(their_line), TOKEN.findall(my_line)
        if len(one) != len(two):
            return None
        renamable = {index for index, _ in _names(one)}
        for index, (a, b) in enumerate(zip(one, two, strict=True)):
            if a == b:
                if index in renamable and (forward.setdefault(a, b) != b or backward.setdefault(b, a) != a):
                    return None
                continue
            if index not in renamable or not _NAME.fullmatch(b) or b in FIXED:
                return None
            if forward.setdefault(a, b) != b or backward.setdefault(b, a) != a:
                return None
    return {a: b for a, b in forward.items() if a != b}


def renamed(text: str, renames: dict[str, str]) -> str:
    """`text` with its renamable identifiers renamed (`pairing`), its spacing kept."""
    if not renames:
        return text
    tokens = list(TOKEN.finditer(text))
    words = [m.group() for m in tokens]
    out = text
    for index, name in reversed(_names(words)):
        if name in renames:
            lo, hi = tokens[index].span()
            out = out[:lo] + renames[name] + out[hi:]
    return out
