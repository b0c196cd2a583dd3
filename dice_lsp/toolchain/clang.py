"""A fast front-end check for completions: clang reads the document with a fill as CUDA and says whether the fill
adds an error (types, overloads, members, declarations: what tree-sitter and the name index cannot see).

nvcc takes 0.3-3 s to judge a file, too slow for a completion the editor is waiting for. clang parses and
type-checks CUDA itself (`-x cuda -fsyntax-only --cuda-host-only`: no code is generated, nothing is run), and
with the document's preamble (its leading `#include`s and macros) precompiled once per file (in the
background, on the file's first check) it judges a fill in ~50 ms. On the dev split's shown one-line and
half-line fills, clang finds an error in every fill nvcc rejects and in 1 of 207 that nvcc accepts
(docs/bench-logs/performance-history.md, "Round 4").

- Which clang: `dice.clang`, else the newest `clang++-N` on PATH with N >= 15 (what CUDA 13's CUB, Thrust and
  cooperative-groups headers need), else `clang++`, else an older `clang++-N` (none: the check is off, `types`
  is None).
- Which CUDA: the toolkit of the nvcc in use. A clang older than the toolkit may not read its headers as they
  are; `front_end` tries the plain configuration first, then one that stubs what the toolkit no longer ships
  (texture references, removed in CUDA 12), and keeps the first under which a small kernel that uses the
  common runtime and device API checks clean. If none does, the check is off (logged once). Which one a clang
  and toolkit needed is remembered in the user's cache folder, so later processes try it first.
- A verdict is relative to the document as the user has it: a fill passes when clang reports no error whose
  message the document without the fill lacks (the user's file may not compile yet).
- Headers that are not there (a real project's: torch's, OpenCV's, its own generated ones, a library the toolkit
  lacks) are fatal to clang. The preamble's build stands in for each with an empty file (`MAX_STUBS` at most,
  found one run at a time in the background; those past the preamble, under an `#if` around the whole file or in
  a file read whole, by reading the file through when it opens, `ClangJudge.discover`, or else by a check, which
  then has no verdict) and keeps the precompiled preamble despite the errors that makes:
  what the missing headers declared is then undeclared in the document with and without the fill alike, so the
  verdict still says whether the fill adds an error (and a syntax error inside the fill's own text fails it
  even when the document has that message too: `syntax_in_fill`). A name clang does not know may then be one such
  a header declares: those errors are left to the names rules (`completion.checks`), which judge names by what the
  document and the headers that are here declare. Other fatal errors, or more missing headers, mean clang
  cannot tell: None.
- Like nvcc (`dice_lsp.sandbox`), clang runs without a shell, on a copy of the text under a generated name in a
  scratch folder, with the flags `CompileFlags` checked; on a team server inside the sandbox.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import re
import shutil
import subprocess
import threading
import time
from collections import OrderedDict
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, replace
from functools import cache
from pathlib import Path

from dice_lsp.errors import DiceError
from dice_lsp.lifetime import Stopped
from dice_lsp.sandbox import run_host_tool, run_tool
from dice_lsp.toolchain.cache import cache_root, replace_atomically
from dice_lsp.toolchain.flags import CompileFlags
from dice_lsp.toolchain.scratch import process_folder, run_folder

LOG = logging.getLogger("dice_lsp.clang")
RECOMMENDED_MAJOR = 15  # CUDA 13's CUB, Thrust and cooperative groups headers need clang >= 15
# the newest versioned clang that reads CUDA 13's headers first, then the unversioned one (often the distribution's
# oldest), then older versioned ones
NAMES = (*(f"clang++-{version}" for version in range(22, RECOMMENDED_MAJOR - 1, -1)), "clang++",
         *(f"clang++-{version}" for version in range(RECOMMENDED_MAJOR - 1, 13, -1)))
CHECK_TIMEOUT_S = 10.0  # one front-end run (a stuck one is killed; the check then cannot tell)
# A run before the file's preamble is precompiled reads every header it includes: ~0.2 s for a kernel file that
# includes the runtime, ~0.8 s to seconds for one that includes Thrust, CUB or ATen (2-core machine). A completion
# waits at most the larger of these for the preamble's build (and only during the build's first such seconds:
# `Preambles.get`), or for such a run where the file has no preamble
# (the factor scales with how fast this machine read the self-test kernel's headers; ~0.43 s on 2 cores): a
# completion must stay within ~0.8 s with its fill (~0.2-0.35 s) and its other checks. Past it clang has no
# verdict on this completion; the next one in the file uses the preamble, and a file without one gets no more
# clang runs after `SLOW_RUNS` such completions in a row.
COLD_CHECK_TIMEOUT_S = 0.4
COLD_CHECK_FACTOR = 2.5
# A run with the precompiled preamble reads only the file's own code: ~0.05 s for a kernel on the runtime, but
# ~0.45-0.9 s for one that instantiates CUB's templates (26 of the 32 held-out kernels include CUB). A completion
# waits at most the larger of these for it (scaled like the cold bound); past it in `SLOW_RUNS` completions in a
# row, the file is as unreadable as one whose preamble build timed out: its completions get the cheap checks.
WARM_CHECK_TIMEOUT_S = 0.3
WARM_CHECK_FACTOR = 2.0
AFTER_WAIT_S = 0.15  # a run after a wait for the preamble gets this long at least (a kernel on the runtime: ~0.05 s)
# A caller who waits for the answer (`dice-lsp complete`, not an editor) gives a check this long at least: the
# bounds above keep an editor's completion fast and may leave a one-shot command, or a loaded machine, with no
# verdict (its first check is always cold).
PATIENT_CHECK_TIMEOUT_S = 20.0
SLOW_RUNS = 2  # completions in a row whose check ran past its time, after which a file gets no more clang runs
PREAMBLES_KEPT = 32  # precompiled preambles kept (one per file and flags; least recently used dropped)
BUILD_NICENESS = 10  # preamble builds run in the background at this lower CPU priority (`Preambles`)
MAX_STUBS = 16  # headers not found that a preamble's build stands in for with empty files, at most
SOURCE = "source.cu"
_DIAGNOSTIC = re.compile(r"^(?P<file>[^:\n]+):(?P<line>\d+):(?P<column>\d+): (?P<severity>fatal error|error): "
                         r"(?P<message>.*)$", re.MULTILINE)
_INCLUDE_LINE = re.compile(r"^\s*#\s*include\b")
_NOT_FOUND = re.compile(r"^'(?P<name>[^']+)' file not found$")
_STUB_NAME = re.compile(r"[\w+-][\w.+-]*(/[\w+-][\w.+-]*)*")  # a relative header path with no `..` and no `.`
_WITH_ERRORS = ("-Xclang", "-fallow-pch-with-compiler-errors")  # a preamble that stubs made wrong is kept, and read
# With stand-ins, a name clang does not know may be one a missing header declares (a namespace's member too: such
# a header may have included the standard header that declares it): the names rules' call (`completion.checks`), which
# knows what the document and the headers that are here declare, not clang's
_UNKNOWN_NAME = re.compile(r"^(use of undeclared identifier|unknown type name|no template named) '|"
                           r"^no member named '[^']+' in namespace '|^explicit instantiation of '[^']+' does not refer")
_WRAPPER_INCLUDE = re.compile(r'^\s*#\s*include\s*"([\w./]+)"', re.MULTILINE)
_SELF_TEST = """#include <cstdio>
#include <cmath>
__device__ float twice(float v) { return 2.0f * v; }
__global__ void kernel(float* x, int n) {
  __shared__ float tile[32];
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    tile[threadIdx.x % 32] = x[i];
    __syncthreads();
    x[i] = twice(__shfl_down_sync(0xffffffffu, tile[0], 1)) + sqrtf(fabsf(x[i])) + __expf(x[i]);
    atomicAdd(x, 1.0f);
  }
}
int main() {
  float* d = nullptr;
  cudaMalloc(&d, 4 * sizeof(float));
  kernel<<<dim3(1), dim3(32), 0, 0>>>(d, 4);
  cudaError_t status = cudaDeviceSynchronize();
  std::printf("%s\\n", cudaGetErrorString(status));
  cudaFree(d);
}
"""
Error = tuple[int, int, str]  # (line, character) 0-based in the checked text, message


class Errors(list[Error]):
    """clang's errors in one run. `stood_in`: the file's missing headers had stand-ins, so the document has errors
    they cause (an operator the missing header declared for its types, say) anywhere, the fill's own function
    included: a fill is then judged by the messages it adds alone."""

    stood_in = False
    # with stand-ins: the errors naming an unknown identifier, type, template or namespace member, left to the
    # name index (not in the list) but kept here: a syntax error right after one is the unknown name's doing
    unknown: tuple[Error, ...] = ()


_SYNTAX = re.compile(r"^(expected |extraneous |missing terminating |unterminated )")


def find_clang(configured: str | None = None) -> Path | None:
    """The configured clang (`dice.clang`), else the first of `NAMES` on PATH (the newest that reads CUDA 13's
    headers first); None when there is none."""
    if configured:
        if not Path(configured).is_file():
            raise DiceError(f"clang not found at {configured} (dice.clang)")
        return Path(configured)
    for name in NAMES:
        if found := shutil.which(name):
            return Path(found)
    return None


def clang_version(clang: Path) -> str | None:
    """`clang --version`'s version number (`19.1.7`), or None when it does not say."""
    try:
        out = run_host_tool([str(clang), "--version"], 30.0)
    except (OSError, subprocess.SubprocessError):
        return None
    found = re.search(r"clang version (\d+(?:\.\d+)*)", out.stdout)
    return found.group(1) if found else None


