"""A completion at a cursor: find the hole, build the context, fill it, clean, check, repair and rank.

The pipeline every caller shares (the CLI, the language server, the team server, `eval infill`):
1. the hole (`dice_lsp.cuda.holes`) says which region to replace and which canvas lengths to try;
2. the context (`dice_lsp.cuda.context`) keeps what matters inside the model window;
3. the model fills every canvas length in one batch (`FillRequest.lengths`), each fill scored by the mean
   log-probability of what it committed;
4. the filters (`dice_lsp.cuda.postprocess`) turn raw fills into text that fits between what is before and
   after, or drop them;
5. the checks (`dice_lsp.completion.checks`), cheapest first: the fill parses, every name it uses resolves; a fill
   that parses but names something wrongly (a misspelt name in scope, the local the code below needs declared
   under another name) is renamed without a model call (`dice_lsp.cuda.renames`) and checked again;
6. a fill that fails a check has the tokens of the offending spans (and a few around them) masked again and
   denoised in place (`Draft`), at most `REMASK_ROUNDS` times, kept when it passes more checks than before;
   what only a diffusion model can do (autoregressive checkpoints skip it);
7. other sources propose for a hole on one line (`dice_lsp.completion.sources`): the document (its line whose
   neighbours look most like the hole's, also with its names renamed to the hole's), the caller's workspace index,
   the model's idiom bank and the next line of a run; each candidate is cleaned and checked like a fill, and a text
   several sources propose is one suggestion with every source's vote;
8. decide (`dice_lsp.completion.decide`): the model's show filter gives each one-line candidate its P(right) from
   cheap features (`dice_lsp.completion.features`); rank showable first, then by P(right); show the best only at
   P >= `dice.minConfidence` (the filter's own threshold by default), else nothing, with the reason. A model
   without a show filter is ranked by checks passed, then a strong document line (`DOCUMENT_THRESHOLD`) before
   the model's fills, then by score, and shows the best that passes the checks.
A caller that has clang (`front_end`, `dice_lsp.toolchain.clang`) has the best fills that passed the cheap
checks read by clang's front end too, on the critical path (~50 ms): a fill that adds an error (a type, an
overload, a member that does not exist) is re-masked where clang points and withdrawn when it still fails.
A caller that can compile (`Compiler`) checks fills with nvcc too: a fill that adds an error is withdrawn
when another passes, and ranked last otherwise. `dice-lsp complete --compile-check` waits for nvcc; the
language server does not (`CompileVerdicts`: verdicts come in the background and rank the next request).
Line endings are normalised at the boundary: a CRLF document is filled as its LF text (the model sees, and
fills, the same text whatever the editor's line endings; LSP positions are the same in both), and the fills
are given back with the document's CRLF.
"""

from __future__ import annotations

import hashlib
import logging
import math
import re
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dice_lsp.completion import features, spelling
from dice_lsp.completion.checks import Checks
from dice_lsp.completion.checks.context import CheckContext
from dice_lsp.completion.decide import ShowFilter, show_filter
from dice_lsp.completion.decide import threshold as show_threshold
from dice_lsp.completion.sources import Candidate, Source, analogue, document, rules
from dice_lsp.cuda.context import SIMILAR_PAIRS, build_context
from dice_lsp.cuda.holes import Hole, canvas_lengths, find_hole
from dice_lsp.cuda.postprocess import FILTERS, FillContext, Filter, postprocess
from dice_lsp.cuda.renames import renamed
from dice_lsp.engine.fill_types import CancelCheck, Draft, FillRequest, FillResult, StepProgress
from dice_lsp.engine.tokenizer import Tokenizer
from dice_lsp.errors import DiceError
from dice_lsp.settings import Settings
from dice_lsp.textdoc import Position, offset_at, position_at
from dice_lsp.toolchain.cache import CompileCache
from dice_lsp.toolchain.flags import CompileFlags
from dice_lsp.toolchain.header_index import header_names_now

if TYPE_CHECKING:  # the engine (torch) loads with the model, not with this module
    from dice_lsp.engine import LoadedModel

LOG = logging.getLogger("dice_lsp.complete")
FILL_MARGIN = 4  # tokens of the window kept free: healing and counting differ from the final encoding
_SPECIAL = re.compile(r"<\|[^|<>]*\|>")  # a special token as the tokenizer writes it (`<|pad|>`)
REMASK_ROUNDS = 1  # re-mask and denoise a failing fill at most this often
REMASK_MARGIN = 2  # characters around an offending span that are masked with it (whole tokens are masked)
REMASK_GROW = 2  # extra masks after each re-masked span: the rewrite may be a little longer
# A re-masking round's step ceiling (None: the request's own, 8 per 32 tokens): fewer steps save little and lose
# fills (docs/bench-logs/performance-history.md, the re-masking steps on the dev pool).
REMASK_STEPS: int | None = None
# How similar a line's neighbours must be to the hole's (0..1) for the document's line to be proposed: chosen on
# the dev split's 300 line and 300 mid-line holes, where the proposals above these were exact 37% and 59% of the
# time (the model's shown fills: 6-8%); below, a proposal was right too rarely to rank above the model.
DOCUMENT_THRESHOLD = {"line": 0.9, "midline": 0.8}
Filler = Callable[[FillRequest], FillResult]  # runs the model (evaluation passes its own)
Compiler = Callable[[str], bool | None]  # the document with a fill -> no new nvcc error? (None: cannot tell)


