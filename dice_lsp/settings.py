"""The one settings schema, `dice.*`, shared by the language server, the CLI and the editor extension.

Editors send it as `initializationOptions` (either `{"dice": {...}}` or the bare object) and answer
`workspace/configuration` for the section `dice`; keys are camelCase there (`maxCanvas`; the team server's
are grouped as `server.url`, `server.token`, `server.tokenFile`, which editors send nested) and snake_case
here. A bad value is reported and ignored, never fatal: the previous value stays. Numbers must be finite
and below bounds no real use reaches (`MAXIMA`): settings can come from a workspace's files or a team
server's client, and NaN, 1e308 or 2^64 steps would otherwise reach the sampler.

`trusted` (false by default) is the user's word that the workspace may decide what runs: untrusted, the
language server takes no flags from its files, runs none of its kernels and no model folder's own code
(`dice_lsp.lsp.trust`). It must come from the user, never from the workspace: VS Code's extension answers
it from Workspace Trust; other editors set it in the user's own configuration.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any

from dice_lsp.address import parse_address
from dice_lsp.engine.sampler_config import SamplerConfig, Strategy
from dice_lsp.errors import DiceError
from dice_lsp.toolchain.flags import CompileFlags, FlagError, check_define

SAMPLERS: dict[str, Strategy] = {"low-confidence": "low_confidence", "threshold": "threshold", "entropy": "entropy"}
MODEL_KEYS = ("model", "device", "dtype", "trust_remote_code")
SERVER_KEYS = ("server_url", "server_token", "server_token_file")
BACKEND_KEYS = (*MODEL_KEYS, *SERVER_KEYS)  # a change of any of these means another model to talk to
NULLABLE_TEXT = ("model", "nvcc", "clang", *SERVER_KEYS)
# the number that stands for "not set" where a setting's unset (None) has a meaning of its own: VS Code's Settings UI
# edits numbers, not nulls, so the extension declares these as plain numbers with this value as the default
UNSET_NUMBER = {"block_length": 0, "context_tokens": 0, "temperature": -1, "min_confidence": -1}
# a team server's, never per request (`trusted` is the editor's own: a request never sets it on a server)
SERVER_OWNED = (*BACKEND_KEYS, "nvcc", "clang", "diagnostics", "bench_on_save", "trusted")
PATTERNS = {"arch": (r"(sm|compute)_\d+[a-z]?", "an architecture such as sm_90"),
            "std": (r"c\+\+\d\d", "a C++ standard such as c++17")}
REPAIR_CANDIDATES = 4  # repair's rewrites tried per round (`dice-lsp repair --candidates`, a team server's repair)
UNTRUSTED = "workspace not trusted"  # why an untrusted workspace's code was not run, as reports say it
STEP_TOKENS = 32  # `steps` is the budget of a canvas up to this size (a line or two); larger ones get more
MAX_ENTROPY_BOUND = 1000.0  # nats: far above any use (a step then commits everything)
SAMPLED_TEMPERATURE = 0.8  # the temperature of several candidates when none is set (one candidate is greedy)
MAX_TEMPERATURE = 10.0  # far above any useful sampling temperature (0-2); 1e308 overflowed the sampler
# above these a value is absurd, and refused for everyone (a team server caps far lower: dice_lsp.remote.limits)
MAXIMA = {"steps": 1024, "min_steps": 1024, "block_length": 65536, "top_k": 1 << 20, "seed": 2**64 - 1,
          "candidates": 1024, "max_canvas": 65536, "context_tokens": 1 << 20, "optimize_candidates": 1024,
          "repair_rounds": 100, "repair_seconds": 3600}


@dataclass(frozen=True)
class Settings:
    model: str | None = None  # checkpoint folder; None = the embedded dice-tiny
    device: str = "auto"
    dtype: str = "auto"
    trust_remote_code: bool = False
    sampler: str = "entropy"  # docs/PERFORMANCE.md: on the dev split, more shown fills compile for fewer calls
    steps: int = 8  # denoising steps per 32 canvas tokens: the ceiling (the entropy sampler stops sooner)
    threshold: float = 0.9
    entropy_bound: float = 1.0  # entropy sampler: nats of uncertainty a step may commit (docs/PERFORMANCE.md)
    min_steps: int = 1  # adaptive samplers: the fewest model calls per window
    block_length: int | None = None
    temperature: float | None = None  # None: greedy for one candidate, SAMPLED_TEMPERATURE for several
    top_k: int = 0
    seed: int = 0
    candidates: int = 1
    max_canvas: int = 64  # largest region, in tokens, a completion may fill
    diagnostics: bool = True  # compile .cu files with nvcc on open, save and typing pauses
    arch: str = CompileFlags.arch  # GPU architecture the background compile targets
    bench_on_save: bool = False  # verify and time a saved file's kernels on the GPU (docs/BENCHMARKING.md)
    include_dirs: tuple[str, ...] = ()  # extra -I folders (relative ones: to the workspace folder)
    defines: tuple[str, ...] = ()  # -D NAME or NAME=VALUE
    std: str = CompileFlags.std  # C++ standard; a compile_commands.json in the workspace replaces these four
    nvcc: str | None = None  # path of nvcc; None: CUDA_HOME / CUDA_PATH, PATH, /usr/local/cuda
    type_check: bool = True  # completions: clang's front end reads the best fills (dice_lsp.toolchain.clang)
    clang: str | None = None  # path of clang++ for that check; None: clang++ or clang++-N on PATH
    context_tokens: int | None = 256  # tokens of code around the hole; None: as many as the model window holds
    # the P(right) a completion needs to be shown (dice_lsp.completion.decide); None: the threshold chosen with the
    # model's show filter for its target precision; 0: whatever passes the checks
    min_confidence: float | None = None
    optimize_candidates: int = 8  # rewrites of a kernel the optimize action generates
    repair_rounds: int = 3  # compile, re-mask the error lines, denoise: at most this many times
    repair_seconds: int = 120  # no repair round starts after this long (a repair on a busy machine ends)
    server_url: str | None = None  # a team server (tcp://HOST:PORT, unix:///PATH) instead of the local model
    server_token: str | None = None  # its token (prefer server_token_file: settings files get shared)
    server_token_file: str | None = None  # a file holding the token; read again on every connection
    trusted: bool = False  # the user trusts the workspace: its compile_commands.json, GPU runs, trustRemoteCode

    def sampler_config(self, canvas: int = STEP_TOKENS) -> SamplerConfig:
        """The sampler for a canvas of `canvas` tokens: `steps` per started 32 tokens (per block when decoding
        in blocks), so a kernel body gets as many tokens per step as a line does."""
        temperature = self.temperature if self.temperature is not None else (
            0.0 if self.candidates == 1 else SAMPLED_TEMPERATURE)
        steps = self.steps if self.block_length else self.steps * max(1, math.ceil(canvas / STEP_TOKENS))
        return SamplerConfig(strategy=SAMPLERS[self.sampler], steps=steps,
                             threshold=self.threshold, entropy_bound=self.entropy_bound,
                             min_steps=min(self.min_steps, steps), block_length=self.block_length,
                             temperature=temperature, top_k=self.top_k, seed=self.seed)

    def compile_flags(self, base: Path) -> CompileFlags:
        """The compile flags these settings give (relative include folders resolved against `base`)."""
        folders = tuple((base / d).resolve() for d in self.include_dirs)
        return CompileFlags(arch=self.arch, std=self.std, include_dirs=folders, defines=self.defines)

    def per_request(self) -> dict[str, Any]:
        """The settings a team server takes from each request (the rest are the server's own)."""
        return {f.name: list(value) if isinstance(value := getattr(self, f.name), tuple) else value
                for f in fields(self) if f.name not in SERVER_OWNED}

    def model_changed(self, other: Settings) -> bool:
        return any(getattr(self, k) != getattr(other, k) for k in BACKEND_KEYS)

    def updated(self, raw: Any) -> tuple[Settings, list[str]]:
        """These settings with the valid values of `raw` (the `dice` section: `{"maxCanvas": 64, "server":
        {"url": ...}}`) applied, and one message per value refused. The section is read by one schema: each
        key once, camelCase as editors write it or snake_case as the team server's wire does; the only nested
        group is `server` (and the VS Code extension's own `client`, which is not the server's); an unknown
        key or any other nested object is refused, so no spelling of a setting slips past its check."""
        if not isinstance(raw, dict):
            return self, [] if raw is None else ["dice settings must be an object"]
        flat, errors = _flatten(raw)
        changes: dict[str, Any] = {}
        for key in flat:
            if key not in _SPELLINGS:
                errors.append(f"dice.{key}: unknown setting (ignored)")
        for f in fields(self):
            given = [key for key in dict.fromkeys((_camel(f.name), f.name)) if key in flat]
            if not given:
                continue
            if len(given) > 1 and flat[given[0]] != flat[given[1]]:
                errors.append(f"dice.{editor_key(f.name)}: given twice ({' and '.join(given)}) with different values")
                continue
            value, problem = check_value(f.name, flat[given[0]])
            if problem:
                errors.append(f"dice.{editor_key(f.name)}: {problem}")
            else:
                changes[f.name] = value
        return replace(self, **changes), errors

    @classmethod
    def initialization_options(cls, raw: Any) -> Any:
        """The `dice` section inside an editor's `initializationOptions`: `{"dice": {...}}` as the VS Code
        extension and the README's examples send it, or the bare section."""
        if isinstance(raw, dict) and isinstance(raw.get("dice"), dict):
            return raw["dice"]
        return raw


def editor_key(name: str) -> str:
    """How editors spell a setting under `dice.`: `max_canvas` → `maxCanvas`, `server_token_file` →
    `server.tokenFile`."""
    group, _, rest = name.partition("_") if name in SERVER_KEYS else ("", "", name)
    head, *words = rest.split("_")
    return (f"{group}." if group else "") + head + "".join(word.capitalize() for word in words)


def _camel(name: str) -> str:
    """A setting's key in a flattened section: `max_canvas` → `maxCanvas`, `server_token_file` →
    `serverTokenFile`."""
    head, *words = name.split("_")
    return head + "".join(word[:1].upper() + word[1:] for word in words)


_GROUPS = {"server": True, "client": False}  # nested groups of the section: read (server) or the editor's own
_SPELLINGS = {key for f in fields(Settings) for key in (_camel(f.name), f.name)}


def _flatten(raw: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """`{"server": {"url": x}}` (how editors send `dice.server.url`) as `{"serverUrl": x}`; the extension's
    `client` group is left out; any other nested object is refused (one message each)."""
    flat: dict[str, Any] = {}
    errors: list[str] = []
    for key, value in raw.items():
        if not isinstance(value, dict):
            flat[key] = value
        elif key not in _GROUPS:
            errors.append(f"dice.{key}: not a setting (settings are not nested, except server.*; ignored)")
        elif _GROUPS[key]:
            for sub, inner in value.items():
                if isinstance(inner, dict):
                    errors.append(f"dice.{key}.{sub}: not a setting (ignored)")
                else:
                    flat[key + sub[:1].upper() + sub[1:]] = inner
    return flat, errors


def finite_number(value: Any) -> bool:
    """An int, or a float that is neither NaN nor infinite (a bool is neither; an int of any size is fine:
    bounds are checked as ints, never through a float that would overflow)."""
    if isinstance(value, bool):
        return False
    return isinstance(value, int) or (isinstance(value, float) and math.isfinite(value))


Checked = tuple[Any, str | None]  # (the value as the settings hold it, None) or (None, why it is refused)


def _text(value: Any) -> Checked:
    return (value, None) if isinstance(value, str) else (None, "must be a string")


def _sampler(value: Any) -> Checked:
    if not isinstance(value, str):
        return None, "must be a string"
    return (value, None) if value in SAMPLERS else (None, f"must be one of {', '.join(SAMPLERS)}")


def _address(value: Any) -> Checked:
    try:
        parse_address(value if isinstance(value, str) else "")
    except DiceError as exc:
        return None, str(exc)
    return _text(value)


def _strings(value: Any) -> Checked:
    valid = isinstance(value, list) and all(isinstance(v, str) and v != "" for v in value)
    return (tuple(value), None) if valid else (None, "must be a list of strings")


def _defines(value: Any) -> Checked:
    checked, problem = _strings(value)
    try:
        for define in checked or ():
            check_define(define)
    except FlagError as exc:
        return None, str(exc)
    return checked, problem


def _pattern(name: str) -> Callable[[Any], Checked]:
    pattern, example = PATTERNS[name]
    return lambda value: ((value, None) if isinstance(value, str) and re.fullmatch(pattern, value) is not None
                          else (None, f"must be {example}"))


def _flag(value: Any) -> Checked:
    return (value, None) if isinstance(value, bool) else (None, "must be true or false")


def _number(within: Callable[[float], bool] = lambda _: True, why: str = "") -> Callable[[Any], Checked]:
    """A finite non-negative number (as a float) for which `within` holds (else `why`)."""
    def check(value: Any) -> Checked:
        if not finite_number(value) or value < 0:
            return None, "must be a finite non-negative number"
        return (float(value), None) if within(value) else (None, why)
    return check


def _integer(name: str) -> Callable[[Any], Checked]:
    """An int (not a bool) from 1 (0 for the counts that may be none) to the setting's `MAXIMA`."""
    minimum, maximum = (0 if name in ("top_k", "seed", "repair_rounds") else 1), MAXIMA[name]

    def check(value: Any) -> Checked:
        if isinstance(value, bool) or not isinstance(value, int):
            return None, "must be an integer"
        if value < minimum:
            return None, f"must be at least {minimum}"
        return (value, None) if value <= maximum else (None, f"must be at most {maximum}")
    return check


def _or_none(check: Callable[[Any], Checked]) -> Callable[[Any], Checked]:
    return lambda value: (None, None) if value is None else check(value)


CHECKS: dict[str, Callable[[Any], Checked]] = {
    **{name: _text for name in ("model", "device", "dtype", "nvcc", *NULLABLE_TEXT)},
    "sampler": _sampler,
    "server_url": _address,
    "include_dirs": _strings,
    "defines": _defines,
    **{name: _pattern(name) for name in PATTERNS},
    **{name: _flag for name in ("trust_remote_code", "diagnostics", "type_check", "bench_on_save", "trusted")},
    "threshold": _number(lambda v: 0 < v <= 1, "must be in (0, 1]"),
    "entropy_bound": _number(lambda v: v <= MAX_ENTROPY_BOUND, f"must be at most {MAX_ENTROPY_BOUND:g}"),
    "temperature": _or_none(_number(lambda v: v <= MAX_TEMPERATURE, f"must be at most {MAX_TEMPERATURE:g}")),
    "min_confidence": _or_none(_number(lambda v: v <= 1, "must be in [0, 1]")),
    **{name: _integer(name) for name in MAXIMA},
    **{name: _or_none(_integer(name)) for name in ("block_length", "context_tokens")},
}


def check_value(name: str, value: Any) -> Checked:
    """Validate one setting (`CHECKS`); returns (value, None) or (None, reason). An empty nullable text, and a
    number's unset value (`UNSET_NUMBER`), are None."""
    if name in NULLABLE_TEXT and (value is None or value == ""):
        return None, None
    if name in UNSET_NUMBER and not isinstance(value, bool) and value == UNSET_NUMBER[name]:
        return None, None
    checked, reason = CHECKS[name](value)
    if reason is not None and name in UNSET_NUMBER:
        return None, f"{reason} ({UNSET_NUMBER[name]}: not set)"
    return checked, reason
