"""The names of the function around a hole, as the candidate sources and the show filter need them: its
parameters and the locals declared above the hole, whether each is a pointer (or array), and how often the rest
of the function uses it, the hole's line left out.

A kernel uses every parameter it takes: a parameter that no line of the function uses yet is what the hole most
likely uses (`c` in `c[i] = a[i] + b[i];` when the hole is that line), and a local declared above and never read
is what it most likely reads. The idiom bank's values with a name their key does not bind (`if ($0 < $1) {`) are
completed with such names (`bind`), and the filter reads how many of them a candidate uses.

Read from the text alone, line by line, so that it costs microseconds on each request and holds on half-written
code: the function starts at the nearest line above the hole that begins in column 0 with code (its signature;
a `template <...>` line above it is not needed), its parameters are the top-level comma-separated pieces between
the first `(` of the signature and its `)`, and it ends at the first line below the hole that begins with `}`.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from functools import cached_property

from dice_lsp.completion.lexing import declared_name

_WORD = re.compile(r"[A-Za-z_]\w*")
_COMMENT = re.compile(r"//[^\n]*|/\*.*?(?:\*/|$)", re.DOTALL)
_STRING = re.compile(r'"(?:\\.|[^"\\\n])*"')
_NOT_SIGNATURE = frozenset({"if", "for", "while", "return", "else", "do", "switch", "case", "public", "private",
                            "protected", "default", "goto"})
MAX_FUNCTION_LINES = 400  # a function further than this above the hole is not looked for


@dataclass(frozen=True)
class Name:
    """A name of the function around the hole."""

    name: str
    pointer: bool  # declared with `*` or `[...]`: it is subscripted or dereferenced, not compared with a count
    constant: bool  # a pointer to const (or a const array): read, never written through
    parameter: bool
    uses: int  # its occurrences in the function outside the hole's line (a local's declaration not counted)


def _code(text: str) -> str:
    """`text` without comments and string literals (their words are not uses)."""
    return _STRING.sub('""', _COMMENT.sub(" ", text))


def _split_top(text: str) -> Iterator[str]:
    """The pieces of a parameter list between top-level commas (commas inside `<>`, `()` and `[]` kept)."""
    depth = 0
    start = 0
    for i, char in enumerate(text):
        if char in "<([{":
            depth += 1
        elif char in ">)]}":
            depth -= 1
        elif char == "," and depth == 0:
            yield text[start:i]
            start = i + 1
    yield text[start:]


def _points_to_const(head: str) -> bool:
    """Whether a declaration's type (what precedes its name) is const where it matters: before the first `*`."""
    return "const" in _WORD.findall(head.split("*", 1)[0]) if "*" in head else "const" in _WORD.findall(head)


def _parameter(piece: str) -> tuple[str, bool, bool] | None:
    """(name, pointer, constant) of one parameter declaration (`const float* __restrict__ x`, `int n = 4`,
    `float a[]`)."""
    piece = piece.split("=", 1)[0].strip()
    array = "[" in piece
    head = piece.split("[", 1)[0]
    words = _WORD.findall(head)
    if len(words) < 2:  # `void`, `...`, or a type without a name
        return None
    return words[-1], array or "*" in head, _points_to_const(head)


def _parameter_list(signature: str) -> str | None:
    """What stands between the first `(` of a signature and its matching `)`."""
    open_ = signature.find("(")
    if open_ < 0:
        return None
    depth = 0
    for i in range(open_, len(signature)):
        if signature[i] == "(":
            depth += 1
        elif signature[i] == ")":
            depth -= 1
            if depth == 0:
                return signature[open_ + 1:i]
    return None


def _declared(line: str) -> list[tuple[str, bool, bool]]:
    """(name, pointer, constant) of each variable a one-line declaration declares (`float *d_a, *d_b;`,
    `cudaEvent_t start, stop;`, `int i = ...;`); none for another line."""
    name = declared_name(line)
    first = re.search(rf"\b{re.escape(name)}\b", line) if name is not None else None
    if first is None:
        return []
    head = line[:first.start()]  # the type, with the first declarator's `*` (and any `__restrict__` after it)
    constant = "const" in _WORD.findall(head.split("*", 1)[0])
    found = []
    for i, piece in enumerate(_split_top(line[first.start():].rstrip().rstrip(";"))):
        declarator = piece.split("=", 1)[0].strip()
        stars = (head if i == 0 else "") + declarator[:len(declarator) - len(declarator.lstrip("*& "))]
        word = _WORD.search(declarator)
        if word is not None:
            pointer = "*" in stars or "[" in declarator
            found.append((word.group(), pointer, pointer and constant))
    return found


