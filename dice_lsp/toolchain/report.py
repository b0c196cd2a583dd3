"""What nvcc says about a file, as an editor shows it: diagnostics with ranges, and resources per kernel.

nvcc reports front-end problems as `file(line): error|warning #code-D: message`, followed by the source
line as it saw it (after macro expansion, so `__global__` reads `__attribute__((global))`) and a caret
under the column. ptxas (`-Xptxas -v`) reports registers, barriers, shared/constant memory, stack and
spills per mangled entry function; its errors name the mangled function. Everything here maps those
back onto the user's text: 0-based lines and characters, a problem in an included header reported on
the `#include` line that pulls it in (with the header's own message as related information), ptxas
lines on the kernel's definition.
"""

from __future__ import annotations

import logging
import re
import subprocess
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

from dice_lsp.cuda.functions import parse_functions
from dice_lsp.sandbox import run_host_tool
from dice_lsp.toolchain.cache import CompileCache, cache_key
from dice_lsp.toolchain.flags import DEFAULT_FLAGS, CompileFlags
from dice_lsp.toolchain.nvcc import SOURCE_NAME, compile_source, find_nvcc

LOG = logging.getLogger("dice_lsp.report")

Severity = Literal["error", "warning"]

_FRONT_END = re.compile(r"^(?P<file>.+?)\((?P<line>\d+)\): (?P<severity>error|warning)(?: #(?P<code>\S+?))?: "
                        r"(?P<message>.*)$")
_HOST = re.compile(r"^(?P<file>.+?):(?P<line>\d+):(?P<column>\d+): (?:fatal )?(?P<severity>error|warning): "
                   r"(?P<message>.*)$")  # the host compiler's preprocessor: a missing header, a bad #if
_PTXAS_ERROR = re.compile(r"^ptxas (?P<severity>error|warning)\s*: (?P<message>.*)$")
_ENTRY = re.compile(r"Compiling entry function '(?P<name>[^']+)'")
_PROPERTIES = re.compile(r"Function properties for (?P<name>\S+)")
_STACK = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_USED = re.compile(r"Used (\d+) registers")
_AMOUNTS = {"barriers": re.compile(r"used (\d+) barriers"), "shared_bytes": re.compile(r"(\d+) bytes smem"),
            "constant_bytes": re.compile(r"(\d+) bytes cmem\[0\]")}
_MANGLED = re.compile(r"'(_Z\w+)'")
_WORD = re.compile(r"\w+|\S")


@dataclass(frozen=True)
class Related:
    file: str
    line: int
    message: str

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Related:
        return cls(data["file"], data["line"], data["message"])


def severity_of(value: object) -> Severity:
    """`value` as a severity; ValueError when it is neither `error` nor `warning`."""
    if value == "error":
        return "error"
    if value == "warning":
        return "warning"
    raise ValueError(f"unknown severity {value!r}")


