"""Candidates from the other files of the workspace: a project repeats itself across files (the same launch
boilerplate, the same guard after the same index computation, a cuda/ and a rocm/ copy of a kernel), so the line
a hole needs is often already written in a neighbouring file.

The rule is the document source's (`document.py`), applied to other files: a line is proposed when the lines
around it look like the lines around the hole (the nearest non-blank line above, weighed 0.7, and below, 0.3;
token-multiset Dice similarity, `document.similarity`), so the two sources' scores are the same measure and can
be compared directly. On a half-typed line only lines that begin with what was typed are candidates, and the
candidate is the rest. The file being edited is never proposed from (`exclude`): the document source covers its
own lines, from the editor's current text rather than the copy on disk.

What differs is scale. A workspace holds thousands of files and the lookup runs on every keystroke, so nothing
is scanned whole:

* Each file is kept once, compactly: its non-blank lines, stripped, joined in one string, with the offset of
  each line and a hash of each line's tokens (whitespace-blind, like the similarity). An *entry* is a line with
  its neighbours, named by (file slot, line number) packed in one integer; nothing is stored per entry.
* An inverted index maps a line's hash to where it occurs (`_lines`), and a word token (identifier, number) to
  the occurrences of the lines containing it (`_words`). A lookup gathers entries by kind of evidence, strongest
  first (`WorkspaceIndex._gather`): both neighbours exactly the hole's; the above one exactly and the below one
  sharing rare words; the above one exactly; the below one exactly; the above one sharing rare words (most
  first). It scans at most `MAX_SCANNED` occurrences and scores at most `MAX_SCORED` entries, the weaker kinds
  `MAX_PER_KIND` each, however large the workspace, and compares a below neighbour only where the entry can
  still make the top (`WorkspaceIndex._rank`): a few milliseconds. A word in more than `COMMON_WORD` lines is
  no key (`i`, `float`, `threadIdx`: it would select everything); its postings are dropped to bound memory.
* Identical lines (same tokens) are aggregated: a candidate's score is its best entry's context score,
  `WorkspaceCandidate.files` counts the files in which it follows a context scoring that well, and `rivals` the
  other lines whose best context scores the same. The score is left as the pure context score (comparable with
  the document source's); the counts are separate evidence for ranking, and `files` breaks ties between equal
  scores here. Measured on the dev split, a top line with rivals is rarely right (the context is boilerplate
  that different files continue differently), and among top lines without rivals, more files is better.

Bounds: a file over `max_file_bytes` or that looks generated or minified is not indexed; at most `max_files`
files and `max_lines` lines in all. When a new file would pass a cap, the files least recently added, changed or
`touch`ed (opened in the editor) are evicted first: the files the user works with stay. A removed or replaced
file leaves dead postings behind (its slot is never reused, so they are recognised and skipped); once they
outnumber the live ones they are swept out, a few thousand keys at a time, letting completions in between.

Threads: one lock guards the index. A file is prepared (split, stripped, hashed, tokenised) outside it and its
postings are inserted under it in chunks of `_INSERT_CHUNK` lines; before each chunk a writer gives way to the
lookups in progress or waiting (it sleeps, releasing the interpreter too), so a lookup waits for at most one
chunk while a background thread indexes. `WorkspaceIndexer` walks a folder into an index in such a thread.

"""

from __future__ import annotations

import os
import re
import stat
import threading
import time
from array import array
from collections import Counter, OrderedDict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from itertools import islice
from pathlib import Path
from typing import TYPE_CHECKING

from dice_lsp.completion.sources import TOKEN, Candidate, Source
from dice_lsp.completion.sources.document import MAX_CANDIDATES, context_score

if TYPE_CHECKING:
    from dice_lsp.completion.checks.request import Request

SOURCE = "workspace"
SUFFIXES = (".cu", ".cuh", ".cuinl", ".h", ".hpp", ".hh", ".c", ".cc", ".cpp", ".cxx", ".inl")
MAX_SCORED = 1_000  # entries scored by one lookup (dev split: as many exact as 2,000, at half the time)
MAX_PER_KIND = 250  # entries of each kind of weaker evidence (`WorkspaceIndex._gather`)
MAX_SCANNED = 10_000  # occurrences looked at by one lookup, a fifth per kind of evidence
COMMON_WORD = 2_000  # a word in more lines than this is no index key
MAX_FILES = 10_000
MAX_LINES = 1_000_000  # non-blank lines of all files together: about 165 MiB of index (bench/workspace_index.py)
MAX_FILE_BYTES = 1_000_000  # larger: generated (tables, amalgamations), never written by hand
MAX_MEAN_LINE = 200  # a mean non-blank line longer than this: minified or generated data
GENERATED = re.compile(r"@generated|do not edit|generated by the protocol buffer compiler", re.IGNORECASE)
_WORD = re.compile(r"\w+")
_POS_BITS = 24  # an entry is slot << _POS_BITS | line number: files of up to 16 million lines
_POS_MASK = (1 << _POS_BITS) - 1
_INSERT_CHUNK = 256  # lines inserted per hold of the lock (about 2 ms)
_GIVE_WAY_S = 0.1  # a writer waits at most this long between chunks for lookups in progress
_SWEEP_CHUNK = 1_000  # posting keys swept per hold of the lock
_MIN_SWEEP = 100_000  # dead postings tolerated whatever the live count


