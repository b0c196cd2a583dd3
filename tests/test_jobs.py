"""The one jobs interface (`dice_lsp.jobs.api`): a team server's jobs give the same typed results as this
machine's (what it sends, `to_json`, is rebuilt with `from_json` and gives back the very same JSON); each job's
parameters read back from the request its client sent; the command line picks its jobs once, from `--server`,
and shows every result from its typed fields."""

from __future__ import annotations

import argparse
import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from dice_lsp.errors import DiceError
from dice_lsp.harness.bench import BenchReport, BuildFailure, KernelResult
from dice_lsp.harness.limits import Limits
from dice_lsp.jobs.api import BenchJob, CheckJob, Completed, CompleteJob, Defaults, Document, OptimizeJob, RepairJob
from dice_lsp.jobs.local import LocalJobs
from dice_lsp.optimize import OptimizeReport, OptimizeRequest, RepairResult, Rewrite
from dice_lsp.optimize.repair import Change
from dice_lsp.remote.team import TeamJobs, TeamServer
from dice_lsp.settings import REPAIR_CANDIDATES, Settings
from dice_lsp.textdoc import Position
from dice_lsp.toolchain.flags import CompileFlags
from dice_lsp.toolchain.report import CheckReport, Diagnostic, KernelResources, Related

SERVER = "tcp://gpu:7878"


def wire(data: dict) -> dict:
    """As it arrives: through JSON (tuples become lists)."""
    return json.loads(json.dumps(data))


class FakeClient:
    """Stands for `RemoteClient`: answers each call with `reply`, and keeps what was asked."""

    def __init__(self, reply: Any) -> None:
        self.reply = reply
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.address = SERVER

    async def call(self, method: str, params: dict[str, Any] | None = None, progress: Any = None) -> Any:
        self.calls.append((method, params or {}))
        return self.reply

    async def close(self) -> None:
        return None


def team_with(client: FakeClient) -> TeamJobs:
    team = TeamServer(Settings(server_url=SERVER))
    team.client = client  # type: ignore[assignment]
    return TeamJobs(team)


def document(settings: Settings | None = None) -> Document:
    return Document(Path("/tmp/k.cu"), "__global__ void k() {}\n", settings or Settings(), CompileFlags)


def test_an_optimize_report_round_trips_on_a_gpu_and_without_one() -> None:
    fast = Rewrite("re-noise 0.5", "__global__ void k() {}\n", compiled=True, verified=True, speedup=1.8,
                   median_ms=0.2, reference_ms=0.36, resources=KernelResources("k()", "_Z1kv", 3, registers=20),
                   rank=1, diff="--- a\n+++ b\n")
    slow = Rewrite("regenerate", "x", compiled=False, failure="nvcc: 1 error", rank=2, diff="-\n+\n")
    for gpu, unverified in ((True, "no GPU"), (False, "no GPU"), (False, "workspace not trusted")):
        sent = wire(OptimizeReport("k", gpu, [fast, slow], generated=5, wall_s=1.234, unverified=unverified).to_json())
        rebuilt = OptimizeReport.from_json(sent)
        assert rebuilt.to_json() == sent
        assert rebuilt.summary() == sent["summary"]
    nothing = wire(OptimizeReport("k", False, [slow], generated=1).to_json())
    assert nothing["best"] is None and OptimizeReport.from_json(nothing).to_json() == nothing


def test_a_repair_result_round_trips() -> None:
    error = Diagnostic(4, 2, 4, 9, "error", "identifier \"y\" is undefined", "20",
                       (Related("k.cu", 3, "in kernel"),))
    warning = Diagnostic(1, 0, 1, 3, "warning", "unused", None)
    for report, changes, stopped in ((CheckReport([error, warning], [], 12.0), [], None),
                                     (CheckReport([], [], 3.0), [Change(4, "y = 1;", "x = 1;", "undefined")],
                                      "out of time")):
        sent = wire(RepairResult("int x;\n", 2, report, changes, stopped).to_json())
        assert RepairResult.from_json(sent).to_json() == sent