@dataclass(frozen=True)
class Pipeline:
    """What runs around the model; each part can be switched off to measure what it is worth
    (bench/completion_pipeline.py). The defaults are the product's."""

    filters: tuple[Filter, ...] = FILTERS
    lengths: bool = True  # line holes also try the shorter canvases (`canvas_lengths`)
    checks: bool = True  # False: every cleaned fill counts as passing (ranked by score alone)
    remask_rounds: int = REMASK_ROUNDS
    remask_steps: int | None = REMASK_STEPS  # a re-masking round's step ceiling (None: the request's own)
    front_end: bool = True  # clang's front end judges the best fills where a caller has it (`front_end_for`)
    names_by_front_end: bool = False  # clang also judges parsing fills the name check rejects, and overrules it
    renames: bool = True  # a fill with misspelt names, or the needed local declared as another, is renamed
    document: bool = True  # the document's own lines are candidates too (`dice_lsp.completion.sources.document`)
    analogue: bool = True  # the next line of a run the lines above start (`sources.analogue`)
    rules: bool = True  # what a kernel's structure implies: its thread index, bounds test, barrier (`sources.rules`)
    workspace: bool = True  # the caller's workspace index proposes (`sources.workspace`), where it has one
    idioms: bool = True  # the idiom bank mined from the training corpus proposes (`sources.idioms`)
    decide: bool = True  # the model's show filter ranks and decides (`dice_lsp.completion.decide`), where it has one
    similar_context: int = SIMILAR_PAIRS  # line pairs like the hole's the model sees (`context.build_context`)


PRODUCT = Pipeline()


SOURCE_ORDER = ("document", "workspace", "analogue", "rule", "idiom", "model")  # the source a text is said to come from
USER_SOURCES = frozenset({"document", "workspace"})  # the user's own code: its spelling of a candidate is shown


@dataclass(frozen=True)
class Suggestion:
    """A cleaned candidate, its score, the checks it passed, every source that proposed it (`votes`: source ->
    its score) and, where a show filter decides, its P(right) (`confidence`)."""

    text: str
    score: float  # the model's mean log-probability, or the source's similarity (0..1)
    checks: Checks
    source: str = "model"
    votes: tuple[tuple[str, float], ...] = ()
    renamed: bool = False  # its names were repaired (`dice_lsp.cuda.renames`)
    confidence: float | None = None
    support: tuple[tuple[str, float], ...] = ()  # a source's evidence beyond its score (`features.SUPPORT`)

    @property
    def shown(self) -> bool:
        """Good enough to show: it parses, its names resolve, and where clang or nvcc read it, neither found a
        new error."""
        checks = self.checks
        return checks.parses and checks.names and checks.types is not False and checks.compiles is not False

    def rank(self) -> tuple[bool, float, int, bool, float]:
        """Showable first; then the show filter's P(right) where it decided; then more checks passed, a source's
        line before the model's fill, and the score."""
        confidence = self.confidence if self.confidence is not None else -1.0
        return self.shown, confidence, self.checks.passed, self.source != "model", _score(self.score)

    def voted(self, source: str, score: float) -> Suggestion:
        """This suggestion with `source`'s vote too (the best score kept); it is said to come from the first of
        `SOURCE_ORDER` that voted."""
        votes = dict(self.votes or ((self.source, self.score),))
        if math.isnan(score) or score > votes.get(source, -math.inf):
            votes[source] = score
        said = next(name for name in SOURCE_ORDER if name in votes)
        return replace(self, votes=tuple(votes.items()), source=said)

    @property
    def evidence(self) -> dict[str, float]:
        """Every source that proposed this text, with its score."""
        return dict(self.votes or ((self.source, self.score),))


@dataclass(frozen=True)
class Decision:
    """The show filter that ranks one-line candidates, and the P(right) a candidate needs to be shown."""

    filter: ShowFilter
    threshold: float

    def sure(self, suggestion: Suggestion) -> bool:
        return suggestion.confidence is None or suggestion.confidence >= self.threshold


def decision_for(folder: Path, settings: Settings) -> Decision | None:
    """The decision of the show filter that ships with the model in `folder` at the settings' threshold
    (`dice.minConfidence`); None when the model has no filter (the checks alone decide)."""
    found = show_filter(folder)
    return None if found is None else Decision(found, show_threshold(found, settings.min_confidence))