@dataclass(frozen=True)
class WorkspaceCandidate(Candidate):
    """A workspace line for the hole: `score` is the context score of its best occurrence (the document
    source's measure), `files` the number of files where it follows a context scoring as well, `path` one of
    them (the first in sorted order), `rivals` the number of other lines whose best context scores the same.

    For ranking: on the dev split a top candidate with rivals is rarely the line (score 1.0: 2-3% when another
    line follows an equally good context in other files, against 70-94% alone), and among those alone more
    files is better (docs/bench-logs/workspace)."""

    files: int = 1
    path: str = ""
    rivals: int = 0


def line_key(text: str) -> int:
    """The identity of a stripped line for exact matches: its tokens, so `a+b;` and `a + b;` are one line."""
    return hash("\x1f".join(TOKEN.findall(text)))


def path_key(path: str | os.PathLike[str]) -> str:
    """How a path names a file in the index: as given, normalised (`a/./b` is `a/b`). `WorkspaceIndexer` gives
    resolved paths; an excluded path is looked up both as given and resolved."""
    return os.path.normpath(os.fspath(path))


@dataclass(slots=True)
class _File:
    """One indexed file: its non-blank lines, stripped, in one string; where each starts (one more offset, the
    end, so line i is body[starts[i]:starts[i + 1] - 1]); each line's `line_key`; how many lines."""

    path: str
    body: str
    starts: array[int]
    keys: array[int]
    words: list[tuple[str, ...]]  # the distinct words of each line (dropped once inserted)
    lines: int
    postings: int = 0  # postings inserted for it so far (what its removal leaves dead)

    def line(self, pos: int) -> str:
        return self.body[self.starts[pos]:self.starts[pos + 1] - 1]


def _prepare(path: str, text: str, max_bytes: int) -> _File | None:
    """The file ready to insert, or None when it is not worth indexing: too large, generated or minified."""
    if len(text) > max_bytes or GENERATED.search(text[:2_000]):
        return None
    lines = [s for s in (raw.strip() for raw in text.split("\n")) if s]
    if not lines or sum(map(len, lines)) / len(lines) > MAX_MEAN_LINE:
        return None
    starts = array("I", [0])
    for line in lines:
        starts.append(starts[-1] + len(line) + 1)
    tokens = [TOKEN.findall(line) for line in lines]
    keys = array("q", (hash("\x1f".join(t)) for t in tokens))
    words = [tuple(dict.fromkeys(w for w in t if w[0].isalnum() or w[0] == "_")) for t in tokens]
    return _File(path, "\n".join(lines) + "\n", starts, keys, words, len(lines))


def _hole(before: str, after: str) -> tuple[str, str | None, str | None] | None:
    """What was typed on the hole's line (left-stripped), and its nearest non-blank lines above and below
    (stripped; None at the start or end of the file); None when the cursor is inside a line."""
    head_start = before.rfind("\n") + 1
    rest_end = after.find("\n")
    if after[:rest_end if rest_end >= 0 else len(after)].strip():
        return None
    prefix = before[:head_start].rstrip()
    above = prefix[prefix.rfind("\n") + 1:].strip() or None
    suffix = after[rest_end + 1:].lstrip() if rest_end >= 0 else ""
    cut = suffix.find("\n")
    below = suffix[:cut if cut >= 0 else len(suffix)].strip() or None
    return before[head_start:].lstrip(), above, below


def _add_posting(table: dict[object, int | array[int]], key: object, ref: int) -> int:
    """Append `ref` to `key`'s postings (a lone posting is kept as a bare int); returns the new length."""
    found = table.get(key)
    if found is None:
        table[key] = ref
        return 1
    if isinstance(found, int):
        table[key] = array("q", (found, ref))
        return 2
    found.append(ref)
    return len(found)


def _postings(table: dict[object, int | array[int]], key: object) -> Sequence[int]:
    found = table.get(key)
    if found is None:
        return ()
    return (found,) if isinstance(found, int) else found


