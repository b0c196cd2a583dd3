"""Fills that name the right thing wrongly, renamed: misspelt names in scope, and the declaration the code
below needs.

Most fills the names rules (`dice_lsp.completion.checks.rules`) reject are well-formed statements with one
wrong name, in two ways, each with one repair that needs no model call (the renamed fill then goes through every
check again, and is kept only where it passes more of them):
- **Did you mean** (`corrected`): the fill uses a name nothing declares, a near miss of a name in scope
  (`cellx` where the kernel has `cell_x`, `threadIdxx`, `blockdim`); compilers answer such an error with a
  suggestion (clang's typo correction), here it is applied. A name is corrected to a candidate (a name a
  variable at the hole may use) when they are the same word but for case and underscores, or, for names of
  4+ characters, one edit apart (one character inserted, deleted, replaced, or two neighbours swapped; two
  edits from 8 characters); only when exactly one candidate is that close (a tie corrects nothing). Short
  names are never edited: `i`/`j`, `tx`/`ty` differ by one character and mean different things.
- **Declare what is needed** (`declared_as_needed`): the code after the hole uses a local that nothing
  declares (the deleted line did: `out[_loop_start] = ...` below), and the fill declares a variable under
  another name (`int loop_stride = blockIdx.x;`, or one its block already has). With exactly one such
  needed name and exactly one name declared by the fill, the declaration takes the needed name; its type
  and initialiser stay the model's.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

MIN_LENGTH = 4  # names shorter than this are never edited (`i` vs `j`, `tx` vs `ty`)
LONG = 8  # from this length, two edits are allowed


def _folded(name: str) -> str:
    return name.replace("_", "").lower()


def edits(a: str, b: str, limit: int) -> int:
    """The optimal-string-alignment distance between `a` and `b` (insert, delete, replace, swap two
    neighbours), or `limit + 1` when it is more than `limit`."""
    if abs(len(a) - len(b)) > limit:
        return limit + 1
    before: list[int] = []
    row = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        current = [i] + [0] * len(b)
        for j, cb in enumerate(b, 1):
            cost = 0 if ca == cb else 1
            current[j] = min(row[j] + 1, current[j - 1] + 1, row[j - 1] + cost)
            if i > 1 and j > 1 and ca == b[j - 2] and a[i - 2] == cb:
                current[j] = min(current[j], before[j - 2] + 1)
        if min(current) > limit:
            return limit + 1
        before, row = row, current
    return min(row[-1], limit + 1)


def _distance(name: str, candidate: str) -> int | None:
    """How far `candidate` is from `name` (0: the same word but for case and underscores), None: too far."""
    shortest = min(len(name), len(candidate))
    if shortest < MIN_LENGTH:
        return None
    if _folded(name) == _folded(candidate):
        return 0
    limit = 2 if shortest >= LONG else 1
    found = edits(name, candidate, limit)
    return found if found <= limit else None


def correction(name: str, candidates: Iterable[str]) -> str | None:
    """The one candidate `name` most likely misspells, or None (none close enough, or a tie)."""
    best: list[str] = []
    best_distance = None
    for candidate in candidates:
        if candidate == name:
            return None  # the name exists: nothing to correct
        found = _distance(name, candidate)
        if found is None:
            continue
        if best_distance is None or found < best_distance:
            best, best_distance = [candidate], found
        elif found == best_distance:
            best.append(candidate)
    return best[0] if len(best) == 1 else None


def corrected(fill: str, unknown: list[tuple[int, str]], candidates: Iterable[str]) -> str | None:
    """`fill` with each unknown name (offset in the fill, name) replaced by its correction, or None when one
    of them has none (a fill that is still wrong somewhere is not worth a new check)."""
    pool = tuple(candidates)
    out = fill
    for at, name in sorted(unknown, reverse=True):  # from the end: earlier offsets stay valid
        if fill[at:at + len(name)] != name:
            return None
        new = correction(name, pool)
        if new is None:
            return None
        out = out[:at] + new + out[at + len(name):]
    return out


def declared_as_needed(fill: str, needed: list[str], declared: list[tuple[int, str]]) -> str | None:
    """`fill` with its one declared name (`declared`: offset in the fill, name) replaced by the one name the
    code after the hole needs declared (`needed`), or None when either is not exactly one."""
    if len(needed) != 1 or len({name for _, name in declared}) != 1:
        return None
    at, name = declared[0]
    if fill[at:at + len(name)] != name or name == needed[0]:
        return None
    return fill[:at] + needed[0] + fill[at + len(name):]


class NameChecks(Protocol):
    """What the repairs ask of a request's checks (`dice_lsp.completion.checks.context.CheckContext`)."""

    @property
    def names_in_scope(self) -> frozenset[str]: ...

    def unknown_names(self, fill: str) -> list[tuple[int, str]]: ...

    def undeclared(self, fill: str) -> list[str]: ...

    def declarations(self, fill: str) -> list[tuple[int, str]]: ...


def renamed(fill: str, checks: NameChecks) -> str | None:
    """`fill` with its wrong names repaired (misspellings corrected, then the needed declaration named), or
    None when neither repair applies. The caller checks the result again."""
    out = fill
    unknown = checks.unknown_names(out)
    if unknown:
        fixed = corrected(out, unknown, checks.names_in_scope)
        if fixed is None:
            return None
        out = fixed
    needed = checks.undeclared(out)
    if needed:
        out = declared_as_needed(out, needed, checks.declarations(out)) or out
    return out if out != fill else None
