"""Candidates from the idiom bank: the statement lines every CUDA programmer writes, mined from the training
corpus (dice_lsp.training.idioms) and shipped beside the model (dice-tiny/idioms.json.gz).

A hole has two context lines: the nearest code line above it (`context_line`: blank lines, comment lines and a
line that is only `{` are skipped) and the nearest one below it (`below_line`, the same rule). The bank has a
table for each side: what followed a line like the one above, and what preceded a line like the one below
(`if (i < n) {` below an emptied first line of a kernel asks for the `i` it tests). Each line is normalised the
way the miner normalised every line it learnt from (`abstract_key`): comments dropped, whitespace reduced to what
separates two words, a trailing `{` dropped, and each identifier that is not C/C++/CUDA vocabulary (keywords,
types, builtins such as `threadIdx`, `__`-names such as `__syncthreads` and `__shfl_down_sync`, `atomic*`,
`cuda*`, math functions, numbers) replaced by a placeholder `$0`, `$1`, ... in order of first appearance (a
preprocessor line, such as `#pragma unroll`, is kept whole). Each table maps such a key to the lines that
followed (or preceded) it in the corpus, written with the same placeholders.

Each context line has two keys. The generic key abstracts every name of the code; the specific key keeps
concrete the names common across the corpus (found in the GPU files of at least `min_name_projects` projects,
listed in the bank's `names`: `i`, `tid`, `idx`, `offset`, ...), so `int i = blockIdx.x * blockDim.x +
threadIdx.x;` has statistics of its own beside those of every `int $0 = ...`. The miner counts a pair under
both keys (once where they are the same); a hole gets the values of both, and for a text both propose, the
better-scored evidence.

A value may name what the key does not bind. Stored as it was (`if ($0 < n) {`), it is proposed as it is: the
miner kept it only because that very name was frequent after the key. Stored with a free placeholder
(`$1 += __shfl_down_sync(0xffffffff, $1, $0);` after `for (int $0 = 16; $0 > 0; $0 /= 2)`), it is proposed
only on a half-typed line whose typed text binds it (`sum += ` -> `__shfl_down_sync(0xffffffff, sum, offset);`,
`bind_typed`); a line hole cannot write it.

Lookup is a dict access per key: the values are instantiated with the hole's own names (`$0` -> the identifier
that stood at `$0` in the hole's context line), and on a half-typed line only values that begin with the typed
text (whitespace aside) are kept, the candidate being what follows it.

Score of one side (in [0, 1]): `files / (total + PRIOR)`, the pair's share of the key's continuations with PRIOR pseudo
continuations of "something else" added to the key's total; `files` is the number of distinct corpus files in
which the value followed the key, `total` the same count summed over every value (as written) that followed the
key. A pair seen in 3 files out of 3 scores 3/7 = 0.43, 80 out of 100 scores 0.77, 300 out of 310 scores 0.96:
the score rises with both the share and the evidence behind it. It does not condition on the typed text (a
half-typed line's candidate is likelier than its score says). A text both sides propose scores
1 - (1 - above)(1 - below). `IdiomCandidate` carries each side's raw evidence (files, projects, share, total,
whether typed names were bound) for the ranking stage.
"""

from __future__ import annotations

import gzip
import json
import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from dice_lsp.completion.lexing import Token, declared_name, is_kept, is_vocabulary, tokens
from dice_lsp.completion.scope import FunctionScope, bind
from dice_lsp.completion.sources import Candidate

if TYPE_CHECKING:
    from dice_lsp.completion.checks.request import Request

SOURCE = "idiom"
FORMAT = "dice-idioms/2"
Side = Literal["above", "below"]  # where a key's context line is, seen from the line it proposes
PRIOR = 4  # pseudo continuations added to a key's total: little evidence -> low score
MAX_CANDIDATES = 3
MAX_LINE_CHARS = 200  # longer lines are neither keys nor values
DEFAULT_PATH = Path(__file__).resolve().parents[2] / "models" / "dice-tiny" / "idioms.json.gz"
LOG = logging.getLogger("dice_lsp.idioms")

# -------------------------------------------------------------------------------------------------- keys and values

