"""Rejection-sampling fine-tuning (RFT): the model fills holes in training files, the fills that pass the
completion's cheap checks and come close to the removed code are kept, and the model is trained on them.

    python -m dice_lsp.training.rft collect --corpus data/corpus --model runs/v2 --out fills.jsonl --holes 4000
    python -m dice_lsp.training.rft finetune --data data/pack --tokenizer runs/v2 --init runs/v2 \\
        --rft fills.jsonl --out runs/rft --run-minutes 10

The spirit of DICE's compile-rewarded RL at our scale: the reward is binary (kept or not) and the update is
supervised training on what was kept (RAFT / expert iteration), not a policy gradient.

Collect. Holes are cut from CUDA files of the corpus's TRAIN split only (`corpus.read_split`; lang and dialect
`cuda`, permissively licensed, from no source the benchmark draws from) or from `.cu` files given directly;
a file that is, exactly or nearly, a CUDA-Infill file (test or dev) or a held-out one (`corpus.BenchFilter`)
is skipped. The holes are the suite's `line` holes (`training.suite_build.cut_functions`: statement lines of cleanly
parsed kernels and `__device__` functions; `--kinds line midline` adds `midline` holes, the rest of such a line
after a cursor inside), asked as the editor asks them (`evals.systems`): the line's
content removed, the cursor where it was, the region from `cuda.holes.find_hole`. Each hole is filled through
the product's pieces (`complete.fill_request`: context, canvases; the engine's batched in-place fill:
`--candidates` sampled rows per canvas, several holes per denoising batch; `complete.suggestions`: the
clean-up filters and the cheap checks) at `--temperature` (default 1: the model's own distribution). Renames
are off: a kept fill is what the model wrote. A fill is kept when it parses, its names resolve, and its
token-level edit similarity to the removed line is at least `--threshold` (C tokens, `evals.score.tokens`)
and it writes no identifier the removed line does not (a wrong member is a small edit in tokens);
each distinct kept fill of a hole is one JSON line (`KeptFill`).

Train. A kept fill becomes an example shaped like the curriculum's hole examples (`training.holes`):
prefix tokens, a canvas holding the fill's tokens then pads, masked with probability t and weighted 1/t,
suffix tokens; the context is fitted around the canvas as the curriculum fits it (10-50% suffix). A
document shorter than the example is padded after its suffix (weight 0), as the engine pads batch rows.
`train.py --rft FILE --rft-share S` builds that share of each batch from these examples.
"""

from __future__ import annotations

import argparse
import json
import logging
import random
import sys
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from dice_lsp.errors import DiceError
from dice_lsp.training.holes import CANVAS_BUCKETS, Example, TokenTables, _mask

if TYPE_CHECKING:
    from dice_lsp.complete import Compiler
    from dice_lsp.cuda.holes import Hole
    from dice_lsp.cuda.postprocess import FillContext
    from dice_lsp.engine import LoadedModel
    from dice_lsp.engine.fill_types import FillRequest, FillResult
    from dice_lsp.engine.tokenizer import Tokenizer
    from dice_lsp.settings import Settings

LOG = logging.getLogger("dice_lsp.rft")
THRESHOLD = 0.8  # token-level edit similarity a kept fill has to the removed line, at least
TEMPERATURE = 1.0  # the model's own distribution
CANDIDATES = 4
PER_FILE = 2  # line holes taken from one file, at most (many files rather than a few deep ones)
BATCH_HOLES = 16  # holes per model call (their candidates are rows of one denoising batch)
BatchFiller = Callable[[list["FillRequest"]], list["FillResult"]]


# ---------------------------------------------------------------- what is kept