@dataclass(frozen=True)
class Diagnostic:
    line: int  # 0-based, in the checked file
    character: int
    end_line: int
    end_character: int
    severity: Severity
    message: str
    code: str | None = None
    related: tuple[Related, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {"range": {"start": {"line": self.line, "character": self.character},
                          "end": {"line": self.end_line, "character": self.end_character}},
                "severity": self.severity, "message": self.message, "code": self.code,
                "related": [asdict(r) for r in self.related]}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Diagnostic:
        """The diagnostic `to_json` wrote (a cache entry, a team server's answer)."""
        start, end = data["range"]["start"], data["range"]["end"]
        return cls(start["line"], start["character"], end["line"], end["character"], severity_of(data["severity"]),
                   data["message"], data["code"], tuple(Related.from_json(r) for r in data["related"]))


@dataclass
class KernelResources:
    name: str  # demangled, e.g. `scale<float>(float*, float)`
    mangled: str
    line: int | None = None  # 0-based line of the definition in the checked file, when found
    registers: int = 0
    barriers: int = 0
    shared_bytes: int = 0
    constant_bytes: int = 0
    stack_bytes: int = 0
    spill_stores: int = 0
    spill_loads: int = 0


def parse_diagnostics(output: str, text: str, source: Path) -> list[Diagnostic]:
    """Front-end diagnostics of the file nvcc compiled as `source` (content `text`); problems in other
    files are mapped to the `#include` that pulls them in."""
    lines = text.split("\n")
    found: list[Diagnostic] = []
    output_lines = output.splitlines()
    for index, raw in enumerate(output_lines):
        match = _FRONT_END.match(raw) or _HOST.match(raw)
        if match is None:
            continue
        number = int(match["line"]) - 1
        severity: Severity = match["severity"]  # type: ignore[assignment]
        message, code = match["message"].strip(), match.groupdict().get("code")
        echoed = output_lines[index + 1] if index + 1 < len(output_lines) else ""
        caret = output_lines[index + 2] if index + 2 < len(output_lines) else ""
        if Path(match["file"]).name == source.name and match.groupdict().get("column"):
            column = int(match["column"]) - 1
            end = len(lines[number]) if number < len(lines) else column
            found.append(Diagnostic(number, column, number, max(end, column), severity, message, code))
            continue
        if Path(match["file"]).name == source.name:
            found.append(_located(lines, number, echoed, caret, severity, message, code))
            continue
        include = _include_line(lines, match["file"])
        related = (Related(match["file"], number, message),)
        found.append(Diagnostic(include, 0, include, len(lines[include]) if include < len(lines) else 0,
                                severity, f"in {Path(match['file']).name}:{number + 1}: {message}", code, related))
    return found


def _located(lines: list[str], number: int, echoed: str, caret: str, severity: Severity, message: str,
             code: str | None) -> Diagnostic:
    """The caret's column mapped onto the original line (nvcc echoes it macro-expanded, indented by 2)."""
    original = lines[number] if 0 <= number < len(lines) else ""
    column = caret.find("^") - 2 if caret.strip() == "^" else -1
    shown = echoed[2:]
    if column >= 0 and shown != original:
        tail = shown[column:]
        column = len(original) - len(tail) if tail and original.endswith(tail) else -1
    if not 0 <= column <= len(original):
        return Diagnostic(number, 0, number, len(original), severity, message, code)
    token = _WORD.match(original, column)
    end = token.end() if token is not None else min(len(original), column + 1)
    return Diagnostic(number, column, number, max(end, column), severity, message, code)


def _include_line(lines: list[str], header: str) -> int:
    """The line of the `#include` naming `header` (by its file name), else the first local include."""
    name = Path(header).name
    local = None
    for number, line in enumerate(lines):
        stripped = line.strip()
        if stripped.startswith("#") and "include" in stripped:
            if re.search(rf"[\"</]{re.escape(name)}[\">]", stripped):
                return number
            if local is None and '"' in stripped:
                local = number
    return local if local is not None else 0


def parse_resources(output: str, text: str, nvcc: Path | None = None) -> list[KernelResources]:
    """Per-kernel resources from `-Xptxas -v` output, with demangled names and definition lines."""
    kernels: dict[str, KernelResources] = {}
    current: KernelResources | None = None
    for raw in output.splitlines():
        if (entry := _ENTRY.search(raw)) or (entry := _PROPERTIES.search(raw)):
            current = kernels.setdefault(entry["name"], KernelResources(entry["name"], entry["name"]))
        elif current is not None and (stack := _STACK.search(raw)):
            current.stack_bytes, current.spill_stores, current.spill_loads = (int(g) for g in stack.groups())
        elif current is not None and (used := _USED.search(raw)):
            current.registers = int(used[1])
            for name, pattern in _AMOUNTS.items():
                if amount := pattern.search(raw):
                    setattr(current, name, int(amount[1]))
    names = demangle(list(kernels), nvcc)
    definitions = {f.name: text.count("\n", 0, f.start) for f in parse_functions(text) if f.is_kernel}
    for kernel in kernels.values():
        kernel.name = names.get(kernel.mangled, kernel.mangled)
        kernel.line = definitions.get(base_name(kernel.name))
    return list(kernels.values())


def ptxas_diagnostics(output: str, kernels: list[KernelResources], text: str) -> list[Diagnostic]:
    """ptxas errors and warnings, on the definition of the kernel they name (else the first line)."""
    lines = text.split("\n")
    by_mangled = {k.mangled: k for k in kernels}
    found = []
    for raw in output.splitlines():
        match = _PTXAS_ERROR.match(raw)
        if match is None:
            continue
        mangled = _MANGLED.search(match["message"])
        kernel = by_mangled.get(mangled[1]) if mangled else None
        line = kernel.line if kernel is not None and kernel.line is not None else 0
        message = match["message"]
        if kernel is not None:
            message = message.replace(kernel.mangled, kernel.name)
        severity: Severity = match["severity"]  # type: ignore[assignment]
        found.append(Diagnostic(line, 0, line, len(lines[line]) if line < len(lines) else 0, severity,
                                message, "ptxas"))
    return found


def demangle(names: list[str], nvcc: Path | None = None) -> dict[str, str]:
    """Demangled C++ names via cu++filt next to nvcc (or c++filt); names stay mangled if neither runs."""
    if not names:
        return {}
    tools = [str(nvcc.parent / "cu++filt")] if nvcc is not None else []
    for tool in (*tools, "cu++filt", "c++filt"):
        try:
            proc = run_host_tool([tool], 10, "\n".join(names) + "\n")
        except (OSError, subprocess.SubprocessError):
            continue
        if proc.returncode != 0:
            continue
        out = proc.stdout.splitlines()
        if len(out) == len(names):
            return dict(zip(names, out, strict=True))
    return {}


def instance_name(demangled: str) -> str:
    """`void ns::scale<float, 256>(float*, float)` -> `ns::scale<float, 256>`: the name with its template
    arguments, without the return type and the parameters."""
    depth, head = 0, demangled
    for i, ch in enumerate(demangled):
        depth += (ch == "<") - (ch == ">")
        if ch == "(" and depth == 0 and i > 0:
            head = demangled[:i]
            break
    depth = 0
    for i in range(len(head) - 1, -1, -1):
        depth += (head[i] == ">") - (head[i] == "<")
        if head[i] == " " and depth == 0:
            return head[i + 1:]
    return head


def base_name(demangled: str) -> str:
    """`void ns::scale<float>(float*, float)` -> `scale`."""
    head = demangled.split("(", 1)[0]
    depth, cut = 0, len(head)
    for i, ch in enumerate(head):
        if ch == "<":
            if depth == 0:
                cut = min(cut, i)
            depth += 1
        elif ch == ">":
            depth -= 1
    words = head[:cut].split()
    return words[-1].rsplit("::", 1)[-1] if words else ""


@dataclass(frozen=True)
class CheckReport:
    diagnostics: list[Diagnostic]
    kernels: list[KernelResources]
    elapsed_ms: float

    @property
    def errors(self) -> int:
        return sum(d.severity == "error" for d in self.diagnostics)

    cached: bool = False

    def to_json(self) -> dict[str, Any]:
        return {"diagnostics": [d.to_json() for d in self.diagnostics],
                "kernels": [asdict(kernel) for kernel in self.kernels],
                "cached": self.cached, "elapsed_ms": round(self.elapsed_ms, 1)}

    @classmethod
    def from_json(cls, data: dict[str, Any], elapsed_ms: float) -> CheckReport:
        diagnostics = [Diagnostic.from_json(d) for d in data["diagnostics"]]
        return cls(diagnostics, [KernelResources(**k) for k in data["kernels"]], elapsed_ms, cached=True)


def check_source(text: str, folder: Path, flags: CompileFlags = DEFAULT_FLAGS, cache: CompileCache | None = None,
                 nvcc: Path | None = None, cancel: threading.Event | None = None) -> CheckReport:
    """Compile `text` (a file living in `folder`, whose local includes must resolve) and report on it;
    with a cache, an unchanged file (includes, flags and nvcc too) is answered without compiling, and a
    compile that failed for a reason of the machine (`CompileResult.transient`) is reported, never kept.
    Raises `lifetime.Stopped` when `cancel` is set (nvcc killed)."""
    started = time.perf_counter()
    nvcc = nvcc or find_nvcc()
    key = ""
    if cache is not None:
        key = cache_key(text, (folder, *flags.include_dirs), (*flags.arguments(), "-Xptxas -v"), nvcc)
        if (hit := _cached(cache, key, started)) is not None:
            return hit
    result = compile_source(text, flags, folder, ptxas_verbose=True, nvcc=nvcc, cancel=cancel)
    kernels = parse_resources(result.output, text, nvcc)
    diagnostics = [*parse_diagnostics(result.output, text, Path(SOURCE_NAME)),
                   *ptxas_diagnostics(result.output, kernels, text)]
    if not result.ok and not any(d.severity == "error" for d in diagnostics):
        last = result.output.strip().splitlines()[-1:] or ["nvcc failed"]
        diagnostics.append(Diagnostic(0, 0, 0, 0, "error", last[0], "nvcc"))
    report = CheckReport(diagnostics, kernels, (time.perf_counter() - started) * 1000)
    if cache is not None and not result.transient:
        cache.put(key, report.to_json())
    return report


def _cached(cache: CompileCache, key: str, started: float) -> CheckReport | None:
    """The cached report for `key`; None for none, or for an entry of another shape (another version of
    dice-lsp wrote it, or it is damaged): that is compiled again and replaced."""
    hit = cache.get(key)
    if hit is None:
        return None
    try:
        return CheckReport.from_json(hit, (time.perf_counter() - started) * 1000)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        LOG.info("compile cache: an entry of another shape (%s: %s), compiling again", type(exc).__name__, exc)
        return None
