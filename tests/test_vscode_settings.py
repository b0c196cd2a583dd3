"""The VS Code extension declares exactly the server's settings schema (`dice.*`), each with a description
and the server's default, plus its own `dice.client.*` keys (how to reach the server)."""

from __future__ import annotations

import json
from dataclasses import MISSING, fields
from pathlib import Path

from dice_lsp.settings import Settings, editor_key

PACKAGE = Path(__file__).resolve().parents[1] / "client-vscode" / "package.json"


def test_every_server_setting_is_declared_with_its_default_and_a_description() -> None:
    declared = json.loads(PACKAGE.read_text())["contributes"]["configuration"]["properties"]
    server = {f"dice.{editor_key(f.name)}": f.default for f in fields(Settings) if f.default is not MISSING}
    assert set(server) == {key for key in declared if not key.startswith("dice.client.")}
    for key, default in server.items():
        assert declared[key]["default"] == (list(default) if isinstance(default, tuple) else default), key
        assert len(declared[key]["description"]) > 20, key
    assert all(declared[key]["description"] for key in declared if key.startswith("dice.client."))
