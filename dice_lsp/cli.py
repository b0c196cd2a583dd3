"""The `dice-lsp` command line: every capability as a subcommand, human output or `--json`.

Each job command reads its arguments into one request (`jobs.api`), runs it through `asyncio.run` on the jobs of
this machine or of the team server of `--server` (the same typed results from both), and shows the result
(`cli_output`). Bad input ends with one line on stderr and exit code 2; progress goes to stderr only, so stdout
stays clean for `--json` consumers.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from dice_lsp import cli_output as show
from dice_lsp.cli_output import EXIT_NO_GPU
from dice_lsp.errors import DiceError
from dice_lsp.harness.limits import Limits
from dice_lsp.settings import MODEL_KEYS, REPAIR_CANDIDATES, SAMPLED_TEMPERATURE, SAMPLERS, Settings, check_value
from dice_lsp.wording import Said, counted

if TYPE_CHECKING:
    from dice_lsp.complete import Compiler
    from dice_lsp.completion.sources import Source
    from dice_lsp.evals.results import EvalReport
    from dice_lsp.jobs.api import Completed, Document, Jobs
    from dice_lsp.remote.team import TeamJobs
    from dice_lsp.toolchain.flags import CompileFlags

EXIT_BAD_INPUT = 2
T = TypeVar("T")


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def _setting(name: str) -> Callable[[str], Any]:
    """An argparse type that validates a string option as the `dice.*` setting `name` does."""
    def parse(text: str) -> Any:
        value, problem = check_value(name, text)
        if problem:
            raise argparse.ArgumentTypeError(f"{text!r} {problem}")
        return value
    return parse


def _seconds(text: str) -> float:
    """A time limit: a finite number of seconds above zero (nan or inf would never end a run)."""
    value = float(text)
    if not 0 < value < 86400:
        raise argparse.ArgumentTypeError(f"must be a number of seconds between 0 and 86400, got {text}")
    return value


def _non_negative(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must not be negative, got {value}")
    return value


def add_model_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", help="checkpoint folder (default: the embedded dice-tiny)")
    parser.add_argument("--device", default=Settings.device,
                        help=f"auto, cpu, cuda or cuda:N (default: {Settings.device})")
    parser.add_argument("--dtype", default=Settings.dtype,
                        help="auto, float32, bfloat16, float16 or int8 (int8 products, CPU only)")
    parser.add_argument("--trust-remote-code", action="store_true",
                        help="run the modeling code shipped in the model folder (SDAR/DICE)")


SENDS_TEXT = "only FILE's text is sent (its headers are not)"
SENDS_FILES = "FILE is sent with the headers it includes in quotes from its folder or below"
SENDS_FILES_AND_REF = SENDS_FILES + ", and --ref"


def add_server_arguments(parser: argparse.ArgumentParser, sends: str | None) -> None:
    """--server and --token-file; `sends` says what of the user's files goes to the server (`remote_file`,
    `file_request`), None for a command that sends none and needs the server (status)."""
    where = "tcp://HOST:PORT or unix:///PATH"
    parser.add_argument("--server", metavar="URL", required=sends is None,
                        help=f"the team server to ask ({where})" if sends is None else
                        f"run it on a team server ({where}) instead of here; {sends}")
    parser.add_argument("--token-file", help="file holding the team server's token")


def add_flag_arguments(command: argparse.ArgumentParser) -> None:
    """`--arch`, `--std`, `-I`, `-D`: on top of the file's own flags (its compile_commands.json), as `check`
    compiles."""
    command.add_argument("--arch", type=_setting("arch"),
                         help=f"GPU architecture (default: the build's, else {Settings.arch})")
    command.add_argument("--std", type=_setting("std"),
                         help=f"C++ standard (default: the build's, else {Settings.std})")
    command.add_argument("-I", dest="include", action="append", default=[], metavar="DIR",
                         help="add an include folder")
    command.add_argument("-D", dest="define", action="append", default=[], metavar="NAME[=VALUE]",
                         help="define a macro")


def add_sampler_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--sampler", choices=list(SAMPLERS), default=Settings.sampler,
                        help="commit the k most confident tokens per step, all above --threshold, or the most "
                        "confident while their entropy stays under --entropy-bound (default: %(default)s)")
    parser.add_argument("--steps", type=_positive, default=Settings.steps,
                        help="denoising steps per 32 tokens of region (per block with --block-length)")
    parser.add_argument("--threshold", type=float, default=Settings.threshold,
                        help="confidence threshold (threshold sampler)")
    parser.add_argument("--entropy-bound", type=float, default=Settings.entropy_bound,
                        help="nats of uncertainty one step may commit (entropy sampler)")
    parser.add_argument("--min-steps", type=_positive, default=Settings.min_steps,
                        help="fewest denoising steps per window (threshold and entropy samplers)")
    parser.add_argument("--block-length", type=_positive, default=None,
                        help="decode the region in blocks of this many tokens, left to right")
    parser.add_argument("--temperature", type=float, default=None,
                        help=f"0 is greedy (default for one candidate; {SAMPLED_TEMPERATURE:g} for several)")
    parser.add_argument("--top-k", type=_non_negative, default=Settings.top_k,
                        help="sample among the k likeliest tokens")
    parser.add_argument("--seed", type=int, default=Settings.seed)
    parser.add_argument("--candidates", type=_positive, default=Settings.candidates,
                        help="candidates generated as one batch")
    parser.add_argument("--max-tokens", type=_positive, default=Settings.max_canvas,
                        help="largest canvas for the region, in tokens")
    parser.add_argument("--context-tokens", type=_positive, default=Settings.context_tokens,
                        help="tokens of code around the region (default: %(default)s)")


def updated(settings: Settings, values: dict[str, Any]) -> Settings:
    """`settings` with `values` read through the `dice.*` schema; the first refused value is a DiceError."""
    settings, errors = settings.updated(values)
    if errors:
        raise DiceError(errors[0])
    return settings


def settings_from_args(args: argparse.Namespace) -> Settings:
    """The sampler flags read through the same `dice.*` schema as the editor settings."""
    return updated(Settings(), {
        "sampler": args.sampler, "steps": args.steps, "threshold": args.threshold,
        "entropy_bound": args.entropy_bound, "min_steps": args.min_steps, "block_length": args.block_length,
        "temperature": args.temperature, "top_k": args.top_k, "seed": args.seed, "candidates": args.candidates,
        "max_canvas": args.max_tokens, "context_tokens": args.context_tokens})


def model_settings(args: argparse.Namespace) -> Settings:
    """`--model`, `--device`, `--dtype` and `--trust-remote-code` read through the `dice.*` schema."""
    return updated(Settings(), {key: getattr(args, key) for key in MODEL_KEYS if hasattr(args, key)})


@dataclass(frozen=True)
class FlagOptions:
    """The command line's `--arch`, `--std`, `-I` and `-D` (`check`, `complete`, `repair`, `optimize`)."""

    arch: str | None = None
    std: str | None = None
    include: tuple[str, ...] = ()
    define: tuple[str, ...] = ()

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> FlagOptions:
        return cls(getattr(args, "arch", None), getattr(args, "std", None), tuple(getattr(args, "include", ())),
                   tuple(getattr(args, "define", ())))

    def on_top_of_file(self, file: Path) -> CompileFlags:
        """The file's compile flags (`flags_for`: compile_commands.json, settings) with these on top: every
        command compiles alike."""
        from dice_lsp.toolchain.flags import CompileFlags, flags_for

        flags = flags_for(file, CompileFlags())
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