@dataclass(frozen=True)
class Completion:
    texts: list[str]  # what the editor shows, best first (empty: nothing passed the checks)
    start: Position
    end: Position
    latency_ms: float
    model_calls: int
    hole: str | None  # the kind of region filled, None when the cursor is at no hole
    checks: list[Checks] | None = None  # per text: which checks it passed
    withheld: str | None = None  # why nothing is shown although the model filled the hole
    sources: list[str] | None = None  # per text: where it came from ("model", "document", "workspace", ...)
    confidences: list[float | None] | None = None  # per text: the show filter's P(right) (None: no filter)

    def to_json(self, model: LoadedModel) -> dict[str, Any]:
        rng = {"start": self.start.to_json(), "end": self.end.to_json()}
        checks: list[Checks | None] = [*self.checks] if self.checks is not None else [None] * len(self.texts)
        sources = self.sources if self.sources is not None else ["model"] * len(self.texts)
        confidences = self.confidences if self.confidences is not None else [None] * len(self.texts)
        return {
            "items": [{"text": text, "range": rng, "checks": None if c is None else c.to_json(), "source": source,
                       "confidence": p}
                      for text, c, source, p in zip(self.texts, checks, sources, confidences, strict=True)],
            "hole": self.hole,
            "withheld": self.withheld,
            "model": model.name,
            "device": str(model.device),
            "latency_ms": round(self.latency_ms, 1),
        }

    @classmethod
    def from_json(cls, data: dict[str, Any], position: Position) -> Completion:
        """A completion a team server sent (`to_json`), asked for at `position`."""
        items = data["items"]
        span = items[0]["range"] if items else {"start": position.to_json(), "end": position.to_json()}
        checks = [Checks(**item["checks"]) if item.get("checks") else Checks(False, False) for item in items]
        sources = [str(item.get("source", "model")) for item in items]
        confidences = [item.get("confidence") for item in items]
        return cls([item["text"] for item in items], Position(**span["start"]), Position(**span["end"]),
                   float(data["latency_ms"]), 0, data["hole"], checks, data.get("withheld"), sources, confidences)


@dataclass(frozen=True)
class PreparedFill:
    """Everything a completion needs besides the model: made wherever the tokenizer is (the team server
    prepares in worker processes, so that parsing and tokenizing never hold the model thread's GIL)."""

    request: FillRequest
    context: FillContext
    start: Position
    end: Position
    started: float  # time.perf_counter() when the completion was asked for
    newline: str = "\n"  # the document's line break: the fill is made on `\n` text and given back with this
    sources: tuple[Source, ...] = ()  # proposers besides the model and the document (the workspace, the idiom bank)

    @cached_property
    def checker(self) -> CheckContext:
        """The request's checks: the document parsed once, shared by every step of this completion."""
        before = self.context.before
        return CheckContext(_document(self), len(before), len(before), header_names_now())

    def completion(self, result: FillResult, filler: Filler | None = None, compiler: Compiler | None = None,
                   document: str | None = None, pipeline: Pipeline = PRODUCT,
                   front_end: Compiler | None = None, decision: Decision | None = None) -> Completion:
        """The completion from the model's first `result`; `filler` runs re-masking rounds (None: none),
        `front_end` (clang) and `compiler` (nvcc) check fills in `document` (the full text the region is in);
        `decision` (the model's show filter) ranks one-line candidates and withholds the unlikely ones."""
        decision = decision if pipeline.decide else None
        ranked, calls = finish(self, result, filler, compiler, document, pipeline, front_end, decision)
        passing = [s for s in ranked if s.shown]
        shown = [s for s in passing if decision is None or decision.sure(s)]
        elapsed = (time.perf_counter() - self.started) * 1000
        withheld = (None if shown else _unsure(passing[0], decision) if passing and decision is not None
                    else _why(ranked, self) if ranked else _dropped(result.texts))
        if withheld:
            LOG.debug("completion withheld: %s (best: %r)", withheld, ranked[0].text if ranked else result.texts[:1])
        return Completion([s.text.replace("\n", self.newline) for s in shown], self.start, self.end, elapsed, calls,
                          self.context.hole.kind, [s.checks for s in shown], withheld, [s.source for s in shown],
                          [s.confidence for s in shown])


def _unsure(best: Suggestion, decision: Decision) -> str:
    return (f"the best candidate is likely not what you would write (P(right) {best.confidence:.2f} < "
            f"{decision.threshold:.2f}, dice.minConfidence)")


def _why(ranked: list[Suggestion], prepared: PreparedFill) -> str:
    best = ranked[0].checks
    what = (_parse_fault(ranked[0].text, prepared) if not best.parses else _name_fault(ranked[0].text, prepared)
            if not best.names else "does not type-check" if best.types is False else "does not compile")
    return f"no fill passed the checks ({len(ranked)} tried; the best {what})"


def _parse_fault(text: str, prepared: PreparedFill) -> str:
    """What the parse rules find wrong with a fill: a syntax error, or the construct a rule rejects."""
    rule = prepared.checker.failed_rule(text)
    return "does not parse" if rule in (None, "syntax errors") else f"fails the rule: {rule}"


def _dropped(texts: list[str]) -> str:
    """Why nothing is shown when no fill survived the clean-up filters, or the model wrote nothing (only white space
    and special tokens)."""
    if not any(_SPECIAL.sub("", text).strip() for text in texts):
        return "the model wrote nothing here (white space or special tokens only)"
    return f"no fill was left after clean-up ({len(texts)} written: comments only, repeats or no code)"