class WorkspaceIndex:
    """The workspace's lines, indexed by their neighbours (module docstring); safe to use from several threads."""

    def __init__(self, max_files: int = MAX_FILES, max_lines: int = MAX_LINES,
                 max_file_bytes: int = MAX_FILE_BYTES) -> None:
        self.max_files = max_files
        self.max_lines = max_lines
        self.max_file_bytes = max_file_bytes
        self._lock = threading.Lock()
        self._files: dict[int, _File] = {}  # slot -> file; a slot is never reused
        self._slots: OrderedDict[str, int] = OrderedDict()  # path -> slot, least recently added/touched first
        self._next_slot = 1
        self._lines: dict[object, int | array[int]] = {}  # line_key -> occurrences
        self._words: dict[object, int | array[int]] = {}  # word -> occurrences of lines containing it
        self._common: set[str] = set()  # words too common to be keys
        self._live_lines = 0
        self._live_postings = 0
        self._dead_postings = 0
        self._sweeping = False
        self._readers = 0  # lookups in progress or waiting for the lock: writers give way to them
        self._readers_lock = threading.Lock()
        self.generation = 0  # bumped on every change (a caller's cache key)

    # -- contents -----------------------------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self._slots)

    def __contains__(self, path: object) -> bool:
        return isinstance(path, str | os.PathLike) and path_key(path) in self._slots

    def paths(self) -> list[str]:
        with self._lock:
            return list(self._slots)

    @property
    def lines(self) -> int:
        """Non-blank lines indexed, all files together (what `max_lines` caps)."""
        return self._live_lines

    def add(self, path: str | os.PathLike[str], text: str) -> bool:
        """Index `text` as the file `path` (replacing what was indexed for it); False when the file is not
        indexed (too large, generated, minified, empty, more lines than the whole cap), and then any older
        version of it is removed too."""
        key = path_key(path)
        prepared = _prepare(key, text, self.max_file_bytes)
        with self._lock:
            self._remove(key)
            if prepared is None or prepared.lines > self.max_lines:
                return False
            while self._slots and (len(self._slots) >= self.max_files
                                   or self._live_lines + prepared.lines > self.max_lines):
                self._remove(next(iter(self._slots)))  # the least recently added or touched
            slot = self._next_slot
            self._next_slot += 1
            self._files[slot] = prepared
            self._slots[key] = slot
            self._live_lines += prepared.lines
            self.generation += 1
        for start in range(0, prepared.lines, _INSERT_CHUNK):
            self._give_way()
            with self._lock:
                if self._files.get(slot) is not prepared:
                    break  # removed or replaced meanwhile
                self._insert(slot, prepared, start, min(start + _INSERT_CHUNK, prepared.lines))
                self.generation += 1
        prepared.words = []
        self._maybe_sweep()
        return True

    def remove(self, path: str | os.PathLike[str]) -> bool:
        """Forget the file `path`; False when it was not indexed."""
        with self._lock:
            removed = self._remove(path_key(path))
        self._maybe_sweep()
        return removed

    def remove_under(self, folder: str | os.PathLike[str]) -> int:
        """Forget every file below `folder` (a deleted or newly ignored folder); returns how many."""
        prefix = path_key(folder).rstrip(os.sep) + os.sep
        with self._lock:
            gone = [p for p in self._slots if p.startswith(prefix)]
            for path in gone:
                self._remove(path)
        self._maybe_sweep()
        return len(gone)

    def touch(self, path: str | os.PathLike[str]) -> None:
        """Mark `path` as recently used (opened in the editor): evicted last."""
        with self._lock:
            if (key := path_key(path)) in self._slots:
                self._slots.move_to_end(key)

    def clear(self) -> None:
        with self._lock:
            for path in list(self._slots):
                self._remove(path)
            self._lines.clear()
            self._words.clear()
            self._common.clear()
            self._live_postings = self._dead_postings = 0

    def _insert(self, slot: int, file: _File, start: int, end: int) -> None:
        base = slot << _POS_BITS
        added = 0
        for pos in range(start, end):
            ref = base | pos
            _add_posting(self._lines, file.keys[pos], ref)
            added += 1
            for word in file.words[pos]:
                if word in self._common:
                    continue
                if _add_posting(self._words, word, ref) > COMMON_WORD:
                    dropped = self._words.pop(word)
                    self._common.add(word)
                    count = 1 if isinstance(dropped, int) else len(dropped)
                    self._live_postings -= count - 1  # mostly live; the dead among them are over-counted
                    self._dead_postings = max(0, self._dead_postings - (count - 1))
                    added -= 1
                else:
                    added += 1
        file.postings += added
        self._live_postings += added

    def _remove(self, key: str) -> bool:
        slot = self._slots.pop(key, None)
        if slot is None:
            return False
        file = self._files.pop(slot)
        self._live_lines -= file.lines
        self._live_postings -= file.postings
        self._dead_postings += file.postings
        self.generation += 1
        return True

    def _maybe_sweep(self) -> None:
        """Sweep dead postings out once they outnumber the live ones (and `_MIN_SWEEP`), in chunks of keys so
        that lookups run in between; one thread sweeps at a time."""
        with self._lock:
            if self._sweeping or self._dead_postings <= max(self._live_postings, _MIN_SWEEP):
                return
            self._sweeping = True
        try:
            for table in (self._lines, self._words):
                with self._lock:
                    keys = list(table)
                for start in range(0, len(keys), _SWEEP_CHUNK):
                    self._give_way()
                    with self._lock:
                        self._sweep(table, keys[start:start + _SWEEP_CHUNK])
            with self._lock:
                self._dead_postings = 0
        finally:
            self._sweeping = False

    def _sweep(self, table: dict[object, int | array[int]], keys: list[object]) -> None:
        live = self._files
        for key in keys:
            found = table.get(key)
            if found is None:
                continue
            kept = [r for r in _postings(table, key) if (r >> _POS_BITS) in live]
            if not kept:
                del table[key]
            elif len(kept) == 1:
                table[key] = kept[0]
            elif isinstance(found, array) and len(kept) < len(found):
                table[key] = array("q", kept)

    # -- lookup -------------------------------------------------------------------------------------------

    def source(self, exclude: str | os.PathLike[str] | Iterable[str] | None = None) -> Source:
        """This index as a `Source` that never proposes from `exclude` (the file being edited, or several)."""
        return WorkspaceSource(self, exclude)

    def candidates(self, before: str, after: str, limit: int = MAX_CANDIDATES,
                   exclude: str | os.PathLike[str] | Iterable[str] | None = None) -> list[WorkspaceCandidate]:
        """Lines of the workspace's files (never `exclude`'s) proposed for a hole that ends its line, best first
        (score, then files, then text); what follows the typed text on a half-typed line."""
        hole = _hole(before, after)
        if hole is None or limit <= 0:
            return []
        typed, above, below = hole
        if exclude is None:
            excluded: set[str] = set()
        else:
            given = [exclude] if isinstance(exclude, str | os.PathLike) else list(exclude)
            # as given and with links resolved: the indexer names files by their resolved paths, an editor may not
            excluded = {path_key(p) for p in given} | {path_key(os.path.realpath(p)) for p in given}
        with self._readers_lock:
            self._readers += 1
        try:
            with self._lock:
                skip = {self._slots[p] for p in excluded if p in self._slots}
                entries = self._gather(typed, above, below, skip)
                return self._rank(entries, typed, above, below, limit)
        finally:
            with self._readers_lock:
                self._readers -= 1

    def _give_way(self) -> None:
        """Let lookups in progress or waiting finish before a writer takes the lock again (up to `_GIVE_WAY_S`):
        sleeping releases the interpreter lock too, so a lookup runs at full speed instead of sharing it."""
        deadline = time.monotonic() + _GIVE_WAY_S
        while self._readers and time.monotonic() < deadline:
            time.sleep(0.0005)

    def _gather(self, typed: str, above: str | None, below: str | None, skip: set[int]) -> list[int]:
        """The entries worth scoring for the hole, at most MAX_SCORED, by kind of evidence, strongest first:

        1. both neighbours exactly the hole's;
        2. the above one exactly the hole's, the below one sharing rare words with the hole's (most first);
        3. the above one exactly the hole's (`MAX_PER_KIND`: after `}` the rest is a lottery);
        4. the below one exactly the hole's (`MAX_PER_KIND`);
        5. the above one sharing rare words with the hole's, most first (`MAX_PER_KIND`; at the start of a file,
           the below one).
        Each kind scans at most a fifth of MAX_SCANNED occurrences. Left out: entries of `skip`ped files, lines
        equal to the hole's neighbours (a repeat, never the answer) and, on a half-typed line, lines that do
        not continue what was typed."""
        files = self._files
        above_key = line_key(above) if above is not None else None
        below_key = line_key(below) if below is not None else None
        quota = MAX_SCANNED // 5
        chosen: dict[int, None] = {}

        def scan(refs: Iterable[int], shift: int, neighbour: int | None = None, cap: int = MAX_SCORED) -> None:
            """Choose the entry `shift` lines from each occurrence in `refs` (at most `quota` of them), if the
            line `shift` further has the key `neighbour` (when given), until `cap` more are chosen."""
            ceiling = min(MAX_SCORED, len(chosen) + cap)
            typed_length = len(typed)
            repeats = (above_key, below_key)
            for ref in islice(refs, quota):
                if len(chosen) >= ceiling:
                    return
                slot = ref >> _POS_BITS
                entry = ref + shift
                file = files.get(slot)
                if file is None or slot in skip or entry in chosen:
                    continue
                pos = (ref & _POS_MASK) + shift
                if not 0 <= pos < file.lines:
                    continue
                keys = file.keys
                if neighbour is not None and (not 0 <= pos + shift < file.lines or keys[pos + shift] != neighbour):
                    continue
                if keys[pos] in repeats:
                    continue
                if typed_length:
                    start = file.starts[pos]
                    if file.starts[pos + 1] - 1 - start <= typed_length or not file.body.startswith(typed, start):
                        continue
                chosen[entry] = None

        def by_words(text: str, shift: int, neighbour: int | None, cap: int) -> None:
            words = [w for w in dict.fromkeys(_WORD.findall(text)) if w in self._words]
            words.sort(key=lambda w: len(_postings(self._words, w)))
            votes: Counter[int] = Counter()
            left = quota
            for word in words:
                refs = _postings(self._words, word)[:left]
                votes.update(refs)
                left -= len(refs)
                if left <= 0:
                    break
            scan((ref for ref, _ in votes.most_common()), shift, neighbour, cap)

        after_above = _postings(self._lines, above_key) if above_key is not None else ()
        before_below = _postings(self._lines, below_key) if below_key is not None else ()
        if after_above and before_below:
            if len(after_above) <= len(before_below):
                scan(after_above, 1, below_key)
            else:
                scan(before_below, -1, above_key)
        if after_above and below is not None:
            by_words(below, -1, above_key, MAX_PER_KIND)
        scan(after_above, 1, cap=MAX_PER_KIND)
        scan(before_below, -1, cap=MAX_PER_KIND)
        if above is not None:
            by_words(above, 1, None, MAX_PER_KIND)
        elif below is not None:
            by_words(below, -1, None, MAX_PER_KIND)
        return list(chosen)

    def _rank(self, entries: list[int], typed: str, above: str | None, below: str | None,
              limit: int) -> list[WorkspaceCandidate]:
        """Score entries like the document source does, aggregate identical lines, keep the best `limit`.

        Entries with the same three lines (a file copied, boilerplate repeated) are scored once, for all their
        files. Branch and bound: the above neighbour's similarity is computed first (once per distinct line),
        which bounds a context's score (as if its below neighbour matched exactly); contexts are taken in order
        of that bound and the rest dropped once it falls below the `limit`-th best score found, so the below
        neighbour is compared only for contexts that can still enter."""
        files = self._files
        near_above = _Near(above) if above is not None else None
        near_below = _Near(below) if below is not None else None
        contexts: dict[tuple[int, int, int], tuple[int, set[int]]] = {}  # lines' keys -> an entry, its files
        for entry in entries:
            slot, pos = entry >> _POS_BITS, entry & _POS_MASK
            keys = files[slot].keys
            triple = (keys[pos - 1] if pos > 0 else 0, keys[pos],
                      keys[pos + 1] if pos + 1 < len(keys) else 0)
            seen = contexts.get(triple)
            if seen is None:
                contexts[triple] = (entry, {slot})
            else:
                seen[1].add(slot)
        bounded: list[tuple[float, int, set[int]]] = []
        for entry, slots in contexts.values():
            file, pos = files[entry >> _POS_BITS], entry & _POS_MASK
            above_similarity = near_above(file, pos - 1) if near_above is not None and pos > 0 else 0.0
            has_below = near_below is not None and pos + 1 < file.lines
            bounded.append((round(context_score(above_similarity, 1.0 if has_below else 0.0), 4), entry, slots))
        bounded.sort(key=lambda b: -b[0])
        best: dict[int, tuple[float, str, set[int]]] = {}  # line key -> score, text, files at that score
        floor = -1.0
        for count, (bound, entry, slots) in enumerate(bounded):
            if bound < floor:
                break
            file, pos = files[entry >> _POS_BITS], entry & _POS_MASK
            above_similarity = near_above(file, pos - 1) if near_above is not None and pos > 0 else 0.0
            below_similarity = near_below(file, pos + 1) if near_below is not None and pos + 1 < file.lines else 0.0
            score = round(context_score(above_similarity, below_similarity), 4)
            key = file.keys[pos]
            found = best.get(key)
            if found is None or score > found[0]:
                best[key] = (score, file.line(pos), set(slots))
            elif score == found[0]:
                found[2].update(slots)
            if len(best) >= limit and count % 16 == 15:
                floor = sorted((b[0] for b in best.values()), reverse=True)[limit - 1]
        ranked = sorted(best.values(), key=lambda b: (-b[0], -len(b[2]), b[1]))[:limit]
        tied = Counter(b[0] for b in best.values())
        return [WorkspaceCandidate(text[len(typed):], SOURCE, score, len(slots),
                                   min(self._files[s].path for s in slots), tied[score] - 1)
                for score, text, slots in ranked]


