"""How often `repair` makes a held-out CUDA file compile again after one planted error (embedded model, CPU).

    HF_HUB_OFFLINE=1 python bench/repair_rate.py [--heldout bench/heldout/standalone.jsonl] [--files N]
        [--seed 0] [--rounds 3] [--candidates 4] [--steps 8] [--json OUT.json]

Only the held-out files that compile as they are (nvcc, default CompileFlags, a temporary folder) take
part. Each gets one planted error inside a `__global__` body: `semicolon` (a statement's `;` deleted),
`typo` (an identifier misspelt: two adjacent letters swapped or one dropped), `paren` (a `)` deleted from a
line whose parens balance), `keyword` (a type keyword misspelt: `float` -> `flaot`, ...), `bracket` (the `]`
of an indexing expression deleted). The kinds take turns, the one planted least so far first, so each gets a
fair share; a kind with no site in the file, or whose sites all still compile, hands over to the next.
Sites are drawn with `--seed`. The planted file is then repaired (`--rounds` rounds, `--candidates`
candidates, the default sampler with `--steps` steps) and the table says, per kind and in total: how many
were made to compile, how many are the original exactly, how many repaired ones have as many non-blank
lines as the original, the mean rounds the repaired ones took and the median wall seconds per file (repair
only).
"""

from __future__ import annotations

import argparse
import difflib
import json
import os
import random
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from dice_lsp.cuda.functions import parse_functions  # noqa: E402
from dice_lsp.engine import SamplerConfig, load_model  # noqa: E402
from dice_lsp.optimize.repair import Check, checker, errors_of, repair  # noqa: E402
from dice_lsp.toolchain.flags import CompileFlags  # noqa: E402

HELDOUT = ROOT / "bench" / "heldout" / "standalone.jsonl"
KINDS = ("semicolon", "typo", "paren", "keyword", "bracket")
TARGET = 0.5
SITES_PER_KIND = 4  # planted sites tried (each one compile) before a kind hands over to the next
Site = tuple[int, int, str, str]  # (start, end, replacement, what was done)

_NOT_CODE = re.compile(r"//[^\n]*|/\*.*?\*/|\"(?:\\.|[^\"\\\n])*\"|'(?:\\.|[^'\\\n])*'", re.S)
_IDENT = re.compile(r"[A-Za-z_]\w*")
_MISSPELT = {"float": "flaot", "int": "itn", "const": "cosnt", "double": "doubel", "unsigned": "unsinged",
             "char": "cahr", "bool": "bol", "long": "lnog", "short": "shrot", "void": "viod", "auto": "atuo",
             "signed": "sigend"}
_KEYWORD = re.compile(r"\b(" + "|".join(_MISSPELT) + r")\b")
_RESERVED = frozenset({*_MISSPELT, "if", "else", "for", "while", "do", "return", "break", "continue", "switch",
                       "case", "default", "struct", "class", "template", "typename", "sizeof", "true", "false",
                       "nullptr", "static_cast", "reinterpret_cast", "const_cast", "dynamic_cast", "static",
                       "volatile", "extern", "inline", "namespace", "using", "goto", "this", "new", "delete",
                       "__shared__", "__restrict__", "__device__", "__global__", "__host__", "__forceinline__",
                       "__syncthreads", "constexpr", "register", "typedef", "enum", "union", "operator"})


# --- planting ---------------------------------------------------------------------------------------------

def code_ranges(text: str) -> list[tuple[int, int]]:
    """(start, end) of each kernel body's inside, comments and string literals cut out."""
    hidden = [(m.start(), m.end()) for m in _NOT_CODE.finditer(text)]
    ranges = []
    for function in parse_functions(text):
        if not function.is_kernel:
            continue
        cursor, end = function.body_open + 1, function.body_close
        for lo, hi in hidden:
            if hi <= cursor or lo >= end:
                continue
            if lo > cursor:
                ranges.append((cursor, lo))
            cursor = max(cursor, hi)
        if cursor < end:
            ranges.append((cursor, end))
    return ranges


def _inside(ranges: list[tuple[int, int]], lo: int, hi: int) -> bool:
    return any(start <= lo and hi <= end for start, end in ranges)


def _lines(text: str, ranges: list[tuple[int, int]]) -> list[tuple[int, str]]:
    """(offset, line) for each line whose code lies wholly inside a kernel body."""
    found, offset = [], 0
    for line in text.split("\n"):
        code = line.rstrip()
        lead = len(code) - len(code.lstrip())
        if code.strip() and _inside(ranges, offset + lead, offset + len(code)):
            found.append((offset, line))
        offset += len(line) + 1
    return found


