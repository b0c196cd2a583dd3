"""Where a CLI job runs: here (`LocalBackend`: this machine's model, nvcc and GPU) or on a team server
(`TeamBackend`: `dice-lsp serve`, through `RemoteClient`). Both answer with the same typed results; JSON is
only the wire's (`from_json` on the team side). `backend_for(args)` picks one from `--server`.

Importing this module loads no torch: the model is loaded the first time a job needs it.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from dice_lsp import __version__
from dice_lsp.errors import DiceError
from dice_lsp.harness.limits import Limits
from dice_lsp.settings import Settings

if TYPE_CHECKING:
    from dice_lsp.complete import Completion
    from dice_lsp.completion.sources import Source
    from dice_lsp.engine import LoadedModel
    from dice_lsp.harness.bench import BenchReport
    from dice_lsp.optimize import OptimizeReport, RepairResult
    from dice_lsp.textdoc import Position
    from dice_lsp.toolchain.flags import CompileFlags
    from dice_lsp.toolchain.report import CheckReport

T = TypeVar("T")


def step_bar(description: str) -> Any:
    """A progress bar on stderr over denoising steps (silent when stderr is not a terminal)."""
    from tqdm import tqdm

    return tqdm(desc=description, unit="step", file=sys.stderr, disable=None, leave=False)


def status_bar(description: str) -> Any:
    """A one-line status on stderr that long jobs rewrite as they go (silent when stderr is not a terminal)."""
    from tqdm import tqdm

    return tqdm(desc=description, bar_format="{desc} [{elapsed}]", file=sys.stderr, disable=None, leave=False)


@dataclass(frozen=True)
class FlagOptions:
    """The command line's `--arch`, `--std`, `-I` and `-D` (`check`, `repair`, `optimize`)."""

    arch: str | None = None
    std: str | None = None
    include: tuple[str, ...] = ()
    define: tuple[str, ...] = ()

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> FlagOptions:
        return cls(args.arch, args.std, tuple(args.include), tuple(args.define))

    def on_top_of_file(self, file: str) -> CompileFlags:
        """The file's compile flags (`flags_for`: compile_commands.json, settings) with these on top:
        `check`, `repair` and `optimize` compile alike."""
        from dice_lsp.toolchain.flags import CompileFlags, flags_for

        flags = flags_for(Path(file).resolve(), CompileFlags())
        return replace(flags, arch=self.arch or flags.arch, std=self.std or flags.std,
                       include_dirs=(*flags.include_dirs, *(Path(d).resolve() for d in self.include)),
                       defines=(*flags.defines, *self.define))

    def as_settings(self) -> dict[str, Any]:
        """These as a team server's settings (`-I` cannot reach it)."""
        if self.include:
            raise DiceError("-I does not reach a team server (it has its own file system): the headers "
                            "beside FILE and below its folder are sent with it")
        wanted = {"arch": self.arch, "std": self.std, "defines": list(self.define) or None}
        return {k: v for k, v in wanted.items() if v is not None}


@dataclass(frozen=True)
class Completed:
    """A completion as the CLI shows it: the completion, the model that wrote it (name, device), where it
    came from (`N model calls`, or the server's address), and its JSON for `--json` (`Completion.to_json`,
    or the server's reply as it came: the output's wire form, printed unread)."""

    completion: Completion
    model: str
    device: str
    where: str
    json: dict[str, Any]


@dataclass(frozen=True)
class ServerStatus:
    """A team server's `status` reply: its model's state (`ready`, `loading`, `error`), the model and where it
    runs, why it is not ready, the load, and the reply as it came for `--json`."""

    state: str | None
    model: str | None
    device: str | None
    dtype: str | None
    message: str | None
    in_flight: int
    queued: int
    served: int
    fill_steps: int  # model calls of fills
    step_rows: int  # rows over those calls (batching: several requests share a call)
    uptime_s: float
    version: str
    json: dict[str, Any]

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ServerStatus:
        return cls(data.get("state"), data.get("model"), data.get("device"), data.get("dtype"), data.get("message"),
                   int(data["in_flight"]), int(data["queued"]), int(data["served"]), int(data.get("fill_steps") or 0),
                   int(data.get("step_rows") or 0), float(data["uptime_s"]), str(data["version"]), data)

    @property
    def rows_per_call(self) -> float:
        return self.step_rows / self.fill_steps if self.fill_steps else 1.0