def token_similarity(fill: str, truth: str) -> float:
    """1 - (token edit distance) / (the longer token count), over C tokens (whitespace never counts): each
    distinct token stands for one character, so the suite's character distance (`evals.score.levenshtein`)
    counts whole tokens."""
    from dice_lsp.evals.score import levenshtein, tokens

    a, b = [t for t, _ in tokens(fill)], [t for t, _ in tokens(truth)]
    longest = max(len(a), len(b))
    if longest == 0:
        return 1.0
    code = {token: chr(0x10000 + n) for n, token in enumerate(dict.fromkeys(a + b))}
    return 1.0 - levenshtein("".join(code[t] for t in a), "".join(code[t] for t in b)) / longest


@dataclass(frozen=True)
class HoleTask:
    """A hole as the editor meets it: `document` is the file with `truth` removed, `hole` the region to fill."""

    key: str  # which file: "source/path" of a corpus record, or the path given
    document: str
    hole: Hole
    truth: str


@dataclass(frozen=True)
class KeptFill:
    """One JSON line of `collect`'s output: a fill that passed, where it goes and what it replaced."""

    file: str
    document: str
    start: int  # the region the fill replaces: document[start:end]
    end: int
    fill: str
    truth: str
    similarity: float
    exact: bool  # the same C tokens as the truth
    checks: dict[str, bool | None]
    score: float  # the model's mean log-probability of the fill

    def filled(self) -> str:
        return self.document[:self.start] + self.fill + self.document[self.end:]

    def to_json(self) -> dict[str, Any]:
        return {"file": self.file, "document": self.document, "start": self.start, "end": self.end,
                "fill": self.fill, "truth": self.truth, "similarity": round(self.similarity, 4),
                "exact": self.exact, "checks": self.checks, "score": round(self.score, 4)}


def judge(task: HoleTask, context: FillContext, texts: list[str], scores: list[float],
          threshold: float = THRESHOLD, front_end: Compiler | None = None) -> list[KeptFill]:
    """The distinct fills of `texts` (raw model output) that the clean-up filters leave, that parse and whose
    names resolve (`complete.suggestions`, renames off), and that are `threshold`-close to the truth; with
    `front_end` (clang, `complete.front_end_for`), also those it finds no new error in."""
    from dice_lsp.complete import suggestions
    from dice_lsp.completion.checks.context import CheckContext
    from dice_lsp.toolchain.header_index import header_names_now

    document = context.before + context.after
    checker = CheckContext(document, len(context.before), len(context.before), header_names_now())
    kept = []
    for found in suggestions(texts, scores, context, checker, renames=False):
        if not (found.checks.parses and found.checks.names):
            continue
        similarity = token_similarity(found.text, task.truth)
        if similarity < threshold or not _names_of(found.text) <= _names_of(task.truth):
            continue
        checks = found.checks
        if front_end is not None:
            checks = replace(checks, types=front_end(task.document[:task.hole.start] + found.text
                                                     + task.document[task.hole.end:]))
            if checks.types is False:
                continue
        kept.append(KeptFill(task.key, task.document, task.hole.start, task.hole.end, found.text, task.truth,
                             similarity, similarity == 1.0, checks.to_json(), found.score))
    return kept


def _names_of(code: str) -> set[str]:
    """The identifiers (and keywords) among `code`'s C tokens: a kept fill may use no name the removed code does
    not (`is_object()) {` for `advance_to_block()) {` is 0.8-close in tokens and teaches a wrong member)."""
    from dice_lsp.evals.score import tokens

    return {token for token, comment in tokens(code) if not comment and (token[0].isalpha() or token[0] == "_")}


# ---------------------------------------------------------------- where the holes come from


