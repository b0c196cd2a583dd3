"""LSP positions over plain text: lines split at \\n, \\r\\n or \\r; characters counted in UTF-16 units."""

from __future__ import annotations

import os
import re
import stat
from dataclasses import dataclass

from dice_lsp.errors import InputError

_LINE_BREAK = re.compile(r"\r\n|\r|\n")
MAX_SOURCE_BYTES = 16 << 20  # a source file the CLI reads (the LSP's own bound on a message is 64 MiB)


@dataclass(frozen=True)
class Position:
    line: int
    character: int

    def to_json(self) -> dict[str, int]:
        return {"line": self.line, "character": self.character}


def line_starts(text: str) -> list[int]:
    return [0, *(m.end() for m in _LINE_BREAK.finditer(text))]


def offset_at(text: str, position: Position) -> int:
    """String index of an LSP position; a position outside the text is an InputError."""
    starts = line_starts(text)
    if not 0 <= position.line < len(starts):
        raise InputError(f"line {position.line} is outside the file (it has {len(starts)} lines)")
    start = starts[position.line]
    end = starts[position.line + 1] if position.line + 1 < len(starts) else len(text)
    line = _LINE_BREAK.sub("", text[start:end])
    units = index = 0
    while index < len(line) and units < position.character:
        units += 2 if ord(line[index]) > 0xFFFF else 1
        index += 1
    if units == position.character:
        return start + index
    raise InputError(
        f"character {position.character} is outside line {position.line} (it has {units} UTF-16 units)"
    )


def clamped(text: str, position: Position) -> Position:
    """`position` as LSP reads a client's: a character past its line's end means the line's end (the
    specification lets clients send that). A line outside the text stays as it is (`offset_at` refuses it)."""
    starts = line_starts(text)
    if not 0 <= position.line < len(starts):
        return position
    end = starts[position.line + 1] if position.line + 1 < len(starts) else len(text)
    line = _LINE_BREAK.sub("", text[starts[position.line]:end])
    units = sum(2 if ord(c) > 0xFFFF else 1 for c in line)
    return Position(position.line, min(position.character, units))


def position_at(text: str, offset: int) -> Position:
    """The LSP position of a string index (the inverse of `offset_at`)."""
    starts = line_starts(text)
    line = max(i for i, start in enumerate(starts) if start <= offset)
    column = text[starts[line]:offset]
    return Position(line, sum(2 if ord(c) > 0xFFFF else 1 for c in column))


def read_source(path: str) -> str:
    """A source file as text, with one-line errors for what a user can fix.

    Only a regular file of at most `MAX_SOURCE_BYTES` is read: a FIFO would block (its open waits for a
    writer, so it is opened non-blocking and refused), and a device such as /dev/zero never ends.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except FileNotFoundError:
        raise InputError(f"{path}: no such file") from None
    except OSError as exc:
        raise InputError(f"{path}: {exc.strerror}") from None
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode) or info.st_size > MAX_SOURCE_BYTES:
        os.close(fd)
        if stat.S_ISDIR(info.st_mode):
            raise InputError(f"{path}: is a directory")
        if not stat.S_ISREG(info.st_mode):
            raise InputError(f"{path}: not a regular file ({_kind(info.st_mode)})")
        raise InputError(f"{path}: {info.st_size} bytes, over the limit of {MAX_SOURCE_BYTES} for a source file")
    with os.fdopen(fd, "rb") as handle:
        try:
            data = handle.read(MAX_SOURCE_BYTES + 1)
        except OSError as exc:
            raise InputError(f"{path}: {exc.strerror}") from None
    if len(data) > MAX_SOURCE_BYTES:  # it grew while being read
        raise InputError(f"{path}: over the limit of {MAX_SOURCE_BYTES} bytes for a source file")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"{path}: not UTF-8 text (byte {exc.start})") from None


def _kind(mode: int) -> str:
    kinds = {stat.S_ISFIFO: "a FIFO", stat.S_ISCHR: "a character device", stat.S_ISBLK: "a block device",
             stat.S_ISSOCK: "a socket"}
    return next((name for test, name in kinds.items() if test(mode)), "not a file")