def _name_fault(text: str, prepared: PreparedFill) -> str:
    """What is wrong with the names of a fill that parses (for the user: `declares 'i' again`)."""
    checker = prepared.checker
    if found := checker.unknown_names(text):
        return f"uses unknown names ({', '.join(dict.fromkeys(name for _, name in found))})"
    if found := checker.redeclared(text):
        return f"declares {found[0][1]!r} again"
    if needed := checker.undeclared(text):
        return f"leaves {needed[0]!r} undeclared, which the code below uses"
    if found := checker.wrong_arity(text):
        return f"calls {found[0][1]!r} with a wrong number of arguments"
    return "uses unknown names"


def _document(prepared: PreparedFill) -> str:
    return prepared.context.before + prepared.context.after


def checked(text: str, score: float, checker: CheckContext, renames: bool = True) -> Suggestion:
    """A cleaned fill with its cheap checks; with `renames`, a fill that parses but names something wrongly is
    replaced by its renamed twin when that passes more checks (`dice_lsp.cuda.renames`)."""
    suggestion = Suggestion(text, score, checker.check(text))
    if not renames or suggestion.checks.names or not suggestion.checks.parses:
        return suggestion
    fixed = renamed(text, checker)
    if fixed is None:
        return suggestion
    better = Suggestion(fixed, score, checker.check(fixed), renamed=True)
    return better if better.checks.passed > suggestion.checks.passed else suggestion


def suggestions(texts: list[str], scores: list[float], ctx: FillContext, checker: CheckContext | None,
                filters: tuple[Filter, ...] = FILTERS, renames: bool = True) -> list[Suggestion]:
    """Cleaned, de-duplicated (whitespace aside; the better score kept) and checked fills (`checker` None:
    unchecked, every fill passes; `renames`: wrong names repaired, see `checked`)."""
    best: dict[str, Suggestion] = {}
    for text, score in zip(texts, scores or [math.nan] * len(texts), strict=True):
        cleaned = postprocess(text, ctx, filters)
        if cleaned is None or not cleaned.strip():
            continue
        key = " ".join(cleaned.split())
        if key not in best or _score(best[key].score) < _score(score):
            best[key] = checked(cleaned, score, checker, renames) if checker else Suggestion(
                cleaned, score, Checks(True, True))
    return list(best.values())


def _proposals(prepared: PreparedFill, pipeline: Pipeline, weighed: bool,
               checker: CheckContext | None) -> list[Candidate]:
    """What the sources other than the model propose for a hole on one line. Unless a show filter weighs them
    (`weighed`), only the document's strong candidates (`DOCUMENT_THRESHOLD`): the other sources' evidence means
    something only to a filter trained to weigh it."""
    ctx = prepared.context
    if ctx.hole.kind != "line":
        return []
    before, after = ctx.before, ctx.after
    found: list[Candidate] = []
    if pipeline.document:
        least = 0.0 if weighed else DOCUMENT_THRESHOLD["midline" if ctx.line_before.strip() else "line"]
        found += [c for c in document.candidates(before, after) if c.score >= least]
    if not weighed:
        return found
    if pipeline.analogue:
        found += analogue.candidates(before, after)
    wanted = {"workspace": pipeline.workspace, "idiom": pipeline.idioms}
    needed = checker.needed if checker is not None else frozenset()
    checks = prepared.checker.request  # parsed once per request: the sources read the hole's scope from it
    if pipeline.rules:
        found += rules.candidates(before, after, needed, checks)
    for source in prepared.sources:
        found += [c for c in source.candidates(before, after, needed=needed, checks=checks)
                  if wanted.get(c.source, True)]
    return found


def with_sources(found: list[Suggestion], prepared: PreparedFill, checker: CheckContext | None,
                 pipeline: Pipeline, weighed: bool) -> list[Suggestion]:
    """`found` (the model's fills) with the other sources' candidates, cleaned and checked as fills are; a text
    several sources propose, up to the order of index arithmetic's operands (`spelling.key`), is one suggestion
    with every source's vote (`Suggestion.votes`), spelt as the user's code spells it where the document or the
    workspace proposed it. `weighed`: a show filter will weigh them (every source proposes; see `_proposals`)."""
    proposed = _proposals(prepared, pipeline, weighed, checker)
    if not proposed:
        return found
    merged = {spelling.key(s.text): s for s in found}
    for candidate in proposed:
        for cleaned in suggestions([candidate.text], [candidate.score], prepared.context, checker,
                                   pipeline.filters, pipeline.renames):
            key = spelling.key(cleaned.text)
            known = merged.get(key, replace(cleaned, source=candidate.source))
            if candidate.source in USER_SOURCES and not set(known.evidence) & USER_SOURCES:
                known = replace(known, text=cleaned.text, checks=cleaned.checks, renamed=cleaned.renamed)
            support = dict(known.support)
            for name, value in features.support(candidate).items():
                support[name] = max(value, support.get(name, value))
            merged[key] = replace(known.voted(candidate.source, candidate.score), support=tuple(support.items()))
    return list(merged.values())


