"""clang's front end as a completion check (`dice_lsp.toolchain.clang`): the real clang and the real CUDA headers.

A fill passes when clang reports no error the document without it lacks; a fatal error (a header that is not
there) means clang cannot tell. The pipeline's side (a rejected fill re-masked where clang points, withdrawn
when it still fails) is here too, with the real judge and fixed fills in place of the model.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest

from dice_lsp.complete import PreparedFill, front_end_for, prepare
from dice_lsp.completion.checks import Checks
from dice_lsp.engine import EMBEDDED_MODEL, FillRequest, FillResult
from dice_lsp.engine.infill import Draft
from dice_lsp.engine.tokenizer import Tokenizer
from dice_lsp.settings import Settings
from dice_lsp.textdoc import Position
from dice_lsp.toolchain import clang
from dice_lsp.toolchain.clang import Built, ClangJudge, clang_judge, find_clang, preamble_lines, unguarded
from dice_lsp.toolchain.flags import CompileFlags

BASE = ("#include <cstdio>\n"
        "#include <cuda_fp16.h>\n"
        "\n"
        "struct Pair { float a; float b; };\n"
        "\n"
        "__global__ void scale(const float* x, float* y, Pair p, int n) {\n"
        "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
        "    \n"
        "}\n")
LINE = 7  # the empty line of the kernel


def filled(text: str) -> str:
    lines = BASE.split("\n")
    lines[LINE] = "    " + text
    return "\n".join(lines)


def _judge(base: str = BASE, folder: Path | None = None) -> ClangJudge:
    judge = clang_judge(base, folder, CompileFlags())
    if judge is None or judge.front is None:
        reason = "no clang that reads the CUDA headers (apt-get install clang)"
        if os.environ.get("CI"):
            pytest.fail(reason)
        pytest.skip(reason)
    return judge


def _checks_with_the_preamble(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """Filled, from now on, with whether each check's clang run (not a preamble's build) read the precompiled
    preamble."""
    runs: list[bool] = []
    run = clang._run

    def recorded(front: clang.FrontEnd, argv: list[str], *args: object, **kwargs: object) -> str:
        if not kwargs.get("niceness"):  # a check, not the build
            runs.append("-include-pch" in argv)
        return run(front, argv, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(clang, "_run", recorded)
    return runs


@pytest.fixture(autouse=True)
def patient_bounds(monkeypatch: pytest.MonkeyPatch) -> None:
    """Verdicts are tested here, not timing (the tests of the bounds set their own): on a loaded machine (CI's
    two test workers on two cores) a check may outlast the product's bounds, and two slow checks in a row
    would end clang for the module's file, failing every test after them."""
    monkeypatch.setattr(clang, "COLD_CHECK_TIMEOUT_S", 60.0)
    monkeypatch.setattr(clang, "WARM_CHECK_TIMEOUT_S", 60.0)


@pytest.fixture(scope="module")
def judge() -> ClangJudge:
    return _judge()


@pytest.mark.parametrize("fill", ["if (i < n) y[i] = p.a * x[i] + p.b;", "__half h = __float2half(x[i]);",
                                  "atomicAdd(y, __shfl_down_sync(0xffffffffu, x[i], 1));",
                                  "printf(\"%d\\n\", i);", "float v = fmaxf(x[i], 0.0f);"])
def test_fills_that_nvcc_accepts_pass(judge: ClangJudge, fill: str) -> None:
    assert judge(filled(fill)) is True


@pytest.mark.parametrize(("fill", "columns"), [
    ("float *index = n;", [11]),  # an int is no pointer: at `index`
    ("y[i] = p.c;", [13]),  # Pair has no member c: at `c`
    ("y[i] = x[i][i];", [15]),  # a float cannot be indexed: at the second `[`
    ("int v = __shfl_xor_sync(0xffffffffu, 1);", [12]),  # too few arguments: at the callee
    ("n n2 = 0;", [5, 6]),  # a variable used as a type: `;` expected after `n`, `n2` undeclared
])
def test_fills_that_nvcc_rejects_fail_where_clang_points(judge: ClangJudge, fill: str, columns: list[int]) -> None:
    assert judge(filled(fill)) is False
    assert judge.new_errors(filled(fill)) == [(LINE, column) for column in columns]


def test_a_pragma_clang_does_not_know_fails_and_a_known_one_passes(judge: ClangJudge) -> None:
    """`#pragma defined(__CUDA_ARCH____))` parses and compiles (nvcc only warns: "unrecognized #pragma in device
    code"): a fill that adds a warning is not clean. `#pragma unroll` is CUDA's own."""
    assert judge(filled("#pragma defined(__CUDA_ARCH____))")) is False
    assert judge(filled("#pragma unroll\n    for (int k = 0; k < 4; ++k) y[i] += x[k];")) is True


def test_errors_the_document_already_has_do_not_count() -> None:
    broken = BASE + "__device__ float unfinished(float v) { return v + undefined_name; }\n"
    judge = _judge(broken)
    assert judge(broken.replace("    \n}", "    y[i] = x[i];\n}", 1)) is True
    # the same message as the base's, but in the fill's own function: the fill's error
    assert judge(broken.replace("    \n}", "    y[i] = x[i] + undefined_name;\n}", 1)) is False
    assert judge(broken.replace("    \n}", "    y[i] = x[i] + other_name;\n}", 1)) is False