@dataclass(frozen=True)
class FrontEnd:
    """A clang that reads this CUDA toolkit's headers cleanly, and the arguments that make it do so."""

    clang: Path
    arguments: tuple[str, ...]
    readable: tuple[Path, ...]  # folders the runs read besides the request's (the stubs)
    header_seconds: float = 0.0  # how long the self-test kernel (the runtime's headers) took to read
    least_seconds: float = 0.0  # a run may take at least this long (`PATIENT_CHECK_TIMEOUT_S` for a patient judge)
    # the caller waits for the answer and runs nothing beside it (a command): its preamble builds at the normal CPU
    # priority, not `BUILD_NICENESS` (under load a lowered build would outlast even a patient check's time)
    urgent: bool = False

    @property
    def cold_timeout(self) -> float:
        """The time a run without a precompiled preamble may take (`COLD_CHECK_TIMEOUT_S`)."""
        return max(COLD_CHECK_TIMEOUT_S, COLD_CHECK_FACTOR * self.header_seconds, self.least_seconds)

    @property
    def warm_timeout(self) -> float:
        """The time a run with the precompiled preamble may take (`WARM_CHECK_TIMEOUT_S`)."""
        return max(WARM_CHECK_TIMEOUT_S, WARM_CHECK_FACTOR * self.header_seconds, self.least_seconds)


def _run(front: FrontEnd, argv: list[str], scratch: Path, readable: list[Path],
         timeout: float = CHECK_TIMEOUT_S, niceness: int = 0) -> str:
    """clang's output of one run; `niceness` > 0: at that lower CPU priority (`sandbox.run_tool`)."""
    proc = run_tool([str(front.clang), *front.arguments, *argv], scratch, timeout, readable, niceness=niceness)
    return proc.stderr + proc.stdout