@dataclass(frozen=True)
class RewriteOptions:
    """What `optimize` and `repair` share: the model's sampling and the repair rounds."""

    rounds: int
    steps: int
    seed: int
    flags: FlagOptions


class JobBackend(Protocol):
    """The CLI's jobs, run here or on a team server."""

    def complete(self, file: str, text: str, position: Position, settings: Settings,
                 compile_check: bool, flags: FlagOptions, workspace: str | None = None) -> Completed: ...

    def check(self, file: str, text: str, flags: FlagOptions) -> CheckReport: ...

    def bench(self, file: str, text: str, ref: str | None, limits: Limits) -> BenchReport: ...

    def optimize(self, file: str, text: str, kernel: str, ref: str | None, candidates: int, timeout: float,
                 options: RewriteOptions) -> OptimizeReport: ...

    def repair(self, file: str, text: str, candidates: int, options: RewriteOptions) -> RepairResult: ...

    def status(self) -> ServerStatus: ...


@dataclass(frozen=True)
class ModelOptions:
    folder: str | None = None
    device: str = Settings.device
    dtype: str = Settings.dtype
    trust_remote_code: bool = False


def _workspace_source(folder: str, file: str) -> Source:
    """The lines of `folder`'s CUDA/C/C++ files (as the editor's index has them: ignore files respected), for a
    completion in `file` (left out); indexed now, with a progress bar."""
    from dice_lsp.completion.sources.workspace import WorkspaceIndex, WorkspaceIndexer

    index = WorkspaceIndex()
    from tqdm import tqdm

    with tqdm(desc="indexing", unit="file", file=sys.stderr, disable=None, leave=False) as bar:
        indexer = WorkspaceIndexer(folder, index, trusted=True, pause_s=0.0,
                                   progress=lambda done, total: bar.update(done - bar.n))
        indexer.start()
        indexer.wait()
        indexer.stop()
    return index.source(exclude=str(Path(file).resolve()))