def semicolon_sites(text: str, ranges: list[tuple[int, int]]) -> list[Site]:
    sites = []
    for offset, line in _lines(text, ranges):
        code = line.rstrip()
        if code.endswith(";") and not code.lstrip().startswith("for"):
            at = offset + len(code) - 1
            sites.append((at, at + 1, "", "deleted ';'"))
    return sites


def typo_sites(text: str, ranges: list[tuple[int, int]], rng: random.Random) -> list[Site]:
    words = set(_IDENT.findall(text))
    sites = []
    for start, end in ranges:
        for m in _IDENT.finditer(text, start, end):
            name = m.group()
            member = text[:m.start()].rstrip().endswith((".", "->", "::")) or text[m.end():m.end() + 2] == "::"
            if len(name) < 3 or name in _RESERVED or member:
                continue
            variants = [name[:i] + name[i + 1] + name[i] + name[i + 2:] for i in range(len(name) - 1)
                        if name[i] != name[i + 1] and name[i:i + 2].isalpha()]
            variants += [name[:i] + name[i + 1:] for i in range(1, len(name)) if name[i].isalpha()]
            variants = [v for v in variants if v not in words and v not in _RESERVED and _IDENT.fullmatch(v)]
            if variants:
                typo = rng.choice(variants)
                sites.append((m.start(), m.end(), typo, f"{name} -> {typo}"))
    return sites


def paren_sites(text: str, ranges: list[tuple[int, int]], rng: random.Random) -> list[Site]:
    sites = []
    for offset, line in _lines(text, ranges):
        closes = [i for i, c in enumerate(line) if c == ")"]
        if closes and line.count("(") == len(closes) and "//" not in line and '"' not in line:
            at = offset + rng.choice(closes)
            sites.append((at, at + 1, "", "deleted ')'"))
    return sites


def keyword_sites(text: str, ranges: list[tuple[int, int]]) -> list[Site]:
    return [(m.start(), m.end(), _MISSPELT[m.group()], f"{m.group()} -> {_MISSPELT[m.group()]}")
            for start, end in ranges for m in _KEYWORD.finditer(text, start, end)]


def bracket_sites(text: str, ranges: list[tuple[int, int]]) -> list[Site]:
    sites = []
    for start, end in ranges:
        opened: list[int] = []
        for at in range(start, end):
            if text[at] == "[":
                opened.append(at)
            elif text[at] == "]" and opened:
                lo = opened.pop()
                indexed = re.search(r"[\w\])]\s*$", text[start:lo]) is not None  # a[i], a[i][j], f(x)[i]
                if indexed and "\n" not in text[lo:at]:
                    sites.append((at, at + 1, "", "deleted ']'"))
    return sites


def sites_of(kind: str, text: str, rng: random.Random) -> list[Site]:
    ranges = code_ranges(text)
    found = {"semicolon": lambda: semicolon_sites(text, ranges), "typo": lambda: typo_sites(text, ranges, rng),
             "paren": lambda: paren_sites(text, ranges, rng), "keyword": lambda: keyword_sites(text, ranges),
             "bracket": lambda: bracket_sites(text, ranges)}[kind]()
    rng.shuffle(found)
    return found


def turn(planted: list[str], offset: int) -> list[str]:
    """The kinds in the order to try them: the least planted so far first, ties taken in turn."""
    return sorted(KINDS, key=lambda k: (planted.count(k), (KINDS.index(k) - len(planted) - offset) % len(KINDS)))


def plant(text: str, kinds: list[str], check: Check, rng: random.Random) -> tuple[str, str, str, int, int] | None:
    """(planted text, kind, what was done, line, errors) for the first of `kinds` with a site that breaks it."""
    for kind in kinds:
        for lo, hi, new, what in sites_of(kind, text, rng)[:SITES_PER_KIND]:
            planted = text[:lo] + new + text[hi:]
            errors = errors_of(check(planted))
            if errors:
                return planted, kind, what, text.count("\n", 0, lo), len(errors)
    return None


# --- measuring --------------------------------------------------------------------------------------------

def non_blank(text: str) -> int:
    return sum(bool(line.strip()) for line in text.splitlines())


def diff(before: str, after: str) -> str:
    return "".join(difflib.unified_diff(before.splitlines(keepends=True), after.splitlines(keepends=True),
                                        "original", "repaired", n=0))