_PLACEHOLDER = re.compile(r"\$(\d+)")


def render(words: list[str], toks: list[Token], compact: bool) -> str:
    """Join `words` (the tokens' texts, some replaced): `compact` puts a space only between two word-like
    tokens (the key form: blind to spacing); otherwise one space wherever the line had whitespace."""
    out: list[str] = []
    for i, (word, tok) in enumerate(zip(words, toks, strict=True)):
        if i:
            if compact:
                if toks[i - 1].kind in ("word", "number") and tok.kind in ("word", "number"):
                    out.append(" ")
            elif tok.spaced:
                out.append(" ")
        out.append(word)
    return "".join(out)


def abstract_key(line: str, common: frozenset[str] = frozenset()) -> tuple[str, list[str]] | None:
    """The key of a context line and the names its placeholders stand for ($i -> names[i]); None for a line
    with no code, a `$`, or longer than MAX_LINE_CHARS. Names in `common` stay concrete too (the specific key:
    module docstring)."""
    if len(line) > MAX_LINE_CHARS or "$" in line:
        return None
    toks = tokens(line)
    if toks and toks[-1].text == "{" and len(toks) > 1:
        toks = toks[:-1]
    if not toks:
        return None
    names: list[str] = []
    index: dict[str, int] = {}
    words: list[str] = []
    directive = toks[0].text == "#"  # `#pragma unroll`, `#endif`: kept as they are
    for i, tok in enumerate(toks):
        if tok.kind == "word" and not directive and tok.text not in common and not is_kept(toks, i):
            if tok.text not in index:
                index[tok.text] = len(names)
                names.append(tok.text)
            words.append(f"${index[tok.text]}")
        else:
            words.append(tok.text)
    return render(words, toks, compact=True), names


def abstract_value(line: str, names: list[str], free: bool = False,
                   keep: frozenset[str] = frozenset()) -> tuple[str, str] | None:
    """(compact form, spaced form) of a statement line with the key's names as placeholders; identifiers the key
    does not have stay as they are, or with `free` become placeholders too, numbered on from the key's (a free
    placeholder is bound by the typed text of a half-typed line: `bind_typed`), except those in `keep` (the
    names a specific key has concretely). None for a line with no code, a `$` or longer than MAX_LINE_CHARS."""
    if len(line) > MAX_LINE_CHARS or "$" in line:
        return None
    toks = tokens(line)
    if not toks:
        return None
    index = {name: i for i, name in enumerate(names)}
    words: list[str] = []
    for i, tok in enumerate(toks):
        if tok.kind != "word" or is_kept(toks, i) or (tok.text not in index and (not free or tok.text in keep)):
            words.append(tok.text)
            continue
        if tok.text not in index:
            index[tok.text] = len(index)
        words.append(f"${index[tok.text]}")
    return render(words, toks, compact=True), render(words, toks, compact=False)


def instantiate(value: str, names: Sequence[str | None]) -> str | None:
    """The value with each `$i` replaced by names[i]; None when it names a placeholder that is not bound."""
    for match in _PLACEHOLDER.finditer(value):
        i = int(match.group(1))
        if i >= len(names) or names[i] is None:
            return None
    return _PLACEHOLDER.sub(lambda m: names[int(m.group(1))] or "", value)


_NAME = re.compile(r"[A-Za-z_]\w*")
_PARTS = re.compile(r"(\$\d+)")  # a value split into its text and its placeholders


def bind_typed(value: str, names: list[str], typed: str) -> list[str | None] | None:
    """`names` extended with the identifiers the typed text puts where `value` has placeholders the key did not
    bind (`$1 += __shfl_down_sync(0xffffffff, $1, $0);` typed `sum +=` binds $1 to `sum`); None when the typed
    text departs from the value (whitespace aside) or ends inside a name that a placeholder would take."""
    bound: list[str | None] = [*names]
    pos = 0
    for part in _PARTS.split(value):
        while pos < len(typed) and typed[pos].isspace():
            pos += 1
        if pos >= len(typed):
            return bound
        match = _PLACEHOLDER.fullmatch(part)
        if match is not None:
            i = int(match.group(1))
            if i >= len(bound):
                bound.extend([None] * (i + 1 - len(bound)))
            if bound[i] is None:
                name = _NAME.match(typed, pos)
                if name is None or name.end() == len(typed) or is_vocabulary(name.group()):
                    return None
                bound[i] = name.group()
                pos = name.end()
                continue
            part = bound[i] or ""
        for char in part:
            if char.isspace():
                continue
            while pos < len(typed) and typed[pos].isspace():
                pos += 1
            if pos >= len(typed):
                return bound
            if typed[pos] != char:
                return None
            pos += 1
    return bound if pos >= len(typed.rstrip()) else None