class LocalBackend:
    """This machine's model (loaded the first time a job needs it), nvcc and GPU."""

    def __init__(self, model: ModelOptions | None = None) -> None:
        self.model_options = model or ModelOptions()
        self._model: LoadedModel | None = None

    def model(self) -> LoadedModel:
        if self._model is None:
            from dice_lsp.engine import load_model

            options = self.model_options
            self._model = load_model(options.folder, options.device, options.dtype, options.trust_remote_code)
        return self._model

    def complete(self, file: str, text: str, position: Position, settings: Settings,
                 compile_check: bool, flags: FlagOptions, workspace: str | None = None,
                 patient: bool = True) -> Completed:
        """The completion at `position`, its fills read by clang and nvcc with the file's flags (`flags` on top of
        its compile_commands.json, as `check` compiles); `workspace`: a folder whose files propose lines too
        (indexed now, the file itself left out); `patient`: clang's check gets the time it needs (a command
        waits for its answer; False: an editor's bounds)."""
        from dice_lsp.complete import complete_at, front_end_for, nvcc_compiler
        from dice_lsp.toolchain.header_index import header_names

        model = self.model()
        header_names()  # the names check's index: built once per nvcc (a few seconds), then read from disk
        folder = Path(file).resolve().parent
        compile_flags = flags.on_top_of_file(file)
        compiler = nvcc_compiler(text, folder, compile_flags) if compile_check else None
        front_end = front_end_for(text, folder, compile_flags, settings, patient=patient)
        sources = (_workspace_source(workspace, file),) if workspace is not None else ()
        with step_bar("denoising") as bar:
            completion = complete_at(model, text, position, settings, progress=lambda _calls: bar.update(1),
                                     compiler=compiler, front_end=front_end, sources=sources)
        return Completed(completion, model.name, str(model.device), f"{completion.model_calls} model calls",
                         completion.to_json(model))

    def check(self, file: str, text: str, flags: FlagOptions) -> CheckReport:
        from dice_lsp.toolchain.cache import CompileCache
        from dice_lsp.toolchain.report import check_source

        return check_source(text, Path(file).resolve().parent, flags.on_top_of_file(file), cache=CompileCache())

    def bench(self, file: str, text: str, ref: str | None, limits: Limits) -> BenchReport:
        from dice_lsp.harness.bench import bench_file
        from dice_lsp.toolchain.flags import CompileFlags, flags_for

        path = Path(file)
        with status_bar("bench") as bar:
            return bench_file(path, Path(ref) if ref else None, limits, flags_for(path.resolve(), CompileFlags()),
                              bar.set_description_str)

    def _rewrite_setup(self, file: str, options: RewriteOptions) -> tuple[Any, Any, Settings, CompileFlags]:
        """The model runner, the compile check, the settings and the file's flags for `optimize` and `repair`."""
        from dice_lsp.optimize import checker

        flags = options.flags.on_top_of_file(file)
        model = self.model()
        settings, errors = Settings().updated({"steps": options.steps, "seed": options.seed, "candidates": 2})
        if errors:
            raise DiceError(errors[0])
        return (lambda job: job(model)), checker(Path(file).resolve().parent, flags), settings, flags

    def optimize(self, file: str, text: str, kernel: str, ref: str | None, candidates: int, timeout: float,
                 options: RewriteOptions) -> OptimizeReport:
        from dice_lsp.optimize import OptimizeRequest, optimize

        run_model, check, settings, flags = self._rewrite_setup(file, options)
        settings = replace(settings, optimize_candidates=candidates, repair_rounds=options.rounds)
        request = OptimizeRequest.from_settings(Path(file).resolve(), text, kernel, settings, flags,
                                                ref=Path(ref).resolve() if ref else None,
                                                limits=Limits(timeout=timeout))
        with status_bar("optimize") as bar:
            return optimize(run_model, request, check, said=bar.set_description_str)

    def repair(self, file: str, text: str, candidates: int, options: RewriteOptions) -> RepairResult:
        from dice_lsp.optimize import repair

        run_model, check, settings, _flags = self._rewrite_setup(file, options)
        with status_bar("repair") as bar:
            return repair(run_model, text, check, options.rounds, candidates, settings.sampler_config(),
                          said=bar.set_description_str, budget_s=Settings().repair_seconds)

    def status(self) -> ServerStatus:
        raise DiceError("status asks a team server: give --server URL")


def read_reply(server: str, method: str, reply: Any, read: Callable[[Any], T]) -> T:
    """A team server's reply to `method` read into a typed result (`from_json`); one that this version cannot
    read (a server of another version) is a `DiceError` naming the server and the method, not a traceback."""
    try:
        return read(reply)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise DiceError(f"{server}: its {method} reply does not read as this dice-lsp's ({__version__}): "
                        f"{type(exc).__name__}: {exc} (is the server another version?)") from exc


