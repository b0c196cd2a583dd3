"""A team server request's parameters, read once from the wire into typed values.

`Service.call` checks a request's wire parameters (`limits.check_params`), merges and checks its settings,
then reads it here, before it takes a place in the queue; the handlers that run it see only these values.
Defaults a request may leave out (timeout, trials, repair's tries) are filled in here from the harness's
and the operator's limits, so no handler reads a key.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from dice_lsp.completion.sources import Candidate
from dice_lsp.harness.limits import Limits
from dice_lsp.remote.limits import RequestLimits
from dice_lsp.settings import REPAIR_CANDIDATES, Settings
from dice_lsp.textdoc import Position


@dataclass(frozen=True)
class Sources:
    """The request's file (`text`, named `path` in its folder), the other files it carries (local headers,
    a reference) and which of them is the reference."""

    text: str
    path: str = "kernel.cu"
    ref: str | None = None
    files: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class CompleteParams:
    text: str
    position: Position
    selection: tuple[Position, Position] | None
    settings: Settings
    proposals: tuple[Candidate, ...] = ()  # the client's workspace lines for the hole (`read_proposals`)


@dataclass(frozen=True)
class FillParams:
    prefix: str
    suffix: str
    max_tokens: int
    settings: Settings


@dataclass(frozen=True)
class CheckParams:
    sources: Sources
    settings: Settings


@dataclass(frozen=True)
class BenchParams:
    sources: Sources
    settings: Settings
    limits: Limits  # the per-kernel timeout and the trials


@dataclass(frozen=True)
class OptimizeParams:
    sources: Sources
    settings: Settings
    kernel: str
    timeout: float  # seconds per kernel run
    trusted: bool  # False: the editor's workspace is untrusted, so no rewrite runs on the GPU


@dataclass(frozen=True)
class RepairParams:
    sources: Sources
    settings: Settings
    candidates: int  # tries per round


Params = CompleteParams | FillParams | CheckParams | BenchParams | OptimizeParams | RepairParams


def read_sources(params: dict[str, Any]) -> Sources:
    files = params.get("files") or {}
    return Sources(str(params["text"]), str(params.get("path", "kernel.cu")),
                   str(params["ref"]) if params.get("ref") else None,
                   {str(name): str(content) for name, content in files.items()})


def read_timeout(params: dict[str, Any], limits: RequestLimits) -> float:
    """A request's `timeout`; the harness's default (or the limit, if lower) when it has none."""
    return float(params.get("timeout", min(Limits.timeout, limits.max_timeout)))


def read_complete(params: dict[str, Any], settings: Settings) -> CompleteParams:
    selection = params.get("selection")
    span = None if selection is None else (Position(*selection[0]), Position(*selection[1]))
    return CompleteParams(str(params["text"]), Position(int(params["line"]), int(params["character"])), span,
                          settings, read_proposals(params.get("proposals") or []))


def read_proposals(found: list[dict[str, Any]]) -> tuple[Candidate, ...]:
    """The client's workspace candidates (checked by `limits.check_proposals`) as the workspace source's: the
    server checks, ranks and decides on them as on its own candidates."""
    from dice_lsp.completion.sources.workspace import SOURCE, WorkspaceCandidate

    return tuple(WorkspaceCandidate(str(p["text"]), SOURCE, float(p["score"]), files=int(p.get("files", 1)),
                                    rivals=int(p.get("rivals", 0))) for p in found)


def read_params(method: str, params: dict[str, Any], settings: Settings, limits: RequestLimits) -> Params:
    """The wire parameters of `method` (checked by `check_params`) with their merged `settings`, as typed
    values; KeyError, TypeError or ValueError where one does not read (the caller says which)."""
    if method == "complete":
        return read_complete(params, settings)
    if method == "fill":
        return FillParams(str(params["prefix"]), str(params.get("suffix", "")),
                          int(params.get("max_tokens", settings.max_canvas)), settings)
    sources = read_sources(params)
    if method == "check":
        return CheckParams(sources, settings)
    if method == "bench":
        trials = int(params.get("trials", min(Limits.trials, limits.max_trials)))
        return BenchParams(sources, settings, Limits(timeout=read_timeout(params, limits), trials=trials))
    if method == "optimize":
        return OptimizeParams(sources, settings, str(params["kernel"]), read_timeout(params, limits),
                              params.get("trusted") is not False)
    if method == "repair":
        return RepairParams(sources, settings,
                            int(params.get("candidates", min(REPAIR_CANDIDATES, limits.max_candidates))))
    raise ValueError(f"no such method {method!r}")


__all__ = ["BenchParams", "CheckParams", "CompleteParams", "FillParams", "OptimizeParams", "Params", "RepairParams",
           "Sources", "read_params"]