def test_headers_that_are_not_here_are_stood_in_for_and_the_verdict_holds(tmp_path: Path) -> None:
    """A real project's file includes headers this machine lacks (torch's, its own generated ones): the preamble's
    build stands in for each with an empty file, and clang still tells whether a fill adds an error."""
    below = "    float2 q = -make_float2(0.f, 0.f);\n"  # an operator a missing header declared: an error in the kernel
    base = ('#include "not_there.cuh"\n#include <torch/extension.h>\n'
            + BASE.replace("struct Pair", "void launch(at::Tensor t);\nstruct Pair")
            .replace("    \n}", "    \n" + below + "}"))
    judge = _judge(base, tmp_path)

    def fill(line: str) -> str:
        return base.replace("    \n" + below, f"    {line}\n" + below, 1)

    assert judge(fill("float *index = n;")) is False
    assert judge(fill("y[i] = p.a * x[i] + p.b;")) is True
    assert judge(fill("y[i] = p.c;")) is False  # Pair has no member c
    assert judge(fill("at::Tensor u;")) is True  # as undeclared as in the document's own line
    assert judge(fill("torch::Tensor u;")) is True  # a missing header may declare it: the name index's call
    assert judge(fill("using Row = std::vector<float>;")) is True  # or include the standard header that does
    assert list(tmp_path.iterdir()) == []  # nothing written beside the user's file


def test_with_stand_ins_a_fill_that_leaves_the_document_s_break_in_its_own_text_fails(tmp_path: Path) -> None:
    """With stand-ins a fill is judged by the messages it adds; a half-typed call left unclosed is an error the
    document already has, so the fill's own text holding it is what counts. A macro a missing header defines,
    used as a statement, is a syntax error to clang too: one that follows an unknown name is not the fill's."""
    base = ('#include "not_there.cuh"\n#include <cstdlib>\n'
            "void clear(int n, float* y) {\n    CUDA_KERNEL_LOOP(j, n) { y[j] = 1.f; }\n}\n"
            "void launch(int n, int threads, float* y) {\n"
            "    auto dv = std::div(n\n"
            "    const int blocks = dv.quot + threads;\n"
            "    \n"
            "}\n")
    judge = _judge(base, tmp_path)
    assert judge(base.replace("std::div(n\n", "std::div(n, threads);\n")) is True
    assert judge(base.replace("std::div(n\n", "std::div(n = 0;\n")) is False  # the call still unclosed
    closed = base.replace("std::div(n\n", "std::div(n, threads);\n")
    judge = _judge(closed, tmp_path)
    assert judge(closed.replace("    \n}", "    CUDA_KERNEL_LOOP(i, n) { y[i] = 0.f; }\n}")) is True
    assert judge(closed.replace("    \n}", "    y[0] = (float(blocks);\n}")) is False


@pytest.mark.parametrize("name", ["../up.cuh", "/abs/path.h", ".hidden/x.h", "a/../../b.h", "a b.h", ""])
def test_a_stand_in_is_made_only_for_a_plain_relative_header_name(tmp_path: Path, name: str) -> None:
    assert clang._stub(tmp_path / "stubs", name) is False
    assert not (tmp_path / "stubs").exists() and not (tmp_path / "up.cuh").exists()
    assert clang._stub(tmp_path / "stubs", "torch/csrc/api.h") is True
    assert (tmp_path / "stubs" / "torch" / "csrc" / "api.h").read_text() == ""


def test_a_header_clang_cannot_find_and_no_stand_in_serves_means_it_cannot_tell(tmp_path: Path) -> None:
    base = '#include "../not_there.cuh"\n' + BASE  # outside the folder: no stand-in is written there
    judge = _judge(base, tmp_path)
    assert judge(base.replace("    \n}", "    float *index = n;\n}", 1)) is None
    assert not (tmp_path.parent / "not_there.cuh").exists()


def test_once_the_preamble_is_known_unreadable_no_check_runs_clang(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """A header clang cannot find stops every run before the fill: once the preamble's build has said so,
    checks in that file answer "cannot tell" without running clang (a completion does not pay a cold run
    that can tell nothing, in each file with a missing or too slow header)."""
    import time

    from dice_lsp.toolchain import clang

    base = '#include "../not_there.cuh"\n' + BASE
    fill = base.replace("    \n}", "    float *index = n;\n}", 1)
    judge = _judge(base, tmp_path)
    front = judge.front
    assert front is not None and judge(fill) is None  # the first check reads the file whole, starts the build
    deadline = time.monotonic() + 60
    options = [f"-std={CompileFlags().std}", f"-iquote{tmp_path}"]
    while time.monotonic() < deadline:
        built = clang.preambles().get(front, options, [tmp_path, *front.readable],
                                      '#include "../not_there.cuh"\n#include <cstdio>\n#include <cuda_fp16.h>\n\n')
        if built is not None:
            break
        time.sleep(0.1)
    assert built is not None and not built.readable and built.pch is None
    runs: list[list[str]] = []
    monkeypatch.setattr(clang, "_run", lambda front, argv, *rest, **kw: runs.append(argv) or "")
    assert _judge(base, tmp_path)(fill) is None and runs == []


def test_local_headers_resolve_from_the_document_s_folder(tmp_path: Path) -> None:
    (tmp_path / "pair.cuh").write_text("struct Local { int count; };\n")
    base = '#include "pair.cuh"\n' + BASE
    judge = _judge(base, tmp_path)
    assert judge(base.replace("    \n}", "    Local l{n}; y[i] = l.count;\n}", 1)) is True
    assert judge(base.replace("    \n}", "    Local l{n}; y[i] = l.total;\n}", 1)) is False


def test_a_relative_folder_names_the_same_local_headers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """clang runs in a scratch folder: the document's folder given relative to the caller's is still its own."""
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "pair.cuh").write_text("struct Local { int count; };\n")
    monkeypatch.chdir(tmp_path)
    base = '#include "pair.cuh"\n' + BASE
    judge = _judge(base, Path("src"))
    assert judge(base.replace("    \n}", "    Local l{n}; y[i] = l.count;\n}", 1)) is True
    assert judge(base.replace("    \n}", "    Local l{n}; y[i] = l.total;\n}", 1)) is False