def corpus_files(paths: Sequence[Path]) -> list[tuple[str, str]]:
    """(key, text) of the CUDA files holes may be cut from: a corpus folder's train split (CUDA dialect,
    permissively licensed, no benchmark source), or the `.cu`/`.cuh` files given (folders: searched)."""
    from dice_lsp.training import corpus

    files: list[tuple[str, str]] = []
    for path in paths:
        if path.is_dir() and (path / "train.jsonl").is_file():
            banned = corpus.bench_projects()
            for record in corpus.trainable(corpus.read_split(path, "train")):
                if (record.get("lang") == "cuda" and record.get("dialect", "cuda") == "cuda"
                        and record.get("source") not in banned):
                    files.append((f"{record['source']}/{record['path']}", str(record["text"])))
        elif path.is_dir():
            found = sorted(p for p in path.rglob("*") if p.suffix in corpus.CUDA_EXTS and p.is_file())
            files += [(str(p), p.read_text(encoding="utf-8", errors="replace")) for p in found]
        elif path.is_file():
            files.append((str(path), path.read_text(encoding="utf-8", errors="replace")))
        else:
            raise DiceError(f"{path}: no such corpus folder or file")
    if not files:
        raise DiceError(f"{', '.join(map(str, paths))}: no CUDA files to cut holes from")
    return files


KINDS = ("line", "midline")  # the suite's one-line hole kinds collect can cut


def line_tasks(key: str, text: str, rng: random.Random, per_file: int = PER_FILE,
               kinds: Sequence[str] = ("line",)) -> list[HoleTask]:
    """Up to `per_file` of the file's suite-like holes of `kinds` (`line`: a statement line's content; `midline`:
    the rest of it after a cursor inside), asked as the editor asks them; a hole where the editor's rule finds
    no one-line region is left out."""
    from dice_lsp.cuda import holes as editor
    from dice_lsp.training.suite_build import cut_functions

    sites = [site for _, found in cut_functions(text, rng) for site in found if site.kind in kinds]
    rng.shuffle(sites)
    tasks = []
    for site in sites:
        document = text[:site.start] + text[site.end:]
        region = editor.find_hole(document, site.start)
        if region is not None and region.kind == "line":
            tasks.append(HoleTask(key, document, region, text[site.start:site.end]))
        if len(tasks) >= per_file:
            break
    return tasks


def hole_tasks(files: list[tuple[str, str]], holes: int, seed: int, per_file: int = PER_FILE,
               bench: Any = None, kinds: Sequence[str] = ("line",)) -> Iterator[HoleTask]:
    """`holes` holes of `kinds` from `files` visited in a seeded order; a file the suite holds (`bench`: a
    `corpus.BenchFilter`, exact or near copy) is skipped."""
    rng = random.Random(seed)
    order = list(range(len(files)))
    rng.shuffle(order)
    given = 0
    for index in order:
        key, text = files[index]
        if bench is not None and bench.reason(text) is not None:
            LOG.info("%s: a CUDA-Infill or held-out file, skipped", key)
            continue
        for task in line_tasks(key, text, rng, per_file, kinds):
            yield task
            given += 1
            if given >= holes:
                return


# ---------------------------------------------------------------- the model


def model_filler(model: LoadedModel) -> BatchFiller:
    """Requests filled by `model`: those that can share a denoising batch (`engine.infill.batch_key`) in one
    call per key, the others one by one."""
    from dice_lsp.engine.infill import batch_key, fill, fill_batch

    def run(requests: list[FillRequest]) -> list[FillResult]:
        results: list[FillResult | None] = [None] * len(requests)
        groups: dict[Any, list[int]] = defaultdict(list)
        for index, request in enumerate(requests):
            key = batch_key(model, request)
            if key is None:
                results[index] = fill(model, request)
            else:
                groups[key].append(index)
        for indices in groups.values():
            for index, result in zip(indices, fill_batch(model, [requests[i] for i in indices]), strict=True):
                results[index] = result
        return [r for r in results if r is not None]

    return run


@dataclass
class Counts:
    """What a collect run did."""

    holes: int = 0
    fills: int = 0  # raw candidates the model returned (per canvas)
    kept: int = 0  # distinct kept fills (JSON lines)
    exact: int = 0
    holes_kept: int = 0  # holes with at least one kept fill
    seconds: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return {"holes": self.holes, "fills": self.fills, "kept": self.kept, "kept_exact": self.exact,
                "holes_kept": self.holes_kept,
                "hole_keep_rate": round(self.holes_kept / self.holes, 4) if self.holes else 0.0,
                "fill_keep_rate": round(self.kept / self.fills, 4) if self.fills else 0.0,
                "seconds": round(self.seconds, 2),
                "holes_per_s": round(self.holes / self.seconds, 3) if self.seconds else 0.0}


