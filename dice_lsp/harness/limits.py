"""How long, how large and how often the harness runs a kernel: the one home of these defaults.

A module of its own, with no imports, so the command line (`dice-lsp bench --help`, which must not load
tree-sitter or torch), the team server's request limits and the child processes read the same values.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Limits:
    timeout: float = 60.0  # seconds per kernel's verify-and-time run
    build_timeout: float = 600.0  # a torch extension's build
    memory_mb: int = 16384  # host memory of the child: resident, and its files in memory (a sandbox's /tmp)
    disk_mb: int = 1024  # what the child may write to disk: its scratch and build folders, its output (a build: ~16 MB)
    trials: int = 3  # random-input trials per verification size
    memcheck: bool = True  # the compute-sanitizer pass, where the tool is on PATH
