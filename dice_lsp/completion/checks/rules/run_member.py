"""A fill on a new line between two lines of a run that already step from one to the next (`a0 = in[0];` then
`a1 = in[1];`, `shfl_down (value, 8)` then `shfl_down (value, 4)`) must not be one more member of that run: the
run needs no line there, and another member repeats one or breaks its order (`shfl_down (value, 2)` inserted
between the 8 and the 4 of an unrolled warp reduction).

A step is what the analogue source continues runs by (`analogue.step`: an axis, a number or a letter one on, a
name whose last character steps so), or a number halved or doubled. A member has the run's tokens where the two
lines agree, and where they step a token of the run's family (a number, a letter, a name of the same stem: `buf3`
for `buf1`, not `idx_buf1`). Only for one line written on an empty line.
"""

from __future__ import annotations

from dice_lsp.completion.checks.request import Placed, Request
from dice_lsp.completion.checks.rule import Fault, Rule
from dice_lsp.completion.sources import TOKEN
from dice_lsp.completion.sources.analogue import MAX_CHANGES, step


def _steps(a: str, b: str) -> bool:
    if step(a, b) is not None:
        return True
    return a.isdigit() and b.isdigit() and min(int(a), int(b)) > 0 and (int(a) == 2 * int(b) or int(b) == 2 * int(a))


def _stem(token: str) -> str:
    return token.rstrip("0123456789") if token[-1:].isdigit() else token[:-1]


def _family(run: str, token: str) -> bool:
    """Whether `token` could stand where the run's `run` stands: a number for a number, a letter of the same case
    for a letter, a name of the same stem (`a0` and `a7`, `ix` and `iz`; not `idx_buf1` for `buf1`)."""
    if run.isdigit():
        return token.isdigit()
    if len(run) == 1:
        return len(token) == 1 and token.isalpha() and token.islower() == run.islower()
    return len(token) > 1 and _stem(token) == _stem(run)


def _neighbours(request: Request) -> tuple[str, str] | None:
    """The nearest non-blank lines above and below the hole's line in the base, stripped (a few lines read, not
    the file: this runs for every fill)."""
    data = request.data
    line_start, line_end = request.hole_line
    above, end = b"", line_start - 1
    while end > 0 and not above:
        start = data.rfind(b"\n", 0, end) + 1
        above, end = data[start:end].strip(), start - 1
    below, start = b"", line_end + 1
    while start < len(data) and not below:
        end = data.find(b"\n", start)
        end = len(data) if end < 0 else end
        below, start = data[start:end].strip(), end + 1
    if not above or not below:
        return None
    return above.decode("utf-8", "replace"), below.decode("utf-8", "replace")


def faults(request: Request, fill: Placed) -> list[Fault]:
    text = fill.data.decode("utf-8", "replace").strip()
    line_start, line_end = request.hole_line
    if not text or "\n" in text or request.data[line_start:line_end].strip():
        return []
    found = _neighbours(request)
    if found is None:
        return []
    one, two, mine = TOKEN.findall(found[0]), TOKEN.findall(found[1]), TOKEN.findall(text)
    if not len(one) == len(two) == len(mine) or one == two:
        return []
    changed = [i for i, (a, b) in enumerate(zip(one, two, strict=True)) if a != b]
    if len(changed) > MAX_CHANGES or not all(_steps(one[i], two[i]) for i in changed):
        return []
    if any(mine[i] != one[i] for i in range(len(one)) if i not in changed):
        return []
    if not all(_family(one[i], mine[i]) for i in changed):
        return []
    return [Fault((0, len(fill.data.decode("utf-8", "replace"))))]


RULE = Rule("member of a complete run", "parses", faults)