def _chunks(tasks: Iterable[HoleTask], size: int) -> Iterator[list[HoleTask]]:
    chunk: list[HoleTask] = []
    for task in tasks:
        chunk.append(task)
        if len(chunk) == size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def collect(tasks: Iterable[HoleTask], filler: BatchFiller, tokenizer: Tokenizer, window: int, settings: Settings,
            threshold: float = THRESHOLD, batch: int = BATCH_HOLES, progress: Callable[[int], None] | None = None,
            types: bool = False) -> Iterator[tuple[HoleTask, list[KeptFill], int]]:
    """Per hole, in order: the task, its kept fills, and how many fills the model gave. `batch` holes go to
    `filler` at once; their sampler seed is `settings.seed` + the batch's number (distinct draws per batch).
    With `types`, clang's front end reads the fills that pass the rest (where there is a clang)."""
    from dice_lsp.complete import fill_request, front_end_for
    from dice_lsp.toolchain.flags import CompileFlags

    for number, chunk in enumerate(_chunks(tasks, batch)):
        prepared = [fill_request(tokenizer, window, task.document, task.hole, settings) for task in chunk]
        requests = [replace(request, sampler=replace(request.sampler, seed=settings.seed + number))
                    for request, _ in prepared]
        results = filler(requests)
        for task, (_, context), result in zip(chunk, prepared, results, strict=True):
            front_end = front_end_for(task.document, None, CompileFlags(), replace(settings, type_check=True)) \
                if types else None
            yield task, judge(task, context, result.texts, result.scores, threshold, front_end), len(result.texts)
        if progress is not None:
            progress(len(chunk))


def collect_settings(candidates: int, temperature: float, seed: int) -> Settings:
    """The product's completion settings with `candidates` sampled at `temperature`; clang's judge off."""
    from dice_lsp.settings import Settings

    return Settings(candidates=candidates, temperature=temperature, seed=seed, type_check=False)


def collect_to_file(tasks: list[HoleTask], filler: BatchFiller, tokenizer: Tokenizer, window: int,
                    settings: Settings, out: Path, threshold: float = THRESHOLD, batch: int = BATCH_HOLES,
                    types: bool = False, quiet: bool = False, minutes: float | None = None) -> Counts:
    """`collect` with a progress bar on stderr, each kept fill written to `out` as one JSON line (flushed per
    hole: a run that is stopped keeps what it kept); the counts. With `minutes`, no hole is started after that
    long (the holes already in the model's batch are finished)."""
    from tqdm import tqdm

    counts = Counts()
    started = time.perf_counter()
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("w", encoding="utf-8") as handle, tqdm(total=len(tasks), desc="holes", unit="hole",
                                                          file=sys.stderr, disable=quiet) as bar:
        for _, kept, fills in collect(tasks, filler, tokenizer, window, settings, threshold, batch, bar.update,
                                      types):
            counts.holes += 1
            counts.fills += fills
            counts.kept += len(kept)
            counts.exact += sum(k.exact for k in kept)
            counts.holes_kept += bool(kept)
            for row in kept:
                handle.write(json.dumps(row.to_json(), ensure_ascii=False) + "\n")
            handle.flush()
            bar.set_postfix(kept=counts.kept, exact=counts.exact)
            if minutes is not None and time.perf_counter() - started > minutes * 60:
                break
    counts.seconds = time.perf_counter() - started
    return counts