class _Near:
    """Similarity to one line (a neighbour of the hole), exactly `document.similarity`'s Dice coefficient of
    token multisets, faster: the line's tokens are counted once, and each other line's similarity once per
    lookup (by its key)."""

    def __init__(self, text: str) -> None:
        tokens = TOKEN.findall(text)
        self.counts = Counter(tokens)
        self.total = len(tokens)
        self.text = text
        self.known: dict[int, float] = {}

    def __call__(self, file: _File, pos: int) -> float:
        key = file.keys[pos]
        found = self.known.get(key)
        if found is None:
            found = self.known[key] = self.similarity(file.line(pos))
        return found

    def similarity(self, text: str) -> float:
        tokens = TOKEN.findall(text)
        total = self.total + len(tokens)
        if total == 0:
            return 1.0 if self.text == text else 0.0
        left = dict(self.counts)
        common = 0
        for token in tokens:
            if left.get(token):
                left[token] -= 1
                common += 1
        return 2 * common / total


# -- ignore files -----------------------------------------------------------------------------------------------

SKIPPED_DIRS = frozenset({".git", "node_modules"})  # never walked, ignored or not (hidden folders neither)


@dataclass(frozen=True)
class _Rule:
    regex: re.Pattern[str]
    negate: bool
    dir_only: bool