# -------------------------------------------------------------------------------------------------- lines

def is_comment(stripped: str) -> bool:
    """A line that is only a comment (or the inside of a `/* ... */` block written with leading stars)."""
    return stripped.startswith(("//", "/*", "*/", "* ")) or stripped == "*"


def is_context(stripped: str) -> bool:
    """A line that can be a key: code that is not blank, not only a comment, and not a lone `{` (a comment may
    follow it)."""
    if not stripped or is_comment(stripped):
        return False
    return not (stripped[0] == "{" and (len(stripped) == 1 or is_comment(stripped[1:].lstrip())))


def context_line(before: str, end: int) -> str | None:
    """The nearest line of `before[:end]` (end: the start of the hole's line) that `is_context`, stripped."""
    while end > 0:
        start = before.rfind("\n", 0, end - 1) + 1
        stripped = before[start:end].strip()
        if is_context(stripped):
            return stripped
        end = start
    return None


def below_line(after: str) -> str | None:
    """The nearest line after the hole's line (`after` starts at the cursor) that `is_context`, stripped."""
    for line in after.split("\n")[1:]:
        stripped = line.strip()
        if is_context(stripped):
            return stripped
    return None


def continuation(value: str, typed: str) -> str | None:
    """What `value` adds after `typed` (whitespace aside), or None when it does not begin with it. A typed
    text ending in whitespace gets the rest without its leading space."""
    pos = 0
    for char in typed:
        if char.isspace():
            continue
        while pos < len(value) and value[pos].isspace():
            pos += 1
        if pos >= len(value) or value[pos] != char:
            return None
        pos += 1
    rest = value[pos:]
    if typed and typed[-1].isspace():
        rest = rest.lstrip()
    return rest if rest.strip() else None


# -------------------------------------------------------------------------------------------------- bank

@dataclass(frozen=True)
class Evidence:
    """What one side's key says of a text: the value followed (or preceded) the key in `files` corpus files of
    `projects` upstream projects, `share` of the key's `total` lines; `key` and `value` as stored; `typed_names`:
    the typed text bound placeholders the key did not (the value's pattern, not its names, is what the evidence is
    about)."""

    files: int
    projects: int
    share: float
    total: int
    key: str
    value: str
    typed_names: bool = False
    scope_bound: int = 0  # placeholders named from the function's scope (`scope.bind`)
    scope_alternatives: int = 0  # other names that fitted them

    @property
    def score(self) -> float:
        return score(self.files, self.total)


@dataclass(frozen=True)
class IdiomCandidate(Candidate):
    """An idiom's text with the evidence of the key above the hole, of the key below it and of the declarations
    of a name the code below needs (any may be missing). Its score is the chance that at least one is right,
    each one's score taken as a chance: 1 - (1 - above)(1 - below)(1 - declares)."""

    above: Evidence | None = None
    below: Evidence | None = None
    declares: Evidence | None = None  # a declaration of a name the code below needs (key: the name)

    @property
    def _found(self) -> list[Evidence]:
        return [side for side in (self.above, self.below, self.declares) if side is not None]

    # the features' view (`dice_lsp.completion.features.SUPPORT`): None where that evidence is missing
    files = property(lambda self: _get(self.above, "files"))
    projects = property(lambda self: _get(self.above, "projects"))
    share = property(lambda self: _get(self.above, "share"))
    total = property(lambda self: _get(self.above, "total"))
    below_files = property(lambda self: _get(self.below, "files"))
    below_share = property(lambda self: _get(self.below, "share"))
    below_total = property(lambda self: _get(self.below, "total"))
    declares_files = property(lambda self: _get(self.declares, "files"))
    declares_share = property(lambda self: _get(self.declares, "share"))
    declares_total = property(lambda self: _get(self.declares, "total"))

    @property
    def sides(self) -> int:
        return len(self._found)

    @property
    def key(self) -> str:
        return self._found[0].key

    @property
    def typed_names(self) -> bool:
        return any(side.typed_names for side in self._found)

    @property
    def scope_bound(self) -> int:
        return max(side.scope_bound for side in self._found)

    @property
    def scope_alternatives(self) -> int:
        return max(side.scope_alternatives for side in self._found)