def table(rows: list[dict[str, Any]], rounds: int) -> list[str]:
    out = [f"| kind | planted | compiles within {rounds} rounds | exact restorations | same line count "
           "| mean rounds (repaired) | p50 s/file |", "|---|---|---|---|---|---|---|"]
    for kind in (*KINDS, "total"):
        group = [r for r in rows if kind in (r["kind"], "total")]
        if not group:
            out.append(f"| {kind} | 0 | - | - | - | - | - |")
            continue
        fixed = [r for r in group if r["compiles"]]
        exact = sum(r["exact"] for r in group)
        kept = sum(r["same_line_count"] for r in fixed)
        mean_rounds = f"{statistics.mean(r['rounds'] for r in fixed):.2f}" if fixed else "-"
        name = f"**{kind}**" if kind == "total" else kind
        out.append(f"| {name} | {len(group)} | {len(fixed)} ({len(fixed) / len(group):.0%}) "
                   f"| {exact} ({exact / len(group):.0%}) | {kept}/{len(fixed)} | {mean_rounds} "
                   f"| {statistics.median(r['seconds'] for r in group):.1f} |")
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--heldout", type=Path, default=HELDOUT)
    parser.add_argument("--files", type=int, help="only the first N held-out files (default: all)")
    parser.add_argument("--seed", type=int, default=0, help="where the errors are planted")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--candidates", type=int, default=4)
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--json", type=Path, help="write the per-file rows here")
    args = parser.parse_args()

    sources = [json.loads(line) for line in args.heldout.read_text().splitlines() if line.strip()]
    sources = sources[:args.files] if args.files is not None else sources
    started = time.perf_counter()
    model = load_model(None, "cpu", "auto")
    print(f"model {model.name} loaded in {time.perf_counter() - started:.1f}s", file=sys.stderr, flush=True)
    sampler = SamplerConfig(steps=args.steps)
    rows: list[dict[str, Any]] = []
    broken = unplanted = 0
    with tempfile.TemporaryDirectory() as folder:
        check = checker(Path(folder), CompileFlags())
        for index, source in enumerate(sources):
            text = source["text"]
            if errors_of(check(text)):
                broken += 1
                print(f"[{index + 1}/{len(sources)}] does not compile as it is: skipped", file=sys.stderr, flush=True)
                continue
            rng = random.Random(f"{args.seed}:{index}")
            planted = plant(text, turn([r["kind"] for r in rows], args.seed), check, rng)
            if planted is None:
                unplanted += 1
                print(f"[{index + 1}/{len(sources)}] no site breaks it: skipped", file=sys.stderr, flush=True)
                continue
            broken_text, kind, what, line, errors_before = planted
            said: list[str] = []
            started = time.perf_counter()
            result = repair(lambda job: job(model), broken_text, check, args.rounds, args.candidates, sampler,
                            said=said.append)
            seconds = time.perf_counter() - started
            row = {"index": index, "source": source.get("source"), "path": source.get("path"), "kind": kind,
                   "planted": what, "line": line + 1, "errors_before": errors_before, "compiles": result.compiles,
                   "rounds": result.rounds, "exact": result.text == text,
                   "same_line_count": non_blank(result.text) == non_blank(text), "seconds": round(seconds, 2),
                   "errors_after": [f"{d.line + 1}:{d.character + 1}: {d.message}" for d in result.errors],
                   "log": said, "diff_planted": diff(text, broken_text),
                   "diff_repaired": "" if result.text == text else diff(text, result.text)}
            rows.append(row)
            state = ("exact" if row["exact"] else "compiles") if result.compiles else "FAILS"
            print(f"[{index + 1}/{len(sources)}] {kind:9} line {line + 1:>3} {what:28} -> {state:8} "
                  f"rounds {result.rounds} {seconds:6.1f}s", file=sys.stderr, flush=True)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    if not rows:
        print("nothing planted", file=sys.stderr)
        return 1
    rate = sum(r["compiles"] for r in rows) / len(rows)
    print(f"held-out: {args.heldout.name}, {len(sources)} files; {broken} do not compile as they are, "
          f"{unplanted} have no site to plant; {len(rows)} planted (seed {args.seed}); repair: "
          f"{args.rounds} rounds, {args.candidates} candidates, {args.steps} steps, model {model.name} on CPU")
    print("\n".join(table(rows, args.rounds)))
    verdict = "met" if rate >= TARGET else "missed"
    print(f"target: share made to compile within {args.rounds} rounds >= {TARGET:.0%}: {verdict} "
          f"({rate:.1%}, {100 * (rate - TARGET):+.1f} points)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