class TeamBackend:
    """A team server (`dice-lsp serve`): each job one request through `RemoteClient`; its replies come back
    as the same typed results (`from_json`)."""

    def __init__(self, server: str, token_file: str | None = None) -> None:
        self.server = server
        self.token_file = token_file

    def call(self, method: str, params: dict[str, Any]) -> Any:
        """One request to the team server (with the token of the token file)."""
        import asyncio

        from dice_lsp.address import parse_address
        from dice_lsp.remote.client import RemoteClient, read_token

        token_file = self.token_file
        client = RemoteClient(parse_address(self.server), lambda: read_token(None, token_file))

        async def call() -> Any:
            try:
                with status_bar(f"{method} on {self.server}") as bar:
                    return await client.call(method, params,
                                             lambda update: bar.set_description_str(update["message"]))
            finally:
                await client.close()

        return asyncio.run(call())

    def ask(self, method: str, params: dict[str, Any], read: Callable[[Any], T]) -> T:
        """One request, its reply read into a typed result; a reply this version cannot read (a server of
        another version) is one line naming the server, not a traceback."""
        return read_reply(self.server, method, self.call(method, params), read)

    @staticmethod
    def _files(file: str, text: str, ref: str | None = None) -> dict[str, Any]:
        from dice_lsp.remote.client import file_request

        return file_request(Path(file), text, Path(ref) if ref is not None else None)

    def complete(self, file: str, text: str, position: Position, settings: Settings,
                 compile_check: bool, flags: FlagOptions, workspace: str | None = None) -> Completed:
        """The team server's completion (`workspace` is not sent: the server proposes from the text alone)."""
        from dice_lsp.complete import Completion

        settings, errors = settings.updated(flags.as_settings())
        if errors:
            raise DiceError(errors[0])
        return self.ask("complete", {"text": text, "line": position.line, "character": position.character,
                                     "settings": settings.per_request()},
                        lambda reply: Completed(Completion.from_json(reply, position), str(reply["model"]),
                                                str(reply["device"]), self.server, reply))

    def check(self, file: str, text: str, flags: FlagOptions) -> CheckReport:
        from dice_lsp.toolchain.report import CheckReport

        return self.ask("check", {**self._files(file, text), "settings": flags.as_settings()},
                        lambda found: replace(CheckReport.from_json(found, found["elapsed_ms"]),
                                              cached=found["cached"]))

    def bench(self, file: str, text: str, ref: str | None, limits: Limits) -> BenchReport:
        from dice_lsp.harness.bench import BenchReport

        return self.ask("bench", {**self._files(file, text, ref), "timeout": limits.timeout, "trials": limits.trials},
                        BenchReport.from_json)

    def optimize(self, file: str, text: str, kernel: str, ref: str | None, candidates: int, timeout: float,
                 options: RewriteOptions) -> OptimizeReport:
        from dice_lsp.optimize import OptimizeReport

        return self.ask("optimize", {
            **self._files(file, text, ref), "kernel": kernel, "timeout": timeout,
            "settings": {"optimize_candidates": candidates, "repair_rounds": options.rounds, "steps": options.steps,
                         "seed": options.seed, **options.flags.as_settings()}}, OptimizeReport.from_json)

    def repair(self, file: str, text: str, candidates: int, options: RewriteOptions) -> RepairResult:
        from dice_lsp.optimize import RepairResult

        return self.ask("repair", {
            **self._files(file, text), "candidates": candidates,
            "settings": {"repair_rounds": options.rounds, "steps": options.steps, "seed": options.seed,
                         **options.flags.as_settings()}}, RepairResult.from_json)

    def status(self) -> ServerStatus:
        return self.ask("status", {}, ServerStatus.from_json)


def backend_for(args: argparse.Namespace) -> JobBackend:
    """The team server of `--server` (with `--token-file`), else this machine with `--model` and friends."""
    if getattr(args, "server", None):
        return TeamBackend(args.server, getattr(args, "token_file", None))
    return LocalBackend(ModelOptions(getattr(args, "model", None), getattr(args, "device", Settings.device),
                                     getattr(args, "dtype", Settings.dtype),
                                     getattr(args, "trust_remote_code", False)))


__all__ = ["Completed", "FlagOptions", "JobBackend", "LocalBackend", "ModelOptions", "RewriteOptions",
           "ServerStatus", "TeamBackend", "backend_for", "read_reply", "status_bar", "step_bar"]
