"""Rewrites of one kernel's body, from the engine.

Three ways, by what the checkpoint can do:
- re-noise: the body's own tokens with a share of them masked again and denoised (30%, 60%, 100%): small
  edits near the original at low strength, a new body of the same length at full strength (diffusion
  models only; a block-diffusion model sees the code after the body through its fill-in-the-middle prompt);
- signature: the body generated afresh behind the signature and an instruction comment (every family);
- prompted: a block-diffusion (DICE) or autoregressive checkpoint asked in words for a faster version of
  the kernel; the body of the same-named kernel in its answer is taken.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from functools import partial
from typing import TYPE_CHECKING, TypeVar

from dice_lsp import engine
from dice_lsp.cuda.functions import Function, parse_functions
from dice_lsp.engine.fill_types import CancelCheck, Draft, FillRequest
from dice_lsp.engine.sampler_config import SamplerConfig
from dice_lsp.errors import DiceError, InputError
from dice_lsp.settings import SAMPLED_TEMPERATURE
from dice_lsp.wording import counted

if TYPE_CHECKING:  # torch loads with the model, not with this module
    from dice_lsp.engine import LoadedModel

T = TypeVar("T")

STRENGTHS = (0.3, 0.6, 1.0)
INSTRUCTION = ("Faster version: coalesced and vectorized memory access, data reused from shared memory or "
               "registers, no redundant work; same results.")
PROMPT = ("<|im_start|>user\nRewrite this CUDA kernel to run faster on the GPU. Keep its name, its parameters "
          "and its results.\n\n```cuda\n{kernel}\n```<|im_end|>\n<|im_start|>assistant\n")
ANSWER_TOKENS = 512
_COMMENT = re.compile(r"//[^\n]*|/\*.*?\*/", re.DOTALL)
_CODE_BLOCK = re.compile(r"```(?:cuda|cpp|c\+\+|c)?\n(.*?)(?:```|$)", re.DOTALL)
_ASSIGNMENT = re.compile(r"(?:<<|>>|[-+*/%&|^])=|(?<![=!<>])=(?!=)")
_STORE_CALL = re.compile(r"\b(?:atomic\w+|__st\w+|memcpy|memset)\s*\(([^,;]*)")
_RETURN = re.compile(r"\breturn\b")
_WORD = re.compile(r"[A-Za-z_]\w*")


@dataclass(frozen=True)
class BodyCandidate:
    body: str  # the text between the kernel's braces
    origin: str  # how it was made: "re-noise 30%", "signature", "prompted", "repaired ..."


def find_kernel(text: str, name: str) -> Function:
    """The `__global__` function `name` with a complete body, or an error listing the kernels there are."""
    kernels = [f for f in parse_functions(text) if f.is_kernel]
    for kernel in kernels:
        if kernel.name == name:
            return kernel
    listed = ", ".join(sorted({k.name for k in kernels})) or "none"
    raise InputError(f"no kernel named {name!r} with a complete body (kernels: {listed})")


def body_of(text: str, kernel: Function) -> str:
    return text[kernel.body_open + 1:kernel.body_close]


def with_body(text: str, kernel: Function, body: str) -> str:
    """`text` with the kernel's body replaced (the signature and everything around it kept)."""
    return text[:kernel.body_open + 1] + body + text[kernel.body_close:]


def normalized(code: str) -> str:
    """Code without comments and with whitespace collapsed: two rewrites that differ only there are one."""
    return " ".join(_COMMENT.sub(" ", code).split())


def first_of_each(items: Iterable[T], key: Callable[[T], str], skip: Iterable[str] = ()) -> list[T]:
    """The first item of each distinct key, in order, leaving out the keys in `skip`."""
    seen = set(skip)
    kept = []
    for item in items:
        if (found := key(item)) not in seen:
            seen.add(found)
            kept.append(item)
    return kept


def pointer_parameters(text: str, kernel: Function) -> set[str]:
    """The names of the kernel's pointer parameters (where it can write its results)."""
    signature = _COMMENT.sub(" ", text[kernel.start:kernel.body_open])
    parameters = signature[signature.find("(") + 1:signature.rfind(")")].split(",")
    return {words[-1] for p in parameters if "*" in p and (words := _WORD.findall(p))}


def written(body: str, pointers: set[str]) -> set[str]:
    """The pointers a body writes through: named left of an assignment (`y[i] = ...`, `*p += ...`), or the
    first argument of an atomic or store call. A plain scan of the statements: it may miss a write through
    an alias, never invents one."""
    found: set[str] = set()
    for statement in re.split(r"[;{}]", _COMMENT.sub(" ", body)):
        assignment = _ASSIGNMENT.search(statement)
        target = statement[:assignment.start()] if assignment else ""
        target = target if "(" not in target or "[" in target else ""  # not `f(a == b)` nor a declaration's call
        found |= pointers & set(_WORD.findall(target))
        for call in _STORE_CALL.finditer(statement):
            found |= pointers & set(_WORD.findall(call.group(1)))
    return found