def _stubs(clang: Path, cuda: Path) -> Path:
    """A folder of empty headers for each header clang's CUDA wrapper includes that `cuda` does not have."""
    resource = subprocess.run([str(clang), "-print-resource-dir"], capture_output=True, text=True, timeout=30,
                              check=False).stdout.strip()
    wrapper = Path(resource) / "include" / "__clang_cuda_runtime_wrapper.h"
    folder = process_folder("clang-stubs")
    names = _WRAPPER_INCLUDE.findall(wrapper.read_text(errors="replace")) if wrapper.is_file() else []
    for name in names:
        if not (cuda / "include" / name).exists() and not (wrapper.parent / name).exists():
            (folder / name).parent.mkdir(parents=True, exist_ok=True)
            (folder / name).write_text("")
    return folder


def _self_test(candidate: FrontEnd) -> tuple[str | None, float]:
    """None when `candidate` reads the self-test kernel cleanly, else its first error; and the seconds it took."""
    started = time.perf_counter()
    try:
        with run_folder("clang") as scratch:
            (Path(scratch) / SOURCE).write_text(_SELF_TEST)
            output = _run(candidate, ["-fsyntax-only", "-std=c++17", SOURCE], Path(scratch), list(candidate.readable))
    except (OSError, subprocess.SubprocessError) as exc:
        return str(exc), time.perf_counter() - started
    found = _DIAGNOSTIC.search(output)
    return (None if found is None else found.group(0)), time.perf_counter() - started


_FRONT_END_LOCK = threading.Lock()


def front_end(clang: Path, cuda: Path) -> FrontEnd | None:
    """How `clang` reads the toolkit at `cuda` (see the module's docstring); None when it cannot. Found once per
    process: a second thread asking meanwhile waits for the first's self-test (two at once, beside the model,
    would each take longer, and the self-test's time sets the checks' bounds: `FrontEnd`)."""
    with _FRONT_END_LOCK:
        return _front_end(clang, cuda)


@cache
def _front_end(clang: Path, cuda: Path) -> FrontEnd | None:
    cccl = cuda / "include" / "cccl"  # CUDA 13 keeps Thrust, CUB and libcu++ here; nvcc adds it, clang does not
    plain = FrontEnd(clang, ("-x", "cuda", "--cuda-host-only", f"--cuda-path={cuda}", "-nocudalib",
                             # warnings off, but a pragma clang does not know is an error: a fill that writes one
                             # (`#pragma defined(__CUDA_ARCH__))`) parses and compiles, with a warning nvcc gives too
                             "-Wno-unknown-cuda-version", "-Wno-everything", "-Werror=unknown-pragmas",
                             "-ferror-limit=0", "-fno-color-diagnostics",
                             *(("-isystem", str(cccl)) if cccl.is_dir() else ())), ())
    key = _toolchain_key(clang, cuda)
    # where this clang needed the stubs for this toolkit before, the plain self-test (~0.5 s of a core, in every
    # process that checks) is not run again
    order = ("stubbed", "plain") if key is not None and _remembered(key) == "stubbed" else ("plain", "stubbed")
    failures: list[str] = []
    for variant in order:
        candidate = plain if variant == "plain" else _stubbed(plain, clang, cuda, failures)
        if candidate is None:
            continue
        failed, seconds = _self_test(candidate)
        if failed is None:
            LOG.info("clang check: %s reads %s%s", clang, cuda, " (with stub headers)" if candidate.readable else "")
            if key is not None and variant == "stubbed" and any(_DIAGNOSTIC.match(f) for f in failures):
                _remember(key, variant)  # the plain configuration failed on the headers, not on a hiccup
            return replace(candidate, header_seconds=seconds)
        failures.append(failed)
    LOG.info("clang check off: %s cannot read the CUDA headers of %s (%s)", clang, cuda,
             "; ".join(f[:200] for f in failures))
    return None


def _stubbed(plain: FrontEnd, clang: Path, cuda: Path, failures: list[str]) -> FrontEnd | None:
    """`plain` reading stub headers for what the toolkit no longer ships (`_stubs`); None (and why, in `failures`)
    when they cannot be made."""
    try:
        stubs = _stubs(clang, cuda)
    except (OSError, subprocess.SubprocessError) as exc:
        failures.append(f"no stub headers ({exc})")
        return None
    return FrontEnd(clang, (*plain.arguments, "-D__CLANG_CUDA_TEXTURE_INTRINSICS_H__", "-isystem", str(stubs)),
                    (stubs,))


FRONT_END_MEMORY = "clang-front-end.json"  # under `cache.cache_root()`: which configuration a toolchain needed
_MEMORY_VERSION = "1"


def _toolchain_key(clang: Path, cuda: Path) -> str | None:
    """What decides the configuration: the clang binary and the toolkit's runtime header (paths, sizes, times)."""
    try:
        binary = clang.resolve()
        header = (cuda / "include" / "cuda_runtime.h").resolve()
        stats = binary.stat(), header.stat()
    except OSError:
        return None
    parts = [_MEMORY_VERSION, str(binary), str(header), *(f"{st.st_size}:{st.st_mtime_ns}" for st in stats)]
    return hashlib.sha256("\0".join(parts).encode("utf-8", "surrogatepass")).hexdigest()[:32]


def _memory_path() -> Path:
    return cache_root() / FRONT_END_MEMORY


def _remembered(key: str) -> str | None:
    """The configuration remembered for `key` ("plain" or "stubbed"); None when none is (or the file is not
    dice-lsp's JSON: a memory is a help, never a condition)."""
    try:
        value = json.loads(_memory_path().read_text(encoding="utf-8")).get(key)
    except (OSError, ValueError, AttributeError):
        return None
    return value if value in ("plain", "stubbed") else None


def _remember(key: str, variant: str) -> None:
    """Keep `variant` for `key` (a few toolchains at most), replacing the file atomically; skipped when the
    cache folder cannot be written."""
    path = _memory_path()
    try:
        known = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
        known = {k: v for k, v in known.items() if v in ("plain", "stubbed")} if isinstance(known, dict) else {}
    except (OSError, ValueError):
        known = {}
    known.pop(key, None)
    known[key] = variant
    known = dict(list(known.items())[-8:])
    try:
        replace_atomically(path, json.dumps(known).encode("utf-8"))
    except OSError as exc:
        LOG.debug("clang: not remembered (%s)", exc)