def run_collect(args: argparse.Namespace) -> Counts:
    """`collect` from the command line: check the options, load the model, cut the holes, fill, write."""
    from dice_lsp.engine import load_model
    from dice_lsp.training.corpus import BenchFilter

    if args.holes < 1 or args.candidates < 1 or args.batch < 1 or args.per_file < 1:
        raise DiceError("--holes, --candidates, --batch and --per-file must be at least 1")
    if args.minutes is not None and args.minutes <= 0:
        raise DiceError("--minutes must be above 0")
    if not 0.0 <= args.threshold <= 1.0:
        raise DiceError("--threshold must be in [0, 1]")
    if args.temperature <= 0:
        raise DiceError("--temperature must be above 0 (rejection sampling draws from the model)")
    model = load_model(args.model, device=args.device)
    files = corpus_files([Path(p) for p in args.corpus])
    tasks = list(hole_tasks(files, args.holes, args.seed, args.per_file, BenchFilter.load(), args.kinds))
    settings = collect_settings(args.candidates, args.temperature, args.seed)
    return collect_to_file(tasks, model_filler(model), model.tokenizer, model.window, settings, Path(args.out),
                           args.threshold, args.batch, args.types, args.quiet, args.minutes)


# ---------------------------------------------------------------- training examples


@dataclass(frozen=True)
class RftTokens:
    """A kept fill in tokens: the document before the region, the fill (opened by the healed prefix tail, as
    the model writes it), and the document after the region."""

    prefix: np.ndarray  # int64
    fill: np.ndarray
    suffix: np.ndarray


def tokenize_fill(tok: Tokenizer, kept: KeptFill | dict[str, Any]) -> RftTokens:
    from dice_lsp.engine.infill import heal_prefix

    row = kept.to_json() if isinstance(kept, KeptFill) else kept
    document, start, end = str(row["document"]), int(row["start"]), int(row["end"])
    prefix, overlap = heal_prefix(tok, document[:start])
    return RftTokens(np.array(prefix, dtype=np.int64), np.array(tok.encode(overlap + str(row["fill"])), dtype=np.int64),
                     np.array(tok.encode(document[end:]), dtype=np.int64))