@dataclass(frozen=True)
class FunctionScope:
    """The function around a hole (`before` ends at the cursor, `after` starts there)."""

    before: str
    after: str

    @cached_property
    def _above(self) -> tuple[str, list[str]]:
        """(the signature through the `{`, the body's lines above the hole's line)."""
        lines = self.before.split("\n")[:-1]
        start = None
        for i in range(len(lines) - 1, max(-1, len(lines) - 1 - MAX_FUNCTION_LINES), -1):
            word = _WORD.match(lines[i])
            if word is not None and word.group() not in _NOT_SIGNATURE:
                start = i
                break
        if start is None:
            return "", []
        text = "\n".join(lines[start:])
        brace = _code(text).find("{")
        if brace < 0:
            return "", []
        signature = text[:brace]
        body_start = signature.count("\n") + 1
        return signature, lines[start + body_start:]

    @cached_property
    def _below(self) -> list[str]:
        """The function's lines after the hole's line, up to its closing `}` (excluded)."""
        rest = self.after.split("\n")[1:]
        end = next((i for i, line in enumerate(rest) if line.startswith("}")), len(rest))
        return rest[:end]

    @cached_property
    def signature(self) -> str:
        return self._above[0]

    @cached_property
    def is_kernel(self) -> bool:
        """The function is a `__global__` kernel."""
        return "__global__" in self.signature

    @cached_property
    def names(self) -> Mapping[str, Name]:
        """The parameters, then the locals declared above the hole (one-line declarations), by name."""
        signature, body = self._above
        declared: dict[str, tuple[bool, bool, bool, int]] = {}  # name -> (pointer, constant, parameter, line)
        parameters = _parameter_list(_code(signature)) if signature else None
        for piece in _split_top(parameters or ""):
            found = _parameter(piece)
            if found is not None:
                declared[found[0]] = (found[1], found[2], True, -1)
        for index, line in enumerate(body):
            for name, pointer, constant in _declared(_code(line).strip()):
                declared.setdefault(name, (pointer, constant, False, index))
        text = [_code(line) for line in body]
        below = _code("\n".join(self._below))
        out = {}
        for name, (pointer, constant, parameter, at) in declared.items():
            pattern = re.compile(rf"\b{re.escape(name)}\b")
            uses = sum(len(pattern.findall(line)) for line in text) - (1 if at >= 0 else 0)
            out[name] = Name(name, pointer, constant, parameter, max(0, uses + len(pattern.findall(below))))
        return out

    @cached_property
    def unused(self) -> frozenset[str]:
        """The names no line of the function but the hole's uses."""
        return frozenset(name for name, found in self.names.items() if found.uses == 0)

    def unused_in(self, text: str) -> int:
        """How many of the unused names `text` uses."""
        return len(self.unused & set(_WORD.findall(_code(text))))


_PLACEHOLDER = re.compile(r"\$(\d+)")
_ASSIGNED = re.compile(r"\s*\[[^=;]*\]\s*[-+*/%&|^]?=(?!=)")  # `[...] =` / `[...] +=` after a name: it is written
MAX_FREE = 3  # free placeholders a value may have to be completed from the scope


def _dereferenced(before: str) -> bool:
    """Whether a name after `before` is dereferenced (`*p`, `&a`), not multiplied or and-ed (`x * p`, `a && p`)."""
    if not before.endswith(("*", "&")) or before.endswith(("&&", "**")):
        return False
    operand = before[:-1].rstrip()
    return not operand or not (operand[-1].isalnum() or operand[-1] in "_)]")


def _role(value: str, start: int, end: int) -> str | None:
    """What a placeholder at value[start:end] must name: "written" (a pointer or array the value stores into),
    "pointer" (subscripted or dereferenced), "scalar", or None where no local variable fits (a member after
    `.`/`->`, a function called, a type)."""
    after = value[end:].lstrip()
    before = value[:start].rstrip()
    if before.endswith((".", "->", "::")) or after.startswith(("(", "::", "<")):
        return None
    if after.startswith("["):
        return "written" if not before and _ASSIGNED.match(value, end) else "pointer"
    if _dereferenced(before):
        return "pointer"
    if after[:1].isalpha() or after[:1] == "_":  # `$1 x`: a type
        return None
    return "scalar"


def _fits(name: Name, role: str) -> bool:
    if role == "scalar":
        return not name.pointer
    return name.pointer and not (role == "written" and name.constant)


@dataclass(frozen=True)
class Binding:
    """A value's placeholders completed from the scope: the names (`$i` -> names[i]), how many placeholders the
    scope named, and how many other ways it had (0: the only names that fit)."""

    names: list[str]
    bound: int
    alternatives: int


def bind(value: str, bound: list[str | None], scope: FunctionScope) -> Binding | None:
    """`bound` (the value's placeholders bound so far, None where free) completed with names of the function
    around the hole: each free placeholder takes a name of its role (`_role`) that the value does not use yet,
    from the unused names (`FunctionScope.unused`) where one fits, in the order the function declares them
    (`c[i] = a[i] + b[i]` writes the one pointer that is not const and reads the others in parameter order).
    None when a free placeholder has no name that fits, or the value has more than `MAX_FREE`."""
    free: dict[int, str] = {}
    declares = declared_name(_PLACEHOLDER.sub(lambda m: f"v{m.group(1)}", value))
    for match in _PLACEHOLDER.finditer(value):
        i = int(match.group(1))
        if (i < len(bound) and bound[i] is not None) or i in free:
            continue
        if declares == f"v{i}":  # the name the value declares is a new one, not one of the scope's
            return None
        role = _role(value, match.start(), match.end())
        if role is None:
            return None
        free[i] = role
    if not free or len(free) > MAX_FREE:
        return None
    taken = {name for name in bound if name is not None}
    full = [*bound, *([None] * (max(free) + 1 - len(bound)))]
    alternatives = 0
    for i, role in sorted(free.items(), key=lambda item: item[1] != "written"):
        fitting = [n for n in scope.names.values() if _fits(n, role) and n.name not in taken]
        options = [n.name for n in fitting if n.uses == 0] or [n.name for n in fitting]
        if not options:
            return None
        full[i] = options[0]
        taken.add(options[0])
        alternatives += len(options) - 1
    return Binding([name or "" for name in full], len(free), alternatives)