def test_a_bench_report_round_trips_with_typed_diagnostics() -> None:
    error = Diagnostic(4, 2, 4, 9, "error", "identifier \"q\" is undefined", "20", (Related("k.cu", 3, "in k"),))
    kernel = KernelResult("k", verified=True, median_ms=0.4, shapes=["n=1024"])
    sent = wire(BenchReport(True, False, [error], [kernel], "does not compile").to_json())
    assert sent["compile"] == {"ok": False, "diagnostics": [
        {"range": {"start": {"line": 4, "character": 2}, "end": {"line": 4, "character": 9}}, "severity": "error",
         "message": "identifier \"q\" is undefined", "code": "20",
         "related": [{"file": "k.cu", "line": 3, "message": "in k"}]}]}
    rebuilt = BenchReport.from_json(sent)
    assert rebuilt.diagnostics == [error] and rebuilt.to_json() == sent
    failed = BuildFailure("build failed", "g++: error")
    built = wire(BenchReport(True, False, [failed], [], "does not compile").to_json())
    assert built["compile"]["diagnostics"] == [{"severity": "error", "message": "build failed", "detail": "g++: error"}]
    [failure] = BenchReport.from_json(built).diagnostics
    assert failure == BuildFailure("build failed", "g++: error") and (failure.line, failure.severity) == (0, "error")
    with pytest.raises(ValueError, match="severity"):
        Diagnostic.from_json({**sent["compile"]["diagnostics"][0], "severity": "fatal"})


def test_the_request_from_settings_is_the_one_built_by_hand() -> None:
    settings = Settings(optimize_candidates=3, repair_rounds=0, steps=4, seed=7, candidates=2)
    flags = CompileFlags(arch="sm_80")
    built = OptimizeRequest.from_settings(Path("k.cu"), "text", "k", settings, flags, ref=Path("r.py"),
                                          limits=Limits(timeout=5.0), unverified="workspace not trusted")
    assert built == OptimizeRequest(Path("k.cu"), "text", "k", Path("r.py"), 3, 0, settings.sampler_config(), flags,
                                    Limits(timeout=5.0), "workspace not trusted")
    assert OptimizeRequest.from_settings(Path("k.cu"), "t", "k", Settings(), CompileFlags()).limits == Limits()


@pytest.mark.parametrize("job", [
    CompleteJob(document(), Position(2, 5)),
    CompleteJob(document(), Position(2, 5), selection=(Position(1, 0), Position(3, 4))),
    CheckJob(document()),
    BenchJob(document()),
    BenchJob(document(), timeout=9.0, trials=4),
    OptimizeJob(document(), "add", timeout=2.0),
    OptimizeJob(document(Settings(trusted=True)), "add"),
    RepairJob(document()),
    RepairJob(document(), candidates=5)], ids=["complete", "selection", "check", "bench", "bench-limits", "optimize",
                                               "optimize-trusted", "repair", "repair-tries"])
def test_each_job_reads_back_from_the_parameters_its_client_sent(job: Any) -> None:
    sent = wire(job.params())
    assert type(job).reader(sent)(job.document) == job


def test_only_an_explicit_false_makes_an_optimize_untrusted() -> None:
    def trusted(params: dict[str, Any]) -> bool:
        return OptimizeJob.reader({"kernel": "add", **params})(document()).document.settings.trusted

    assert OptimizeJob(document(), "add").params() == {"kernel": "add", "trusted": False}
    assert OptimizeJob(document(Settings(trusted=True)), "add").params() == {"kernel": "add"}
    assert [trusted({"trusted": value}) for value in (False, None, True, 0)] == [False, True, True, True]
    assert trusted({})


def test_what_a_job_leaves_out_is_the_runners_default() -> None:
    assert BenchJob(document()).arguments(Defaults()) == {"limits": Limits()}
    assert BenchJob(document(), trials=1).arguments(Defaults(timeout=2.0)) == {"limits": Limits(timeout=2.0, trials=1)}
    assert OptimizeJob(document(), "k", timeout=5.0).arguments(Defaults(timeout=2.0)) == {
        "kernel": "k", "limits": Limits(timeout=5.0)}
    assert RepairJob(document()).arguments(Defaults()) == {"candidates": REPAIR_CANDIDATES}
    assert RepairJob(document(), 2).arguments(Defaults(repair_candidates=1)) == {"candidates": 2}