def feature_rows(found: list[Suggestion], context: FillContext,
                 checker: CheckContext | None = None) -> list[list[float]]:
    """The show filter's features of each suggestion (`dice_lsp.completion.features`); `checker`: the request's
    checks, whose symbol table the function's scope is read from (None: the document is parsed for it)."""
    hole = features.Hole(context.before, context.after, checker.request if checker is not None else None)
    votes = (s.evidence.get("model", math.nan) for s in found)
    model = sorted((score for score in votes if not math.isnan(score)), reverse=True)
    return [features.row(features.Evidence(s.text, s.evidence, s.checks.parses, s.checks.names, s.renamed,
                                           dict(s.support)), hole, model, len(found)) for s in found]


def _confident(found: list[Suggestion], prepared: PreparedFill, decision: Decision | None) -> list[Suggestion]:
    """`found` with the show filter's P(right) of each one-line candidate; a larger region's fills get the share of
    such fills that were right on dev (`ShowFilter.region_chance`). Unchanged without a filter."""
    if decision is None or not found:
        return found
    context = prepared.context
    if context.hole.kind != "line":
        chance = decision.filter.region_chance
        return found if chance is None else [replace(s, confidence=chance) for s in found]
    chances = decision.filter.probabilities(feature_rows(found, context, prepared.checker))
    return [replace(s, confidence=p) for s, p in zip(found, chances, strict=True)]


def _score(score: float) -> float:
    return score if not math.isnan(score) else -math.inf


def remask_spans(text: str, faults: list[tuple[int, int]]) -> tuple[tuple[int, int], ...]:
    """The offending spans widened by `REMASK_MARGIN` characters, merged where they meet."""
    spans: list[tuple[int, int]] = []
    for lo, hi in sorted((max(0, lo - REMASK_MARGIN), min(len(text), max(hi, lo + 1) + REMASK_MARGIN))
                         for lo, hi in faults):
        if spans and lo <= spans[-1][1]:
            spans[-1] = (spans[-1][0], max(spans[-1][1], hi))
        else:
            spans.append((lo, hi))
    return tuple(spans)


def remask(prepared: PreparedFill, suggestion: Suggestion, checker: CheckContext, filler: Filler,
           filters: tuple[Filter, ...] = FILTERS, faults: list[tuple[int, int]] | None = None,
           renames: bool = True, steps: int | None = None) -> tuple[Suggestion | None, int]:
    """One round: the failing spans of `suggestion` (`faults`, or what the cheap checks reject) masked again
    and denoised in place; the repaired fill when it passes more checks than before (None otherwise), and
    the model calls spent."""
    spans = remask_spans(suggestion.text, checker.faults(suggestion.text) if faults is None else faults)
    if not spans:
        return None, 0
    sampler = replace(prepared.request.sampler, temperature=0.0)
    if steps is not None and steps < sampler.steps:
        sampler = replace(sampler, steps=steps, min_steps=min(sampler.min_steps, steps))
    draft = Draft(suggestion.text, spans=spans, grow=REMASK_GROW, over_fill=_over_fill(prepared))
    request = replace(prepared.request, candidates=1, lengths=(), draft=draft, sampler=sampler)
    result = filler(request)
    found = suggestions(result.texts, result.scores, prepared.context, checker, filters, renames)
    better = [s for s in found if s.checks.passed > suggestion.checks.passed]
    return (max(better, key=Suggestion.rank) if better else None), result.model_calls


def _over_fill(prepared: PreparedFill) -> bool:
    """Whether a round re-denoises its fill over the first fill's context keys (`Draft.over_fill`, ~75 ms
    less per round on 2 cores): not after text typed on the hole's line. On the dev pool (169 line and 210
    mid-line holes) rounds over the kept keys showed 89 line fills instead of 88, but 148 mid-line fills
    instead of 154 (2 exact ones lost): a few tokens after a half-typed line need the context to see them."""
    return not prepared.context.line_before.strip()


def finish(prepared: PreparedFill, result: FillResult, filler: Filler | None = None,
           compiler: Compiler | None = None, document: str | None = None,
           pipeline: Pipeline = PRODUCT, front_end: Compiler | None = None,
           decision: Decision | None = None) -> tuple[list[Suggestion], int]:
    """Every candidate of `result` and of the other sources cleaned, checked, repaired where it fails and ranked
    (best first; by the show filter's P(right) where `decision` has one), and the model calls spent in all."""
    ctx = prepared.context
    checker = prepared.checker if pipeline.checks else None
    found = suggestions(result.texts, result.scores, ctx, checker, pipeline.filters, pipeline.renames)
    found = with_sources(found, prepared, checker, pipeline, decision is not None)
    ranked = sorted(_confident(found, prepared, decision), key=Suggestion.rank, reverse=True)
    calls = result.model_calls
    if filler is not None and checker is not None and ranked and not any(s.shown for s in ranked):
        current = ranked[0]
        for _ in range(pipeline.remask_rounds):
            try:
                repaired, spent = remask(prepared, current, checker, filler, pipeline.filters,
                                         renames=pipeline.renames, steps=pipeline.remask_steps)
            except DiceError as exc:  # a family that cannot re-denoise a draft (autoregressive)
                LOG.debug("no re-masking: %s", exc)
                break
            calls += spent
            if repaired is None:
                break
            ranked.insert(0, repaired)
            current = repaired
            if repaired.shown:
                break
        ranked = sorted(_confident(ranked, prepared, decision), key=Suggestion.rank, reverse=True)
    if front_end is not None and pipeline.front_end and document is not None and ranked and checker is not None:
        ranked, spent = _judged(prepared, ranked, front_end, "types", document, checker, filler, pipeline, decision)
        calls += spent
    if compiler is not None and document is not None and ranked and checker is not None:
        ranked, spent = _judged(prepared, ranked, compiler, "compiles", document, checker, filler, pipeline,
                                decision)
        calls += spent
    return ranked, calls


