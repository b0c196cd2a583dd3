"""Per-fill verdicts of CUDA-Infill, on the CPU: how close a fill is to the truth, and whether it is code.

`score_fill` judges one fill of one hole. A fill of None (the system showed nothing) and a fill of only
whitespace are both *not shown*. The verdicts:

- `exact`: fill and truth are equal once both are *normalised*: each line loses its trailing whitespace
  (spaces, tabs, a `\\r`), and blank lines at the start and at the end are dropped. Nothing else changes:
  the first line's indentation, blank lines in the middle and every character inside a line count.
- `exact_ws`: fill and truth are the same sequence of C tokens (`tokens`), so they differ at most in
  whitespace between tokens: `a+b` equals `a + b`, but `int a` does not equal `inta`. A token is an
  identifier, a preprocessing number, a string or char literal (whitespace inside it counts), an operator
  or punctuator (longest match: `>>=` before `>>`, `<<<` and `>>>` of a launch are one token each), or a
  comment, whose words count but not the whitespace between them. Any other non-blank character is a
  token of its own.
- `first_line`: the first non-blank lines of fill and truth are equal after stripping both ends.
- `similarity`: 1 - Levenshtein(fill, truth) / max(len) over the normalised texts (1.0 exactly when
  `exact`; an unshown fill counts as the empty string).
- `parses`: the file with the fill spliced in (`text[:start] + fill + text[end:]`) has no ERROR or
  MISSING node of tree-sitter in the hole's function. That function is the outermost
  `function_definition` covering the hole's start in the filled text, together with the span of the
  original text's function moved by the change of length: a stray `}` that closes the function early
  leaves the rest of the original body as an ERROR there. With no function around the hole, the whole
  tree is checked. An empty fill is judged too; an unshown one does not parse.
- `substantive`: shown, and some token is not a comment.
- `compiles`: None unless the caller asks (a file that compiles on its own, a function that is not a
  template); then False for a fill that is not substantive, else whether nvcc compiles the filled file
  (compile-only, `DEFAULT_FLAGS`), remembered on disk by the text, the flags and the nvcc version.
- `passes`: always None here; the runner sets it from `dice_lsp.evals.execute` for executable holes
  (`dataclasses.replace(score, passes=...)`).
"""

from __future__ import annotations

import os
import re
import tempfile
from dataclasses import dataclass

import numpy as np
from tree_sitter import Node

from dice_lsp.cuda.functions import ParsedSource, parse
from dice_lsp.evals.suite import SuiteHole
from dice_lsp.toolchain.cache import cache_key, cache_root
from dice_lsp.toolchain.flags import DEFAULT_FLAGS
from dice_lsp.toolchain.nvcc import compile_source, find_nvcc

_OPERATORS = ("<<<", ">>>", "<<=", ">>=", "...", "->*", "->", "++", "--", "<<", ">>", "<=", ">=", "==", "!=",
              "&&", "||", "+=", "-=", "*=", "/=", "%=", "&=", "|=", "^=", "::", ".*", "##")
_TOKEN = re.compile(
    r"(?P<comment>//[^\n]*|/\*.*?(?:\*/|\Z))"
    r"|(?P<literal>[uUL]?8?(?:\"(?:\\.|[^\"\\\n])*\"|'(?:\\.|[^'\\\n])*'))"
    r"|(?P<number>\.?\d(?:[eEpP][+-]|[\w.])*)"
    r"|(?P<name>[A-Za-z_]\w*)"
    r"|(?P<operator>" + "|".join(re.escape(op) for op in _OPERATORS) + r")"
    r"|(?P<other>\S)", re.DOTALL)


@dataclass(frozen=True)
class FillScore:
    shown: bool
    exact: bool
    exact_ws: bool
    first_line: bool
    similarity: float
    parses: bool
    substantive: bool
    compiles: bool | None = None
    passes: bool | None = None


def normalise(text: str) -> str:
    """`text` without trailing whitespace on any line and without leading or trailing blank lines."""
    lines = [line.rstrip() for line in text.split("\n")]
    while lines and not lines[0]:
        lines.pop(0)
    while lines and not lines[-1]:
        lines.pop()
    return "\n".join(lines)


def tokens(text: str) -> list[tuple[str, bool]]:
    """The C tokens of `text`, each with whether it is a comment (a comment's whitespace made single)."""
    found = []
    for match in _TOKEN.finditer(text):
        if match.lastgroup == "comment":
            found.append((" ".join(match.group().split()), True))
        else:
            found.append((match.group(), False))
    return found