def preamble_lines(text: str) -> int:
    """How many leading lines of `text` hold only preprocessor lines, comments and blank lines, ending where
    every `#if` it opened is closed: the part precompiled once per file."""
    lines = text.split("\n")
    depth, in_comment, cut, continued = 0, False, 0, False
    for number, line in enumerate(lines):
        stripped = line.strip()
        if continued:
            continued = stripped.endswith("\\")
        elif in_comment:
            in_comment = "*/" not in stripped
        elif stripped.startswith("#"):
            word = stripped[1:].lstrip().split(" ", 1)[0].split("(", 1)[0]
            depth += 1 if word in ("if", "ifdef", "ifndef") else -1 if word == "endif" else 0
            continued = stripped.endswith("\\")
        elif stripped.startswith("/*"):
            in_comment = "*/" not in stripped
        elif stripped and not stripped.startswith("//"):
            break
        if depth == 0 and not continued and not in_comment:
            cut = number + 1
    return cut


_GUARD_OPEN = re.compile(r"#\s*(?:ifndef\s+(\w+)|if\s+!\s*defined\s*\(?\s*(\w+)\s*\)?)\s*(?://.*|/\*.*\*/)?")
_DIRECTIVE = re.compile(r"#\s*(\w+)")


def _code_lines(lines: list[str]) -> list[int]:
    """The indexes of the lines that hold more than blanks and comments (a line inside a /* */ comment does not)."""
    found, in_comment = [], False
    for number, line in enumerate(lines):
        stripped = line.strip()
        if in_comment:
            in_comment = "*/" not in stripped
            stripped = stripped.split("*/", 1)[1].strip() if not in_comment else ""
        while stripped.startswith("/*"):
            in_comment = "*/" not in stripped
            stripped = "" if in_comment else stripped.split("*/", 1)[1].strip()
        if stripped and not stripped.startswith("//"):
            found.append(number)
    return found


def unguarded(text: str) -> str:
    """`text` with its include guard's three lines blanked (`#ifndef G` / `#define G` first, the `#endif` that
    closes it last): a header under a guard then has a preamble (`preamble_lines`) like any file, instead of being
    read whole by every check. The same file as far as a check of it goes (nothing else defines its guard); line
    numbers are kept. Text without such a guard is returned as it is."""
    lines = text.split("\n")
    code = _code_lines(lines)
    if len(code) < 3:
        return text
    first, second, last = code[0], code[1], code[-1]
    opened = _GUARD_OPEN.fullmatch(lines[first].strip())
    guard = opened and (opened[1] or opened[2])
    if not guard or not re.fullmatch(rf"#\s*define\s+{guard}\b.*", lines[second].strip()):
        return text
    depth = 0
    for number in code[:-1]:  # the guard's #if stays open until the last line
        word = _DIRECTIVE.match(lines[number].strip())
        if word:
            depth += 1 if word[1] in ("if", "ifdef", "ifndef") else -1 if word[1] == "endif" else 0
            if depth == 0:
                return text
    closing = _DIRECTIVE.match(lines[last].strip())
    if depth != 1 or not closing or closing[1] != "endif":
        return text
    for number in (first, second, last):
        lines[number] = ""
    return "\n".join(lines)


@dataclass(frozen=True)
class Built:
    """A preamble's build: `pch` the precompiled file (None: clang found an error in the preamble; checks read
    the file whole); `readable` False when clang can judge nothing of this file in a check's time: a fatal
    error in the preamble (a header not found: every run stops there, before any fill) or a build that
    outlasted `CHECK_TIMEOUT_S` (its headers take longer to read than a completion may wait)."""

    pch: Path | None
    readable: bool = True
    stubs: Path | None = None  # empty headers standing in for headers the preamble includes that are not there


def _stand_in_options(stubs: Path | None) -> list[str]:
    """What a run adds where a file has stand-ins: their folder (searched after every other), and that its
    precompiled preamble may hold errors."""
    return [] if stubs is None else ["-idirafter", str(stubs), *_WITH_ERRORS]


def _stub(folder: Path, name: str) -> bool:
    """Stand in for the header `name` (as an #include spelled it) with an empty file in `folder`; False when the
    name is no plain relative path (an absolute one, `..`: a workspace's text never writes outside `folder`) or
    there is one already (clang still did not find it)."""
    if not _STUB_NAME.fullmatch(name) or (folder / name).exists():
        return False
    (folder / name).parent.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text("")
    return True