class NvccJudge:
    """The `Compiler` of fills of `base` (the document as the user has it, living in `folder`): a filled
    document compiles when nvcc reports no error whose message the base does not have too (the base may not
    compile: a body not written yet, another half-typed line); `new_errors` says where those errors are, for
    re-masking what nvcc points at. Reports come from the compile cache when a text was judged before."""

    def __init__(self, base: str, folder: Path, flags: CompileFlags, cache: CompileCache | None, nvcc: Path) -> None:
        self.base, self.folder, self.flags, self.cache, self.nvcc = base, folder, flags, cache, nvcc
        self.known: set[str] | None = None  # the base's own error messages

    def _errors(self, text: str) -> list[tuple[int, int, str]]:
        from dice_lsp.toolchain.report import check_source

        report = check_source(text, self.folder, self.flags, self.cache, self.nvcc)
        return [(d.line, d.character, d.message) for d in report.diagnostics if d.severity == "error"]

    def new_errors(self, text: str) -> list[tuple[int, int]]:
        """(line, character) of each nvcc error of `text` that the base does not have."""
        if self.known is None:
            self.known = {message for _, _, message in self._errors(self.base)}
        return [(line, character) for line, character, message in self._errors(text) if message not in self.known]

    def __call__(self, text: str) -> bool | None:
        return not self.new_errors(text)


def nvcc_compiler(base: str, folder: Path, flags: CompileFlags, cache: CompileCache | None = None,
                  nvcc: Path | None = None) -> Compiler:
    """An `NvccJudge` for fills of `base`; one that cannot tell (None) when there is no nvcc."""
    from dice_lsp.toolchain.nvcc import find_nvcc

    try:
        return NvccJudge(base, folder, flags, cache, nvcc or find_nvcc(None))
    except DiceError as exc:
        LOG.debug("no compile check: %s", exc)
        return lambda _text: None


def front_end_for(base: str, folder: Path | None, flags: CompileFlags, settings: Settings,
                  nvcc: Path | None = None, patient: bool = False) -> Compiler | None:
    """clang's front-end judge of fills of `base` (`dice_lsp.toolchain.clang`); None when `dice.typeCheck` is
    off, or there is no clang (or none that reads the CUDA toolkit's headers). `patient`: for a caller who waits
    for the answer (a command, not an editor): the checks get the time they need, within
    `clang.PATIENT_CHECK_TIMEOUT_S`."""
    if not settings.type_check:
        return None
    from dice_lsp.toolchain.clang import clang_judge
    from dice_lsp.toolchain.nvcc import find_nvcc

    try:
        return clang_judge(lf_text(base)[0], folder, flags, settings.clang, nvcc or find_nvcc(settings.nvcc),
                           patient)
    except DiceError as exc:
        LOG.debug("no clang check: %s", exc)
        return None


VERDICTS_KEPT = 512  # nvcc verdicts a language server remembers (least recently asked for dropped first)


class CompileVerdicts:
    """nvcc's verdicts on multi-line fills, made off the completion's critical path (the language server's).

    `compiler(judge, base, tag)` is a `Compiler` that answers at once from the verdicts it has (None: not
    known yet, shown on the cheap checks alone) and hands each multi-line fill it has no verdict for to
    `submit` (a worker) to be judged once. The editor asks again for the same hole as the user pauses or
    moves; that completion is ranked with the verdicts: a fill that adds an nvcc error is withdrawn when
    another passes, and shown last otherwise. One-line fills are left to the cheap checks (a compile per
    keystroke pause would take the machine).
    """

    def __init__(self, submit: Callable[[Callable[[], None]], object], kept: int = VERDICTS_KEPT) -> None:
        self.submit = submit
        self.kept = kept
        self.known: OrderedDict[str, bool | None] = OrderedDict()  # None: being judged, or nvcc cannot tell
        self.lock = threading.Lock()

    def compiler(self, judge: Compiler, base: str, tag: str) -> Compiler:
        """`judge` compiles fills of `base`; `tag` names how (folder, flags): verdicts are per tag and base."""

        def verdict(text: str) -> bool | None:
            if "\n" not in text.strip():
                return None
            key = hashlib.sha256("\0".join((tag, base, text)).encode("utf-8", "surrogatepass")).hexdigest()
            with self.lock:
                if key in self.known:
                    self.known.move_to_end(key)
                    return self.known[key]
                self.known[key] = None
                while len(self.known) > self.kept:
                    self.known.popitem(last=False)
            self.submit(lambda: self._judge(key, judge, text))
            return None

        return verdict

    def _judge(self, key: str, judge: Compiler, text: str) -> None:
        try:
            result = judge(text)
        except (DiceError, OSError) as exc:
            LOG.debug("compile verdict failed: %s", exc)
            result = None
        with self.lock:
            if key in self.known:
                self.known[key] = result