def is_substantive(fill: str | None) -> bool:
    """Shown, and more than comments: some token of `fill` is not a comment."""
    return fill is not None and any(not comment for _, comment in tokens(fill))


def first_line(text: str) -> str | None:
    """The first non-blank line of `text`, stripped; None when every line is blank."""
    return next((line.strip() for line in text.split("\n") if line.strip()), None)


def levenshtein(a: str, b: str) -> int:
    """Edit distance (insertions, deletions, substitutions of characters), one numpy row per character
    of `a`: within a row, insertions are a running minimum of (value - column), added back."""
    if len(a) < len(b):
        a, b = b, a
    if not b:
        return len(a)
    target = np.frombuffer(b.encode("utf-32-le"), dtype=np.uint32)
    columns = np.arange(len(b) + 1, dtype=np.int64)
    row = columns.copy()
    for i, char in enumerate(a, start=1):
        best = np.empty_like(row)
        best[0] = i
        best[1:] = np.minimum(row[1:] + 1, row[:-1] + (target != ord(char)))
        row = np.minimum.accumulate(best - columns) + columns
    return int(row[-1])


def similarity(fill: str, truth: str) -> float:
    longest = max(len(fill), len(truth))
    return 1.0 if longest == 0 else 1.0 - levenshtein(fill, truth) / longest


def _outer_function(src: ParsedSource, offset: int) -> tuple[int, int] | None:
    """Byte span of the outermost function definition covering the string offset `offset`."""
    byte = src.byte(offset)
    node: Node | None = src.root.descendant_for_byte_range(byte, byte)
    span = None
    while node is not None:
        if node.type == "function_definition" and node.start_byte <= byte <= node.end_byte:
            span = (node.start_byte, node.end_byte)
        node = node.parent
    return span


def _error_within(node: Node, low: int, high: int) -> bool:
    """Whether an ERROR or MISSING node under `node` touches the byte span [low, high]."""
    if not node.has_error or node.end_byte < low or node.start_byte > high:
        return False
    if node.type == "ERROR" or node.is_missing:
        return True
    return any(_error_within(child, low, high) for child in node.children)


def parses(text: str, hole: SuiteHole, fill: str) -> bool:
    """No syntax error in the hole's function once `fill` replaces the hole (see the module's docstring)."""
    filled = text[:hole.start] + fill + text[hole.end:]
    src = parse(filled)
    spans = []
    if (own := _outer_function(src, hole.start)) is not None:
        spans.append(own)
    original = parse(text)
    if (before := _outer_function(original, hole.start)) is not None:
        growth = len(fill.encode("utf-8")) - len(text[hole.start:hole.end].encode("utf-8"))
        spans.append((before[0], before[1] + growth))
    if not spans:
        return not src.root.has_error
    return not _error_within(src.root, min(s for s, _ in spans), max(e for _, e in spans))


def compiles(source: str) -> bool:
    """nvcc compile-only of `source` with the default flags; results are kept under the cache folder."""
    nvcc = find_nvcc()
    key = cache_key(source, [], ("compile-only", *DEFAULT_FLAGS.arguments()), nvcc)
    marker = cache_root() / "infill-compiles" / key[:2] / key
    try:
        return marker.read_text() == "ok"
    except FileNotFoundError:
        pass
    ok = compile_source(source).ok
    marker.parent.mkdir(parents=True, exist_ok=True)
    handle, scratch = tempfile.mkstemp(dir=marker.parent)
    with os.fdopen(handle, "w") as out:
        out.write("ok" if ok else "fails")
    os.replace(scratch, marker)
    return ok


def score_fill(text: str, hole: SuiteHole, fill: str | None, *, compile_check: bool) -> FillScore:
    """The verdicts on `fill` for `hole` of the file `text` (None: nothing was shown)."""
    truth = hole.truth(text)
    shown = fill is not None and bool(fill.strip())
    given = fill if fill is not None else ""
    substantive = is_substantive(fill)
    first = first_line(given)
    checked = None
    if compile_check:
        checked = substantive and compiles(text[:hole.start] + given + text[hole.end:])
    return FillScore(
        shown=shown,
        exact=shown and normalise(given) == normalise(truth),
        exact_ws=shown and tokens(given) == tokens(truth),
        first_line=shown and first is not None and first == first_line(truth),
        similarity=similarity(normalise(given), normalise(truth)),
        parses=fill is not None and parses(text, hole, fill),
        substantive=substantive,
        compiles=checked,
    )
