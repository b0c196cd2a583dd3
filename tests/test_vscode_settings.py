"""The VS Code extension declares exactly the server's settings schema (`dice.*`), each with a description
and the server's default, plus its own `dice.client.*` keys (how to reach the server)."""

from __future__ import annotations

import json
from dataclasses import MISSING, fields
from pathlib import Path

from dice_lsp.settings import NULLABLE_TEXT, UNSET_NUMBER, Settings, editor_key

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
        name = key.removeprefix("dice.")
        unset_numbers = {f"dice.{editor_key(n)}": value for n, value in UNSET_NUMBER.items()}
        if key in unset_numbers:  # unset is a number in the editor; the server reads None
            unset = unset_numbers[key]
            assert declared[key]["type"] in ("number", "integer") and declared[key]["minimum"] <= unset, key
            assert declared[key]["default"] == (unset if default is None else default), key
            changed, errors = Settings().updated({name: unset})
            assert errors == [] and getattr(changed, next(n for n in UNSET_NUMBER if editor_key(n) == name)) is None
            assert str(unset) in declared[key]["description"], key
            continue
        assert declared[key]["default"] == (list(default) if isinstance(default, tuple) else default), key
        assert len(declared[key]["description"]) > 20, key
    assert all(declared[key]["description"] for key in declared if key.startswith("dice.client."))
    client_texts = ("dice.client.pythonPath", "dice.client.connect", "dice.client.tokenFile")
    assert all((declared[key]["type"], declared[key]["default"]) == ("string", "") for key in client_texts)


def test_the_settings_ui_can_edit_every_setting() -> None:
    """No setting is declared nullable (VS Code's Settings UI sends those to settings.json): unset is "" for a text
    and a number of its own for a number (`UNSET_NUMBER`)."""
    declared = json.loads(PACKAGE.read_text())["contributes"]["configuration"]["properties"]
    assert [key for key, spec in declared.items() if isinstance(spec["type"], list)] == []


def test_a_numbers_unset_value_is_none_on_the_server_and_its_other_values_are_checked() -> None:
    assert Settings().updated({"minConfidence": -1, "temperature": -1, "blockLength": 0, "contextTokens": 0}) == (
        Settings(min_confidence=None, temperature=None, block_length=None, context_tokens=None), [])
    assert Settings().updated({"minConfidence": 0})[0].min_confidence == 0.0  # 0 shows everything: not unset
    _, errors = Settings().updated({"minConfidence": -0.5, "blockLength": -2})
    assert errors == ["dice.blockLength: must be at least 1 (0: not set)",
                      "dice.minConfidence: must be a finite non-negative number (-1: not set)"]