def _glob_regex(pattern: str) -> str:
    """A gitignore glob as a regex over '/'-separated paths: `*` and `?` stay within a name, `**/` is any
    number of folders, `/**` everything inside, `[...]` a character class (`[!...]` its complement)."""
    out: list[str] = []
    i = 0
    while i < len(pattern):
        c = pattern[i]
        if pattern.startswith("**/", i) and (i == 0 or pattern[i - 1] == "/"):
            out.append("(?:.*/)?")
            i += 3
            continue
        if pattern.startswith("**", i) and i + 2 == len(pattern) and (i == 0 or pattern[i - 1] == "/"):
            out.append(".*")
            i += 2
            continue
        if c == "*":
            out.append("[^/]*")
        elif c == "?":
            out.append("[^/]")
        elif c == "[" and (close := pattern.find("]", i + 2)) > 0:
            body = pattern[i + 1:close]
            if body[0] in "!^":
                body = "^" + body[1:]
            out.append("[" + body.replace("\\", "\\\\") + "]")
            i = close
        elif c == "\\" and i + 1 < len(pattern):
            i += 1
            out.append(re.escape(pattern[i]))
        else:
            out.append(re.escape(c))
        i += 1
    return "".join(out)


class IgnoreRules:
    """The patterns of one `.gitignore` (or `.git/info/exclude`), for paths relative to its folder.

    The subset of gitignore that matters for finding source files: comments, `!` negation (the last matching
    pattern wins), a trailing `/` for folders only, a pattern with a `/` anchored to the file's folder and one
    without matching a name at any depth, `*`, `?`, `[...]`, `**`, backslash escapes. Deeper ignore files take
    precedence over shallower ones, and nothing below an ignored folder is looked at (so, as in git, a file in
    an ignored folder cannot be re-included)."""

    def __init__(self, lines: Iterable[str]) -> None:
        self.rules: list[_Rule] = []
        for raw in lines:
            line = raw.rstrip("\n\r")
            if line.endswith(" ") and not line.endswith("\\ "):
                line = line.rstrip(" ")
            if not line or line.startswith("#"):
                continue
            negate = line.startswith("!")
            if negate:
                line = line[1:]
            dir_only = line.endswith("/")
            line = line.rstrip("/")
            if not line:
                continue
            anchored = "/" in line
            body = _glob_regex(line.lstrip("/") if anchored else line)
            self.rules.append(_Rule(re.compile(body if anchored else f"(?:.*/)?{body}"), negate, dir_only))

    @classmethod
    def read(cls, path: Path) -> IgnoreRules | None:
        try:
            return cls(path.read_text(encoding="utf-8", errors="replace").splitlines())
        except OSError:
            return None

    def match(self, relative: str, is_dir: bool) -> bool | None:
        """True: ignored; False: re-included by a `!` pattern; None: no pattern says."""
        verdict: bool | None = None
        for rule in self.rules:
            if (is_dir or not rule.dir_only) and rule.regex.fullmatch(relative):
                verdict = not rule.negate
        return verdict