COMPILED_CANDIDATES = 2  # fills judged per completion by clang and by nvcc (the best that passed the cheap checks)


def _with(checks: Checks, check: str, verdict: bool | None) -> Checks:
    """`checks` with the judge's verdict; clang accepting a fill also settles its names (it resolved them)."""
    if check == "types":
        return replace(checks, types=verdict, names=checks.names or verdict is True)
    return replace(checks, compiles=verdict)


def _judgeable(suggestion: Suggestion, check: str, pipeline: Pipeline, decision: Decision | None) -> bool:
    """Worth a judge's run: sure enough to be shown where a show filter decides (a verdict on a candidate that
    is withheld anyway only costs the editor time: clang ~0.2 s a run on 2 cores), and shown on the cheap checks,
    or (clang, `names_by_front_end`) parsing with names the name index does not know: clang reads the headers
    and the file as the compiler does, and decides."""
    if decision is not None and not decision.sure(suggestion):
        return False
    if suggestion.shown:
        return True
    checks = suggestion.checks
    return check == "types" and pipeline.names_by_front_end and checks.parses and not checks.names


def _judged(prepared: PreparedFill, ranked: list[Suggestion], judge: Compiler, check: str, document: str,
            checker: CheckContext, filler: Filler | None = None, pipeline: Pipeline = PRODUCT,
            decision: Decision | None = None) -> tuple[list[Suggestion], int]:
    """The best cheap-checked fills judged in the document (`check`: "types" for clang, "compiles" for nvcc):
    a fill that adds an error drops below every fill that does not. When none passes and the judge says where
    (`new_errors`: `NvccJudge`, `ClangJudge`), the best one has the tokens at those columns re-masked and
    denoised again (as the cheap checks' faults are), and the repair is kept when it passes. Returns the
    ranking and the model calls spent."""
    hole = prepared.context.hole
    checked = []
    judged = 0
    for suggestion in ranked:
        if judged < COMPILED_CANDIDATES and _judgeable(suggestion, check, pipeline, decision):
            judged += 1
            verdict = judge(document[:hole.start] + suggestion.text + document[hole.end:])
            suggestion = replace(suggestion, checks=_with(suggestion.checks, check, verdict))
        checked.append(suggestion)
    checked.sort(key=Suggestion.rank, reverse=True)
    calls = 0
    failing = next((s for s in checked if getattr(s.checks, check) is False), None)
    locate = getattr(judge, "new_errors", None)
    if (failing is None or any(getattr(s.checks, check) for s in checked) or filler is None
            or locate is None or not pipeline.remask_rounds):
        return checked, calls
    for _ in range(pipeline.remask_rounds):
        filled = document[:hole.start] + failing.text + document[hole.end:]
        faults = _in_fill(filled, hole.start, failing.text, locate(filled) or [])
        baseline = replace(failing, checks=Checks(False, False))  # any repair that passes the cheap checks
        try:
            repaired, spent = remask(prepared, baseline, checker, filler, pipeline.filters, faults,
                                     pipeline.renames, pipeline.remask_steps)
        except DiceError as exc:
            LOG.debug("no re-masking: %s", exc)
            break
        calls += spent
        if repaired is None or not repaired.shown:
            break
        verdict = judge(document[:hole.start] + repaired.text + document[hole.end:])
        failing = replace(repaired, checks=_with(repaired.checks, check, verdict))
        checked.insert(0, failing)
        if verdict is not False:
            break
    return sorted(checked, key=Suggestion.rank, reverse=True), calls