class Preambles:
    """Precompiled preambles, one per (front end, flags, folder, preamble text), built once on first use (a
    second asker waits for the build under way).

    One build runs at a time, the most recently asked-for preamble first (the file being edited), at a low
    CPU priority (`BUILD_NICENESS`): an editor that restores a session opens many files at once, and their
    builds (CUB's takes ~10 s of a core) would otherwise all run beside the model and its completions; the build
    a command waits for alone (`FrontEnd.urgent`) runs at the normal priority."""

    def __init__(self, kept: int = PREAMBLES_KEPT) -> None:
        self.folder = process_folder("clang-pch")
        self.kept = kept
        self.built: OrderedDict[str, Future[Built]] = OrderedDict()  # least recently asked for first
        self.waiting: dict[str, tuple[Future[Built], FrontEnd, list[str], list[Path], str]] = {}
        self.builder: threading.Thread | None = None
        self.building: str | None = None  # the key whose build runs now
        self.building_since = 0.0  # when it started (`time.monotonic`)
        self.slow_runs: dict[str, int] = {}  # checks in a row that outlasted their time, per file key (`slow`)
        self.lock = threading.Lock()

    def get(self, front: FrontEnd, flags: list[str], readable: list[Path], preamble: str,
            wait: float = 0.0, behind: bool = True) -> Built | None:
        """The preamble's build if it is done, waiting at most `wait` seconds for it (its build is queued, first in
        line); None when it is not done by then. `behind` False (an editor's completion): no wait while another
        file's build runs (this one starts after it: a build is seconds, a completion's wait is not), and a wait
        only during the build's first `wait` seconds: a build that has run that long is a slow one (CUB's takes
        ~10 s on 2 cores), so the completion right after the file opened waits for what is left of it, and the
        next ones do not wait again; they read the preamble once it is there. A build that failed gives
        `Built(None)`: read the file whole this time (the next asker builds again)."""
        key = _key(front, flags, readable, preamble)
        with self.lock:
            if key not in self.built or (front.urgent and key in self.waiting and not self.waiting[key][1].urgent):
                self.built.setdefault(key, Future())
                self.waiting[key] = (self.built[key], front, flags, readable, preamble)
                self._trim()
                if self.builder is None:
                    self.builder = threading.Thread(target=self._builds, name="dice-clang-pch", daemon=True)
                    self.builder.start()
            self.built.move_to_end(key)
            future = self.built[key]
            if not behind and key in self.waiting and self.building not in (None, key):
                wait = 0.0
            elif not behind and self.building == key:
                wait = max(0.0, min(wait, self.building_since + wait - time.monotonic()))
        with contextlib.suppress(TimeoutError):
            future.exception(timeout=wait)
        if not future.done():
            return None
        return future.result() if future.exception() is None else Built(None)

    def _builds(self) -> None:
        """Build the waiting preambles one after another, the most recently asked-for first, until none waits."""
        while True:
            with self.lock:
                for dropped in [key for key in self.waiting if key not in self.built]:  # dropped before its turn
                    self.waiting.pop(dropped)[0].set_exception(DiceError("dropped before it was built"))
                latest = next((key for key in reversed(self.built) if key in self.waiting), None)
                if latest is None:
                    self.builder = None
                    return
                future, front, flags, readable, preamble = self.waiting.pop(latest)
                self.building, self.building_since = latest, time.monotonic()
            try:
                self._settle(latest, future, front, flags, readable, preamble)
            finally:
                with self.lock:
                    self.building = None

    def _settle(self, key: str, future: Future[Built], front: FrontEnd, flags: list[str],
                readable: list[Path], preamble: str) -> None:
        try:
            future.set_result(self._build(key, front, flags, readable, preamble))
        except subprocess.TimeoutExpired:  # too slow for any check: none is run on this preamble (`Built`)
            LOG.debug("clang check: the preamble took longer than %.0f s to read; no checks in its files",
                      CHECK_TIMEOUT_S)
            future.set_result(Built(None, readable=False))
        except Exception as exc:  # the check goes on without it; the next asker builds again
            LOG.debug("clang check: no precompiled preamble (%s)", exc)
            future.set_exception(exc)
            with self.lock:
                if self.built.get(key) is future:
                    del self.built[key]

    def _build(self, key: str, front: FrontEnd, flags: list[str], readable: list[Path], preamble: str) -> Built:
        """Precompile `preamble`; each header it includes that is not there gets an empty stand-in and the build
        runs again (one run finds one), up to `MAX_STUBS` of them."""
        path = self.folder / f"{key}.pch"
        header = self.folder / f"{key}.cuh"
        header.write_text(preamble)
        stubs = self._stand_ins(key)
        built = Built(None)
        for _ in range(MAX_STUBS + 1):
            built = Built(None, stubs=stubs if stubs.is_dir() else None)
            output = _run(front, [*flags, *_stand_in_options(built.stubs), "-c", "-Xclang", "-emit-pch", "-o",
                                  path.name, header.name], self.folder, readable,
                          niceness=0 if front.urgent else BUILD_NICENESS)
            found = list(_DIAGNOSTIC.finditer(output))
            fatal = next((m for m in found if m["severity"] == "fatal error"), None)
            if fatal is None:
                break
            missing = _NOT_FOUND.match(fatal["message"])
            if missing is None or not _stub(stubs, missing["name"]):
                LOG.debug("clang check: the preamble cannot be read (%s); no checks in its files", fatal.group(0))
                return Built(None, readable=False)
        else:
            LOG.debug("clang check: the preamble includes more than %d headers that are not here", MAX_STUBS)
            return Built(None, readable=False)
        if built.stubs is not None:  # errors are expected where the stand-ins leave names undeclared
            return Built(path if path.is_file() else None, stubs=built.stubs)
        return Built(path if path.is_file() and not found else None)

    def _stand_ins(self, key: str) -> Path:
        return self.folder / f"{key}.stubs"

    def stand_ins(self, key: str) -> Path | None:
        """The folder of the file `key` names (its preamble's key, or `_whole_file_key`) whose empty headers stand
        in for the ones it includes that are not there; None while it has none."""
        folder = self._stand_ins(key)
        return folder if folder.is_dir() else None

    def stand_in(self, key: str, name: str) -> bool:
        """An #include outside the preamble (under an `#if` around the whole file, or in a file read whole) named a
        header that is not there: stand in for it from the file's next check on. False when `name` cannot be
        stood in for (`_stub`) or the file has `MAX_STUBS` already; True when it is there now (a check beside
        this one may have written it)."""
        folder = self._stand_ins(key)
        with self.lock:
            if (folder / name).is_file() and _STUB_NAME.fullmatch(name):
                return True
            if folder.is_dir() and sum(1 for path in folder.rglob("*") if path.is_file()) >= MAX_STUBS:
                return False
            return _stub(folder, name)

    def _trim(self) -> None:
        """Drop the least recently asked-for entries past `kept` (lock held)."""
        while len(self.built) > self.kept:
            _, dropped = self.built.popitem(last=False)
            dropped.add_done_callback(_remove_built)

    def slow(self, key: str) -> None:
        """A completion's check in the file `key` names outlasted its time; after `SLOW_RUNS` such completions in a
        row the file gets no more runs (`give_up`): one slow run on a busy machine does not switch clang off."""
        with self.lock:
            self.slow_runs[key] = self.slow_runs.get(key, 0) + 1
            slow = self.slow_runs[key] >= SLOW_RUNS
        if slow:
            self.give_up(key)

    def in_time(self, key: str) -> None:
        """A check in the file `key` names took no longer than its time: its slow runs are forgotten."""
        with self.lock:
            self.slow_runs.pop(key, None)

    def give_up(self, key: str) -> None:
        """The file `key` names (its preamble's key, or `_whole_file_key`) takes longer to check than a completion
        may wait, or its checks can tell nothing: from now on as unreadable as a preamble whose build timed out
        (its checks run no clang)."""
        unreadable: Future[Built] = Future()
        unreadable.set_result(Built(None, readable=False))
        with self.lock:
            self.built[key] = unreadable
            self.built.move_to_end(key)
            self._trim()

    def unreadable(self, key: str) -> bool:
        with self.lock:
            future = self.built.get(key)
        return future is not None and future.done() and future.exception() is None and not future.result().readable

    def forget(self, pch: Path) -> None:
        with self.lock:
            for key, future in list(self.built.items()):
                if future.done() and not future.exception() and future.result().pch == pch:
                    del self.built[key]
        pch.unlink(missing_ok=True)