def file_document(args: argparse.Namespace, text: str, settings: Settings) -> Document:
    """FILE (with `--ref`) as a job's document: compiled with its own flags and `--arch`, `--std`, `-I`, `-D` on
    top, with `settings` and, for a team server, those flags as its settings. The command line runs what its
    user names: the document is trusted."""
    from dice_lsp.jobs.api import Document

    flags = FlagOptions.from_args(args)
    if getattr(args, "server", None):
        settings = updated(settings, flags.as_settings())
    path, ref = Path(args.file).resolve(), getattr(args, "ref", None)
    return Document(path, text, replace(settings, trusted=True), lambda: flags.on_top_of_file(path),
                    ref=Path(ref).resolve() if ref is not None else None)


def team_jobs(args: argparse.Namespace) -> TeamJobs:
    """The jobs of the team server of `--server`, with the token of `--token-file`."""
    from dice_lsp.remote.team import TeamJobs, TeamServer

    return TeamJobs(TeamServer(Settings(server_url=args.server, server_token_file=args.token_file)))


def jobs_for(args: argparse.Namespace) -> Jobs:
    """The jobs of the team server of `--server`, else of this machine with `--model` and friends (loaded the
    first time a job needs the model)."""
    if getattr(args, "server", None):
        return team_jobs(args)
    from dice_lsp.jobs.local import LocalJobs

    return LocalJobs.of_model(model_settings(args))


def run_job(args: argparse.Namespace, title: str, job: Callable[[Jobs, Said], Awaitable[T]]) -> T:
    """One job on `jobs_for(args)`, through `asyncio.run`, with a status line on stderr (`title`, then what the
    job says as it goes)."""
    import asyncio

    async def run() -> T:
        jobs = jobs_for(args)
        try:
            with show.status_bar(f"{title} on {args.server}" if getattr(args, "server", None) else title) as bar:
                return await job(jobs, bar.set_description_str)
        finally:
            await jobs.close()

    return asyncio.run(run())


