"""What the CLI says about itself and about counts: help that matches what is sent, plurals that agree."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest

from dice_lsp.cli import build_parser
from dice_lsp.optimize.repair import RepairResult
from dice_lsp.toolchain.report import CheckReport
from dice_lsp.wording import counted


@pytest.mark.parametrize(("count", "said"), [(0, "0 errors"), (1, "1 error"), (2, "2 errors")])
def test_a_count_agrees_with_its_noun(count: int, said: str) -> None:
    assert counted(count, "error") == said


def server_help(command: str) -> str:
    """The --server help of `command`, as one line."""
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    action = next(a for a in sub.choices[command]._actions if "--server" in a.option_strings)
    return " ".join((action.help or "").split())


def test_server_help_says_what_each_command_sends() -> None:
    assert server_help("status") == "the team server to ask (tcp://HOST:PORT or unix:///PATH)"
    assert server_help("complete").endswith("only FILE's text is sent (its headers are not)")
    for command in ("check", "repair"):
        assert server_help(command).endswith("FILE is sent with the headers it includes in quotes from its folder "
                                             "or below"), command
    for command in ("bench", "optimize"):
        assert server_help(command).endswith("from its folder or below, and --ref"), command


def test_every_key_of_repair_json_is_documented() -> None:
    """`repair --json` prints the repair's result and its diff (cmd_repair); docs/OPTIMIZE.md names each key."""
    docs = (Path(__file__).resolve().parents[1] / "docs" / "OPTIMIZE.md").read_text(encoding="utf-8")
    documented = re.search(r"`--json`: `(\{.*?\})`", docs)
    assert documented is not None
    printed = {*RepairResult("int x;\n", 0, CheckReport([], [], 0.0)).to_json(), "diff"}
    assert set(re.findall(r'"(\w+)":', documented[1])) == printed
    for key in printed:
        assert f"`{key}`" in docs[documented.end():], f"{key} is not explained"


def test_the_command_line_builds_without_torch() -> None:
    """`dice-lsp --help` and argument errors stay instant: torch loads only when a command needs the model."""
    import subprocess
    import sys

    code = ("import sys; from dice_lsp.cli import build_parser; build_parser().format_help(); "
            "print(sorted(m for m in ('torch', 'tree_sitter', 'pygls') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_a_reader_that_goes_away_ends_the_command_quietly() -> None:
    """`dice-lsp ... | head`: the closed pipe ends the command without a traceback."""
    import subprocess
    import sys

    report = Path(__file__).resolve().parents[1] / "docs/bench-logs/pipeline/dev_lines_body/plus_remask.json"
    proc = subprocess.Popen([sys.executable, "-c", "import sys; from dice_lsp.cli import main; sys.exit(main())",
                             "eval", "table", str(report), "--json"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()  # before the command has written anything
    err = proc.stderr.read().decode()
    assert proc.wait(60) == 141 and "Traceback" not in err, err
