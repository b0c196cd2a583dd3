"""What a team-server request's sources may name on the server: their own files and the CUDA toolkit, nothing
else.

A compile reads whatever its `#include` lines name, and its diagnostics quote what it read: an
`#include "/srv/app/.env"` once came back as "identifier … is undefined" with the secret in it, and
`#include "/dev/zero"` grew the compiler until the memory ran out. The sandbox (`dice_lsp.sandbox`) is the
guarantee: it shows a compile nothing of the host, whatever path a macro builds. This check comes first
and gives the plain cases a clear one-line `bad_params` before anything runs: an absolute path outside the
toolkit (`/dev/...` included), or a `..` that leaves the request's files. Its answer is the same whether
the path exists on the server or not, so it discloses nothing either. The same holds for the
`// dice:reference PATH` comment of a benchmark: the reference must be one of the request's `files`.
"""

from __future__ import annotations

import os
import re
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path, PurePosixPath

from dice_lsp.remote.protocol import RemoteError
from dice_lsp.toolchain.flags import CompileFlags

_INCLUDE = re.compile(r'^[ \t]*#[ \t]*(?:include|include_next|import|embed)[ \t]*([<"])([^>"\n]*)[>"]', re.MULTILINE)
_HAS_INCLUDE = re.compile(r'__has_(?:include|include_next|embed)[ \t]*\([ \t]*([<"])([^>"\n]*)[>"]')
_REFERENCE = re.compile(r"//\s*dice:reference\s+(\S+)")  # as harness.bench reads it
_ADVICE = ("a team server compiles only the request's files and the CUDA toolkit (send the header in `files` and "
           "include it by a path relative to the file)")


def check_sources(files: Mapping[str, str], toolkit: Sequence[Path]) -> None:
    """Raise `bad_params` for the first `#include` (or `__has_include`) in `files` (relative name -> text) that
    names an absolute path outside `toolkit` or leaves the request's files through `..`."""
    names = {str(PurePosixPath(os.path.normpath(name))) for name in files}
    for name, raw in files.items():
        if name.endswith(".py"):
            continue
        text, lines = _as_preprocessed(raw)
        for pattern in (_INCLUDE, _HAS_INCLUDE):
            for match in pattern.finditer(text):
                bracket, included = match.group(1), match.group(2)
                if not _allowed(included, bracket, PurePosixPath(name).parent, names, toolkit):
                    line = lines[match.start()]
                    shown = f'"{included}"' if bracket == '"' else f"<{included}>"
                    raise RemoteError("bad_params", f"{name}:{line}: #include {shown} names a file outside the "
                                                    f"request; {_ADVICE}")


def _as_preprocessed(text: str) -> tuple[str, list[int]]:
    """`text` as the preprocessor reads its directives: backslash-newlines spliced (`#inc\\<newline>lude`) and
    each comment a space (`#/**/include`); with the 1-based line of the original text at each character. String
    and character literals are kept as they are (a `"/*"` in one starts no comment)."""
    out: list[str] = []
    lines: list[int] = []
    line, i, n = 1, 0, len(text)
    quote: str | None = None

    def put(char: str) -> None:
        out.append(char)
        lines.append(line)

    while i < n:
        char = text[i]
        if (char == "\\" and text.startswith("\n", i + 1)) or text.startswith("\\\r\n", i):
            i += 2 if text[i + 1] == "\n" else 3
            line += 1
            continue
        if quote is not None:
            put(char)
            if char == "\\" and i + 1 < n and text[i + 1] != "\n":
                put(text[i + 1])
                i += 1
            elif char == quote or char == "\n":
                quote = None
        elif char in "\"'":
            quote = char
            put(char)
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            end = n if end < 0 else end + 2
            put(" ")
            for skipped in text[i:end]:
                if skipped == "\n":
                    line += 1
                    put("\n")
            i = end
            continue
        elif text.startswith("//", i):
            while i < n and text[i] != "\n":
                i += 2 if text.startswith("\\\n", i) else 1
            continue
        else:
            put(char)
        if char == "\n":
            line += 1
        i += 1
    return "".join(out), lines


def _allowed(included: str, bracket: str, folder: PurePosixPath, names: Collection[str],
             toolkit: Sequence[Path]) -> bool:
    if included.startswith("/"):
        return _in_toolkit(included, toolkit)
    if ".." not in PurePosixPath(included).parts:
        return True
    base = folder if bracket == '"' else PurePosixPath()
    target = os.path.normpath(str(base / included))
    return target in names


def _in_toolkit(path: str, toolkit: Sequence[Path]) -> bool:
    """Whether `path`, its links followed (`/usr/local/cuda/include/...`), lies in a toolkit folder."""
    real = Path(os.path.realpath(path))
    return any(real == root or root in real.parents for root in toolkit)


def check_reference(path: str, text: str, ref: str | None, files: Collection[str]) -> None:
    """The benchmark's reference (`ref`, or the file's `// dice:reference` comment) must be one of `files`."""
    names = {os.path.normpath(name) for name in files}
    if ref:
        if os.path.normpath(ref) not in names:
            raise RemoteError("bad_params", f"ref {ref!r} is not one of the request's files")
    elif match := _REFERENCE.search(text):
        named = match.group(1)
        target = os.path.normpath(str(PurePosixPath(path).parent / named))
        if named.startswith("/") or target not in names:
            raise RemoteError("bad_params", f"// dice:reference {named}: a team server takes the reference from "
                                            "the request's files, and this is not one of them")


def check_folders(flags: CompileFlags, root: Path) -> None:
    """Raise `bad_params` unless every include folder of `flags` (from `dice.includeDirs` or the request's
    compile_commands.json, links followed) lies inside the request's folder `root`: a folder named there is
    shown to the compile, and a team server shows a compile nothing of its host. The answer names no path of
    the server, whether the folder exists or not."""
    inside = Path(os.path.realpath(root))
    for folder in flags.include_dirs:
        real = Path(os.path.realpath(folder))
        if real != inside and inside not in real.parents:
            origin = "dice.includeDirs" if flags.origin == "settings" else Path(flags.origin).name
            raise RemoteError("bad_params", f"{origin} names an include folder outside the request; a team server "
                                            "compiles only the request's files (name a folder the request sent, "
                                            "relative to its file)")