def _in_fill(filled: str, start: int, fill_text: str, errors: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """nvcc's (line, character) positions that fall inside the fill, as one-character ranges of the fill
    (re-masking widens them to whole tokens and a margin)."""
    lines = filled.split("\n")
    offsets = [0]
    for text in lines:
        offsets.append(offsets[-1] + len(text) + 1)
    found = []
    for line, character in errors:
        if 0 <= line < len(lines):
            at = offsets[line] + min(character, len(lines[line])) - start
            if 0 <= at < len(fill_text):
                found.append((at, at + 1))
    return found


def fill_request(tokenizer: Tokenizer, window: int, text: str, hole: Hole, settings: Settings,
                 pipeline: Pipeline = PRODUCT) -> tuple[FillRequest, FillContext]:
    """The model request for `hole` (its context fitted into `window` tokens) and what cleaning needs."""
    canvas = min(hole.canvas_tokens, settings.max_canvas)
    budget = window - canvas - FILL_MARGIN
    if settings.context_tokens is not None:
        budget = min(budget, settings.context_tokens)
    prefix, suffix = build_context(text, hole, budget, tokenizer.counting_starts, pipeline.similar_context)
    # the canvas itself always, capped by max_canvas (a cap must not leave only the shorter canvases)
    lengths = tuple(sorted({*(n for n in canvas_lengths(hole) if n < canvas), canvas})) if pipeline.lengths else ()
    request = FillRequest(prefix, suffix, canvas, settings.candidates, settings.sampler_config(canvas),
                          lengths=lengths)
    return request, FillContext(hole, text[:hole.start], text[hole.end:])


def fill_hole(model: LoadedModel, text: str, hole: Hole, settings: Settings, filler: Filler,
              compiler: Compiler | None = None, pipeline: Pipeline = PRODUCT,
              front_end: Compiler | None = None, sources: tuple[Source, ...] = ()) -> Completion:
    """The completion for `hole` in `text` through the whole pipeline, the model run by `filler`; `sources`: the
    proposers besides the model and the document (the workspace's index)."""
    request, context = fill_request(model.tokenizer, model.window, text, hole, settings, pipeline)
    prepared = PreparedFill(request, context, position_at(text, hole.start), position_at(text, hole.end),
                            time.perf_counter(), sources=(*sources, *model_sources(model.path)))
    return prepared.completion(filler(request), filler, compiler, text, pipeline, front_end,
                               decision_for(model.path, settings))


def lf_text(text: str) -> tuple[str, str]:
    """`text` with `\n` line breaks, and the line break to give fills back with (`\r\n` for a CRLF text)."""
    lf = text.replace("\r\n", "\n")
    return lf, "\n" if lf == text else "\r\n"


IDIOM_BANK = "idioms.json.gz"  # a model folder's idiom bank (`dice_lsp.completion.sources.idioms`)


def model_sources(folder: Path) -> tuple[Source, ...]:
    """The candidate sources that ship with the model in `folder`: its idiom bank, where it has one (a bank is
    read once per folder)."""
    from dice_lsp.completion.sources.idioms import IdiomBank

    bank = folder / IDIOM_BANK
    return (IdiomBank.load(bank),) if bank.is_file() else ()


def prepare(tokenizer: Tokenizer, window: int, text: str, position: Position, settings: Settings,
            selection: tuple[Position, Position] | None = None,
            sources: tuple[Source, ...] = ()) -> PreparedFill | None:
    """The fill for the region at `position` (or the selection); None when there is no region to fill."""
    started = time.perf_counter()
    text, newline = lf_text(text)
    cursor = offset_at(text, position)
    span = None if selection is None else (offset_at(text, selection[0]), offset_at(text, selection[1]))
    hole = find_hole(text, cursor, span)
    if hole is None:
        return None
    request, context = fill_request(tokenizer, window, text, hole, settings)
    return PreparedFill(request, context, position_at(text, hole.start), position_at(text, hole.end), started,
                        newline, sources)


# What a freshly loaded model completes once, untimed, before the editor's first request (`warm_up`).
WARM_UP_TEXT = ("__global__ void scale(float* x, float a, int n) {\n"
                "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
                "    \n"  # the cursor: an emptied line
                "    if (i < n) x[i] = a * x[i];\n"
                "}\n")


def warm_up(model: LoadedModel, settings: Settings, filler: Filler | None = None) -> None:
    """Complete a small kernel once and drop the result: the first completion of a process otherwise also pays
    for the one-time work on its path (compiling the checks' tree-sitter queries, decoding the header-name
    index, the first calls' kernel setup and CUDA graphs; ~200 ms on 2 cores). `filler`: the path the
    process's fills take (a batching team server's step scheduler), the engine's own fill by default. A model
    that cannot complete it is logged and left to fail on the real request, where its error is reported."""
    try:
        prepared = prepare(model.tokenizer, model.window, WARM_UP_TEXT, Position(2, 4), settings)
        if prepared is not None:
            run = filler or engine_filler(model)
            prepared = replace(prepared, sources=model_sources(model.path))
            prepared.completion(run(prepared.request), run, None, WARM_UP_TEXT,
                                decision=decision_for(model.path, settings))
    except Exception as exc:  # a warm-up is never an error of its own
        LOG.debug("no warm-up completion: %s", exc)


def engine_filler(model: LoadedModel, cancel: CancelCheck | None = None,
                  progress: StepProgress | None = None) -> Filler:
    """The engine's own fill of `model` in this thread (`cancel` checked and `progress` told between steps)."""
    def filler(request: FillRequest) -> FillResult:
        from dice_lsp.engine import fill

        return fill(model, request, cancel, progress)

    return filler


def no_completion(position: Position, started: float) -> Completion:
    return Completion([], position, position, (time.perf_counter() - started) * 1000, 0, None)


def complete_at(model: LoadedModel, text: str, position: Position, settings: Settings,
                cancel: CancelCheck | None = None, progress: StepProgress | None = None,
                selection: tuple[Position, Position] | None = None, compiler: Compiler | None = None,
                front_end: Compiler | None = None, sources: tuple[Source, ...] = ()) -> Completion:
    """The completion at `position`, filled here (with `cancel` checked and `progress` told between steps);
    `sources`: the proposers besides the model, the document and the model's idiom bank (the workspace's index)."""
    started = time.perf_counter()
    prepared = prepare(model.tokenizer, model.window, text, position, settings, selection,
                       (*sources, *model_sources(model.path)))
    if prepared is None:
        return no_completion(position, started)
    filler = engine_filler(model, cancel, progress)
    return prepared.completion(filler(prepared.request), filler, compiler, lf_text(text)[0], front_end=front_end,
                               decision=decision_for(model.path, settings))