@pytest.mark.parametrize(("text", "lines"), [
    ("#include <a>\n#include <b>\nint x;\n", 2),
    ("// c\n/* a\n   b */\n#define N 4 \\\n  + 1\n\nint x;\n", 6),
    ("#ifndef G\n#define G\n#include <a>\nint x;\n#endif\n", 0),  # a guard around code (`unguarded` blanks it)
    ("#include <a>\n#if X\n#include <b>\n#endif\nint y;\n", 4),
    ("int x;\n", 0),
])
def test_the_preamble_ends_before_the_first_code_with_every_if_closed(text: str, lines: int) -> None:
    assert preamble_lines(text) == lines


@pytest.mark.parametrize(("text", "expected"), [
    ("#ifndef G\n#define G\n#include <a>\nint x;\n#endif\n", "\n\n#include <a>\nint x;\n\n"),
    ("/* licence\n   text */\n#ifndef K_CUH_\n#define K_CUH_\n#include <a>\n#if X\nint y;\n#endif\nint x;\n"
     "#endif  // K_CUH_\n", "/* licence\n   text */\n\n\n#include <a>\n#if X\nint y;\n#endif\nint x;\n\n"),
    ("#if !defined(G)\n#define G 1\n#include <a>\nint x;\n#endif\n", "\n\n#include <a>\nint x;\n\n"),
])
def test_an_include_guard_around_the_file_is_blanked_for_the_check(text: str, expected: str) -> None:
    assert unguarded(text) == expected
    assert preamble_lines(expected) == expected.split("\n").index("#include <a>") + 1


@pytest.mark.parametrize("text", [
    "#ifndef G\n#define G\n#endif\n#include <a>\nint x;\n",  # closed before the code: not around the file
    "#ifndef G\n#define H\n#include <a>\nint x;\n#endif\n",  # defines another name
    "#ifndef G\n#define G\n#include <a>\nint x;\n",  # never closed
    "#ifdef G\n#define G\nint x;\n#endif\n",
    "#include <a>\nint x;\n",
])
def test_text_without_an_include_guard_around_it_is_checked_as_it_is(text: str) -> None:
    assert unguarded(text) == text