def _key(front: FrontEnd, flags: list[str], readable: list[Path], preamble: str) -> str:
    # how the clang reads the toolkit, not how long its runs may take: a patient judge shares the file's preamble
    return hashlib.sha256("\0".join((str(front.clang), *front.arguments, *map(str, front.readable), *flags,
                                     *map(str, readable), preamble)).encode(
        "utf-8", "surrogatepass")).hexdigest()[:32]


def _whole_file_key(front: FrontEnd, flags: list[str], readable: list[Path], lines: list[str]) -> str:
    """What the checks of a file without a preamble are remembered by: its #include lines."""
    return _key(front, flags, readable, "whole file including:\n" + "\n".join(
        line.strip() for line in lines if _INCLUDE_LINE.match(line)))


def _remove_built(done: Future[Built]) -> None:
    if done.exception() is None and (path := done.result().pch) is not None:
        path.unlink(missing_ok=True)


_PREAMBLES: Preambles | None = None
_PREAMBLES_LOCK = threading.Lock()


def preambles() -> Preambles:
    global _PREAMBLES
    with _PREAMBLES_LOCK:
        if _PREAMBLES is None:
            _PREAMBLES = Preambles()
        return _PREAMBLES


def _invocation(front: FrontEnd, folder: Path | None, flags: CompileFlags) -> tuple[list[str], list[Path]]:
    """clang's options for a file living in `folder` with `flags`, and the folders its runs may read."""
    folders = [*flags.include_dirs, *([folder] if folder is not None else [])]
    # nvcc's device-code options (`extra`) have no clang spelling and change no verdict: left out
    options = [f"-std={flags.std}", *(f"-D{d}" for d in flags.defines),
               *([f"-iquote{folder}"] if folder is not None else []), *(f"-I{d}" for d in flags.include_dirs)]
    return options, [*folders, *front.readable]


def _preamble(lines: list[str], cut: int) -> str:
    return "\n".join(lines[:cut]) + "\n"


def warm(front: FrontEnd, text: str, folder: Path | None, flags: CompileFlags, wait: float = 0.0) -> None:
    """Start precompiling `text`'s preamble in the background (the editor opened the file: its first
    completion then reads the preamble instead of every header); with `wait`, return once it is built or
    `wait` seconds have passed."""
    text = unguarded(text)
    cut = preamble_lines(text)
    if not cut:
        return
    options, readable = _invocation(front, folder, flags)
    preamble = _preamble(text.split("\n"), cut)
    preambles().get(front, options, readable, preamble, wait)


class TooSlow(Exception):
    """A check outlasted its time; `key` names its file for `Preambles.slow` (None: a file with no such key)."""

    def __init__(self, seconds: float, key: str | None) -> None:
        super().__init__(f"the run outlasted {seconds:.1f} s")
        self.key = key


class NotReady(Exception):
    """The file's precompiled preamble was not built within the time a check may wait for it."""


# one read-through run at a time, whatever the file: an editor that restores a session opens many files at once,
# and several low-priority clang runs together would still take a 2-core machine's time from the model
_READING_THROUGH = threading.Lock()


class NewStandIn(Exception):
    """The run met a header past the preamble that is not there, and it has a stand-in now: no verdict this time;
    the file's next run reads on."""