def reachable(body: str) -> str:
    """The body up to its first unconditional `return`: a statement of its own outside any nested block
    (not the branch of a brace-less `if`, loop, `else` or `case`); what follows it never runs."""
    code = _COMMENT.sub(" ", body)
    depth = 0
    for at, char in enumerate(code):
        depth += {"{": 1, "}": -1}.get(char, 0)
        word_start = at == 0 or not (code[at - 1].isalnum() or code[at - 1] == "_")
        if depth == 0 and word_start and _RETURN.match(code, at) and code[:at].rstrip()[-1:] in ("", ";", "}"):
            return code[:at]
    return code


def dropped_work(original: str, candidate: str, pointers: set[str]) -> str | None:
    """What the original body does that the candidate cannot (None: nothing seen): an output the original
    writes that the candidate's reachable code never names, or no code at all. Unverified candidates that
    do less work must never rank above the original: without a GPU, a do-nothing body is the "leanest"."""
    runs = reachable(candidate)
    if not runs.strip(" \t\r\n;"):
        return "does nothing (returns before any work)" if candidate.strip() else "does nothing (empty body)"
    missing = sorted(written(original, pointers) - set(_WORD.findall(runs)))
    return f"never writes {', '.join(missing)}, which the original writes" if missing else None


def distinct(candidates: list[BodyCandidate], original: str) -> list[BodyCandidate]:
    """Drop empty bodies, copies of the original and repeats (keeping the first of each)."""
    return first_of_each(candidates, lambda c: normalized(c.body), ("", normalized(original)))


def generate(model: LoadedModel, text: str, kernel: Function, count: int, sampler: SamplerConfig,
             cancel: CancelCheck | None = None, said: Callable[[str], None] | None = None) -> list[BodyCandidate]:
    """About `count` candidate bodies, spread over the strategies the model supports (before dedup)."""
    body = body_of(text, kernel)
    ways: list[Callable[[int, SamplerConfig], list[BodyCandidate]]] = []
    if model.attention != "causal":
        ways += [partial(_renoise, model, text, kernel, body, noise, cancel=cancel) for noise in STRENGTHS]
    ways.append(lambda n, s: _from_signature(model, text, kernel, body, n, s, cancel))
    if model.attention != "bidirectional":
        ways.append(lambda n, s: _prompted(model, text, kernel, n, s, cancel))
    each = max(1, math.ceil(count / len(ways)))
    found: list[BodyCandidate] = []
    for index, way in enumerate(ways):
        diverse = replace(sampler, temperature=sampler.temperature or SAMPLED_TEMPERATURE, seed=sampler.seed + index)
        found += way(each, diverse)
        if said is not None:
            said(f"generated {counted(len(found), 'candidate')}")
    return found[:max(count, len(ways))]


def _steps(sampler: SamplerConfig, tokens: int) -> SamplerConfig:
    """A step budget that grows with the region: 4 tokens per step at most (what a line gets)."""
    return replace(sampler, steps=max(sampler.steps, math.ceil(tokens / 4)))


def _renoise(model: LoadedModel, text: str, kernel: Function, body: str, noise: float, count: int,
             sampler: SamplerConfig, cancel: CancelCheck | None = None) -> list[BodyCandidate]:
    tokens = len(model.tokenizer.encode(body))
    request = FillRequest(text[:kernel.body_open + 1], text[kernel.body_close:], tokens, count,
                          _steps(sampler, round(tokens * noise)), Draft(body, noise=noise))
    return [BodyCandidate(fill_text, f"re-noise {round(noise * 100)}%")
            for fill_text in engine.fill(model, request, cancel).texts]


def _from_signature(model: LoadedModel, text: str, kernel: Function, body: str, count: int,
                    sampler: SamplerConfig, cancel: CancelCheck | None) -> list[BodyCandidate]:
    tokens = len(model.tokenizer.encode(body))
    prefix = text[:kernel.body_open + 1] + f"\n    // {INSTRUCTION}\n"
    request = FillRequest(prefix, text[kernel.body_close:], tokens, count, _steps(sampler, tokens))
    return [BodyCandidate("\n" + fill_text, "signature") for fill_text in engine.fill(model, request, cancel).texts]


def _prompted(model: LoadedModel, text: str, kernel: Function, count: int, sampler: SamplerConfig,
              cancel: CancelCheck | None) -> list[BodyCandidate]:
    prompt = PROMPT.format(kernel=text[kernel.head:kernel.body_close + 1])
    answers = engine.answer(model, prompt, min(ANSWER_TOKENS, model.window // 2), count, sampler, cancel).texts
    bodies = (body_in_answer(reply, kernel.name) for reply in answers)
    return [BodyCandidate(found, "prompted") for found in bodies if found is not None]


def body_in_answer(reply: str, name: str) -> str | None:
    """The body of kernel `name` in a model's reply (inside its first code block that has it), or None."""
    for code in [*_CODE_BLOCK.findall(reply), reply]:
        try:
            kernel = find_kernel(code, name)
        except DiceError:
            continue
        return body_of(code, kernel)
    return None
