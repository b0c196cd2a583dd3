"""The nvcc flags a file is checked with: its build's, from `compile_commands.json`, else the settings.

clangd's convention: the database sits in the file's folder or one above it, or in a `build/` folder
there. From a build's command only what changes what the compiler says about the code is kept: include
paths, defines, the C++ standard, the target architecture and the options that change device code
(`--maxrregcount`, `--use_fast_math`, `-G`, ...). Outputs, host-compiler options and the like are
dropped, because the check compiles into a temporary directory of its own.

nvcc runs its sub-steps through a shell, so every flag is shell text there. Flags from any source (settings,
a database, the CLI, a team-server request) are therefore checked when `CompileFlags` is built: a define is
`NAME` or `NAME=VALUE` with NAME an identifier and VALUE made of characters no shell treats specially; the
architecture, the standard and the kept device-code options match exact patterns. Anything else is refused
with a `FlagError` naming the flag. Paths (include folders) are not checked here: they never reach nvcc's
command line as written (`toolchain.nvcc` maps them to generated names).
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

from dice_lsp.errors import DiceError

LOG = logging.getLogger("dice_lsp.flags")
DATABASE = "compile_commands.json"
_BOOLEAN = r"=(true|false)"
_KEPT = re.compile(r"^(--?(expt-relaxed-constexpr|extended-lambda|expt-extended-lambda|use_fast_math|G|lineinfo|"
                   rf"rdc{_BOOLEAN}|relocatable-device-code{_BOOLEAN}|ftz{_BOOLEAN}|prec-div{_BOOLEAN}|"
                   rf"prec-sqrt{_BOOLEAN}|fmad{_BOOLEAN}|maxrregcount=\d{{1,4}})|-U[A-Za-z_]\w*)$")
_KEPT_NAME = re.compile(r"^(--?(rdc|relocatable-device-code|ftz|prec-div|prec-sqrt|fmad)=|-U)")  # kept when valid
_IDENTIFIER = re.compile(r"[A-Za-z_]\w*")
_VALUE = re.compile(r"[\w.+\-/:,=@%^~]*")  # nothing a shell expands, quotes, splits or redirects
_ARCH = re.compile(r"(sm|compute)_\d+[a-z]?|native|all|all-major")
_STD = re.compile(r"c\+\+\d\d")


class FlagError(DiceError):
    """A compile flag that may not reach nvcc: the message names the flag and what it may be."""


def check_define(define: str) -> str:
    """`define` if it is `NAME` or `NAME=VALUE` safe for nvcc's shell, else a FlagError naming it."""
    name, _, value = define.partition("=")
    if not _IDENTIFIER.fullmatch(name):
        raise FlagError(f"-D{define!r} refused: a define is NAME or NAME=VALUE with NAME an identifier")
    if not _VALUE.fullmatch(value):
        raise FlagError(f"-D{define!r} refused: its value may hold only letters, digits and _ . + - / : , = @ % ^ ~ "
                        "(no spaces, quotes, $, `, ;, |, &, <, >, parentheses or backslashes)")
    return define


def check_flags(flags: CompileFlags) -> None:
    """Refuse, naming the flag, anything in `flags` that is not safe on nvcc's command line."""
    if not _ARCH.fullmatch(flags.arch):
        raise FlagError(f"-arch={flags.arch!r} refused: an architecture is sm_NN or compute_NN (e.g. sm_90)")
    if not _STD.fullmatch(flags.std):
        raise FlagError(f"-std={flags.std!r} refused: a C++ standard is c++NN (e.g. c++17)")
    for define in flags.defines:
        check_define(define)
    for option in flags.extra:
        if not _KEPT.match(option):
            raise FlagError(f"{option!r} refused: not a device-code option dice-lsp passes to nvcc")
_VALUED = {"-I": "include", "-isystem": "include", "--include-path": "include", "-D": "define",
           "--define-macro": "define", "-std": "std", "--std": "std", "-arch": "arch",
           "--gpu-architecture": "arch", "-gencode": "gencode", "--generate-code": "gencode",
           "-maxrregcount": "maxrregcount", "--maxrregcount": "maxrregcount"}
_CODE = re.compile(r"code=\[?(sm_\d+[a-z]?)")


@dataclass(frozen=True)
class CompileFlags:
    arch: str = "sm_90"  # the one home of the default architecture and standard (Settings.arch/std read them)
    std: str = "c++17"
    include_dirs: tuple[Path, ...] = ()
    defines: tuple[str, ...] = ()  # NAME or NAME=VALUE
    extra: tuple[str, ...] = ()  # device-code options kept from a build command
    origin: str = "settings"  # or the compile_commands.json they came from

    def __post_init__(self) -> None:
        check_flags(self)

    def arguments(self) -> list[str]:
        """The flags as nvcc would read them, include folders as written (what a cache key is made of)."""
        return [*self.options()[:2], *(f"-I{d}" for d in self.include_dirs), *self.options()[2:]]

    def options(self) -> list[str]:
        """nvcc arguments without the include folders (`toolchain.nvcc` adds those under safe names)."""
        return [f"-std={self.std}", f"-arch={self.arch}", *(f"-D{d}" for d in self.defines), *self.extra]


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
            elif _KEPT_NAME.match(argument):
                raise FlagError(f"{argument!r} refused: not a valid value for a device-code option")
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
    try:
        flags = from_command(arguments, directory, fallback)
    except FlagError as exc:
        raise FlagError(f"{database}: {exc}") from exc
    return CompileFlags(flags.arch, flags.std, flags.include_dirs, flags.defines, flags.extra, str(database))


def _entry(entry: dict[str, Any], root: Path) -> tuple[Path, Path, list[str]]:
    directory = Path(entry.get("directory") or root)
    arguments = entry.get("arguments") or shlex.split(entry["command"])
    return (directory / entry["file"]).resolve(), directory, [str(a) for a in arguments]


def _shared_depth(a: Path, b: Path) -> int:
    return len(os.path.commonpath([a, b]).split(os.sep))