def front_errors(front: FrontEnd, text: str, folder: Path | None, flags: CompileFlags,
                 niceness: int = 0) -> list[Error] | None:
    """clang's errors in `text` (a file living in `folder`), in any file it includes too; None when clang cannot
    tell (a fatal error such as a header not found). A run that outlasts its time (`FrontEnd.warm_timeout` with the
    precompiled preamble, else `FrontEnd.cold_timeout`) raises `TooSlow` (its judge reports it: after
    `SLOW_RUNS` slow completions in a row the file gets no more runs, `Preambles.slow`; a file without a
    preamble, by its #include lines, also gets none after a fatal error).
    Raises `NotReady` when the file's preamble is still being built after `FrontEnd.cold_timeout`, and `NewStandIn`
    when the run met a missing header past the preamble that now has a stand-in."""
    options, readable = _invocation(front, folder, flags)
    text = unguarded(text)
    cut = preamble_lines(text)
    lines = text.split("\n")
    preamble = _preamble(lines, cut)
    # the first check after the file opened waits for its preamble's build (already under way: `warm`) rather than
    # read every header beside it, as long as such a run may take
    # (a completion does not wait while its file's build is queued behind another file's: the editor opened several)
    asked = time.monotonic()
    built = preambles().get(front, options, readable, preamble, front.cold_timeout,
                            behind=front.least_seconds > 0) if cut else None
    waited = time.monotonic() - asked
    if cut and built is None:
        raise NotReady("the preamble is still being precompiled")
    # a file without a preamble (an include guard around it, an #include after code) is read whole by each check;
    # what makes one such run fail or outlast its time (a header not found, CUB) makes them all
    whole = None if cut else _whole_file_key(front, options, readable, lines)
    if (built is not None and not built.readable) or (whole is not None and preambles().unreadable(whole)):
        return None
    pch = built.pch if built is not None else None
    file_key = whole or _key(front, options, readable, preamble)
    stubs = preambles().stand_ins(file_key)
    body = "\n" * cut + "\n".join(lines[cut:]) if pch is not None else text
    pch_options = ["-include-pch", str(pch)] if pch is not None else []
    bound = front.warm_timeout if pch is not None else front.cold_timeout
    # a check that waited for its file's build gets what is left of the cold bound for its run (at least
    # `AFTER_WAIT_S`): the wait and the run together stay within about what a cold run may take; a run cut
    # short so is not held against the file (`Preambles.slow`)
    waited_for_build = waited > 0.05  # (a build already done answers in microseconds)
    allowed = min(bound, max(front.cold_timeout - waited, AFTER_WAIT_S)) if waited_for_build else bound
    with run_folder("clang") as scratch:
        (Path(scratch) / SOURCE).write_text(body)
        try:
            output = _run(front, ["-fsyntax-only", *options, *_stand_in_options(stubs), *pch_options,
                                  SOURCE], Path(scratch),
                          [*readable, *([pch.parent] if pch is not None else []), *([stubs] if stubs else [])],
                          allowed, niceness)
        except subprocess.TimeoutExpired as exc:  # every later check in this file may take as long again
            raise TooSlow(exc.timeout or 0.0, file_key if allowed >= bound else None) from exc
        preambles().in_time(file_key)
    found = list(_DIAGNOSTIC.finditer(output))
    fatal = next((m for m in found if m["severity"] == "fatal error"), None)
    if fatal is not None:
        if pch is not None and "precompiled" in output:  # a header changed since: build it again next time
            preambles().forget(pch)
        missing = _NOT_FOUND.match(fatal["message"])
        if missing is not None and preambles().stand_in(file_key, missing["name"]):  # an #include past the preamble
            raise NewStandIn(f"{missing['name']} is not here and gets a stand-in")
        LOG.debug("clang check cannot tell: %s", fatal.group(0))
        if whole is not None:
            preambles().give_up(whole)
        return None
    every = [(int(m["line"]) - 1 if Path(m["file"]).name == SOURCE else -1, int(m["column"]) - 1, m["message"])
             for m in found]
    errors = Errors(e for e in every if stubs is None or not _UNKNOWN_NAME.match(e[2]))
    errors.stood_in = stubs is not None
    errors.unknown = tuple(e for e in every if stubs is not None and _UNKNOWN_NAME.match(e[2]))
    return errors


def changed_span(base: str, filled: str) -> tuple[int, int]:
    """The characters of `filled` where it differs from `base`: [start, end) (the longest common head and tail
    left out)."""
    limit = min(len(base), len(filled))
    start = 0
    while start < limit and base[start] == filled[start]:
        start += 1
    same_tail = 0
    while same_tail < limit - start and base[-1 - same_tail] == filled[-1 - same_tail]:
        same_tail += 1
    return start, len(filled) - same_tail


def syntax_in_fill(errors: Errors, base: str, filled: str) -> list[Error]:
    """The syntax errors (`expected ')'`, ...) clang reports inside the changed text of `filled`, but for one on a
    line where an unknown name comes first (a macro a missing header defines, used as a statement, is a syntax
    error to clang with only a stand-in). With stand-ins a fill is otherwise judged by the messages it adds, and
    a fill that leaves the document's break as it was (` = 0;` after a half-typed `std::div(n`, the call still
    unclosed) adds none: its own text holding the break is what gives it away."""
    syntax = [error for error in errors if _SYNTAX.match(error[2])]
    if not syntax:  # most runs: no need to find where the fill is
        return []
    start, end = changed_span(base, filled)
    first, last = filled.count("\n", 0, start), filled.count("\n", 0, end)
    line_start = filled.rfind("\n", 0, start) + 1  # of the fill's first line; later lines found as needed

    def offset(line: int, character: int) -> int:
        if not first <= line <= last:
            return -1
        at = line_start
        for _ in range(line - first):
            at = filled.index("\n", at) + 1
        return at + character

    return [(line, character, message) for line, character, message in syntax
            if start <= offset(line, character) < end
            and not any(u_line == line and u_character < character for u_line, u_character, _ in errors.unknown)]


def fill_lines(base: str, filled: str) -> tuple[int, int]:
    """The lines of `filled` (0-based, inclusive) from where it differs from `base` to the end of the function that
    holds that place (to the end of the changed text where no function does)."""
    start, end = changed_span(base, filled)
    from dice_lsp.cuda.functions import enclosing_function

    function = enclosing_function(filled, start)
    last = max(end, function.body_close) if function is not None else end
    return filled.count("\n", 0, start), filled.count("\n", 0, last)


