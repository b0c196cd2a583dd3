"""Candidates that continue a run of lines: the next line of a sequence the lines above have started.

CUDA code writes the same statement once per axis, lane or element: `int ix = blockIdx.x * blockDim.x +
threadIdx.x;` then the same for `y`, then for `z`; `a0 = in[0];` then `a1 = in[1];`. When the two nearest
non-blank lines above the hole have the same tokens except for a few that each take one step (`x`→`y`, `0`→`1`,
`a`→`b`, `ix`→`iy`), the line after them takes the same step again (`y`→`z`, `1`→`2`, `b`→`c`, `iy`→`iz`):
that line is proposed. For a half-typed line the candidate is what follows the typed text, when the step's line
begins with it. A line that the code already has right below the hole is not proposed (the run is complete).
"""

from __future__ import annotations

import re

from dice_lsp.completion.sources import TOKEN, Candidate

SOURCE = "analogue"
MAX_CHANGES = 4  # tokens that may differ between the two lines above (a step changes each axis's tokens)
_AXES = "xyzw"


def step(a: str, b: str) -> str | None:
    """The token after `b` when `a` -> `b` is one step of a run, else None: an axis (`x`->`y` gives `z`), a number
    (`0`->`1` gives `2`), a single letter (`a`->`b` gives `c`), or a name whose last character steps so
    (`ix`->`iy` gives `iz`, `a0`->`a1` gives `a2`, `row0`->`row1` gives `row2`)."""
    if a.isdigit() and b.isdigit():
        return str(2 * int(b) - int(a)) if int(b) - int(a) in (1, -1) and 2 * int(b) - int(a) >= 0 else None
    if len(a) == len(b) == 1:
        if a in _AXES and b in _AXES and _AXES.index(b) == _AXES.index(a) + 1 and b != "w":
            return _AXES[_AXES.index(b) + 1]
        if a.isalpha() and b.isalpha() and a.islower() == b.islower() and ord(b) - ord(a) == 1 and b not in "zZ":
            return chr(ord(b) + 1)
        return None
    prefix_a, number_a = _split_number(a)
    prefix_b, number_b = _split_number(b)
    if number_a and number_b and prefix_a == prefix_b and prefix_a:
        nxt = step(number_a, number_b)
        return prefix_a + nxt if nxt is not None else None
    if len(a) == len(b) > 1 and a[:-1] == b[:-1] and (a[:-1][-1:].isalnum() or a[:-1].endswith("_")):
        last = step(a[-1], b[-1])
        return a[:-1] + last if last is not None and not last.isdigit() else None
    return None


def _split_number(token: str) -> tuple[str, str]:
    match = re.fullmatch(r"(.*?)(\d+)", token)
    return (match.group(1), match.group(2)) if match else (token, "")


def _stepped(first: str, second: str) -> str | None:
    """`second` with every token that differs from `first` stepped once more, when the two lines differ only in
    such tokens (the same other tokens, in the same order); None otherwise."""
    one, two = TOKEN.findall(first), TOKEN.findall(second)
    if len(one) != len(two) or one == two:
        return None
    changed = [(i, a, b) for i, (a, b) in enumerate(zip(one, two, strict=True)) if a != b]
    if len(changed) > MAX_CHANGES:
        return None
    steps: dict[tuple[str, str], str] = {}
    for _, a, b in changed:
        nxt = step(a, b)
        if nxt is None or steps.setdefault((a, b), nxt) != nxt:
            return None
    text = second
    # replace the changed tokens in place, right to left, so that offsets stay valid
    spans = [m.span() for m in TOKEN.finditer(second)]
    for index, a, b in reversed(changed):
        lo, hi = spans[index]
        text = text[:lo] + steps[(a, b)] + text[hi:]
    return text


def _non_blank(lines: list[str], count: int) -> list[str]:
    found = []
    for line in reversed(lines):
        if line.strip():
            found.append(line.strip())
            if len(found) == count:
                break
    return found[::-1]


def candidates(before: str, after: str, limit: int = 1) -> list[Candidate]:
    """The next line of the run the two nearest non-blank lines above the hole make, as the rest of the hole's
    line after what was typed; nothing when they make no run, or the code below already has that line."""
    head_start = before.rfind("\n") + 1
    typed = before[head_start:].lstrip()
    rest_end = after.find("\n")
    if after[:rest_end if rest_end >= 0 else len(after)].strip() or limit < 1:
        return []
    above = _non_blank(before[:head_start].split("\n"), 2)
    if len(above) < 2:
        return []
    line = _stepped(*above)
    if line is None or not line.startswith(typed) or len(line) == len(typed):
        return []
    below = [text.strip() for text in after[rest_end + 1:].split("\n") if text.strip()][:2] if rest_end >= 0 else []
    if any(" ".join(line.split()) == " ".join(other.split()) for other in below):
        return []
    return [Candidate(line[len(typed):], SOURCE, 1.0)]