def canvases_for(tokens: int, length: int) -> list[int]:
    """The curriculum's canvas sizes a fill of `tokens` tokens fits in, in an example of `length` tokens."""
    return [b for b in CANVAS_BUCKETS if 0 < tokens <= b <= length // 2]


def rft_example(item: RftTokens, length: int, tables: TokenTables, rng: np.random.Generator) -> Example | None:
    """A hole example (`training.holes.hole_example`'s layout) whose canvas holds the kept fill: `length`
    tokens of prefix + canvas + suffix (+ pads when the document is shorter); None when the fill fits no
    canvas of at most half the example."""
    fits = canvases_for(len(item.fill), length)
    if not fits:
        return None
    canvas_len = fits[0] if len(fits) == 1 or rng.random() < 0.7 else fits[1]
    context = length - canvas_len
    suffix_len = min(len(item.suffix), int(context * rng.uniform(0.1, 0.5)))
    prefix_len = min(len(item.prefix), context - suffix_len)
    suffix_len = min(len(item.suffix), context - prefix_len)
    canvas = np.full(canvas_len, tables.pad_id, dtype=np.int64)
    canvas[:len(item.fill)] = item.fill
    tail = np.full(length - prefix_len - canvas_len - suffix_len, tables.pad_id, dtype=np.int64)
    targets = np.concatenate((item.prefix[len(item.prefix) - prefix_len:], canvas, item.suffix[:suffix_len], tail))
    masked, t = _mask(canvas_len, rng)
    ids = targets.copy()
    ids[prefix_len:prefix_len + canvas_len] = np.where(masked, tables.mask_id, canvas)
    weights = np.zeros(length, dtype=np.float32)
    weights[prefix_len:prefix_len + canvas_len] = np.where(masked, 1.0 / t, 0.0) / canvas_len
    return Example(ids, targets, weights, "rft")


def load_rft(path: Path, tok: Tokenizer, length: int) -> list[RftTokens]:
    """The kept fills of `path` (collect's JSON lines) in tokens; those too long for a canvas of the example
    are left out. A one-line SystemExit when the file is missing, malformed or keeps nothing usable."""
    if not path.is_file():
        raise SystemExit(f"{path}: no such RFT file (python -m dice_lsp.training.rft collect writes it)")
    items = []
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
                item = tokenize_fill(tok, row)
            except (ValueError, KeyError, TypeError) as exc:
                raise SystemExit(f"{path}:{number}: not a kept fill ({exc})") from None
            if canvases_for(len(item.fill), length):
                items.append(item)
    if not items:
        raise SystemExit(f"{path}: no kept fill fits a {length}-token example")
    return items


# ---------------------------------------------------------------- command line


def build_parser() -> argparse.ArgumentParser:
    from dice_lsp.training.options import build_parser as train_options

    parser = argparse.ArgumentParser(prog="python -m dice_lsp.training.rft", description=__doc__.split("\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    c = commands.add_parser("collect", help="fill holes of training files, keep the fills that pass")
    c.add_argument("--corpus", nargs="+", required=True,
                   help="a corpus folder (its train.jsonl) or .cu files / folders of them")
    c.add_argument("--model", required=True, help="checkpoint folder to sample from")
    c.add_argument("--out", required=True, help="JSON lines of kept fills")
    c.add_argument("--holes", type=int, default=1000, help="line holes to fill")
    c.add_argument("--candidates", type=int, default=CANDIDATES, help="sampled fills per hole and canvas")
    c.add_argument("--temperature", type=float, default=TEMPERATURE)
    c.add_argument("--threshold", type=float, default=THRESHOLD,
                   help="token-level edit similarity to the removed line a kept fill needs")
    c.add_argument("--types", action="store_true",
                   help="clang's front end must find no new error in a kept fill too (slower; needs clang)")
    c.add_argument("--per-file", type=int, default=PER_FILE, help="holes per file, at most")
    c.add_argument("--kinds", nargs="+", choices=KINDS, default=["line"],
                   help="hole kinds to cut: line (a statement line's content), midline (the rest of it after a "
                        "cursor inside)")
    c.add_argument("--batch", type=int, default=BATCH_HOLES, help="holes per model call")
    c.add_argument("--seed", type=int, default=0)
    c.add_argument("--minutes", type=float, default=None,
                   help="start no hole after this long on the wall clock (what was kept stays in --out)")
    c.add_argument("--device", default=None, help="cuda, cpu (default: the best there is)")
    c.add_argument("--json", action="store_true", help="print the counts as JSON")
    c.add_argument("--quiet", action="store_true", help="no progress bar")
    f = train_options(commands.add_parser("finetune", help="train.py from --init with --rft examples mixed in"))
    f.set_defaults(lr=2e-4, warmup=0.05, curriculum_from=1.0)
    return parser


def _human(counts: Counts, out: str) -> str:
    data = counts.to_json()
    return (f"{data['holes']} holes, {data['fills']} fills, {data['kept']} kept ({data['kept_exact']} exact) -> {out}\n"
            f"holes with a kept fill: {data['hole_keep_rate']:.1%}; fills kept: {data['fill_keep_rate']:.1%}; "
            f"{data['holes_per_s']} holes/s")


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s: %(message)s")
    args = build_parser().parse_args(argv)
    if args.command == "finetune":
        if not args.init or not args.rft:
            print("error: finetune needs --init (the model collect sampled) and --rft (its kept fills)",
                  file=sys.stderr)
            return 2
        from dice_lsp.training.train import train

        logging.getLogger().setLevel(logging.INFO)
        state = train(args)
        print(f"fine-tuned to step {state['step']} in {state['minutes_done']:.1f} min -> {args.out}")
        return 0
    try:
        counts = run_collect(args)
    except DiceError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(json.dumps(counts.to_json()) if args.json else _human(counts, args.out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
