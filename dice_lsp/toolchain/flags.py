"""The nvcc flags a file is checked with: its build's, from `compile_commands.json`, else the settings.

clangd's convention: the database sits in the file's folder or one above it, or in a `build/` folder
there. From a build's command only what changes what the compiler says about the code is kept: include
paths, defines, the C++ standard, the target architecture and the options that change device code
(`--maxrregcount`, `--use_fast_math`, `-G`, ...). Outputs, host-compiler options and the like are
dropped, because the check compiles into a temporary directory of its own.
"""

from __future__ import annotations

import json
import logging
import os
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

LOG = logging.getLogger("dice_lsp.flags")
DATABASE = "compile_commands.json"
_KEPT = re.compile(r"^(--?(expt-relaxed-constexpr|extended-lambda|expt-extended-lambda|use_fast_math|G|lineinfo|"
                   r"rdc=\S+|relocatable-device-code=\S+|ftz=\S+|prec-div=\S+|prec-sqrt=\S+|fmad=\S+)|-U\S+)$")
_VALUED = {"-I": "include", "-isystem": "include", "--include-path": "include", "-D": "define",
           "--define-macro": "define", "-std": "std", "--std": "std", "-arch": "arch",
           "--gpu-architecture": "arch", "-gencode": "gencode", "--generate-code": "gencode",
           "-maxrregcount": "maxrregcount", "--maxrregcount": "maxrregcount"}
_CODE = re.compile(r"code=\[?(sm_\d+[a-z]?)")


@dataclass(frozen=True)
class CompileFlags:
    arch: str = "sm_90"
    std: str = "c++17"
    include_dirs: tuple[Path, ...] = ()
    defines: tuple[str, ...] = ()  # NAME or NAME=VALUE
    extra: tuple[str, ...] = ()  # device-code options kept from a build command
    origin: str = "settings"  # or the compile_commands.json they came from

    def arguments(self) -> list[str]:
        """nvcc arguments, without the input, the output and the file's own folder."""
        return [f"-std={self.std}", f"-arch={self.arch}", *(f"-I{d}" for d in self.include_dirs),
                *(f"-D{d}" for d in self.defines), *self.extra]


DEFAULT_FLAGS = CompileFlags()


@dataclass
class _Parsed:
    include: list[Path] = field(default_factory=list)
    define: list[str] = field(default_factory=list)
    extra: list[str] = field(default_factory=list)
    std: str | None = None
    arch: str | None = None


def from_command(arguments: list[str], directory: Path, fallback: CompileFlags) -> CompileFlags:
    """The flags of one build command (relative include paths are relative to its `directory`)."""
    parsed = _Parsed()
    index = 1  # arguments[0] is the compiler
    while index < len(arguments):
        argument = arguments[index]
        index += 1
        name, value = _split(argument)
        if name is None:
            if _KEPT.match(argument):
                parsed.extra.append(argument)
            continue
        if value is None:
            if index >= len(arguments):
                break
            value, index = arguments[index], index + 1
        _apply(parsed, _VALUED[name], value, directory)
    return CompileFlags(arch=parsed.arch or fallback.arch, std=parsed.std or fallback.std,
                        include_dirs=tuple(parsed.include), defines=tuple(parsed.define), extra=tuple(parsed.extra))


def _split(argument: str) -> tuple[str | None, str | None]:
    """(option, attached value or None when the value is the next argument), or (None, None)."""
    if argument in _VALUED:
        return argument, None
    if "=" in argument and argument.split("=", 1)[0] in _VALUED:
        name, value = argument.split("=", 1)
        return name, value
    for short in ("-I", "-D"):
        if argument.startswith(short) and len(argument) > 2:
            return short, argument[2:]
    return None, None


def _apply(parsed: _Parsed, kind: str, value: str, directory: Path) -> None:
    if kind == "include":
        parsed.include.append((directory / value).resolve())
    elif kind == "define":
        parsed.define.append(value)
    elif kind == "std":
        parsed.std = value
    elif kind == "arch":
        parsed.arch = parsed.arch or value.split(",")[0].replace("compute_", "sm_")
    elif kind == "gencode":
        code = _CODE.search(value)
        parsed.arch = parsed.arch or (code.group(1) if code else None)
    elif kind == "maxrregcount":
        parsed.extra.append(f"--maxrregcount={value}")


def find_database(path: Path, stop: Path | None = None) -> Path | None:
    """`compile_commands.json` in the file's folder or above (or in a `build/` there), up to `stop`."""
    for folder in [path.parent, *path.parent.parents]:
        for candidate in (folder / DATABASE, folder / "build" / DATABASE):
            if candidate.is_file():
                return candidate
        if stop is not None and folder == stop:
            break
    return None


def flags_for(path: Path, fallback: CompileFlags, stop: Path | None = None) -> CompileFlags:
    """The flags of `path`'s entry in the nearest compilation database; for a file it does not list (a
    header, a new file), the entry nearest to it in the tree; without a database, `fallback`."""
    database = find_database(path, stop)
    if database is None:
        return fallback
    try:
        entries = json.loads(database.read_text(encoding="utf-8"))
        commands = [_entry(e, database.parent) for e in entries]
    except (OSError, ValueError, TypeError, KeyError) as exc:
        LOG.warning("%s: cannot read (%s); using the dice.* flags", database, exc)
        return fallback
    if not commands:
        return fallback
    target = path.resolve()
    _, directory, arguments = max(commands, key=lambda c: (c[0] == target, _shared_depth(c[0], target)))
    flags = from_command(arguments, directory, fallback)
    return CompileFlags(flags.arch, flags.std, flags.include_dirs, flags.defines, flags.extra, str(database))


def _entry(entry: dict[str, Any], root: Path) -> tuple[Path, Path, list[str]]:
    directory = Path(entry.get("directory") or root)
    arguments = entry.get("arguments") or shlex.split(entry["command"])
    return (directory / entry["file"]).resolve(), directory, [str(a) for a in arguments]


def _shared_depth(a: Path, b: Path) -> int:
    return len(os.path.commonpath([a, b]).split(os.sep))