def command_judges(document: Document, compile_check: bool) -> tuple[Callable[[], Compiler | None],
                                                                       Callable[[], Compiler | None]]:
    """nvcc's and clang's judges of a command's fills, with the file's flags (as `check` compiles). A command
    waits for its answer: the names check's header index is built first, and clang gets the time it needs."""
    def compiler() -> Compiler | None:
        from dice_lsp.complete import nvcc_compiler

        return nvcc_compiler(document.text, document.path.parent, document.flags()) if compile_check else None

    def front_end() -> Compiler | None:
        from dice_lsp.complete import front_end_for
        from dice_lsp.toolchain.header_index import header_names

        header_names()  # built once per nvcc (a few seconds), then read from disk
        return front_end_for(document.text, document.path.parent, document.flags(), document.settings, patient=True)

    return compiler, front_end


def workspace_source(folder: str, file: Path) -> Source:
    """The lines of `folder`'s CUDA/C/C++ files (as the editor's index has them: ignore files respected), for a
    completion in `file` (left out); indexed now, with a progress bar."""
    from tqdm import tqdm

    from dice_lsp.completion.sources.workspace import WorkspaceIndex, WorkspaceIndexer

    index = WorkspaceIndex()
    with tqdm(desc="indexing", unit="file", file=sys.stderr, disable=None, leave=False) as bar:
        indexer = WorkspaceIndexer(folder, index, trusted=True, pause_s=0.0,
                                   progress=lambda done, total: bar.update(done - bar.n))
        indexer.start()
        indexer.wait()
        indexer.stop()
    return index.source(exclude=str(file))


def cmd_complete(args: argparse.Namespace) -> int:
    from dice_lsp.jobs.api import CompleteJob
    from dice_lsp.textdoc import Position, offset_at, read_source

    text = read_source(args.file)
    position = Position(args.line, args.character)
    offset_at(text, position)  # a position outside the file is refused now, not after the model has loaded
    settings = updated(settings_from_args(args), {"type_check": args.type_check, "clang": args.clang,
                                                  "min_confidence": args.min_confidence})
    if args.workspace is not None and not Path(args.workspace).is_dir():
        raise DiceError(f"--workspace {args.workspace}: not a folder")
    document = file_document(args, text, settings)
    compiler, front_end = command_judges(document, args.compile_check)
    sources = (workspace_source(args.workspace, document.path),) if args.workspace is not None else ()

    def complete(jobs: Jobs, said: Said) -> Awaitable[Completed]:
        return jobs.complete(CompleteJob(replace(document, said=said), position, compiler, front_end, sources))

    return show.completion(run_job(args, "complete", complete), position, args.json)


def cmd_status(args: argparse.Namespace) -> int:
    """A team server's health: exit 0 when its model is ready (a probe for systemd or a load balancer)."""
    import asyncio

    async def status() -> Any:
        jobs = team_jobs(args)
        try:
            return await jobs.status()
        finally:
            await jobs.close()

    return show.status(asyncio.run(status()), args.server, args.json)


def cmd_serve_status(args: argparse.Namespace) -> int:
    """The Ray Serve deployment's health, from Ray's dashboard: exit 0 when the application runs with every
    deployment healthy, 1 while it deploys or is unhealthy, 2 (one line) where Ray, Serve or the application
    cannot be found (a probe for systemd, a container's healthcheck or a load balancer)."""
    from dice_lsp.remote.ray_status import serve_health

    health = serve_health(args.address, args.app, args.timeout)
    print(json.dumps(health.to_json()) if args.json else health.line())
    return 0 if health.healthy else 1


def cmd_serve(args: argparse.Namespace) -> int:
    """Host the model, nvcc and the harness for a team (server/README.md); stops on Ctrl+C / SIGTERM."""
    import asyncio

    from dice_lsp import sandbox
    from dice_lsp.address import Address
    from dice_lsp.remote.limits import ConnectionLimits, RequestLimits, limits_from
    from dice_lsp.remote.server import TokenFile, confine, serve
    from dice_lsp.remote.service import Service, ServiceConfig

    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(asctime)s dice-lsp serve %(message)s")
    settings = model_settings(args)
    if args.model and not Path(args.model).is_dir():
        raise DiceError(f"--model {args.model}: no such folder")
    tokens = TokenFile(Path(args.token_file) if args.token_file else None)
    confine(args.unsafe_no_sandbox, settings.nvcc, tokens.path)
    address = Address(socket=args.socket) if args.socket else Address(args.host, args.port)
    caps = limits_from(RequestLimits, {f.name: getattr(args, f.name) for f in fields(RequestLimits)})
    limits = limits_from(ConnectionLimits, {f.name: getattr(args, f.name) for f in fields(ConnectionLimits)})
    service = Service(ServiceConfig(settings, args.max_pending, args.max_batch_rows, caps))

    def ready(where: str) -> None:
        sandbox.announce()
        if args.json:
            print(json.dumps({"listening": where, "model": settings.model or "dice-tiny", "token": tokens.required}),
                  flush=True)
        else:
            print(f"dice-lsp: serving {settings.model or 'dice-tiny'} on {where}"
                  f"{' (token required)' if tokens.required else ''}; Ctrl+C stops", file=sys.stderr)

    asyncio.run(serve(service, address, tokens, ready, limits))
    return 0


