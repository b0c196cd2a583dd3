"""Kernels with their holes marked in the code: the canonical-idioms benchmark (bench/idioms, the measure) and
its dev split (bench/idioms-dev, for tuning) as suites.

A trailing comment marks a hole on its line (bench/idioms/README.md): `// @hole` is a `line` hole (the whole
statement is the truth; the user has the line emptied down to its indentation), `// @hole midline=<prefix>` a
`midline` hole (`<prefix>` and the blanks after it stay typed; the rest of the line is the truth). A file's text
is the file with every marker comment removed; each hole's start and end are offsets of its truth in that text.
A malformed marker, a file without one or a folder without kernels is a one-line error.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from dice_lsp.cuda.functions import enclosing_function
from dice_lsp.errors import DiceError
from dice_lsp.evals.suite import Kind, Suite, SuiteFile, SuiteHole

LICENSE = "Apache-2.0"  # written for this project, under its license
_MARKER = re.compile(r"[ \t]*//[ \t]*@hole(?P<rest>.*)$")
_MIDLINE = re.compile(r"[ \t]+midline=(?P<prefix>.*)")
MARKER_HELP = "`// @hole` or `// @hole midline=<typed prefix>` at the end of a code line"


@dataclass(frozen=True)
class Marked:
    """A hole as its marker states it, before offsets are known."""

    line: int  # 0-based line number in the file
    kind: Kind
    prefix: str  # midline: the start of the line's content that stays typed; "" for a line hole


def strip_markers(raw: str, where: str) -> tuple[str, list[Marked]]:
    """The text without marker comments, and the holes the markers ask for.

    A marker is the last thing on its line, the line keeps its code (trailing blanks dropped). `where` names the
    file in errors (`DiceError`, one line, with the 1-based line number): a `@hole` that is not a well-formed
    trailing marker, a marker on a line with no code or with another comment, a midline prefix that is empty,
    is not how the line's content starts, or leaves nothing to complete.
    """
    lines = raw.split("\n")
    marks: list[Marked] = []
    for number, line in enumerate(lines):
        if "@hole" not in line:
            continue
        at = f"{where}:{number + 1}"
        match = _MARKER.search(line)
        if match is None or line.count("@hole") != 1:
            raise DiceError(f"{at}: malformed hole marker (want {MARKER_HELP})")
        code = line[:match.start()].rstrip()
        content = code.strip()
        if not content:
            raise DiceError(f"{at}: hole marker on a line without code")
        if "//" in code or "/*" in code:
            raise DiceError(f"{at}: a hole's line holds another comment besides its marker")
        rest = match.group("rest")
        if not rest.strip():
            marks.append(Marked(number, "line", ""))
        elif (midline := _MIDLINE.fullmatch(rest)) is not None:
            prefix = midline.group("prefix").strip()
            if not prefix:
                raise DiceError(f"{at}: empty midline prefix (want {MARKER_HELP})")
            if not content.startswith(prefix):
                raise DiceError(f"{at}: midline prefix {prefix!r} is not how the line starts ({content!r})")
            if not content[len(prefix):].strip():
                raise DiceError(f"{at}: midline prefix {prefix!r} leaves nothing to complete")
            marks.append(Marked(number, "midline", prefix))
        else:
            raise DiceError(f"{at}: malformed hole marker {line[match.start():].strip()!r} (want {MARKER_HELP})")
        lines[number] = code
    return "\n".join(lines), marks


def hole_span(text: str, mark: Marked) -> tuple[int, int]:
    """String offsets of a hole's truth in the marker-free `text`: the line's content, or for a midline hole
    what follows the typed prefix and the blanks after it (the cursor stays on the line, as typed)."""
    starts = [0, *(m.end() for m in re.finditer("\n", text))]
    line_start = starts[mark.line]
    line_end = text.find("\n", line_start)
    line = text[line_start:len(text) if line_end < 0 else line_end]
    start = line_start + len(line) - len(line.lstrip())
    end = line_start + len(line.rstrip())
    if mark.kind == "midline":
        start += len(mark.prefix)
        while text[start] in " \t":
            start += 1
    return start, end


def idiom_files(folder: Path) -> list[Path]:
    """The kernel files of the set, by name; a one-line error for a folder that is missing or holds none."""
    if not folder.is_dir():
        raise DiceError(f"{folder}: not a folder")
    files = sorted(folder.glob("*.cu"))
    if not files:
        raise DiceError(f"{folder}: no kernels (*.cu) there")
    return files


def file_compiles(text: str) -> bool | None:
    """Whether nvcc compiles `text` alone (compile-only, the suite's default flags; cached on disk by the text,
    the flags and nvcc's version); None without nvcc, so that no fill is compile-checked."""
    from dice_lsp.evals.score import compiles
    from dice_lsp.toolchain.nvcc import find_nvcc

    try:
        find_nvcc()
    except DiceError:
        return None
    return compiles(text)


def load_marked(folder: Path, compile_check: bool = True, name: str = "canonical-idioms",
                split: str = "idioms") -> Suite:
    """The set as a suite: one `SuiteFile` per kernel file (marker-free text) and one `SuiteHole` per marker,
    ids `<kind>/<file stem>:<line>` (1-based), in file and line order.

    `compile_check` asks nvcc whether each file compiles alone (the scorer then compiles the shown fills of its
    holes); without it, or without nvcc, `compiles` is None. A hole outside any function is an error: the editor
    completes inside function bodies. No idiom is a template.
    """
    files: dict[str, SuiteFile] = {}
    holes: list[SuiteHole] = []
    for path in idiom_files(folder):
        raw = path.read_text(encoding="utf-8")
        text, marks = strip_markers(raw, path.name)
        if not marks:
            raise DiceError(f"{path.name}: no hole marker ({MARKER_HELP})")
        key = path.stem
        for mark in marks:
            start, end = hole_span(text, mark)
            function = enclosing_function(text, start)
            if function is None:
                raise DiceError(f"{path.name}:{mark.line + 1}: hole outside any function body")
            holes.append(SuiteHole(f"{mark.kind}/{key}:{mark.line + 1}", mark.kind, key, start, end, function.name,
                                   False))
        compiles = file_compiles(text) if compile_check else None
        files[key] = SuiteFile(key, name, f"bench/{folder.name}/{path.name}", LICENSE, text, compiles)
    return Suite(name, split, files, holes)


def typed_prefix(suite: Suite, hole: SuiteHole) -> str:
    """What the user has typed on the hole's line before the cursor, without the indentation ("" for a line
    hole; a midline hole's prefix keeps the blanks typed after it)."""
    text = suite.text(hole)
    return text[text.rfind("\n", 0, hole.start) + 1:hole.start].lstrip()
