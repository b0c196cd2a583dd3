"""Workspace trust in the language server: what an untrusted workspace cannot make the editor do, and
saying so once.

Opening a file of a cloned repository must not run anything that repository chose. So until the user
trusts the workspace (`dice.trusted`; VS Code answers it from its Workspace Trust), the server
- takes no compile flags from the workspace's files: compile_commands.json is ignored, the `dice.*` flags
  settings apply (diagnostics keep working);
- runs none of the workspace's code: no benchmark on save, and the optimize action compiles its rewrites
  but never runs them on a GPU (ranked by nvcc's report, said to be unverified);
- never runs a model folder's own Python code: `dice.trustRemoteCode` has no effect.
Each of these is said once (per stretch of untrust) with how to trust, so the user knows why a feature is
quiet. A change of trust arrives as new settings and takes effect at once.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from dice_lsp.settings import UNTRUSTED, Settings

HOW_TO_TRUST = ("to allow it, trust the workspace (VS Code: Manage Workspace Trust; "
                "other editors: set dice.trusted = true in your own editor configuration)")
NOT_BENCHMARKED = f"not run: {UNTRUSTED}"  # the reason a benchmark lens shows


def effective(settings: Settings) -> Settings:
    """The settings the model is loaded with: untrusted, a model folder's own code never runs."""
    return replace(settings, trust_remote_code=False) if not settings.trusted else settings


def remote_code_ignored() -> str:
    return (f"dice-lsp: dice.trustRemoteCode has no effect: {UNTRUSTED}, so the model folder's own Python code "
            f"does not run (the folder is loaded without it); {HOW_TO_TRUST}")


def database_ignored(database: Path) -> str:
    return (f"dice-lsp: {database.name} is ignored ({database}): {UNTRUSTED}; diagnostics use the dice.* flags "
            f"(arch, std, includeDirs, defines); {HOW_TO_TRUST}")


def bench_skipped() -> str:
    return f"dice-lsp: benchmarks on save do not run: {UNTRUSTED}, and they run its kernels; {HOW_TO_TRUST}"


class Notices:
    """Says each reason once while the workspace stays untrusted (`reset` when trust changes)."""

    def __init__(self, tell: Callable[[str], None]) -> None:
        self.tell = tell
        self.said: set[str] = set()

    def once(self, key: str, message: str) -> None:
        if key not in self.said:
            self.said.add(key)
            self.tell(message)

    def reset(self) -> None:
        self.said.clear()