def cmd_check(args: argparse.Namespace) -> int:
    from dice_lsp.jobs.api import CheckJob
    from dice_lsp.textdoc import read_source

    document = file_document(args, read_source(args.file), Settings())
    report = run_job(args, "check", lambda jobs, said: jobs.check(CheckJob(replace(document, said=said))))
    return show.check(report, args.file, args.json)


def cmd_bench(args: argparse.Namespace) -> int:
    from dice_lsp.jobs.api import BenchJob
    from dice_lsp.textdoc import read_source

    text = read_source(args.file)  # a missing or unreadable file: one line, exit 2
    if args.ref is not None and not Path(args.ref).is_file():
        raise DiceError(f"reference {args.ref} not found")
    document = file_document(args, text, Settings())
    report = run_job(args, "bench", lambda jobs, said: jobs.bench(
        BenchJob(replace(document, said=said), timeout=args.timeout, trials=args.trials)))
    return show.bench(report, args.file, args.json)


def _output_path(args: argparse.Namespace) -> Path | None:
    """`--out`, refused when it is the input: the input file is never edited in place."""
    if args.out is None:
        return None
    out = Path(args.out)
    if out.resolve() == Path(args.file).resolve():
        raise DiceError(f"--out {args.out} is the input file; it is never edited in place: name another file")
    return out


def rewrite_settings(args: argparse.Namespace, **more: Any) -> Settings:
    """`--rounds`, `--steps` and `--seed` of `optimize` and `repair` (several candidates: sampled)."""
    return updated(Settings(), {"steps": args.steps, "seed": args.seed, "candidates": 2, "repair_rounds": args.rounds,
                                **more})


def cmd_optimize(args: argparse.Namespace) -> int:
    from dice_lsp.jobs.api import OptimizeJob
    from dice_lsp.textdoc import read_source

    text = read_source(args.file)
    out = _output_path(args)
    if args.ref is not None and not Path(args.ref).is_file():
        raise DiceError(f"reference {args.ref} not found")
    document = file_document(args, text, rewrite_settings(args, optimize_candidates=args.candidates))
    report = run_job(args, "optimize", lambda jobs, said: jobs.optimize(
        OptimizeJob(replace(document, said=said), args.kernel, timeout=args.timeout)))
    best = report.best
    if out is not None and best is not None:
        out.write_text(best.text, encoding="utf-8")
    return show.optimize(report, args.json, out)


def cmd_repair(args: argparse.Namespace) -> int:
    from dice_lsp.jobs.api import RepairJob
    from dice_lsp.optimize import unified_diff
    from dice_lsp.textdoc import read_source

    text = read_source(args.file)
    out = _output_path(args)
    document = file_document(args, text, rewrite_settings(args))
    result = run_job(args, "repair", lambda jobs, said: jobs.repair(
        RepairJob(replace(document, said=said), candidates=args.candidates)))
    if out is not None and result.compiles:  # a file that still fails is not worth a new copy
        out.write_text(result.text, encoding="utf-8")
    return show.repair(result, args.file, unified_diff(Path(args.file), text, result.text), args.json)


class OneLineErrors(argparse.ArgumentParser):
    """argparse, but a usage error is one line (the full usage stays in --help)."""

    def error(self, message: str) -> Any:
        self.exit(EXIT_BAD_INPUT, f"{self.prog}: error: {message}\n")


def versions() -> dict[str, Any]:
    """dice-lsp's version and the tools it found on this machine (nvcc, clang), as `--version` says them."""
    import platform
    import re

    from dice_lsp import __version__
    from dice_lsp.toolchain.cache import nvcc_version
    from dice_lsp.toolchain.clang import RECOMMENDED_MAJOR, clang_version, find_clang
    from dice_lsp.toolchain.nvcc import find_nvcc

    found: dict[str, Any] = {"dice-lsp": __version__, "python": platform.python_version()}
    try:
        nvcc = find_nvcc()
        release = re.search(r"release (\d+(?:\.\d+)*)", nvcc_version(nvcc, nvcc.stat().st_mtime))
        found["nvcc"] = {"path": str(nvcc), "version": release.group(1) if release else None}
    except (DiceError, OSError):
        found["nvcc"] = None
    clang = find_clang()
    version = clang_version(clang) if clang is not None else None
    found["clang"] = None if clang is None else {
        "path": str(clang), "version": version,
        "recommended": version is not None and int(version.split(".")[0]) >= RECOMMENDED_MAJOR}
    return found