class _Ignores:
    """The ignore files of a folder tree, read once each (`forget` when one changes)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.by_folder: dict[Path, IgnoreRules | None] = {}

    def rules(self, folder: Path) -> IgnoreRules | None:
        if folder not in self.by_folder:
            found = IgnoreRules.read(folder / ".gitignore")
            if folder == self.root and (exclude := IgnoreRules.read(self.root / ".git" / "info" / "exclude")):
                merged = IgnoreRules(())
                merged.rules = exclude.rules + (found.rules if found is not None else [])  # .gitignore's win
                found = merged
            self.by_folder[folder] = found
        return self.by_folder[folder]

    def forget(self) -> None:
        self.by_folder.clear()

    def ignored(self, path: Path, is_dir: bool) -> bool:
        """Whether `path` (below the root) is ignored by the ignore files of the folders above it. The caller
        has checked that no folder above it is ignored."""
        name = path.name
        if is_dir and (name in SKIPPED_DIRS or name.startswith(".")):
            return True
        folder = path.parent
        while True:
            rules = self.rules(folder)
            if rules is not None:
                verdict = rules.match(path.relative_to(folder).as_posix(), is_dir)
                if verdict is not None:
                    return verdict
            if folder == self.root or folder == folder.parent:
                return False
            folder = folder.parent

    def ignored_anywhere(self, path: Path, is_dir: bool = False) -> bool:
        """Whether `path` (below the root) or any folder between it and the root is ignored."""
        relative = path.relative_to(self.root)
        current = self.root
        for part in relative.parts[:-1]:
            current = current / part
            if self.ignored(current, True):
                return True
        return self.ignored(path, is_dir)


# -- the background indexer -------------------------------------------------------------------------------------

Progress = Callable[[int, int], None]  # (files done, files known so far)
PROGRESS_EVERY_S = 0.2  # progress is reported at most this often (and once when all is done)


class WorkspaceIndexer:
    """Keeps a `WorkspaceIndex` of the source files below `root`, in a thread of its own.

    `start` walks the folder (breadth first, at most `index.max_files` files) and indexes each file found;
    `changed` queues one path the editor or the file watcher reports (created, changed, deleted, or moved: call
    it for both ends), coalesced with what is already queued. The thread reads and indexes one file at a time
    and sleeps `pause_s` between files, so a completion asking the index meanwhile waits at most for one chunk
    of one file's insertion (the index's lock) and gets the interpreter at least between files. Its priority is
    deliberately not lowered with `nice`: it shares the interpreter lock with the completion threads, and a
    starved thread holding that lock would stall them (priority inversion); yielding is what keeps it in the
    background.

    Walked: files ending in `SUFFIXES`, not ignored by a `.gitignore` (any folder's, for the paths below it) or
    `.git/info/exclude`, and never below `.git`, `node_modules` or a hidden folder; build folders only when an
    ignore file says so. Symbolic links are never followed (a link's target, where it lies inside the root, is
    indexed where it lies), so nothing outside the root is read. Binary files (a NUL byte) and files over
    `index.max_file_bytes` are skipped unread.

    Workspace trust: nothing is read unless the workspace is trusted (`trusted`, `set_trusted`). Reading a
    file runs nothing, but the product's rule (docs/SECURITY.md, "The editor: workspace trust") is that an
    untrusted workspace's files shape nothing beyond the document being edited: no flags from its
    `compile_commands.json`, none of its code run. Proposing its lines in completions would make the files of
    a freshly cloned repository choose what the editor suggests, so the index follows the same switch;
    revoking trust stops the walk and empties the index.
    """

    def __init__(self, root: str | os.PathLike[str], index: WorkspaceIndex, *, trusted: bool,
                 progress: Progress | None = None, pause_s: float = 0.001) -> None:
        self.root = Path(root).resolve()
        self.index = index
        self.trusted = trusted
        self.progress = progress
        self.pause_s = pause_s
        self.done = 0
        self.total = 0
        self._ignores = _Ignores(self.root)
        self._stamps: dict[str, tuple[int, int]] = {}  # path -> (mtime, size) of the version indexed from disk
        self._pending: OrderedDict[Path, str | None] = OrderedDict()
        self._walk_wanted = False
        self._working = False
        self._stopped = False
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None
        self._reported = 0.0

    # -- what the language server calls --------------------------------------------------------------------

    def start(self) -> None:
        """Walk and index the folder in the background (nothing while the workspace is untrusted)."""
        with self._cond:
            if not self.trusted or self._stopped:
                return
            self._walk_wanted = True
            self._ensure_thread()
            self._cond.notify()

    def changed(self, path: str | os.PathLike[str], text: str | None = None) -> None:
        """A file was created, changed or deleted (or a folder deleted): re-index it from `text` (the editor's
        buffer) or else from disk, or forget it when it is gone. Returns at once; ignored while untrusted and
        for paths outside the root."""
        if not self.trusted:
            return
        resolved = Path(path).resolve()
        if resolved == self.root or not resolved.is_relative_to(self.root):
            return
        if resolved.name == ".gitignore":
            self._ignores.forget()
            self.start()  # a rescan: files newly ignored are forgotten, newly visible ones indexed
            return
        with self._cond:
            if self._stopped:
                return
            if resolved not in self._pending:
                self.total += 1
            self._pending[resolved] = text
            self._ensure_thread()
            self._cond.notify()

    def set_trusted(self, trusted: bool) -> None:
        """The workspace's trust changed: trusting starts the walk; untrusting stops it and empties the index."""
        if trusted == self.trusted:
            return
        self.trusted = trusted
        if trusted:
            self.start()
            return
        with self._cond:
            self._pending.clear()
            self._walk_wanted = False
            self.done = self.total = 0
        self.index.clear()
        self._stamps.clear()

    def stop(self, timeout: float | None = None) -> None:
        with self._cond:
            self._stopped = True
            self._cond.notify()
        if self._thread is not None:
            self._thread.join(timeout)

    def wait(self, timeout: float | None = None) -> bool:
        """Block until nothing is queued or being indexed (tests, benchmarks); False on timeout."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            while self._walk_wanted or self._pending or self._working:
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    return False
                self._cond.wait(left)
        return True

    # -- the thread ----------------------------------------------------------------------------------------

    def _ensure_thread(self) -> None:
        if self._thread is None or not self._thread.is_alive():
            self._thread = threading.Thread(target=self._run, name="dice-workspace-index", daemon=True)
            self._thread.start()

    def _run(self) -> None:
        while True:
            with self._cond:
                self._working = False
                self._cond.notify_all()
                while not (self._stopped or self._walk_wanted or self._pending):
                    self._cond.wait()
                if self._stopped:
                    return
                self._working = True
                walk = self._walk_wanted
                self._walk_wanted = False
                item = None if walk else self._pending.popitem(last=False)
            if walk:
                self._walk()
                continue
            assert item is not None
            if self.trusted:
                self.index._give_way()  # a file's preparation shares the interpreter: not while a lookup runs
                self._apply(*item)
            with self._cond:
                self.done += 1
            self._report()
            time.sleep(self.pause_s)

    def _report(self, force: bool = False) -> None:
        now = time.monotonic()
        if self.progress is None:
            return
        if force or self.done >= self.total or now - self._reported >= PROGRESS_EVERY_S:
            self._reported = now
            self.progress(self.done, self.total)

    def _walk(self) -> None:
        """List the folder's files and queue them; forget indexed files that are no longer listed."""
        found = self._list()
        if not self.trusted:  # trust revoked during the walk
            return
        listed = {str(p) for p in found}
        prefix = str(self.root) + os.sep
        for indexed in self.index.paths():
            if indexed.startswith(prefix) and indexed not in listed and Path(indexed) not in self._pending:
                self.index.remove(indexed)
        with self._cond:
            self.done = 0
            for path in found:
                self._pending.setdefault(path, None)  # an editor's text already queued wins
            self.total = len(self._pending)
        self._report(force=True)

    def _list(self, top: Path | None = None) -> list[Path]:
        """The source files below `top` (the root by default) that are not ignored, breadth first, at most
        `index.max_files`; links are not followed."""
        found: list[Path] = []
        queue = [top if top is not None else self.root]
        while queue and len(found) < self.index.max_files:
            folder = queue.pop(0)
            try:
                with os.scandir(folder) as listing:
                    entries = sorted(listing, key=lambda e: e.name)
            except OSError:
                continue
            for entry in entries:
                if entry.is_symlink():
                    continue
                path = Path(entry.path)
                if entry.is_dir(follow_symlinks=False):
                    if not self._ignores.ignored(path, True):
                        queue.append(path)
                elif (entry.name.endswith(SUFFIXES) and entry.is_file(follow_symlinks=False)
                      and not self._ignores.ignored(path, False)):
                    found.append(path)
            time.sleep(0)
        return found[:self.index.max_files]

    def _apply(self, path: Path, text: str | None) -> None:
        """Index one queued path, or forget it (gone, ignored, unreadable, binary, too large). A folder's files
        are queued (one created or moved in); a gone folder's are forgotten. A file read from disk whose size
        and modification time are those it was indexed with is not read again (a rescan costs a `stat`)."""
        key = str(path)
        if path.is_dir() and not path.is_symlink():
            if not self._ignores.ignored_anywhere(path, True):
                with self._cond:
                    for found in self._list(path):
                        if found not in self._pending:
                            self._pending[found] = None
                            self.total += 1
            return
        if not path.name.endswith(SUFFIXES):
            if not path.exists():
                self.index.remove_under(key)  # a deleted folder
                self._stamps = {p: s for p, s in self._stamps.items() if not p.startswith(key + os.sep)}
            return
        if self._ignores.ignored_anywhere(path):
            self._forget(key)
            return
        stamp = None
        if text is None:
            stamp = self._stamp(path)
            if stamp is not None and stamp == self._stamps.get(key) and key in self.index:
                return
            text = self._read(path)
            if text is None:
                self._forget(key)
                return
        self.index.add(key, text)
        if stamp is not None:
            self._stamps[key] = stamp
        else:
            self._stamps.pop(key, None)  # the editor's text: the file on disk may differ
        if not self.trusted:  # trust revoked while this file was read
            self._forget(key)

    def _forget(self, key: str) -> None:
        self.index.remove(key)
        self._stamps.pop(key, None)

    @staticmethod
    def _stamp(path: Path) -> tuple[int, int] | None:
        try:
            info = os.stat(path, follow_symlinks=False)
        except OSError:
            return None
        return info.st_mtime_ns, info.st_size

    def _read(self, path: Path) -> str | None:
        try:
            info = os.stat(path, follow_symlinks=False)
            if not stat.S_ISREG(info.st_mode) or info.st_size > self.index.max_file_bytes:
                return None
            data = path.read_bytes()
        except OSError:
            return None
        if b"\0" in data[:8192]:
            return None
        return data.decode("utf-8", errors="replace")


def index_folder(root: str | os.PathLike[str], index: WorkspaceIndex | None = None, *, trusted: bool,
                 progress: Progress | None = None) -> WorkspaceIndexer:
    """Start indexing `root` in the background; the indexer's `index` answers lookups meanwhile."""
    indexer = WorkspaceIndexer(root, index if index is not None else WorkspaceIndex(), trusted=trusted,
                               progress=progress)
    indexer.start()
    return indexer


@dataclass
class WorkspaceSource:
    """An index as a `Source` for one edited file: never proposes from the paths in `exclude`."""

    index: WorkspaceIndex
    exclude: str | os.PathLike[str] | Iterable[str] | None = None

    def candidates(self, before: str, after: str, limit: int = MAX_CANDIDATES, needed: frozenset[str] = frozenset(),
                   checks: Request | None = None) -> list[Candidate]:
        return list(self.index.candidates(before, after, limit, self.exclude))
