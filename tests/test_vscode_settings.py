"""The VS Code extension declares exactly the server's settings schema (`dice.*`), each with a description
and the server's default, plus its own `dice.client.*` keys (how to reach the server)."""

from __future__ import annotations

import json
from dataclasses import MISSING, fields
from pathlib import Path

from dice_lsp.settings import NULLABLE_TEXT, Settings, editor_key

PACKAGE = Path(__file__).resolve().parents[1] / "client-vscode" / "package.json"


def test_every_server_setting_is_declared_with_its_default_and_a_description() -> None:
    declared = json.loads(PACKAGE.read_text())["contributes"]["configuration"]["properties"]
    server = {f"dice.{editor_key(f.name)}": f.default for f in fields(Settings) if f.default is not MISSING}
    assert set(server) == {key for key in declared if not key.startswith("dice.client.")}
    texts = {f"dice.{editor_key(name)}" for name in NULLABLE_TEXT}
    for key, default in server.items():
        if key in texts:  # unset is "" in the editor (the Settings UI edits strings, not nulls); the server reads None
            assert (declared[key]["type"], declared[key]["default"], default) == ("string", "", None), key
            group, _, name = key.removeprefix("dice.").rpartition(".")
            unset = Settings().updated({group: {name: ""}} if group else {name: ""})
            assert unset == (Settings(), []), key
            continue
        assert declared[key]["default"] == (list(default) if isinstance(default, tuple) else default), key
        assert len(declared[key]["description"]) > 20, key
    assert all(declared[key]["description"] for key in declared if key.startswith("dice.client."))
    client_texts = ("dice.client.pythonPath", "dice.client.connect", "dice.client.tokenFile")
    assert all((declared[key]["type"], declared[key]["default"]) == ("string", "") for key in client_texts)