def version_text(found: dict[str, Any]) -> str:
    """`versions()` for a person: one line per tool, with what to do where one is missing or old."""
    lines = [f"dice-lsp {found['dice-lsp']} (Python {found['python']})"]
    nvcc = found["nvcc"]
    lines.append(f"nvcc: {nvcc['path']} ({nvcc['version'] or 'version unknown'})" if nvcc else
                 "nvcc: not found (checks, repair and optimize need it: install the CUDA toolkit or set dice.nvcc)")
    clang = found["clang"]
    if clang is None:
        lines.append("clang: not found (the completions' front-end check is off: install clang-19 or set dice.clang)")
    else:
        advice = "" if clang["recommended"] else "; CUDA 13's CUB, Thrust and cooperative groups need clang >= 15"
        lines.append(f"clang: {clang['path']} ({clang['version'] or 'version unknown'}{advice})")
    return "\n".join(lines)


class _Version(argparse.Action):
    """`--version`: dice-lsp's version and the tools it found (`dice-lsp version --json` for machines)."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, help="print the version and the tools found, then exit")

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        print(version_text(versions()))
        parser.exit(0)


def cmd_version(args: argparse.Namespace) -> int:
    found = versions()
    print(json.dumps(found, indent=1) if args.json else version_text(found))
    return 0


def _port(text: str) -> int:
    value = int(text)
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"a port is 0-65535, got {value}")
    return value


def _host_port(text: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    if not host or not port.isdigit():
        raise argparse.ArgumentTypeError(f"expected HOST:PORT, got {text!r}")
    return host.removeprefix("[").removesuffix("]"), int(port)  # [::1]:PORT


def cmd_lsp(args: argparse.Namespace) -> int:
    """Serve LSP on stdio (the default), TCP or WebSocket; logs go to stderr. A socket always needs a token
    (--token-file, or one made for the run in a private file that the listening line names), and beyond
    loopback --token-file; a WebSocket upgrade from a browser page needs its origin in --allow-origin
    (dice_lsp/lsp/transport.py)."""
    from dice_lsp.lsp.transport import allowed_origins, serve_socket, serve_stdio

    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(asctime)s dice-lsp %(message)s")
    for chatty in ("pygls", "websockets"):
        logging.getLogger(chatty).setLevel(logging.WARNING)
    token_file = getattr(args, "token_file", None)
    origins = allowed_origins(getattr(args, "allow_origin", None) or [])
    kind = "tcp" if getattr(args, "tcp", None) else "ws" if getattr(args, "ws", None) else None
    if kind is None and token_file:
        raise DiceError("--token-file goes with --tcp or --ws (a client on stdio started the server itself)")
    if origins and kind != "ws":
        raise DiceError("--allow-origin goes with --ws (only a WebSocket upgrade carries an Origin)")
    from dice_lsp.lsp.server import server

    if kind is None:
        return serve_stdio(server)
    host, port = getattr(args, kind)
    return serve_socket(server, kind, host, port, Path(token_file) if token_file else None, origins)


def cmd_train(args: argparse.Namespace) -> int:
    from dice_lsp.training import train

    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(message)s")
    train.train(args)
    return 0


def _kinds(text: str) -> list[str]:
    from dice_lsp.evals.suite import KINDS

    kinds = [k for k in text.replace(",", " ").split() if k]
    unknown = [k for k in kinds if k not in KINDS]
    if unknown or not kinds:
        named = ", ".join(unknown) or repr(text)
        raise argparse.ArgumentTypeError(f"unknown hole kind: {named}; known: {', '.join(KINDS)}")
    return kinds


def _eval_system(args: argparse.Namespace, settings: Settings) -> Any:
    from dice_lsp.engine import load_model
    from dice_lsp.evals import systems

    if args.system == "empty":
        return systems.empty()
    if args.system == "idiom":
        return systems.idiom()
    folder = args.model
    if args.system == "random-sdar":
        import tempfile

        folder = str(systems.random_sdar_checkpoint(Path(tempfile.mkdtemp(prefix="dice-random-sdar-"))))
    model = load_model(folder, args.device, args.dtype, args.trust_remote_code)
    default = "random tiny SDAR (plumbing only)" if args.system == "random-sdar" else model.name
    name = args.name or (args.system if args.system != "model" else model.name)
    return systems.ModelSystem(name, args.label or default, model, settings)


def cmd_eval_infill(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    from dice_lsp.evals import report as tables
    from dice_lsp.evals.execute import gpu_available
    from dice_lsp.evals.run import evaluate
    from dice_lsp.evals.suite import load_suite

    if args.execute and not gpu_available():
        print("dice-lsp: error: --execute runs the fills on a CUDA GPU, and there is none here", file=sys.stderr)
        return EXIT_NO_GPU
    suite = load_suite(args.suite, args.split)
    holes = suite.select(args.kinds, args.limit, executable=args.executable_only)
    if not holes:
        raise DiceError("no holes selected (check --kinds / --executable-only)")
    settings, errors = Settings().updated({"steps": args.steps, "context_tokens": args.context_tokens})
    if errors:
        raise DiceError(errors[0])
    system = _eval_system(args, settings)
    with tqdm(total=len(holes), desc=f"{system.name}: holes", unit="hole", file=sys.stderr, disable=None,
              leave=False) as bar:
        result = evaluate(suite, holes, system, args.execute,
                          {"steps_per_32_tokens": settings.steps, "context_tokens": settings.context_tokens},
                          progress=bar.update)
    if args.out:
        Path(args.out).write_text(json.dumps(result.to_json()), encoding="utf-8")
    if args.json:
        print(json.dumps(result.to_json()))
    else:
        print(f"{result.label} on {args.suite} ({args.split}): {counted(len(holes), 'hole')}"
              + ("" if args.execute else "; executable holes not run (--execute on a GPU)"))
        print(tables.markdown([result]))
    return 0


def cmd_eval_table(args: argparse.Namespace) -> int:
    from dice_lsp.evals import report as tables

    reports = [tables.resummarised(r) for r in _read_reports(args.reports)]
    if args.passes:
        reports = tables.with_passes(reports, [tables.resummarised(r) for r in _read_reports(args.passes)])
    if args.plot:
        tables.plot(reports, Path(args.plot))
    if args.json:
        print(json.dumps([r.summary_json() for r in reports]))
    else:
        print(tables.markdown(reports, args.kinds))
    return 0


def _read_reports(names: list[str]) -> list[EvalReport]:
    from dice_lsp.evals.results import EvalReport

    reports = []
    for name in names:
        path = Path(name)
        if not path.is_file():
            raise DiceError(f"{path}: no such report")
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as exc:
            raise DiceError(f"{path}: not a JSON report ({exc.msg}, line {exc.lineno})") from exc
        try:
            reports.append(EvalReport.from_json(data))
        except ValueError as exc:
            raise DiceError(f"{path}: not a dice-lsp eval infill report ({exc})") from exc
    return reports


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineErrors(prog="dice-lsp", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action=_Version)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=OneLineErrors)
    version = sub.add_parser("version", help="the version and the tools found (nvcc, clang)")
    version.add_argument("--json", action="store_true", help="print JSON instead of text")
    version.set_defaults(handler=cmd_version)

    lsp = sub.add_parser("lsp", help="serve the language server protocol (stdio unless --tcp/--ws)")
    transport = lsp.add_mutually_exclusive_group()
    transport.add_argument("--tcp", type=_host_port, metavar="HOST:PORT", help="listen on TCP")
    transport.add_argument("--ws", type=_host_port, metavar="HOST:PORT", help="listen for WebSocket clients")
    lsp.add_argument("--token-file", help="with --tcp/--ws: file holding the token a client must send "
                     "(initializationOptions.authToken, or an Authorization: Bearer header with --ws); "
                     "required beyond loopback; without it a token is made for the run and its file named "
                     "on stderr")
    lsp.add_argument("--allow-origin", action="append", metavar="ORIGIN",
                     help="with --ws: a browser origin (scheme://host[:port], exact) whose pages may connect; "
                     "repeatable; an upgrade with any other Origin header is refused (403)")
    lsp.set_defaults(handler=cmd_lsp)

    complete = sub.add_parser("complete", help="fill the region at a cursor in a CUDA file")
    complete.add_argument("file", help="source file (.cu, .cuh, ...)")
    complete.add_argument("--line", type=_non_negative, required=True, help="0-based line, as in LSP")
    complete.add_argument("--character", type=_non_negative, required=True,
                          help="0-based UTF-16 column, as in LSP")
    complete.add_argument("--json", action="store_true", help="print JSON instead of text")
    complete.add_argument("--compile-check", action=argparse.BooleanOptionalAction, default=True,
                          help="compile the best fills with nvcc and show only one that adds no error (default: on;"
                               " the editor does not wait for nvcc on a line)")
    complete.add_argument("--type-check", action=argparse.BooleanOptionalAction, default=Settings.type_check,
                          help="have clang's front end read the best fills first (~50 ms each; default: on when a "
                               "clang++ is found)")
    complete.add_argument("--clang", metavar="PATH", help="clang++ for --type-check (default: clang++ or "
                          "clang++-N on PATH)")
    complete.add_argument("--min-confidence", type=float, default=None, metavar="P",
                          help="show only a completion the show filter gives at least this P(right), 0-1 (default: "
                               "the model's own threshold; 0: whatever passes the checks)")
    complete.add_argument("--workspace", metavar="DIR",
                          help="a folder whose CUDA/C/C++ files propose lines too (read now; the editor indexes "
                               "its trusted workspace in the background)")
    add_flag_arguments(complete)
    add_server_arguments(complete, SENDS_TEXT)
    add_model_arguments(complete)
    add_sampler_arguments(complete)
    complete.set_defaults(handler=cmd_complete)

    from dice_lsp.address import DEFAULT_HOST, DEFAULT_PORT
    from dice_lsp.jobs import MAX_BATCH_ROWS
    from dice_lsp.remote.limits import HELP, MAX_PENDING, ConnectionLimits, RequestLimits

    serve = sub.add_parser("serve", help="host the model, nvcc and the GPU harness for a team's editors")
    listen = serve.add_mutually_exclusive_group()
    listen.add_argument("--socket", metavar="PATH", help="listen on a Unix socket (mode 0600) instead of TCP; a stale "
                        "socket at PATH is replaced, anything else there is refused")
    serve.add_argument("--host", default=DEFAULT_HOST,
                       help="address to listen on (default: loopback only; any other needs --token-file)")
    serve.add_argument("--port", type=_port, default=DEFAULT_PORT, help="TCP port (default: %(default)s; 0: any free)")
    serve.add_argument("--token-file", help="file holding the shared token, mode 0600 (readable by others: refused); "
                       "re-read when it changes")
    serve.add_argument("--max-pending", type=_positive, default=MAX_PENDING,
                       help="requests in flight before new ones are answered busy (%(default)s)")
    serve.add_argument("--max-batch-rows", type=_positive, default=MAX_BATCH_ROWS,
                       help="rows of one denoising batch across clients; 1 turns batching off (%(default)s)")
    serve.add_argument("--json", action="store_true", help="print the listening address as a JSON line on stdout")
    serve.add_argument("--unsafe-no-sandbox", action="store_true",
                       help="compile and run clients' code without the bubblewrap sandbox (as this server's user)")

    for kind in (RequestLimits, ConnectionLimits):  # each limit a flag of its own name (server/README.md)
        for f in fields(kind):
            serve.add_argument("--" + f.name.replace("_", "-"), type=_positive if f.type == "int" else float,
                               default=getattr(kind, f.name), metavar="N" if f.type == "int" else "S",
                               help=f"{HELP[f.name]} (%(default)s)")
    add_model_arguments(serve)
    serve.set_defaults(handler=cmd_serve)
    # `dice-lsp serve status`: the Ray Serve deployment's health (`dice-lsp status --server` asks a listener)
    from dice_lsp.remote.ray_status import DEFAULT_APP, DEFAULT_DASHBOARD, TIMEOUT_S

    serve_sub = serve.add_subparsers(dest="serve_command", metavar="status", parser_class=OneLineErrors)
    serve_status = serve_sub.add_parser("status", help="the Ray Serve deployment's health, from Ray's dashboard "
                                        "(exit 0: running and healthy; 1: deploying or unhealthy; 2: not found)")
    serve_status.add_argument("--address", metavar="URL",
                              help=f"Ray's dashboard (default: RAY_DASHBOARD_ADDRESS, else {DEFAULT_DASHBOARD}); "
                              "Ray's token is read from RAY_AUTH_TOKEN, RAY_AUTH_TOKEN_PATH or ~/.ray/auth_token")
    serve_status.add_argument("--app", default=DEFAULT_APP, help="the Serve application (default: %(default)s)")
    serve_status.add_argument("--timeout", type=_seconds, default=TIMEOUT_S,
                              help="seconds to wait for the dashboard (default: %(default)s)")
    serve_status.add_argument("--json", action="store_true", help="print the application's health as JSON")
    serve_status.set_defaults(handler=cmd_serve_status)

    health = sub.add_parser("status", help="ask a team server whether it is ready (exit 0) and how loaded it is")
    add_server_arguments(health, None)
    health.add_argument("--json", action="store_true", help="print the server's status as JSON")
    health.set_defaults(handler=cmd_status)

    check = sub.add_parser("check", help="compile a CUDA file with nvcc: diagnostics and resources per kernel")
    check.add_argument("file", help="source file (.cu, .cuh, ...)")

    add_flag_arguments(check)
    check.add_argument("--json", action="store_true", help="print JSON instead of text")
    add_server_arguments(check, SENDS_FILES)
    check.set_defaults(handler=cmd_check)

    bench = sub.add_parser("bench", help="verify a file's kernels against a reference and time them on the GPU")
    bench.add_argument("file", help=".cu file with a dice:launch spec, or a torch extension with a KernelBench REF.py")
    bench.add_argument("--ref", help="reference: a .cu with the same kernel, or a KernelBench .py (Model, get_inputs)")
    bench.add_argument("--timeout", type=_seconds, default=Limits.timeout,
                       help=f"seconds per kernel before it is killed ({Limits.timeout:g})")
    bench.add_argument("--trials", type=_positive, default=Limits.trials,
                       help=f"random-input trials per size ({Limits.trials})")
    bench.add_argument("--json", action="store_true", help="print JSON instead of text")
    add_server_arguments(bench, SENDS_FILES_AND_REF)
    bench.set_defaults(handler=cmd_bench)

    def rewrite_arguments(command: argparse.ArgumentParser, sends: str) -> None:
        command.add_argument("--rounds", type=_non_negative, default=Settings.repair_rounds,
                             help="repair rounds: compile, re-mask the rejected lines, denoise (%(default)s)")
        command.add_argument("--out", help="write the result here (never over FILE); without it nothing is written: "
                                           "the diff is printed")
        command.add_argument("--steps", type=_positive, default=Settings.steps,
                             help="denoising steps per 32 tokens of region")
        command.add_argument("--seed", type=int, default=Settings.seed)
        command.add_argument("--json", action="store_true", help="print JSON instead of text")
        add_flag_arguments(command)
        add_server_arguments(command, sends)
        add_model_arguments(command)

    optimize = sub.add_parser("optimize", help="rewrite a kernel with the model; compile, verify, time and rank")
    optimize.add_argument("file", help=".cu file holding the kernel (with a dice:launch spec or a KernelBench REF.py)")
    optimize.add_argument("--kernel", required=True, help="the __global__ function to optimize")
    optimize.add_argument("--ref", help="reference: a .cu with the same kernel, or a KernelBench .py")
    optimize.add_argument("--candidates", type=_positive, default=Settings.optimize_candidates,
                          help="rewrites to generate (%(default)s)")
    optimize.add_argument("--timeout", type=_seconds, default=Limits.timeout,
                          help=f"seconds per candidate's run on the GPU ({Limits.timeout:g})")
    rewrite_arguments(optimize, SENDS_FILES_AND_REF)
    optimize.set_defaults(handler=cmd_optimize)

    fix = sub.add_parser("repair", help="make a file compile by re-writing the lines nvcc rejects")
    fix.add_argument("file", help="source file (.cu, .cuh, ...)")
    fix.add_argument("--candidates", type=_positive, default=REPAIR_CANDIDATES,
                     help=f"rewrites tried per round ({REPAIR_CANDIDATES})")
    rewrite_arguments(fix, SENDS_FILES)
    fix.set_defaults(handler=cmd_repair)

    from dice_lsp.evals.suite import KIND_HELP, SPLITS, SUITES
    from dice_lsp.training.options import build_parser as train_options

    evaluation = sub.add_parser("eval", help="measure the model")
    eval_sub = evaluation.add_subparsers(dest="what", metavar="WHAT", required=True, parser_class=OneLineErrors)
    infill = eval_sub.add_parser("infill", help="fill the holes of the CUDA-Infill suite and score the fills "
                                 "(docs/BENCHMARK.md)")
    infill.add_argument("--suite", choices=SUITES, default=SUITES[0])
    infill.add_argument("--split", choices=SPLITS, default="test",
                        help="test: the benchmark; dev: for tuning (default: test)")
    infill.add_argument("--kinds", type=_kinds, help="comma-separated hole kinds (default: all): "
                        + "; ".join(f"{k}: {v}" for k, v in KIND_HELP.items()))
    infill.add_argument("--limit", type=_positive, help="first N holes of each kind")
    infill.add_argument("--execute", action="store_true",
                        help="run executable holes' fills on the GPU and verify them against the original kernel")
    infill.add_argument("--executable-only", action="store_true", help="only the holes that can be executed")
    infill.add_argument("--system", choices=("model", "empty", "idiom", "random-sdar"), default="model",
                        help="model: --model (default: the embedded dice-tiny); empty, idiom: baselines; "
                        "random-sdar: a random tiny SDAR checkpoint (plumbing only)")
    infill.add_argument("--name", help="the system's key in reports (default: the model's name); "
                        "eval table --passes matches reports by it")
    infill.add_argument("--label", help="name of the system in tables")
    infill.add_argument("--out", help="also write the JSON report to this file")
    infill.add_argument("--json", action="store_true", help="print the JSON report instead of a table")
    infill.add_argument("--steps", type=_positive, default=Settings.steps, help="denoising steps per 32 canvas tokens")
    infill.add_argument("--context-tokens", type=_positive, default=Settings.context_tokens,
                        help="tokens of code around each hole (default: %(default)s)")
    add_model_arguments(infill)
    infill.set_defaults(handler=cmd_eval_infill)
    table = eval_sub.add_parser("table", help="one table (and plot) from several eval infill reports")
    table.add_argument("reports", nargs="+", help="JSON reports (eval infill --out)")
    table.add_argument("--kinds", type=_kinds, help="only these hole kinds")
    table.add_argument("--plot", help="also draw the rates by kind to this PNG")
    table.add_argument("--passes", nargs="+", metavar="REPORT",
                       help="take each system's pass rates from these reports (its executable holes run on a GPU)")
    table.add_argument("--json", action="store_true", help="print the summaries as JSON")
    table.set_defaults(handler=cmd_eval_table)

    trainer = sub.add_parser("train", help="train the embedded masked-diffusion model on a packed corpus")
    train_options(trainer)
    trainer.set_defaults(handler=cmd_train)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    handler: Callable[[argparse.Namespace], int] = getattr(args, "handler", cmd_lsp)
    try:
        return handler(args)
    except DiceError as exc:
        print(f"dice-lsp: error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # the reader went away (`dice-lsp ... | head`): no traceback, nothing more to write
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141


if __name__ == "__main__":
    sys.exit(main())
