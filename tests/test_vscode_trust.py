"""The VS Code extension supports untrusted workspaces in a limited way, and there a workspace's settings
that name a program, a model folder, compiler flags or a server are not read (VS Code takes the user's)."""

from __future__ import annotations

import json
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "client-vscode" / "package.json"
RESTRICTED = {
    "dice.trusted",  # the extension answers it from Workspace Trust anyway
    "dice.model", "dice.trustRemoteCode",  # a model folder and whether its own code runs
    "dice.nvcc", "dice.clang",  # programs the server runs
    "dice.includeDirs", "dice.defines",  # free-form compiler flags (dice.arch and dice.std are patterns)
    "dice.server.url", "dice.server.token", "dice.server.tokenFile",  # where the code goes; a file read as a token
    "dice.client.serverCommand", "dice.client.pythonPath",  # what the extension starts
    "dice.client.connect", "dice.client.tokenFile",  # which server it talks to, and a file it reads and sends
}


def test_untrusted_workspaces_are_limited_and_cannot_name_programs_models_flags_or_servers() -> None:
    package = json.loads(PACKAGE.read_text())
    untrusted = package["capabilities"]["untrustedWorkspaces"]
    assert untrusted["supported"] == "limited"
    assert "compile_commands.json" in untrusted["description"]
    assert set(untrusted["restrictedConfigurations"]) == RESTRICTED
    declared = package["contributes"]["configuration"]["properties"]
    assert declared.keys() >= RESTRICTED, "only settings the extension declares"


def test_dice_trusted_is_untrusted_by_default_and_only_a_user_setting() -> None:
    trusted = json.loads(PACKAGE.read_text())["contributes"]["configuration"]["properties"]["dice.trusted"]
    assert trusted["default"] is False and trusted["scope"] == "application"
    assert "Workspace Trust" in trusted["description"]


def test_the_restricted_settings_are_user_only_in_every_workspace() -> None:
    """Scoped `machine` (`dice.trusted`: `application`), VS Code ignores their values in a workspace's or folder's
    settings file even once the workspace is trusted: only User / Remote settings can name a program, a model
    folder, compiler flags or a server. (`machine-overridable` or the default `window` would let a cloned
    repository's .vscode/settings.json choose them.)"""
    declared = json.loads(PACKAGE.read_text())["contributes"]["configuration"]["properties"]
    for key in RESTRICTED:
        assert declared[key].get("scope") in ("machine", "application"), key
    user_only = {key for key, prop in declared.items() if prop.get("scope") in ("machine", "application")}
    assert user_only == RESTRICTED, "a user-only setting is restricted in untrusted workspaces too"
