"""A team server request read once from the wire into typed values: the job it asks for (`jobs.api`), the
sources it carries and its merged settings.

`Service.call` checks a request's wire parameters (`limits.check_params`), merges and checks its settings,
then reads it here, before it takes a place in the queue; the service then makes the document (the request's
files in a folder of their own) and runs the job through `Jobs` as any caller does. A job's own parameters are
read by its request type (`reader`, the inverse of the `params` its client sent), so no handler reads a key.
What a request leaves out (timeout, trials, repair's tries) is filled where the job runs, from the server's
`Defaults`: the harness's and repair's own, within the operator's limits (`defaults_within`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from dice_lsp.completion.sources import Candidate, Proposed
from dice_lsp.jobs.api import BenchJob, CheckJob, CompleteJob, Defaults, Document, Job, OptimizeJob, RepairJob
from dice_lsp.remote.limits import RequestLimits
from dice_lsp.settings import Settings

READERS: dict[str, Callable[[dict[str, Any]], Callable[[Document], Job]]] = {
    "check": CheckJob.reader, "bench": BenchJob.reader, "optimize": OptimizeJob.reader, "repair": RepairJob.reader}


@dataclass(frozen=True)
class Sources:
    """The request's file (`text`, named `path` in its folder), the other files it carries (local headers,
    a reference) and which of them is the reference."""

    text: str
    path: str = "kernel.cu"
    ref: str | None = None
    files: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Received:
    """A job request as read: what it asks (`method`), the sources it carries (a completion: its text alone),
    its merged settings, and its job once the document is made (`job`)."""

    method: str
    sources: Sources
    settings: Settings
    job: Callable[[Document], Job]


@dataclass(frozen=True)
class FillParams:
    """A raw fill (`fill`: the model alone, no job around it)."""

    prefix: str
    suffix: str
    max_tokens: int
    settings: Settings


def read_sources(params: dict[str, Any]) -> Sources:
    files = params.get("files") or {}
    return Sources(str(params["text"]), str(params.get("path", "kernel.cu")),
                   str(params["ref"]) if params.get("ref") else None,
                   {str(name): str(content) for name, content in files.items()})


def read_proposals(found: list[dict[str, Any]]) -> tuple[Candidate, ...]:
    """The client's workspace candidates (checked by `limits.check_proposals`) as the workspace source's: the
    server checks, ranks and decides on them as on its own candidates."""
    from dice_lsp.completion.sources.workspace import SOURCE, WorkspaceCandidate

    return tuple(WorkspaceCandidate(str(p["text"]), SOURCE, float(p["score"]), files=int(p.get("files", 1)),
                                    rivals=int(p.get("rivals", 0))) for p in found)


def read_params(method: str, params: dict[str, Any], settings: Settings) -> Received | FillParams:
    """The wire parameters of `method` (checked by `check_params`) with their merged `settings`, as typed
    values; KeyError, TypeError or ValueError where one does not read (the caller says which)."""
    if method == "fill":
        return FillParams(str(params["prefix"]), str(params.get("suffix", "")),
                          int(params.get("max_tokens", settings.max_canvas)), settings)
    if method == "complete":
        proposed = read_proposals(params.get("proposals") or [])
        job = CompleteJob.reader(params, (Proposed(proposed),) if proposed else ())
        return Received(method, Sources(str(params["text"])), settings, job)
    if method not in READERS:
        raise ValueError(f"no such method {method!r}")
    return Received(method, read_sources(params), settings, READERS[method](params))


def defaults_within(limits: RequestLimits) -> Defaults:
    """What a request that leaves a parameter out gets: the runner's default, or the limit where it is lower."""
    found = Defaults()
    return Defaults(timeout=min(found.timeout, limits.max_timeout), trials=min(found.trials, limits.max_trials),
                    repair_candidates=min(found.repair_candidates, limits.max_candidates))


__all__ = ["READERS", "FillParams", "Received", "Sources", "defaults_within", "read_params", "read_proposals"]
