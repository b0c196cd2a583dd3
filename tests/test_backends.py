"""The CLI's two backends give the same typed results: what a team server sends (`to_json`) is rebuilt with
`from_json` and gives back the very same JSON; the request the settings make is the one the sites built."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import pytest

from dice_lsp.backends import FlagOptions, LocalBackend, TeamBackend, backend_for
from dice_lsp.errors import DiceError
from dice_lsp.harness.bench import BenchReport, BuildFailure, KernelResult
from dice_lsp.harness.limits import Limits
from dice_lsp.optimize import OptimizeReport, OptimizeRequest, RepairResult, Rewrite
from dice_lsp.optimize.repair import Change
from dice_lsp.settings import Settings
from dice_lsp.toolchain.flags import CompileFlags
from dice_lsp.toolchain.report import CheckReport, Diagnostic, KernelResources, Related


def wire(data: dict) -> dict:
    """As it arrives: through JSON (tuples become lists)."""
    return json.loads(json.dumps(data))


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


def test_the_backend_is_picked_once_from_server() -> None:
    local = argparse.Namespace(server=None, model=None, device="cpu", dtype="auto", trust_remote_code=False)
    assert isinstance(backend_for(local), LocalBackend)
    team = backend_for(argparse.Namespace(server="tcp://127.0.0.1:1", token_file="t"))
    assert isinstance(team, TeamBackend) and (team.server, team.token_file) == ("tcp://127.0.0.1:1", "t")


def test_flags_for_a_team_server_leave_out_what_is_unset() -> None:
    assert FlagOptions().as_settings() == {}
    assert FlagOptions("sm_80", None, (), ("N=4",)).as_settings() == {"arch": "sm_80", "defines": ["N=4"]}


def test_a_team_reply_this_version_cannot_read_is_one_line_naming_the_server() -> None:
    class OtherVersion(TeamBackend):
        def call(self, method: str, params: dict[str, Any]) -> Any:
            return {"candidates": [{"unknown_field": 1}], "best": None}  # what a server of another version might send

    with pytest.raises(DiceError) as raised:
        OtherVersion("tcp://gpu-host:7077").ask("optimize", {}, OptimizeReport.from_json)
    message = str(raised.value)
    assert message.startswith("tcp://gpu-host:7077: its optimize reply does not read as this dice-lsp's (")
    assert "\n" not in message and message.endswith("(is the server another version?)")


REPLY = {"items": [{"text": "i < n; i++", "range": {"start": {"line": 1, "character": 4},
                                                     "end": {"line": 1, "character": 9}},
                    "checks": {"parses": True, "names": True, "types": None, "compiles": False},
                    "source": "document", "confidence": 0.71}],
         "hole": "loop_header", "withheld": None, "model": "dice-tiny", "device": "cuda:0", "latency_ms": 12.6}


def test_a_team_completion_is_the_typed_completion_and_keeps_the_reply_for_json(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from dice_lsp.backends import Completed
    from dice_lsp.complete import Completion
    from dice_lsp.completion.checks import Checks
    from dice_lsp.textdoc import Position

    team = TeamBackend("tcp://gpu:7878")
    asked: list[tuple[str, dict[str, Any]]] = []
    monkeypatch.setattr(team, "call", lambda method, params: asked.append((method, params)) or REPLY)
    completed = team.complete("k.cu", "text", Position(1, 4), Settings(), False, FlagOptions(arch="sm_80"))
    assert completed == Completed(
        Completion(["i < n; i++"], Position(1, 4), Position(1, 9), 12.6, 0, "loop_header",
                   [Checks(True, True, False, None)], None, ["document"], [0.71]),
        "dice-tiny", "cuda:0", "tcp://gpu:7878", REPLY)
    sent = Settings(arch="sm_80").per_request()
    assert asked == [("complete", {"text": "text", "line": 1, "character": 4, "settings": sent})]
    with pytest.raises(DiceError, match="-I does not reach a team server"):
        team.complete("k.cu", "text", Position(1, 4), Settings(), False, FlagOptions(include=("inc",)))


def test_the_cli_prints_a_completion_from_its_typed_fields(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    from dice_lsp import cli

    team = TeamBackend("tcp://gpu:7878")
    monkeypatch.setattr(team, "call", lambda method, params: REPLY)
    monkeypatch.setattr(cli, "backend_for", lambda args: team)
    (tmp_path / "k.cu").write_text("__global__ void k() {}\n")
    assert cli.main(["complete", str(tmp_path / "k.cu"), "--line", "1", "--character", "4"]) == 0
    out, err = capsys.readouterr()
    assert out == "i < n; i++\n"
    assert err == ("[checks: parses ✓ · names ✓ · types not checked · compiles ✗ · from this file · P(right) 0.71]\n"
                   "[dice-tiny on cuda:0, 13 ms, tcp://gpu:7878]\n")
    assert cli.main(["complete", str(tmp_path / "k.cu"), "--line", "1", "--character", "4", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == REPLY
    monkeypatch.setattr(team, "call", lambda method, params: {**REPLY, "items": [], "withheld": "does not parse"})
    assert cli.main(["complete", str(tmp_path / "k.cu"), "--line", "1", "--character", "4"]) == 0
    out, err = capsys.readouterr()
    assert out == "" and err == ("dice-lsp: no completion shown: does not parse\n"
                                 "[dice-tiny on cuda:0, 13 ms, tcp://gpu:7878]\n")


STATUS = {"state": "ready", "model": "dice-tiny", "device": "cuda:0", "dtype": "torch.bfloat16", "version": "0.9.0",
          "in_flight": 2, "queued": 1, "served": 40, "fills": 12, "fill_batches": 5, "fill_steps": 8, "step_rows": 20,
          "uptime_s": 61.5, "sandbox": "bubblewrap", "limits": {"max_candidates": 16}}


@pytest.mark.parametrize(("reply", "line", "code"), [
    (STATUS, "tcp://gpu:7878: ready: dice-tiny on cuda:0 (torch.bfloat16); 2 in flight, 1 queued, 40 served, "
             "2.50 rows per model call, up 62 s, dice-lsp 0.9.0\n", 0),
    ({**STATUS, "state": "error", "message": "no model: bad folder", "fill_steps": 0},
     "tcp://gpu:7878: error: no model: bad folder; 2 in flight, 1 queued, 40 served, 1.00 rows per model call, "
     "up 62 s, dice-lsp 0.9.0\n", 1),
    ({key: value for key, value in STATUS.items() if key not in ("device", "dtype", "fill_steps", "step_rows")}
     | {"state": "loading"},
     "tcp://gpu:7878: loading: dice-tiny; 2 in flight, 1 queued, 40 served, 1.00 rows per model call, up 62 s, "
     "dice-lsp 0.9.0\n", 1)])
def test_the_cli_shows_a_team_servers_status_from_its_typed_fields(
        reply: dict[str, Any], line: str, code: int, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    from dice_lsp import cli

    team = TeamBackend("tcp://gpu:7878")
    monkeypatch.setattr(team, "call", lambda method, params: reply)
    monkeypatch.setattr(cli, "backend_for", lambda args: team)
    assert cli.main(["status", "--server", "tcp://gpu:7878"]) == code
    assert capsys.readouterr().out == line
    assert cli.main(["status", "--server", "tcp://gpu:7878", "--json"]) == code
    assert json.loads(capsys.readouterr().out) == reply


def test_a_status_reply_without_the_load_is_one_line_naming_the_server(monkeypatch: pytest.MonkeyPatch) -> None:
    team = TeamBackend("tcp://gpu:7878")
    monkeypatch.setattr(team, "call", lambda method, params: {"state": "ready"})
    with pytest.raises(DiceError, match="tcp://gpu:7878: its status reply does not read as this dice-lsp's"):
        team.status()