class ClangJudge:
    """The front-end verdict on fills of `base` (the document as the user has it, living in `folder`).

    A filled document passes when clang reports no error whose message the base does not have too (the user's
    file may be unfinished elsewhere) and, where clang reads the base cleanly up to the fill, no error at all
    in the fill's function from the fill on (`fill_lines`: the fill must leave the rest of its function
    compiling: a hole whose removal left a later use undeclared is not filled by a line that declares
    something else; an error above the fill may derail clang's recovery below it, so then only new messages
    count). `new_errors` says where
    those errors are (for re-masking what clang points at). The base is judged once, beside the first fill."""

    def __init__(self, clang: Path, cuda: Path, base: str, folder: Path | None, flags: CompileFlags,
                 patient: bool = False) -> None:
        self.clang, self.cuda, self.base, self.folder, self.flags = clang, cuda, base, folder, flags
        self.patient = patient  # runs get `PATIENT_CHECK_TIMEOUT_S` at least (a caller who waits for the answer)
        self.known: set[str] | None = None
        self.base_known = True
        self.base_lines: list[int] = []  # where the base's errors are (-1: in an included file)
        self.stood_in = False  # the file's missing headers have stand-ins (`Errors.stood_in`)
        self.read: dict[str, list[Error] | None] = {}  # clang's errors per filled text this judge has read
        self.gave_up = False  # a run outlasted its time: no more runs for this completion
        self.lock = threading.Lock()

    @property
    def front(self) -> FrontEnd | None:
        """How this clang reads the toolkit: found once per process, on the first check (off the editor's
        event loop: checks run beside the model)."""
        front = front_end(self.clang, self.cuda)
        if front is None or not self.patient:
            return front
        return replace(front, least_seconds=PATIENT_CHECK_TIMEOUT_S, urgent=True)

    def warm(self, wait: float = 0.0) -> None:
        """Start clang's one-time work for the base's file: how this clang reads the toolkit (blocks the first
        time, ~0.3 s: call it off the editor's event loop) and the file's precompiled preamble (background;
        `wait`: at most this long for it)."""
        front = self.front
        if front is not None:
            warm(front, self.base, self.folder, self.flags, wait)

    def _errors(self, text: str) -> list[Error] | None:
        front = self.front
        if front is None or self.gave_up:
            return None
        try:
            return front_errors(front, text, self.folder, self.flags)
        except TooSlow as exc:
            LOG.debug("clang check: no verdict, %s", exc)
            with self.lock:  # the base and the first fill run side by side: one slow completion, reported once
                first, self.gave_up = not self.gave_up, True
            if first and exc.key is not None:
                preambles().slow(exc.key)
            return None
        except NotReady as exc:
            LOG.debug("clang check: no verdict, %s", exc)
            self.gave_up = True
            return None
        except NewStandIn as exc:
            LOG.debug("clang check: no verdict this time; %s", exc)
            return None

    def open(self, wait: float = 0.0) -> int:
        """What the editor opening the base's file starts (call it off the editor's event loop): `warm` (its
        preamble's build, waited for at most `wait` seconds), then `discover`. The stand-ins it made."""
        self.warm(wait)
        return self.discover()

    def discover(self) -> int:
        """Read the base once through, in the background when the file opens (after `warm`), patiently and at a
        low CPU priority, so that each header past the preamble that is not here (OpenCV wraps a whole file in
        `#if !defined CUDA_DISABLER`) has its stand-in before the first completion: a run meets one such header
        at a time, and each would otherwise cost a completion its verdict. One such run at a time in the process
        (`_READING_THROUGH`). The stand-ins it made."""
        front = self.front
        if front is None:
            return 0
        front = replace(front, least_seconds=PATIENT_CHECK_TIMEOUT_S, urgent=False)  # background work
        warm(front, self.base, self.folder, self.flags, front.cold_timeout)  # its preamble first, outside the lock
        for made in range(MAX_STUBS + 1):
            try:
                with _READING_THROUGH:
                    front_errors(front, self.base, self.folder, self.flags, niceness=BUILD_NICENESS)
            except NewStandIn as exc:
                LOG.debug("clang: opening the file, %s", exc)
                continue
            except (TooSlow, NotReady, OSError, Stopped) as exc:
                LOG.debug("clang: opening the file, no stand-ins looked for (%s)", exc)
            return made
        return MAX_STUBS

    def new_errors(self, text: str) -> list[tuple[int, int]] | None:
        """(line, character) of each error of `text` the base does not have ((-1, c): in an included file);
        None when clang cannot tell."""
        if self.known is None:
            with ThreadPoolExecutor(2) as pool:  # the base and the first fill side by side
                base, filled = pool.map(self._errors, (self.base, text))
            self.base_known = base is not None
            self.known = {message for _, _, message in base or []}
            self.base_lines = [line for line, _, _ in base or []]
            self.stood_in = isinstance(base, Errors) and base.stood_in
        elif text in self.read:  # the verdict, then where (re-masking): one clang run
            filled = self.read[text]
        elif not self.base_known:  # no verdict on the base: none on any fill of it
            return None
        else:
            filled = self._errors(text)
        self.read[text] = filled
        if filled is None or not self.base_known:
            return None
        first, last = fill_lines(self.base, text)
        if self.stood_in or any(line < first for line in self.base_lines):  # broken above: clang's recovery may
            first, last = 0, -1  # reach the fill; stand-ins: errors in the fill's function may be theirs
        own = syntax_in_fill(filled, self.base, text) if isinstance(filled, Errors) and self.stood_in else []
        return [(line, character) for line, character, message in filled
                if message not in self.known or first <= line <= last or (line, character, message) in own]

    def __call__(self, text: str) -> bool | None:
        try:
            errors = self.new_errors(text)
        except (OSError, Stopped) as exc:
            LOG.debug("clang check failed: %s", exc)
            return None
        return None if errors is None else not errors


def clang_judge(base: str, folder: Path | None, flags: CompileFlags, clang: str | None = None,
                nvcc: Path | None = None, patient: bool = False) -> ClangJudge | None:
    """A `ClangJudge` for fills of `base`; None when there is no clang or no CUDA toolkit (a clang that cannot read
    the toolkit's headers is found out at the first check, whose verdicts are then None)."""
    from dice_lsp.sandbox import toolkit_roots
    from dice_lsp.toolchain.nvcc import find_nvcc

    try:
        found = find_clang(clang)
        roots = [root for root in toolkit_roots(nvcc or find_nvcc(None)) if (root / "include" / "cuda.h").is_file()]
    except DiceError as exc:
        LOG.debug("no clang check: %s", exc)
        return None
    if folder is not None:  # clang runs in a scratch folder: a relative one would name nothing there
        folder = folder.resolve()
    return ClangJudge(found, roots[0], base, folder, flags, patient) if found is not None and roots else None