def test_a_team_completion_is_the_typed_completion_and_sends_only_the_chosen_settings() -> None:
    from dice_lsp.complete import Completion
    from dice_lsp.completion.checks import Checks

    client = FakeClient(REPLY)
    chosen = Settings(arch="sm_80", candidates=2, trusted=True)
    completed = asyncio.run(team_with(client).complete(CompleteJob(document(chosen), Position(1, 4))))
    assert completed == Completed(
        Completion(["i < n; i++"], Position(1, 4), Position(1, 9), 12.6, 0, "loop_header",
                   [Checks(True, True, False, None)], None, ["document"], [0.71]),
        "dice-tiny", "cuda:0", SERVER, REPLY)
    assert client.calls == [("complete", {"text": document().text, "line": 1, "character": 4,
                                          "settings": {"arch": "sm_80", "candidates": 2}})]


def test_a_team_file_job_sends_the_file_its_headers_and_its_own_parameters(tmp_path: Path) -> None:
    (tmp_path / "sizes.cuh").write_text("#define N 4\n")
    (tmp_path / "compile_commands.json").write_text("[]")
    path = tmp_path / "k.cu"
    text = '#include "sizes.cuh"\n#include "compile_commands.json"\n__global__ void k() {}\n'
    untrusted = Document(path, text, Settings(), CompileFlags)
    client = FakeClient(RepairResult(text, 0, CheckReport([], [], 1.0)).to_json())
    asyncio.run(team_with(client).repair(RepairJob(untrusted, candidates=3)))
    [(method, params)] = client.calls
    assert method == "repair" and params == {"text": text, "path": "k.cu", "files": {"sizes.cuh": "#define N 4\n"},
                                             "candidates": 3, "settings": {}}


def test_a_team_reply_this_version_cannot_read_is_one_line_naming_the_server_and_method() -> None:
    team = team_with(FakeClient({"candidates": [{"unknown_field": 1}], "best": None}))
    with pytest.raises(DiceError) as raised:
        asyncio.run(team.optimize(OptimizeJob(document(), "k")))
    message = str(raised.value)
    assert message.startswith(f"{SERVER}: its optimize reply does not read as this dice-lsp's (")
    assert "\n" not in message and message.endswith("(is the server another version?)")


def test_the_command_line_picks_its_jobs_once_from_server() -> None:
    from dice_lsp import cli

    local = cli.jobs_for(argparse.Namespace(server=None, model=None, device="cpu", dtype="auto",
                                            trust_remote_code=False))
    assert isinstance(local, LocalJobs) and local.model == Settings(device="cpu")
    asyncio.run(local.close())
    team = cli.jobs_for(argparse.Namespace(server="tcp://127.0.0.1:1", token_file="t"))
    assert isinstance(team, TeamJobs) and team.address == "tcp://127.0.0.1:1"


def test_flags_for_a_team_server_leave_out_what_is_unset() -> None:
    from dice_lsp.cli import FlagOptions

    assert FlagOptions().as_settings() == {}
    assert FlagOptions("sm_80", None, (), ("N=4",)).as_settings() == {"arch": "sm_80", "defines": ["N=4"]}
    with pytest.raises(DiceError, match="-I does not reach a team server"):
        FlagOptions(include=("inc",)).as_settings()


REPLY = {"items": [{"text": "i < n; i++", "range": {"start": {"line": 1, "character": 4},
                                                     "end": {"line": 1, "character": 9}},
                    "checks": {"parses": True, "names": True, "types": None, "compiles": False},
                    "source": "document", "confidence": 0.71}],
         "hole": "loop_header", "withheld": None, "model": "dice-tiny", "device": "cuda:0", "latency_ms": 12.6}