def _get(evidence: Evidence | None, attribute: str) -> Any:
    return None if evidence is None else getattr(evidence, attribute)


def score(files: int, total: int) -> float:
    """files / (total + PRIOR): the share, shrunk where the key has little evidence (module docstring)."""
    return round(files / (total + PRIOR), 4)


def combined(*found: Evidence | None) -> float:
    """1 - the product of (1 - score) over the evidence found: any one's, and more for several."""
    miss = 1.0
    for side in found:
        if side is not None:
            miss *= 1.0 - side.score
    return round(1.0 - miss, 4)


@dataclass(frozen=True)
class Entry:
    value: str  # spaced form with placeholders
    files: int
    projects: int
    share: float


# key -> [total, [[value, files, projects, share], ...]], as stored (read lazily: loading stays a JSON parse)
Entries = dict[str, list[Any]]


class IdiomBank:
    """The mined (key -> values) tables, one per side; `candidates` answers the Source protocol."""

    def __init__(self, entries: Entries, meta: dict[str, Any] | None = None, common: frozenset[str] = frozenset(),
                 below: Entries | None = None, declarations: Entries | None = None):
        self.tables: dict[Side, Entries] = {"above": entries, "below": below or {}}
        self.declarations = declarations or {}
        self.meta = meta or {}
        self.common = common

    @property
    def entries(self) -> Entries:
        return self.tables["above"]

    def __len__(self) -> int:
        tables = (*self.tables.values(), self.declarations)
        return sum(len(values) for table in tables for _, values in table.values())

    def values(self, key: str, side: Side | None = "above") -> tuple[int, list[Entry]]:
        """The key's total and its values (none for a key the bank lacks); side None: the declarations of the
        name `key`."""
        total, values = (self.declarations if side is None else self.tables[side]).get(key, (0, ()))
        return int(total), [Entry(v, int(f), int(p), float(sh)) for v, f, p, sh in values]

    @staticmethod
    def load(path: Path | str = DEFAULT_PATH) -> IdiomBank:
        """The bank at `path`, read once per path; a missing or unreadable bank is an empty one (logged once)."""
        return _load(str(Path(path).resolve()))

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> IdiomBank:
        """A bank from the miner's JSON (format FORMAT)."""
        if data.get("format") != FORMAT:
            raise ValueError(f"not an idiom bank (format {data.get('format')!r}, expected {FORMAT!r})")
        entries, below, declarations = data["entries"], data.get("below", {}), data.get("declarations", {})
        if not all(isinstance(table, dict) for table in (entries, below, declarations)):
            raise ValueError("idiom bank entries are not a table")
        meta = {k: v for k, v in data.items() if k not in ("entries", "below", "declarations", "names")}
        return cls(entries, meta, frozenset(data.get("names", ())), below, declarations)

    def keys(self, line: str, side: Side = "above") -> list[tuple[str, list[str]]]:
        """The bank's keys for a context line with their names: the specific key (common names concrete) before
        the generic one, each only where the bank has it."""
        found = [abstract_key(line, self.common)] if self.common else []
        found.append(abstract_key(line))
        out: list[tuple[str, list[str]]] = []
        for key in found:
            if key is not None and key[0] in self.tables[side] and all(key[0] != k for k, _ in out):
                out.append(key)
        return out

    def _side(self, line: str | None, typed: str, side: Side, scope: FunctionScope | None) -> dict[str, Evidence]:
        """What one side's key proposes for the hole, by text: the values instantiated with the context line's
        names, the typed text's and, for placeholders neither binds, the names of the function around the hole
        (`scope.bind`), continuing the typed text; for a text both keys propose, the better-scored evidence."""
        best: dict[str, Evidence] = {}
        for key, names in self.keys(line, side) if line is not None else []:
            total, values = self.values(key, side)
            for entry in values:
                text = instantiate(entry.value, names)
                typed_names = text is None
                bound: list[str | None] | None = list(names)
                if typed_names and typed:  # placeholders the key does not bind: maybe the typed text does
                    bound = bind_typed(entry.value, names, typed)
                    text = instantiate(entry.value, bound) if bound is not None else None
                binding = bind(entry.value, bound, scope) if text is None and bound is not None and scope else None
                if binding is not None:
                    text = instantiate(entry.value, binding.names)
                rest = continuation(text, typed) if text is not None else None
                if rest is None:
                    continue
                found = Evidence(entry.files, entry.projects, entry.share, total, key, entry.value, typed_names,
                                 binding.bound if binding else 0, binding.alternatives if binding else 0)
                if rest not in best or found.score > best[rest].score:
                    best[rest] = found
        return best

    def _declaring(self, names: frozenset[str], typed: str) -> dict[str, Evidence]:
        """The declarations of `names` the bank holds, continuing the typed text, by text."""
        best: dict[str, Evidence] = {}
        for name in sorted(names):
            total, values = self.values(name, None)
            for entry in values:
                rest = continuation(entry.value, typed)
                found = Evidence(entry.files, entry.projects, entry.share, total, name, entry.value)
                if rest is not None and (rest not in best or found.score > best[rest].score):
                    best[rest] = found
        return best

    def lookup(self, before: str, after: str, limit: int = MAX_CANDIDATES,
               needed: frozenset[str] = frozenset(), checks: Request | None = None) -> list[IdiomCandidate]:
        """Idioms for a hole on one line (`before` ends at the cursor, `after` starts there), best first: the
        values the bank holds for the hole's context line above and for its context line below, and the
        declarations of the names in `needed` (the code below uses them, nothing declares them) or of the name a
        half-typed declaration names, continuing the typed text, each text with all its evidence. A hole with
        text after the cursor on its line gets none. `checks`: the request the checks parsed for the hole, whose
        symbol table the function's scope reads (`scope.FunctionScope`; None: parsed when a value needs it)."""
        rest_end = after.find("\n")
        if after[:rest_end if rest_end >= 0 else len(after)].strip():
            return []
        head_start = before.rfind("\n") + 1
        typed = before[head_start:].lstrip()
        scope = FunctionScope.of(before, after, checks)
        above = self._side(context_line(before, head_start), typed, "above", scope)
        below = self._side(below_line(after), typed, "below", scope)
        typed_name = declared_name(typed)
        declares = self._declaring(needed | ({typed_name} if typed_name else set()), typed)
        found = []
        for text in above.keys() | below.keys() | declares.keys():
            evidence = (above.get(text), below.get(text), declares.get(text))
            found.append(IdiomCandidate(text, SOURCE, combined(*evidence), *evidence))
        return sorted(found, key=lambda c: (-c.score, c.text))[:limit]

    def candidates(self, before: str, after: str, limit: int = MAX_CANDIDATES,
                   needed: frozenset[str] = frozenset(), checks: Request | None = None) -> list[Candidate]:
        return list(self.lookup(before, after, limit, needed, checks))


@lru_cache(maxsize=8)
def _load(path: str) -> IdiomBank:
    try:
        with gzip.open(path, "rt", encoding="utf-8") as handle:
            return IdiomBank.from_json(json.load(handle))
    except FileNotFoundError:
        LOG.info("no idiom bank at %s: no idiom candidates", path)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        LOG.warning("idiom bank %s unreadable (%s): no idiom candidates", path, exc)
    return IdiomBank({})


def candidates(before: str, after: str, limit: int = MAX_CANDIDATES) -> list[Candidate]:
    """Idioms of the bank shipped with the model for a hole (see `IdiomBank.lookup`)."""
    return IdiomBank.load().candidates(before, after, limit)