def test_a_header_under_an_include_guard_is_checked_with_its_precompiled_preamble(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A `.cuh` under an include guard had no preamble (its #includes sit inside the guard's #if), so every check
    read all its headers; now the guard is blanked for the check and its preamble is precompiled when it opens."""
    import uuid

    _judge()
    monkeypatch.setattr(clang, "COLD_CHECK_TIMEOUT_S", 60.0)
    runs = _checks_with_the_preamble(monkeypatch)
    guard = f"KERNEL_{uuid.uuid4().hex}_CUH"
    base = f"// scale.cuh\n#ifndef {guard}\n#define {guard}\n{BASE}#endif  // {guard}\n"
    judge = _judge(base)
    judge.warm()
    assert judge(base.replace("    \n}", "    y[i] = p.c * x[i];\n}", 1)) is False
    assert judge(base.replace("    \n}", "    y[i] = p.a * x[i];\n}", 1)) is True and not judge.gave_up
    assert runs and all(runs), "every run read the precompiled preamble"


def test_the_setting_switches_the_check_off() -> None:
    assert front_end_for(BASE, None, CompileFlags(), Settings(type_check=False)) is None
    if find_clang() is not None:
        assert front_end_for(BASE, None, CompileFlags(), Settings()) is not None


def test_a_missing_configured_clang_is_one_line() -> None:
    assert front_end_for(BASE, None, CompileFlags(), Settings(clang="/nowhere/clang++")) is None


@pytest.fixture(scope="module")
def prepared() -> PreparedFill:
    found = prepare(Tokenizer(EMBEDDED_MODEL), 512, BASE, Position(LINE, 4), Settings())
    assert found is not None and found.context.hole.kind == "line"
    return found


def result(*fills: tuple[str, float]) -> FillResult:
    return FillResult([text for text, _ in fills], 1, [score for _, score in fills], [24] * len(fills))


def test_a_fill_clang_rejects_is_remasked_where_it_points_and_the_repair_shown(prepared: PreparedFill,
                                                                               judge: ClangJudge) -> None:
    asked: list[FillRequest] = []

    def filler(request: FillRequest) -> FillResult:
        asked.append(request)
        return result(("y[i] = p.a * x[i];", -0.3))

    completion = prepared.completion(result(("y[i] = p.c * x[i];", -0.1)), filler, document=BASE,
                                     front_end=judge)
    assert [r.draft for r in asked] == [Draft("y[i] = p.c * x[i];", spans=((7, 12),), grow=2, over_fill=True)]
    assert completion.texts == ["y[i] = p.a * x[i];"]
    assert completion.checks == [Checks(True, True, None, True)]


def test_a_fill_clang_still_rejects_is_withheld_and_says_why(prepared: PreparedFill, judge: ClangJudge) -> None:
    completion = prepared.completion(result(("y[i] = p.c * x[i];", -0.1)),
                                     lambda request: result(("y[i] = p.d * x[i];", -0.3)), document=BASE,
                                     front_end=judge)
    assert completion.texts == []
    assert completion.withheld == "no fill passed the checks (1 tried; the best does not type-check)"


def test_a_passing_fill_below_a_failing_one_is_shown(prepared: PreparedFill, judge: ClangJudge) -> None:
    completion = prepared.completion(result(("float *index = n;", -0.1), ("y[i] = x[i];", -0.5)), None,
                                     document=BASE, front_end=judge)
    assert completion.texts == ["y[i] = x[i];"]
    assert completion.checks == [Checks(True, True, None, True)]


def test_a_fill_must_leave_the_rest_of_its_function_compiling() -> None:
    """The line the user has not written yet declared `j`, which the lines after it use: the base has
    "use of undeclared identifier 'j'" below the hole; a fill that declares something else leaves that
    error in its function and fails, although the base had the same message; errors in other functions
    that the base had do not count against it (where the file is broken above the fill, clang's recovery
    may reach it: then only new messages count: tests/test_lsp_inline_completion.py)."""
    base = ("__global__ void scale(const float* x, float* y, int n) {\n"
            "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
            "    \n"
            "    if (j < n) y[j] = x[j];\n"
            "}\n"
            "__device__ float other(float v) { return v + missing_elsewhere; }\n")
    judge = _judge(base)
    assert judge(base.replace("    \n", "    int k = i;\n", 1)) is False
    assert judge(base.replace("    \n", "    int j = i;\n", 1)) is True


def test_clang_overrules_the_name_index_only_when_asked(prepared: PreparedFill, judge: ClangJudge) -> None:
    """`__builtin_fmaf` is a compiler builtin no header declares: the name index does not know it, clang does.
    With `names_by_front_end` clang reads the fill and its verdict settles the names; a truly unknown name
    stays withheld either way."""
    from dataclasses import replace

    from dice_lsp.complete import PRODUCT

    builtin = result(("y[i] = __builtin_fmaf(x[i], 2.0f, 1.0f);", -0.1))
    plain = prepared.completion(builtin, None, document=BASE, front_end=judge)
    assert plain.texts == []
    assert plain.withheld == "no fill passed the checks (1 tried; the best uses unknown names (__builtin_fmaf))"
    asked = replace(PRODUCT, names_by_front_end=True)
    shown = prepared.completion(builtin, None, document=BASE, pipeline=asked, front_end=judge)
    assert shown.texts == ["y[i] = __builtin_fmaf(x[i], 2.0f, 1.0f);"]
    assert shown.checks == [Checks(True, True, None, True)]
    unknown = prepared.completion(result(("y[i] = fooo(x[i]);", -0.1)), None, document=BASE, pipeline=asked,
                                  front_end=judge)
    assert unknown.texts == []
    assert unknown.withheld == "no fill passed the checks (1 tried; the best uses unknown names (fooo))"


def test_a_completion_never_waits_for_clang_to_read_a_file_s_headers_the_first_time(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Before a file's preamble is precompiled, a run reads every header: it gets `FrontEnd.cold_timeout`
    (here made ~0 to stand for a file that includes Thrust or ATen); past it there is no verdict, the judge
    runs clang no more for that completion, and the preamble builds in the background; the next completion
    in the file reads it and gets clang's verdict."""
    import time
    import uuid

    from dice_lsp.toolchain import clang

    _judge()  # clang is there and reads the toolkit
    base = BASE.replace("#include <cstdio>\n", f"#include <cstdio>\n#define DICE_TEST_{uuid.uuid4().hex} 1\n")
    lines = base.split("\n")
    at = lines.index("    ")
    wrong = "\n".join([*lines[:at], "    y[i] = p.c * x[i];", *lines[at + 1:]])
    monkeypatch.setattr(clang, "COLD_CHECK_TIMEOUT_S", 0.001)
    monkeypatch.setattr(clang, "COLD_CHECK_FACTOR", 0.0)
    cold = _judge(base)
    started = time.perf_counter()
    assert cold(wrong) is None and cold.gave_up
    assert cold(wrong.replace("p.c", "p.d")) is None
    assert time.perf_counter() - started < 2.0
    deadline = time.monotonic() + 120
    warm = _judge(base)
    while warm(wrong) is None and time.monotonic() < deadline:  # the preamble is still being built
        time.sleep(0.5)
        warm = _judge(base)
    assert warm(wrong) is False and not warm.gave_up
    assert warm(wrong.replace("p.c * x[i]", "p.a * x[i]")) is True


def test_the_first_check_after_a_file_opens_waits_for_its_preamble_instead_of_reading_every_header(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """An editor asks for a completion right after it opens a file, while the file's preamble is being precompiled
    (`warm`): the check waits for that build and reads the preamble, instead of reading every header in two more
    clang runs (the base and the fill) beside the build — three processes on the same headers, ~1 s on 2 cores."""
    import uuid

    from dice_lsp.toolchain import clang

    _judge()  # clang is there and reads the toolkit
    monkeypatch.setattr(clang, "COLD_CHECK_TIMEOUT_S", 60.0)  # as long as the build may take on a loaded machine
    runs = _checks_with_the_preamble(monkeypatch)
    base = BASE.replace("#include <cstdio>\n", f"#include <cstdio>\n#define DICE_TEST_{uuid.uuid4().hex} 1\n")
    lines = base.split("\n")
    at = lines.index("    ")
    wrong = "\n".join([*lines[:at], "    y[i] = p.c * x[i];", *lines[at + 1:]])
    judge = _judge(base)
    judge.warm()  # the file opened: its preamble's build starts
    assert judge(wrong) is False and not judge.gave_up
    assert runs == [True, True], "both runs read the precompiled preamble"


def _fake_builds(monkeypatch: pytest.MonkeyPatch,
                 build: Callable[..., Built]) -> tuple[clang.Preambles, clang.FrontEnd]:
    """Fresh preambles whose builds run `build(self, key, front, flags, readable, preamble)` instead of clang."""
    monkeypatch.setattr(clang.Preambles, "_build", build)
    return clang.Preambles(), clang.FrontEnd(Path("/usr/bin/clang++"), (), ())


def test_preambles_build_one_at_a_time_the_most_recently_asked_for_first(monkeypatch: pytest.MonkeyPatch) -> None:
    """An editor restoring a session opens many files at once: their preamble builds queue, one runs at a time,
    and the file asked for last (the one being edited) is built next."""
    import threading
    import time

    from dice_lsp.toolchain import clang

    started: list[str] = []
    running: list[str] = []
    most = [0]
    release = threading.Event()

    def build(self: clang.Preambles, key: str, front: clang.FrontEnd, flags: list[str], readable: list[Path],
              preamble: str) -> clang.Built:
        running.append(preamble)
        most[0] = max(most[0], len(running))
        started.append(preamble)
        if preamble == "first":
            release.wait(30)
        running.remove(preamble)
        return clang.Built(None)

    preambles, front = _fake_builds(monkeypatch, build)
    assert preambles.get(front, [], [], "first") is None
    deadline = time.monotonic() + 30
    while started != ["first"] and time.monotonic() < deadline:
        time.sleep(0.01)
    for asked in ("second", "third", "second"):  # "second" is asked for again last: the file being edited
        assert preambles.get(front, [], [], asked) is None
    release.set()
    while len(started) < 3 and time.monotonic() < deadline:
        time.sleep(0.01)
    while preambles.get(front, [], [], "third") is None and time.monotonic() < deadline:
        time.sleep(0.01)
    assert started == ["first", "second", "third"] and most == [1]


def test_a_completion_does_not_wait_for_a_build_queued_behind_another_file_s(monkeypatch: pytest.MonkeyPatch) -> None:
    """The editor opened two files: the first one's build runs (CUB's takes seconds), the second's is queued behind
    it. A completion in the second file does not wait its bound for a build that has not started (it is judged
    without clang at once); once the other build is done and this one runs, a completion waits for it again."""
    import threading
    import time

    from dice_lsp.toolchain import clang

    release = {name: threading.Event() for name in ("first", "second")}

    def build(self: clang.Preambles, key: str, front: clang.FrontEnd, flags: list[str], readable: list[Path],
              preamble: str) -> clang.Built:
        release[preamble].wait(30)
        return clang.Built(None)

    preambles, front = _fake_builds(monkeypatch, build)
    assert preambles.get(front, [], [], "first") is None
    deadline = time.monotonic() + 30
    while preambles.building is None and time.monotonic() < deadline:
        time.sleep(0.01)
    assert preambles.get(front, [], [], "second") is None  # opened: queued behind "first"
    started = time.monotonic()
    assert preambles.get(front, [], [], "second", wait=5.0, behind=False) is None
    assert time.monotonic() - started < 2.5, "a completion waited for a build that had not started"
    release["first"].set()
    while preambles.building in (None, clang._key(front, [], [], "first")) and time.monotonic() < deadline:
        time.sleep(0.01)
    threading.Timer(0.3, release["second"].set).start()  # its own build runs now: worth the wait
    assert preambles.get(front, [], [], "second", wait=20.0, behind=False) == clang.Built(None)


def test_a_completion_waits_for_its_file_s_build_only_during_the_build_s_first_seconds(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The first completion after a file opened waits for what is left of its preamble build's first `wait`
    seconds; when the build outlasts them (CUB's takes ~10 s on 2 cores), the next completion in the file does not
    wait for it again (it is judged without clang at once, not after another second), and once the build is done
    a completion reads it."""
    import threading
    import time

    from dice_lsp.toolchain import clang

    release = threading.Event()

    def build(self: clang.Preambles, key: str, front: clang.FrontEnd, flags: list[str], readable: list[Path],
              preamble: str) -> clang.Built:
        release.wait(30)
        return clang.Built(None)

    preambles, front = _fake_builds(monkeypatch, build)
    assert preambles.get(front, [], [], "slow") is None  # the file opened: its build starts
    time.sleep(0.3)  # the completion's fill
    started = time.monotonic()
    assert preambles.get(front, [], [], "slow", wait=0.8, behind=False) is None  # waits for what is left
    assert 0.3 <= time.monotonic() - started < 0.7
    started = time.monotonic()
    assert preambles.get(front, [], [], "slow", wait=0.8, behind=False) is None  # the next does not, again
    assert time.monotonic() - started < 0.2
    started = time.monotonic()
    assert preambles.get(front, [], [], "slow", wait=0.5) is None  # a command still waits
    assert time.monotonic() - started >= 0.45
    release.set()
    deadline = time.monotonic() + 30
    while preambles.get(front, [], [], "slow") is None and time.monotonic() < deadline:
        time.sleep(0.01)
    assert preambles.get(front, [], [], "slow", wait=0.8, behind=False) == clang.Built(None)


def test_a_check_that_waited_for_its_preamble_runs_within_what_is_left_of_the_cold_bound(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A completion right after the file opened waits for its preamble's build; the run that follows gets what is
    left of the cold bound (at least `AFTER_WAIT_S`), not a warm bound of its own on top (a CUB file's first
    completion took ~1.1 s: 0.58 s of wait, then a run that outlasted 0.5 s). A run cut short so does not count
    against the file: its next check runs with its full bound."""
    import time

    from dice_lsp.toolchain import clang

    monkeypatch.setattr(clang, "COLD_CHECK_TIMEOUT_S", 0.4)  # the product's bounds (this module widens them)
    monkeypatch.setattr(clang, "WARM_CHECK_TIMEOUT_S", 0.3)
    front = clang.FrontEnd(Path("/usr/bin/clang++"), (), (), header_seconds=0.5)  # warm bound 1.0 s, cold 1.25 s
    pch = tmp_path / "p.pch"
    pch.write_text("")
    waits = [1.0, 0.0]

    def get(self: clang.Preambles, *args: object, **kwargs: object) -> clang.Built:
        time.sleep(waits.pop(0))
        return clang.Built(pch)

    timeouts: list[float] = []

    def run(front: clang.FrontEnd, argv: list[str], scratch: Path, readable: list[Path], timeout: float = 0.0,
            niceness: int = 0) -> str:
        timeouts.append(timeout)
        raise subprocess.TimeoutExpired(argv, timeout)

    monkeypatch.setattr(clang.Preambles, "get", get)
    monkeypatch.setattr(clang, "_run", run)
    text = "#include <cstdio>\n__global__ void k() {}\n"
    with pytest.raises(clang.TooSlow) as cut_short:
        clang.front_errors(front, text, None, CompileFlags())
    assert clang.AFTER_WAIT_S <= timeouts[0] <= 0.3 and cut_short.value.key is None
    with pytest.raises(clang.TooSlow) as slow:
        clang.front_errors(front, text, None, CompileFlags())
    assert timeouts[1] == front.warm_timeout == 1.0 and slow.value.key is not None


def test_a_preamble_build_runs_at_low_priority(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import subprocess

    from dice_lsp.toolchain import clang

    seen: list[tuple[str, object]] = []

    def run_tool(argv: list[str], *args: object, **kwargs: object) -> subprocess.CompletedProcess[str]:
        seen.append((argv[0], kwargs.get("niceness", 0)))
        return subprocess.CompletedProcess(argv, 0, "", "")

    monkeypatch.setattr(clang, "run_tool", run_tool)
    front = clang.FrontEnd(Path("/usr/bin/clang++"), ("--cuda-host-only",), ())
    clang.Preambles()._build("k", front, ["-std=c++17"], [], "#include <cstdio>\n")
    clang._run(front, ["-fsyntax-only", "source.cu"], tmp_path, [])
    clang.Preambles()._build("k", replace(front, urgent=True), ["-std=c++17"], [], "#include <cstdio>\n")
    assert seen == [("/usr/bin/clang++", clang.BUILD_NICENESS),  # sandbox.run_tool lowers it (its own test)
                    ("/usr/bin/clang++", 0),  # a completion's check runs at the editor's priority
                    ("/usr/bin/clang++", 0)]  # the build a command waits for alone: at its priority too


def test_a_patient_judge_asks_for_an_urgent_build_and_the_editor_s_background_reading_does_not(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """`dice-lsp complete` waits for clang's verdict and runs nothing beside it: a build lowered in priority would,
    on a busy machine, outlast even its patient time; the language server's read-through on opening a file is
    background work."""
    from dice_lsp.toolchain import clang

    front = clang.FrontEnd(Path("/usr/bin/clang++"), (), ())
    monkeypatch.setattr(clang, "front_end", lambda *args: front)
    patient = clang.ClangJudge(Path("/usr/bin/clang++"), Path("/usr/local/cuda"), BASE, None, CompileFlags(), True)
    editor = clang.ClangJudge(Path("/usr/bin/clang++"), Path("/usr/local/cuda"), BASE, None, CompileFlags())
    assert patient.front is not None and patient.front.urgent
    assert patient.front.least_seconds == clang.PATIENT_CHECK_TIMEOUT_S
    assert editor.front is front and not front.urgent


def test_a_file_whose_preamble_cannot_be_precompiled_and_reads_too_slowly_gets_no_more_runs(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """clang cannot precompile a preamble with an error in it, so every check reads such a file whole; once one
    of those runs outlasts the cold bound in two completions in a row, checks in the file run clang no more
    (each completion there had paid the whole bound for no verdict)."""
    import uuid

    from dice_lsp.toolchain import clang

    base = f"#include <cstdio>\n#error not precompiled {uuid.uuid4().hex}\n" + BASE
    fill = base.replace("    \n}", "    float *index = n;\n}", 1)
    built = _built(base)
    assert built.pch is None and built.readable  # read whole by every check
    monkeypatch.setattr(clang, "COLD_CHECK_TIMEOUT_S", 0.001)
    monkeypatch.setattr(clang, "COLD_CHECK_FACTOR", 0.0)
    for _ in range(clang.SLOW_RUNS):  # one completion after another
        slow = _judge(base)
        assert slow(fill) is None and slow.gave_up
    runs: list[list[str]] = []
    monkeypatch.setattr(clang, "_run", lambda front, argv, *rest, **kw: runs.append(argv) or "")
    assert _judge(base)(fill) is None and runs == []


def test_a_file_whose_checks_outlast_the_warm_bound_gets_no_more_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    """With its preamble precompiled, a check of a kernel that instantiates heavy templates (CUB) still takes
    ~0.5-0.9 s; past `FrontEnd.warm_timeout` (here made ~0) that completion has no verdict, and after two such
    completions in a row the file's later ones run no clang (they get the cheap checks) instead of each paying
    the bound again."""
    import uuid

    from dice_lsp.toolchain import clang

    base = BASE.replace("#include <cstdio>\n", f"#include <cstdio>\n#define DICE_TEST_{uuid.uuid4().hex} 1\n")
    fill = base.replace("    \n}", "    float *index = n;\n}", 1)
    assert _built(base).pch is not None
    assert _judge(base)(fill) is False  # within the bound: clang's verdict
    monkeypatch.setattr(clang, "WARM_CHECK_TIMEOUT_S", 0.001)
    monkeypatch.setattr(clang, "WARM_CHECK_FACTOR", 0.0)
    for _ in range(clang.SLOW_RUNS):
        slow = _judge(base)
        assert slow(fill.replace("index", "other")) is None and slow.gave_up
    runs: list[list[str]] = []
    monkeypatch.setattr(clang, "_run", lambda front, argv, *rest, **kw: runs.append(argv) or "")
    assert _judge(base)(fill) is None and runs == []


def test_one_slow_check_on_a_busy_machine_does_not_switch_clang_off_for_the_file() -> None:
    from dice_lsp.toolchain import clang

    preambles = clang.Preambles()
    preambles.slow("file")
    preambles.in_time("file")  # the next check was in time
    preambles.slow("file")
    assert not preambles.unreadable("file")
    preambles.slow("file")  # two in a row
    assert preambles.unreadable("file")


def test_a_file_read_whole_that_clang_cannot_read_is_not_read_again(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """A file whose code comes before its #include lines has no preamble to precompile, so each check reads it
    whole; when such a read stops at a header clang cannot find, every later check in the file would stop there
    too: they run no clang."""
    import uuid

    from dice_lsp.toolchain import clang

    base = f'static const int dice_{uuid.uuid4().hex} = 1;\n#include "../not_there.h"\n' + BASE
    assert clang.preamble_lines(base) == 0
    fill = base.replace("    \n}", "    float *index = n;\n}", 1)
    assert _judge(base, tmp_path)(fill) is None
    runs: list[list[str]] = []
    real_run = clang._run
    monkeypatch.setattr(clang, "_run", lambda front, argv, *rest, **kw: runs.append(argv) or "")
    assert _judge(base, tmp_path)(fill) is None and runs == []
    readable = base.replace('#include "../not_there.h"\n', "")  # other #include lines: judged as before
    monkeypatch.setattr(clang, "_run", real_run)  # (not `undo`: the module's generous bounds stay)
    assert _judge(readable, tmp_path)(readable.replace("    \n}", "    float *index = n;\n}", 1)) is False


@pytest.mark.parametrize("wrap", ["guard", "if"])
def test_a_missing_header_past_the_preamble_is_stood_in_for_from_the_file_s_next_check(tmp_path: Path,
                                                                                       wrap: str) -> None:
    """An `#if` around the whole file (OpenCV's `#if !defined CUDA_DISABLER`) puts #include lines past the
    preamble: the check that meets a missing one there has no verdict and stands in for it; the file's next checks
    judge. Under an include guard (blanked for the check: `unguarded`) they are the preamble's, whose build stands
    in for them before the first check."""
    import uuid

    tag = f"T_{uuid.uuid4().hex}"
    opening = f"#ifndef {tag}\n#define {tag}\n" if wrap == "guard" else f"// file\n#if !defined {tag}\n"
    base = opening + f'#include "project/{tag}.h"\n' + BASE + "#endif\n"
    assert (clang.preamble_lines(base) == 0) == (wrap == "guard")
    first = _judge(base, tmp_path)(base.replace("    \n}", "    float *index = n;\n}", 1))
    assert first is (False if wrap == "guard" else None)
    judge = _judge(base, tmp_path)
    assert judge(base.replace("    \n}", "    float *index = n;\n}", 1)) is False
    assert judge(base.replace("    \n}", "    y[i] = p.a * x[i];\n}", 1)) is True
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("wrap", ["guard", "if"])
def test_opening_a_file_stands_in_for_every_missing_header_past_its_preamble(tmp_path: Path, wrap: str) -> None:
    """The language server reads a file through once when it opens (`ClangJudge.discover`, in the background):
    each missing header past the preamble gets its stand-in then, so the first completion already has a
    verdict instead of the first few completions having none, one per such header."""
    import uuid

    tag = f"T_{uuid.uuid4().hex}"
    opening = f"#ifndef {tag}\n#define {tag}\n" if wrap == "guard" else f"// file\n#if !defined {tag}\n"
    base = (opening + "".join(f'#include "project/{tag}_{k}.h"\n' for k in range(3)) + BASE + "#endif\n")
    assert _judge(base, tmp_path).discover() == (0 if wrap == "guard" else 3)  # a guard's: the preamble's build
    judge = _judge(base, tmp_path)
    assert judge(base.replace("    \n}", "    float *index = n;\n}", 1)) is False
    assert judge(base.replace("    \n}", "    y[i] = p.a * x[i];\n}", 1)) is True
    assert _judge(base, tmp_path).discover() == 0  # nothing left to stand in for: one run
    assert list(tmp_path.iterdir()) == []


def test_files_opened_together_are_read_through_one_run_at_a_time(monkeypatch: pytest.MonkeyPatch) -> None:
    """An editor restoring a session opens many files at once: their read-through runs never overlap."""
    import threading
    import time

    judge = _judge()
    running, most = [0], [0]
    lock = threading.Lock()

    def front_errors(*args: object, **kwargs: object) -> list[clang.Error]:
        with lock:
            running[0] += 1
            most[0] = max(most[0], running[0])
        time.sleep(0.05)
        with lock:
            running[0] -= 1
        return clang.Errors()

    monkeypatch.setattr(clang, "front_errors", front_errors)
    threads = [threading.Thread(target=judge.discover) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert most[0] == 1


def _built(base: str) -> Built:
    """`base`'s preamble build, once done (started here if it was not)."""
    import time

    from dice_lsp.toolchain import clang

    front = _judge(base).front
    assert front is not None
    preamble = clang._preamble(base.split("\n"), clang.preamble_lines(base))
    options, readable = clang._invocation(front, None, CompileFlags())
    deadline = time.monotonic() + 60
    while (built := clang.preambles().get(front, options, readable, preamble)) is None and time.monotonic() < deadline:
        time.sleep(0.1)
    assert built is not None, "the preamble's build did not end within 60 s"
    return built


def test_a_command_gives_the_check_the_time_it_needs_and_an_editor_bounds_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(clang, "COLD_CHECK_TIMEOUT_S", 0.4)  # the product's bounds (this module widens them)
    monkeypatch.setattr(clang, "WARM_CHECK_TIMEOUT_S", 0.3)
    editor, command = _judge(), clang_judge(BASE, None, CompileFlags(), patient=True)
    assert command is not None and command.front is not None and editor.front is not None
    assert editor.front.cold_timeout < 5 and editor.front.warm_timeout < 5
    assert command.front.cold_timeout == command.front.warm_timeout == clang.PATIENT_CHECK_TIMEOUT_S
    assert command(filled("y[i] = p.c;")) is False  # the same verdicts


def test_the_configuration_a_toolchain_needed_is_tried_first_in_the_next_process(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """clang 19 reads CUDA 13's headers only with stub headers: the plain self-test fails in every process (~0.5 s
    of a core each); once that is known (remembered in the cache folder, by the clang binary and the toolkit's
    runtime header) the next process tries the stubbed configuration first. A memory of a failure that was no
    diagnostic (clang could not run) is not kept, and an unreadable memory is no memory."""
    from dice_lsp.toolchain import clang

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    binary, cuda = tmp_path / "clang++", tmp_path / "cuda"
    binary.write_text("")
    (cuda / "include").mkdir(parents=True)
    (cuda / "include" / "cuda_runtime.h").write_text("")
    tested: list[str] = []
    answers = {"plain": "source.cu:1:2: error: unknown type name 'texture'", "stubbed": None}

    def self_test(front: clang.FrontEnd) -> tuple[str | None, float]:
        variant = "stubbed" if front.readable else "plain"
        tested.append(variant)
        return answers[variant], 0.1

    monkeypatch.setattr(clang, "_self_test", self_test)
    monkeypatch.setattr(clang, "_stubs", lambda clang_path, toolkit: tmp_path / "stubs")
    for _ in range(2):
        clang._front_end.cache_clear()
        found = clang._front_end(binary, cuda)
        assert found is not None and found.readable == (tmp_path / "stubs",) and found.header_seconds == 0.1
    assert tested == ["plain", "stubbed", "stubbed"]
    (cuda / "include" / "cuda_runtime.h").write_text("// another toolkit\n")  # the memory is not for this one
    tested.clear()
    answers["plain"] = "[Errno 2] No such file or directory: 'clang++'"
    clang._front_end.cache_clear()
    clang._front_end(binary, cuda)
    clang._front_end.cache_clear()
    clang._front_end(binary, cuda)
    assert tested == ["plain", "stubbed", "plain", "stubbed"]
    (tmp_path / "dice-lsp" / clang.FRONT_END_MEMORY).write_text("not json")
    (cuda / "include" / "cuda_runtime.h").write_text("")
    tested.clear()
    clang._front_end.cache_clear()
    clang._front_end(binary, cuda)
    assert tested == ["plain", "stubbed"]
    clang._front_end.cache_clear()
