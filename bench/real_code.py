"""Completions on real CUDA files the suite does not hold: the product's path (`dice-lsp complete`, the type check
on with an editor's time bounds) at editor-like positions, with a verdict of its own on what was shown.

    python bench/real_code.py PATH [PATH ...] [--files 100] [--seed 1] [--opened] [--unseen data/corpus]
                              [--projects ROOT] [--json rows.jsonl] [--hand sample.txt]

PATH: `.cu`/`.cuh` files or folders of them (searched), or `@LIST` (a file of paths, one a line: what
`bench/unseen.py --list` writes). `--unseen CORPUS` leaves out every file the model has seen (`bench/unseen.py`'s
verdict against that corpus) before sampling: a real-code set measures code the model never trained on.
`--projects ROOT`: each folder directly under ROOT is a project, and a file's completions get its project's other
files as their workspace index (as an editor with that folder open has it; the file itself left out).
Per file, up to five requests, each on a copy of the file changed the way an editor would have it (the file on
disk is never written):
- `newline`: a new empty line, indented like the statement above it, after a random statement line;
- `midline`: a random statement line cut at a random column (the cursor at the cut);
- `emptied`: a random statement line emptied down to its indentation;
- `eof`: the cursor on a new last line;
- `random`: the file as it is, the cursor anywhere.
(a statement line: indented, ends with `;`, not a comment or a directive). `emptied` and `midline` have a truth
(what was there): a shown fill is *exact* when the line it makes is the line that was there, up to whitespace
between tokens (the suite's `exact_ws`).

`--opened`: each file is opened first, as in an editor, whose didOpen starts clang's one-time work on it (the
precompiled preamble, the stand-ins for headers not here) while the user reads and types: the bench waits for it
(at most `OPEN_WAIT_S`) before the file's requests. Without it every file's first requests meet a cold clang, as a
one-shot command does.

Per kind: requests, regions found (`holes`), completions shown, exact among shown (where a truth exists), shown
completions after which the document has more tree-sitter ERROR/MISSING nodes than before (counted over the whole
tree, at every depth: a verdict the product's own checks do not use), exceptions, and latency p50/p95 of requests
that had a region. `--hand FILE` writes a seeded sample of the shown fills with their context for reading by hand. Any
`worse` or `exceptions` count above 0 is a bug to look at: `--json` keeps every request (file, position,
texts, checks, why nothing was shown).
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
import traceback
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from unseen import cuda_files, load_index, verdict

from dice_lsp.complete import complete_at, front_end_for
from dice_lsp.completion.sources import Source
from dice_lsp.completion.sources.workspace import WorkspaceIndex, WorkspaceIndexer
from dice_lsp.cuda.functions import parser
from dice_lsp.engine import LoadedModel, load_model
from dice_lsp.evals.score import tokens
from dice_lsp.settings import Settings
from dice_lsp.textdoc import Position
from dice_lsp.toolchain.clang import ClangJudge
from dice_lsp.toolchain.header_index import header_names

KINDS = ("newline", "midline", "emptied", "eof", "random")
OPEN_WAIT_S = 60.0


def error_nodes(text: str) -> int:
    """ERROR and MISSING nodes of the whole tree, at every depth."""
    count, stack = 0, [parser().parse(text.encode("utf-8")).root_node]
    while stack:
        node = stack.pop()
        count += node.is_error or node.is_missing
        stack.extend(child for child in node.children if child.has_error or child.is_missing)
    return count


def requests(text: str, rng: random.Random) -> Iterator[tuple[str, str, Position, str | None]]:
    """(kind, document, cursor, truth) for one file; `truth`: what the user had there (None: a new line)."""
    lines = text.split("\n")
    statements = [i for i, line in enumerate(lines) if line.strip().endswith(";") and line.startswith((" ", "\t"))
                  and not line.strip().startswith(("//", "*", "#"))]
    if statements:
        i = rng.choice(statements)
        indent = lines[i][:len(lines[i]) - len(lines[i].lstrip())]
        yield "newline", "\n".join([*lines[:i + 1], indent, *lines[i + 1:]]), Position(i + 1, len(indent)), None
        j = rng.choice(statements)
        low = len(lines[j]) - len(lines[j].lstrip())
        cut = rng.randint(low + 1, max(low + 1, len(lines[j]) - 1))
        yield ("midline", "\n".join([*lines[:j], lines[j][:cut], *lines[j + 1:]]), Position(j, cut),
               lines[j][cut:])
        k = rng.choice(statements)
        indent = lines[k][:len(lines[k]) - len(lines[k].lstrip())]
        yield ("emptied", "\n".join([*lines[:k], indent, *lines[k + 1:]]), Position(k, len(indent)),
               lines[k][len(indent):])
    document = text if text.endswith("\n") else text + "\n"
    yield "eof", document, Position(len(document.split("\n")) - 1, 0), None
    r = rng.randrange(len(lines))
    yield "random", text, Position(r, rng.randint(0, len(lines[r]))), None


def exact(typed: str, fill: str, truth: str) -> bool:
    """The line with the fill is the line the user had, up to whitespace between tokens (as the suite's
    `exact_ws`): `typed` is what stays on the line before the cursor."""
    return tokens(typed + fill) == tokens(typed + truth)


def splice(text: str, start: Position, end: Position, fill: str) -> str:
    lines = text.split("\n")

    def offset(p: Position) -> int:
        return sum(len(line) + 1 for line in lines[:p.line]) + p.character
    return text[:offset(start)] + fill + text[offset(end):]


def sampled_files(paths: list[str], count: int, rng: random.Random, unseen: Path | None = None) -> list[Path]:
    """The `.cu`/`.cuh` files of `paths` (only those the corpus in `unseen` does not hold, when given), at most
    `count` of them (a sample drawn with `rng`, in path order)."""
    files = cuda_files(paths)
    if unseen is not None:

        index = load_index(unseen)
        kept = [path for path in files if not verdict(index, path).seen]
        print(f"bench: {len(files) - len(kept)} of {len(files)} files are in the corpus, left out", file=sys.stderr)
        files = kept
    return sorted(rng.sample(files, count)) if len(files) > count else files


class Projects:
    """Each folder directly under `root` is a project; a file's workspace source is its project's index (built
    once per project, as an editor's background indexer has it) without the file itself."""

    def __init__(self, root: Path | None) -> None:
        self.root = root.resolve() if root else None
        self.indexes: dict[Path, WorkspaceIndex] = {}

    def sources(self, path: Path) -> tuple[Source, ...]:
        if self.root is None:
            return ()
        resolved = path.resolve()
        if self.root not in resolved.parents:
            return ()
        project = self.root / resolved.relative_to(self.root).parts[0]
        if project not in self.indexes:
            index = self.indexes[project] = WorkspaceIndex()
            indexer = WorkspaceIndexer(project, index, trusted=True, pause_s=0.0)
            indexer.start()
            indexer.wait()
            indexer.stop()
        return (self.indexes[project].source(exclude=str(resolved)),)


def run_one(model: LoadedModel, path: Path, kind: str, document: str, cursor: Position, truth: str | None,
            settings: Settings, sources: tuple[Source, ...]) -> dict[str, Any]:
    """One request as the editor makes it (clang within an editor's bounds, no nvcc), its fill scored."""
    row: dict[str, Any] = {"file": str(path), "kind": kind, "line": cursor.line, "character": cursor.character,
                           "truth": truth}
    started = time.perf_counter()
    try:
        folder = path.resolve().parent
        front_end = front_end_for(document, folder, settings.compile_flags(folder), settings, patient=False)
        completion = complete_at(model, document, cursor, settings, front_end=front_end, sources=sources)
        row.update(hole=completion.hole, texts=completion.texts, withheld=completion.withheld,
                   checks=[c.to_json() for c in completion.checks or []], latency_ms=completion.latency_ms,
                   sources=completion.sources, confidence=completion.confidences)
        if completion.texts:
            before = error_nodes(document)
            after = error_nodes(splice(document, completion.start, completion.end, completion.texts[0]))
            row.update(errors_before=before, errors_after=after)
            if truth is not None:
                typed = document.split("\n")[cursor.line][:cursor.character]
                row["exact"] = exact(typed, completion.texts[0], truth)
    except Exception:  # every failure is a finding, reported with its traceback
        row["exception"] = traceback.format_exc()
    row["wall_ms"] = (time.perf_counter() - started) * 1000
    return row


def opened(path: Path, text: str, settings: Settings) -> None:
    """What an editor's didOpen starts for `path` (clang's preamble and stand-ins), waited for."""
    folder = path.resolve().parent
    judge = front_end_for(text, folder, settings.compile_flags(folder), settings)
    if isinstance(judge, ClangJudge):
        judge.open(OPEN_WAIT_S)


def table(rows: list[dict[str, Any]]) -> str:
    out = ["| kind | requests | holes | shown | exact / shown (with a truth) | worse (more ERROR nodes) | exceptions "
           "| p50 ms | p95 ms |",
           "|---|---|---|---|---|---|---|---|---|"]
    for kind in (*KINDS, "all"):
        mine = [r for r in rows if kind in ("all", r["kind"])]
        if not mine:
            continue
        holes = [r for r in mine if r.get("hole")]
        shown = [r for r in holes if r.get("texts")]
        judged = [r for r in shown if "exact" in r]
        right = sum(r["exact"] for r in judged)
        precision = f"{right} / {len(judged)} ({right / len(judged):.0%})" if judged else "-"
        worse = [r for r in shown if r["errors_after"] > r["errors_before"]]
        walls = sorted(r["wall_ms"] for r in holes)
        p50 = f"{statistics.median(walls):.0f}" if walls else "-"
        p95 = f"{walls[min(len(walls) - 1, int(0.95 * len(walls)))]:.0f}" if walls else "-"
        out.append(f"| {kind} | {len(mine)} | {len(holes)} | {len(shown)} | {precision} | {len(worse)} | "
                   f"{sum('exception' in r for r in mine)} | {p50} | {p95} |")
    return "\n".join(out)


def rescored(row: dict[str, Any]) -> dict[str, Any]:
    """A saved row with its fill scored against its truth again (the line's typed part read from the file)."""
    if row.get("texts") and row.get("truth") is not None:
        line = Path(row["file"]).read_text(encoding="utf-8", errors="replace").split("\n")[row["line"]]
        row["exact"] = exact(line[:row["character"]], row["texts"][0], row["truth"])
    return row


def project_table(rows: list[dict[str, Any]], root: Path) -> str:
    """Per project (folder under `root`): holes with a truth, shown among them, exact among shown."""
    out = ["| project | files | holes with a truth | shown | exact / shown |", "|---|---|---|---|---|"]
    projects: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        projects.setdefault(Path(row["file"]).resolve().relative_to(root.resolve()).parts[0], []).append(row)
    for name, mine in sorted(projects.items()):
        judged = [r for r in mine if r.get("hole") and r["truth"] is not None]
        shown = [r for r in judged if r.get("texts")]
        right = sum(bool(r.get("exact")) for r in shown)
        precision = f"{right} / {len(shown)} ({right / len(shown):.0%})" if shown else "-"
        out.append(f"| {name} | {len({r['file'] for r in mine})} | {len(judged)} | {len(shown)} | {precision} |")
    return "\n".join(out)


def hand_sample(rows: list[dict[str, Any]], count: int, rng: random.Random) -> str:
    """A seeded sample of the shown fills, each with the file's lines around it, the fill, its source and P(right),
    and the truth where there is one: for reading by hand (`right` / `plausible` / `wrong`)."""
    shown = [r for r in rows if r.get("texts")]
    out = []
    for row in sorted(rng.sample(shown, min(count, len(shown))), key=lambda r: (r["file"], r["line"])):
        lines = Path(row["file"]).read_text(encoding="utf-8", errors="replace").split("\n")
        above = lines[max(0, row["line"] - 3):row["line"]]
        source = (row.get("sources") or ["?"])[0]
        confidence = (row.get("confidence") or [None])[0]
        out += [f"## {row['file']}:{row['line'] + 1} ({row['kind']}, from {source}, "
                f"P(right) {confidence if confidence is None else round(confidence, 3)})",
                *(f"    {line}" for line in above), f">>> {row['texts'][0]!r}",
                f"truth: {row['truth']!r}" if row.get("truth") is not None else "truth: (a new line)",
                "verdict: ", ""]
    return "\n".join(out)


def main() -> int:
    parser_ = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser_.add_argument("paths", nargs="+")
    parser_.add_argument("--files", type=int, default=100, help="at most this many files (a seeded sample)")
    parser_.add_argument("--seed", type=int, default=1)
    parser_.add_argument("--opened", action="store_true",
                         help="open each file first (clang's preamble and stand-ins made)")
    parser_.add_argument("--unseen", type=Path, metavar="CORPUS",
                         help="leave out the files this corpus holds (bench/unseen.py)")
    parser_.add_argument("--projects", type=Path, metavar="ROOT",
                         help="each folder under ROOT is a project: its files are the workspace index")
    parser_.add_argument("--json", type=Path, help="also write every request here (JSON lines)")
    parser_.add_argument("--hand", type=Path, help="write a sample of 40 shown fills here, to read by hand")
    parser_.add_argument("--tables-of", type=Path, metavar="ROWS",
                         help="print the tables of rows a run wrote with --json (their fills scored again)")
    args = parser_.parse_args()
    rng = random.Random(args.seed)
    if args.tables_of:
        report([rescored(json.loads(line)) for line in args.tables_of.read_text().split("\n") if line.strip()], args)
        return 0
    files = sampled_files(args.paths, args.files, rng, args.unseen)
    if not files:
        print("bench: no .cu or .cuh files", file=sys.stderr)
        return 2
    model, settings, projects, rows = load_model(), Settings(), Projects(args.projects), []
    header_names()  # the names check's index: built once per nvcc, then read from disk
    sink = args.json.open("w") if args.json else None
    for number, path in enumerate(files, 1):
        text = path.read_text(encoding="utf-8", errors="replace")
        if args.opened:
            opened(path, text, settings)
        sources = projects.sources(path)
        for kind, document, cursor, truth in requests(text, rng):
            row = run_one(model, path, kind, document, cursor, truth, settings, sources)
            rows.append(row)
            if sink:
                sink.write(json.dumps(row) + "\n")
                sink.flush()
        print(f"[{number}/{len(files)}] {path.name}", file=sys.stderr)
    report(rows, args)
    return 0


def report(rows: list[dict[str, Any]], args: argparse.Namespace) -> None:
    """The tables (per kind; per project with --projects) and, with --hand, the sample to read."""
    print(table(rows))
    if args.projects:
        print("\n" + project_table(rows, args.projects))
    if args.hand:
        args.hand.write_text(hand_sample(rows, 40, random.Random(args.seed)))


if __name__ == "__main__":
    sys.exit(main())