def test_the_cli_prints_a_completion_from_its_typed_fields(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    from dice_lsp import cli

    client = FakeClient(REPLY)
    monkeypatch.setattr(cli, "team_jobs", lambda args: team_with(client))
    (tmp_path / "k.cu").write_text("__global__ void k() {\n    \n}\n")  # line 1, character 4: in the file
    at = ["complete", str(tmp_path / "k.cu"), "--line", "1", "--character", "4", "--server", SERVER]
    assert cli.main(at) == 0
    out, err = capsys.readouterr()
    assert out == "i < n; i++\n"
    assert err == ("[checks: parses ✓ · names ✓ · types not checked · compiles ✗ · from this file · P(right) 0.71]\n"
                   f"[dice-tiny on cuda:0, 13 ms, {SERVER}]\n")
    assert cli.main([*at, "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == REPLY
    client.reply = {**REPLY, "items": [], "withheld": "does not parse"}
    assert cli.main(at) == 0
    out, err = capsys.readouterr()
    assert out == "" and err == (f"dice-lsp: no completion shown: does not parse\n"
                                 f"[dice-tiny on cuda:0, 13 ms, {SERVER}]\n")
    assert cli.main([*at, "-I", str(tmp_path)]) == 2
    assert "-I does not reach a team server" in capsys.readouterr().err


def test_the_cli_shows_optimize_and_repair_from_their_typed_fields(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    from dice_lsp import cli

    path = tmp_path / "k.cu"
    path.write_text("int x = ;\n")
    repaired = RepairResult("int x = 0;\n", 1, CheckReport([], [], 1.0), [Change(0, "int x = ;", "int x = 0;", "e")])
    client = FakeClient(repaired.to_json())
    monkeypatch.setattr(cli, "team_jobs", lambda args: team_with(client))
    assert cli.main(["repair", str(path), "--server", SERVER]) == 0
    out, err = capsys.readouterr()
    assert out.endswith("-int x = ;\n+int x = 0;\n")
    assert err == "dice-lsp: compiles after 1 round\ndice-lsp: changed line 1: `int x = ;` -> `int x = 0;` (for: e)\n"
    fast = Rewrite("signature", "int x = 1;\n", compiled=True, verified=True, speedup=2.0, median_ms=0.5,
                   reference_ms=1.0, resources=KernelResources("k()", "_Z1kv", 3, registers=20), rank=1,
                   diff="--- a/k.cu\n+++ b/k.cu\n")
    client.reply = OptimizeReport("k", True, [fast], generated=1).to_json()
    out_file = tmp_path / "best.cu"
    assert cli.main(["optimize", str(path), "--kernel", "k", "--server", SERVER, "--out", str(out_file)]) == 0
    out, err = capsys.readouterr()
    assert out.splitlines()[1] == f"{1:>4} {'signature':14} {'yes':>8} {0:>7} {'yes':>8} {'2.00x':>8} " \
                                  f"{'0.5000':>10} {20:>5} {0:>6}  "
    assert out_file.read_text() == "int x = 1;\n" and err == f"dice-lsp: wrote {out_file}\n"
    [params] = [params for method, params in client.calls if method == "optimize"]
    assert params["kernel"] == "k" and params["timeout"] == Limits.timeout
    assert params["settings"] == {"candidates": 2}  # sampled, as here: the rest are the defaults


STATUS = {"state": "ready", "model": "dice-tiny", "device": "cuda:0", "dtype": "torch.bfloat16", "version": "0.9.0",
          "in_flight": 2, "queued": 1, "served": 40, "fills": 12, "fill_batches": 5, "fill_steps": 8, "step_rows": 20,
          "uptime_s": 61.5, "sandbox": "bubblewrap", "limits": {"max_candidates": 16}}


@pytest.mark.parametrize(("reply", "line", "code"), [
    (STATUS, f"{SERVER}: ready: dice-tiny on cuda:0 (torch.bfloat16); 2 in flight, 1 queued, 40 served, "
             "2.50 rows per model call, up 62 s, dice-lsp 0.9.0\n", 0),
    ({**STATUS, "state": "error", "message": "no model: bad folder", "fill_steps": 0},
     f"{SERVER}: error: no model: bad folder; 2 in flight, 1 queued, 40 served, 1.00 rows per model call, "
     "up 62 s, dice-lsp 0.9.0\n", 1),
    ({key: value for key, value in STATUS.items() if key not in ("device", "dtype", "fill_steps", "step_rows")}
     | {"state": "loading"},
     f"{SERVER}: loading: dice-tiny; 2 in flight, 1 queued, 40 served, 1.00 rows per model call, up 62 s, "
     "dice-lsp 0.9.0\n", 1)])
def test_the_cli_shows_a_team_servers_status_from_its_typed_fields(
        reply: dict[str, Any], line: str, code: int, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    from dice_lsp import cli

    monkeypatch.setattr(cli, "team_jobs", lambda args: team_with(FakeClient(reply)))
    assert cli.main(["status", "--server", SERVER]) == code
    assert capsys.readouterr().out == line
    assert cli.main(["status", "--server", SERVER, "--json"]) == code
    assert json.loads(capsys.readouterr().out) == reply


def test_a_status_reply_without_the_load_is_one_line_naming_the_server() -> None:
    with pytest.raises(DiceError, match=f"{SERVER}: its status reply does not read as this dice-lsp's"):
        asyncio.run(team_with(FakeClient({"state": "ready"})).status())
