"""The team server's sandbox: a client's sources and code reach nothing of the host, and confined compiles
say what direct ones say. Real `dice-lsp serve` processes, real sockets, real nvcc, real bubblewrap."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import socket
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from dice_lsp import sandbox
from dice_lsp.harness.isolate import run_isolated
from dice_lsp.remote.protocol import RemoteError
from dice_lsp.toolchain.clang import find_clang
from dice_lsp.toolchain.nvcc import find_nvcc
from dice_lsp.toolchain.report import check_source

from .remote_server import ask, serving, token_file

ROOT = Path(__file__).resolve().parents[1]
TESTS = Path(__file__).resolve().parent
TOKEN = "sandbox-team-secret"
SECRET = "DICE_SECRET_4f1c9a7e"  # an identifier: a compile that read it would quote it as "undefined"
EXAMPLE_FILE = ROOT / "examples" / "vector_add.cu"
KERNEL = "__global__ void k(float* x) { x[threadIdx.x] = 1.0f; }\n"


def leak(include: str) -> str:
    """A file whose include lands in an expression: a compile that reads it quotes its words as undefined."""
    return f"int leak =\n#include {include}\n;\n{KERNEL}"


@dataclass(frozen=True)
class Host:
    url: str
    folder: Path
    secret: Path  # a file of the server's host holding SECRET
    home: Path  # the server's $HOME
    pid: int  # the server's process


@pytest.fixture(scope="module")
def host(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Host]:
    """A sandboxed `dice-lsp serve` whose $HOME, environment and a host file hold secrets."""
    folder = tmp_path_factory.mktemp("host")
    (home := folder / "home").mkdir()
    (secret := folder / "app.env").write_text(f"{SECRET}\n")
    tokens = token_file(folder, TOKEN)
    with pytest.MonkeyPatch.context() as env:
        env.setenv("HOME", str(home))
        env.setenv("DICE_SERVER_SECRET", SECRET)
        with serving("--port", "0", "--token-file", str(tokens), token=TOKEN) as (url, process):
            yield Host(url, folder, secret, home, process.pid)


def call(host: Host, method: str, params: dict[str, Any]) -> Any:
    return asyncio.run(ask(host.url, method, params, TOKEN))


def refused(host: Host, method: str, params: dict[str, Any]) -> RemoteError:
    with pytest.raises(RemoteError) as error:
        call(host, method, params)
    return error.value


def test_status_says_the_server_is_sandboxed(host: Host) -> None:
    assert call(host, "status", {})["sandbox"] == "bubblewrap"


def test_an_include_of_a_host_path_is_refused_in_one_line_that_discloses_nothing(host: Host) -> None:
    missing = host.folder / "no-such.env"
    for include in (f'"{host.secret}"', f"<{host.secret}>", '"/dev/zero"', '"/dev/stdin"', '"/proc/self/environ"',
                    f'"../../../../../../../..{host.secret}"'):
        error = refused(host, "check", {"text": leak(include), "path": "k.cu"})
        assert error.code == "bad_params" and "\n" not in str(error)
        assert f"k.cu:2: #include {include} names a file outside the request" in str(error)
        assert SECRET not in str(error)
    probes = [refused(host, "check", {"text": f'#if __has_include("{path}")\n#endif\n{KERNEL}', "path": "k.cu"})
              for path in (host.secret, missing)]
    assert str(probes[0]).replace(str(host.secret), "X") == str(probes[1]).replace(str(missing), "X"), \
        "the same answer whether the path exists or not"
    header = {"text": f'#include "inc/a.cuh"\n{KERNEL}', "path": "k.cu",
              "files": {"inc/a.cuh": '#include "../inc/b.cuh"\n', "inc/b.cuh": "#define B 1\n"}}
    assert call(host, "check", header)["diagnostics"] == [], "a `..` among the request's own files is fine"
    toolkit = sandbox.toolkit_roots(find_nvcc())[0]
    absolute = {"text": f'#include "{toolkit}/include/cuda_runtime.h"\n{KERNEL}', "path": "k.cu"}
    assert call(host, "check", absolute)["diagnostics"] == [], "the toolkit's own headers may be named"


def test_an_include_built_by_a_macro_reads_nothing_of_the_host(host: Host) -> None:
    """The pre-check cannot see this path; the sandbox shows the compile nothing of the host."""
    text = f'#define HOST_FILE "{host.secret}"\n' + leak("HOST_FILE")
    report = call(host, "check", {"text": text, "path": "k.cu"})
    assert SECRET not in json.dumps(report)
    errors = [d["message"] for d in report["diagnostics"] if d["severity"] == "error"]
    assert errors == [f"{host.secret}: No such file or directory"]
    answers = []
    for path in (host.secret, host.folder / "no-such.env"):
        probe = f'#define P "{path}"\n#if __has_include(P)\n#error present\n#endif\n{KERNEL}'
        answers.append(call(host, "check", {"text": probe, "path": "k.cu"})["diagnostics"])
    assert answers[0] == answers[1] == [], "__has_include says nothing about the server's files"


def test_a_macro_built_proc_path_shows_only_the_sandbox_itself(host: Host) -> None:
    """/proc inside the sandbox is its own PID namespace's: /proc/self/environ is the compiler's fixed environment,
    /proc/1/cmdline the sandbox's first process, never the server's (whose environment holds SECRET)."""
    for path in ("/proc/self/environ", "/proc/1/environ", "/proc/1/cmdline", "/proc/self/cwd/../token"):
        report = call(host, "check", {"text": f'#define P "{path}"\n' + leak("P"), "path": "k.cu"})
        said = json.dumps(report)
        assert SECRET not in said and TOKEN not in said and "dice_lsp.cli" not in said, said


def test_dev_zero_through_a_macro_ends_in_a_compile_error_within_the_limits(host: Host) -> None:
    started = time.monotonic()
    report = call(host, "check", {"text": f'#define Z "/dev/zero"\n#include Z\n{KERNEL}', "path": "k.cu"})
    assert time.monotonic() - started < 60
    errors = [d["message"] for d in report["diagnostics"] if d["severity"] == "error"]
    assert errors and "out of memory" in errors[0], errors
    assert call(host, "status", {})["state"] == "ready", "the server carries on"


def _stat(path: Path) -> tuple[int, int, int]:
    status = path.lstat()
    return status.st_uid, status.st_gid, stat.S_IMODE(status.st_mode)


def test_a_request_names_no_host_folder_and_the_server_changes_no_owner(host: Host) -> None:
    """Include folders from the request's settings or its compile_commands.json (absolute, `..`, `/proc/PID/cwd`,
    a database's `directory`) are refused before anything is mounted; a root server chowned such a folder's
    unreadable files to the sandbox's user and the compile quoted them."""
    (decoy := host.folder / "decoy").mkdir(mode=0o700, exist_ok=True)
    (marker := decoy / "secret.h").write_text(f"int x = {SECRET};\n")
    marker.chmod(0o600)
    before = {path: _stat(path) for path in (decoy, marker, host.secret)}
    text = f'#include "secret.h"\n{KERNEL}'

    def database(directory: str, include: str) -> str:
        return json.dumps([{"directory": directory, "file": "k.cu", "arguments": ["nvcc", f"-I{include}", "k.cu"]}])

    requests = [{"settings": {"includeDirs": [str(decoy)]}},
                {"settings": {"includeDirs": [f"../../../../../../../..{decoy}"]}},
                {"settings": {"includeDirs": ["/proc/self/cwd"]}},
                {"files": {"compile_commands.json": database(str(decoy), ".")}},
                {"files": {"compile_commands.json": database(".", ".")}},
                {"files": {"compile_commands.json": database("sub", str(decoy))}}]
    for extra in requests:
        error = refused(host, "check", {"text": text, "path": "k.cu", **extra})
        assert error.code == "bad_params" and "names an include folder outside the request" in str(error), error
        assert SECRET not in str(error) and str(decoy) not in str(error) and "\n" not in str(error)
    assert {path: _stat(path) for path in before} == before, "nothing of the host changed owner or mode"
    own = {"text": text, "path": "k.cu", "settings": {"includeDirs": ["inc"]},
           "files": {"inc/secret.h": "int x = 1;\n"}}
    assert call(host, "check", own)["diagnostics"] == [], "a folder the request sent is fine"


def _descends_from(pid: int, ancestor: int) -> bool:
    """Whether process `pid` runs under `ancestor` (its parents read from /proc; OSError once one exits)."""
    while pid > 1:
        pid = int(Path(f"/proc/{pid}/status").read_text().split("PPid:")[1].split()[0])
        if pid == ancestor:
            return True
    return False


def _clang_processes(server: int, seen: dict[int, tuple[int, int, str]], stop: threading.Event) -> None:
    """Note (uid, PID namespace, command line) of every clang process the server at `server` started, until `stop`
    (tests in other workers run clang of their own at the same time)."""
    while not stop.is_set():
        for entry in os.scandir("/proc"):
            if not entry.name.isdigit():
                continue
            with contextlib.suppress(OSError):
                if (Path(f"/proc/{entry.name}/comm").read_text().startswith("clang")
                        and _descends_from(int(entry.name), server)):
                    uid = int(Path(f"/proc/{entry.name}/status").read_text().split("Uid:")[1].split()[1])
                    line = Path(f"/proc/{entry.name}/cmdline").read_bytes().replace(b"\0", b" ").decode()
                    namespace = os.stat(f"/proc/{entry.name}/ns/pid").st_ino
                    known = seen.get(int(entry.name))  # mid-exec the name is clang's before the command line is
                    seen[int(entry.name)] = (uid, namespace, line if known is None or line else known[2])
        time.sleep(0.005)


@pytest.mark.skipif(find_clang() is None, reason="needs clang (the completion's front-end check)")
def test_a_team_completion_reads_nothing_of_the_host_and_runs_clang_in_the_sandbox(host: Host) -> None:
    """`complete` ran clang on the client's text in worker processes that never switched the sandbox on, as the
    server's user, and skipped the include pre-check."""
    for include in (f'"{host.secret}"', '"/dev/zero"'):
        error = refused(host, "complete", {"text": leak(include), "line": 3, "character": 4})
        assert error.code == "bad_params" and "names a file outside the request" in str(error)
    seen: dict[int, tuple[int, int, str]] = {}
    stop = threading.Event()
    watcher = threading.Thread(target=_clang_processes, args=(host.pid, seen, stop), daemon=True)
    watcher.start()
    try:
        for n in range(3):  # a new file each time: clang reads it through, then checks the fills
            text = f"#define VARIANT {n}\n" + EXAMPLE_FILE.read_text()
            # every candidate sure enough to show (minConfidence 0), so clang judges them: the path, not the decision
            call(host, "complete", {"text": text, "line": 8, "character": 4, "settings": {"minConfidence": 0}})
    finally:
        stop.set()
        watcher.join()
    # runs that read the request's text (a check of the file, its preamble); not the server's own probe of its
    # clang (`-print-resource-dir`), nor a process caught mid-exec before its command line showed
    reads = {pid: seen_ for pid, seen_ in seen.items() if "source.cu" in seen_[2] or "-emit-pch" in seen_[2]}
    assert reads, "the completions ran clang on their text"
    mine = os.stat("/proc/self/ns/pid").st_ino
    assert all(uid == sandbox.SANDBOX_ID and namespace != mine for uid, namespace, _ in reads.values()), reads


def test_the_sandbox_shows_a_run_only_folders_made_for_it(tmp_path: Path) -> None:
    """The last line of defence: whatever names a folder, a confined run is shown only folders this process made
    for its runs (and the system's), and a root server changes the owner of nothing else."""
    (foreign := tmp_path / "foreign").mkdir(mode=0o700)
    (inside := foreign / "private.h").write_text("x\n")
    inside.chmod(0o600)
    before = _stat(inside)
    with sandbox.confined(find_nvcc()), sandbox.owning(scratch := tmp_path / "scratch"):
        scratch.mkdir()
        with pytest.raises(sandbox.SandboxError, match="not a folder dice-lsp made for it"):
            sandbox.run_tool(["cat", str(inside)], scratch, 30, readable=[foreign])
        with pytest.raises(sandbox.SandboxError):
            sandbox.run_tool(["true"], foreign, 30)
    assert _stat(inside) == before


def test_a_dice_reference_comment_answers_nothing_about_server_paths(host: Host) -> None:
    answers = []
    for named in ("/etc/passwd", "/no/such/ref.py", "../../../../etc/passwd"):
        text = f"// dice:reference {named}\n#include <torch/extension.h>\n"
        error = refused(host, "bench", {"text": text, "path": "k.cu"})
        assert error.code == "bad_params"
        answers.append(str(error).replace(named, "X"))
    assert answers[0] == answers[1] == answers[2]
    assert "takes the reference from the request's files" in answers[0]
    unsent = refused(host, "bench", {"text": KERNEL, "path": "k.cu", "ref": "ref.py"})
    assert str(unsent) == "ref 'ref.py' is not one of the request's files"


REFERENCE = '''
import json, os, pathlib, socket, subprocess
import torch

found = {{}}


def attempt(name, action):
    try:
        found[name] = action()
    except Exception as exc:
        found[name] = "refused: " + type(exc).__name__


attempt("token", lambda: pathlib.Path({token!r}).read_text())
attempt("home", lambda: pathlib.Path({home!r}, "planted").write_text("x") and "written")
attempt("server", lambda: socket.create_connection(("127.0.0.1", {port}), timeout=3).close() or "connected")
attempt("grandchild", lambda: subprocess.Popen(["sleep", {mark!r}], start_new_session=True).pid)
attempt("server_cwd", lambda: sorted(os.listdir({cwd!r})))
attempt("uid", os.getuid)
attempt("hostname", socket.gethostname)
attempt("environment", lambda: os.environ.get("DICE_SERVER_SECRET"))
print("ATTEMPTS " + json.dumps(found), flush=True)


class Model(torch.nn.Module):
    def forward(self, x):
        return x


def get_inputs():
    return [torch.randn(4)]


def get_init_inputs():
    return []
'''


def sleeping(mark: str) -> list[int]:
    """Host processes running `sleep MARK`."""
    found = []
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                if Path(entry.path, "cmdline").read_bytes().split(b"\0")[:2] == [b"sleep", mark.encode()]:
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


def test_a_kernelbench_reference_cannot_reach_the_host(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The reference is imported by the child before any GPU is asked for: its module code is the attack."""
    (home := tmp_path / "home").mkdir()
    tokens = token_file(tmp_path, TOKEN)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("DICE_SERVER_SECRET", SECRET)
    mark = "4242.4242"
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        server.settimeout(0.5)
        request = tmp_path / "request"
        request.mkdir(mode=0o700)
        (request / "ref.py").write_text(REFERENCE.format(token=str(tokens), home=str(home), mark=mark, cwd=os.getcwd(),
                                                         port=server.getsockname()[1]))
        job = {"source": str(request / "k.cu"), "name": "dice_ext_test", "build_dir": str(tmp_path / "build"),
               "reference": str(request / "ref.py"), "trials": 1}
        with sandbox.confined(find_nvcc()), sandbox.owning(request):  # as the server's request folder
            outcome = run_isolated("dice_lsp.harness.extension:run", job, 120, 4096, readable=[request])
        with pytest.raises(TimeoutError):
            server.accept()
    attempts = json.loads(outcome.output.split("ATTEMPTS ", 1)[1].splitlines()[0])
    assert attempts["token"] == "refused: FileNotFoundError" and TOKEN not in outcome.output
    assert attempts["home"].startswith("refused") and not (home / "planted").exists()
    assert attempts["server"] == "refused: ConnectionRefusedError"
    runtime = {"dice_lsp", *(Path(sys.prefix).relative_to(os.getcwd()).parts[:1]
                              if Path(sys.prefix).is_relative_to(os.getcwd()) else ())}  # a checkout's .venv
    assert (isinstance(attempts["server_cwd"], str) and attempts["server_cwd"].startswith("refused")) \
        or set(attempts["server_cwd"]) <= runtime, "of the server's working folder only what it runs is visible"
    assert attempts["uid"] == 65534 and attempts["hostname"] == "dice-sandbox"
    assert attempts["environment"] is None and SECRET not in outcome.output
    assert isinstance(attempts["grandchild"], int), "it may start processes, inside"
    deadline = time.monotonic() + 5
    while sleeping(mark) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not sleeping(mark), "a setsid grandchild died with the sandbox"
    assert not outcome.ok, "and then the reference found no GPU"


def test_a_fork_bomb_meets_the_process_limit(tmp_path: Path) -> None:
    script = "for i in $(seq 200); do sleep 2 & done"
    with sandbox.confined(find_nvcc()), sandbox.owning(tmp_path):
        done = sandbox.run_tool(["sh", "-c", script], tmp_path, 30)
    assert "Cannot fork" in done.stderr, done.stderr


def test_confined_children_are_still_killed_on_time_and_memory() -> None:
    with sandbox.confined(find_nvcc()), sandbox.owning(TESTS):
        hung = run_isolated("tests.harness_jobs:hang", {}, timeout=2, memory_mb=2048, readable=[TESTS])
        hog = run_isolated("tests.sandbox_jobs:hog_memory_in_a_grandchild", {"mib": 1500}, timeout=60, memory_mb=400,
                           readable=[TESTS])
    assert hung.failure == "timed out after 2 s (killed)" and hung.seconds < 20
    assert hog.failure is not None and "over the 400 MiB limit (killed)" in hog.failure, hog.failure or hog.output
    assert hog.seconds < 45, "counted in the sandbox although it left the process group"


def test_a_child_cannot_make_the_server_read_a_host_file_or_block(tmp_path: Path) -> None:
    """The server reads the child's result file: a link to a host file or a FIFO left there is no result."""
    (host_file := tmp_path / "host.json").write_text(json.dumps({"value": {"secret": SECRET}}))
    with sandbox.confined(find_nvcc()), sandbox.owning(TESTS):
        linked = run_isolated("tests.sandbox_jobs:result_is_a_link", {"target": str(host_file)}, timeout=30,
                              memory_mb=2048, readable=[TESTS])
        fifo = run_isolated("tests.sandbox_jobs:result_is_a_fifo", {}, timeout=30, memory_mb=2048, readable=[TESTS])
    assert linked.value is None and linked.failure == "the child process exited without a result"
    assert fifo.failure == "the child process exited without a result" and fifo.seconds < 25


SOURCES = {
    "resources": '#include "tile.cuh"\n__global__ void scale(float* y, const float* x, float a, int n) {\n'
                 "    __shared__ float t[TILE];\n    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
                 "    if (i < n) { t[threadIdx.x % TILE] = x[i]; y[i] = a * t[threadIdx.x % TILE]; }\n}\n",
    "errors": '#include "tile.cuh"\n__global__ void broken(float* y) {\n    int unused = 3;\n'
              "    y[threadIdx.x] = undefined_name + TILE\n}\n",
    "missing header": '#include "absent.cuh"\n' + KERNEL,
}


@pytest.mark.parametrize("name", list(SOURCES))
def test_confined_compiles_report_what_direct_ones_report(name: str, tmp_path: Path) -> None:
    (tmp_path / "tile.cuh").write_text("#define TILE 128\n")
    tmp_path.chmod(0o700)
    nvcc = find_nvcc()
    direct = check_source(SOURCES[name], tmp_path, nvcc=nvcc)
    with sandbox.confined(nvcc), sandbox.owning(tmp_path):
        confined = check_source(SOURCES[name], tmp_path, nvcc=nvcc)
    assert confined.diagnostics == direct.diagnostics and confined.kernels == direct.kernels
    assert direct.diagnostics or direct.kernels


def test_a_server_that_cannot_sandbox_refuses_to_start_unless_told(tmp_path: Path) -> None:
    (fake := tmp_path / "bin").mkdir()
    bwrap = fake / "bwrap"
    bwrap.write_text("#!/bin/sh\necho 'bwrap: No permissions to create a new namespace' >&2\nexit 1\n")
    bwrap.chmod(bwrap.stat().st_mode | stat.S_IXUSR)
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PATH": f"{fake}:{os.environ['PATH']}"}
    result = subprocess.run([sys.executable, "-m", "dice_lsp.cli", "serve", "--port", "0"], capture_output=True,
                            text=True, timeout=120, env=env)
    assert result.returncode == 2 and result.stderr.count("\n") == 1
    assert "cannot sandbox compiles and user code (bwrap: No permissions to create a new namespace)" in result.stderr
    assert "--unsafe-no-sandbox" in result.stderr
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PATH", env["PATH"])
        with serving("--port", "0", "--unsafe-no-sandbox") as (url, process):
            assert asyncio.run(ask(url, "status"))["sandbox"] == "off (--unsafe-no-sandbox)"
        assert process.stderr is not None and "run unconfined (--unsafe-no-sandbox)" in process.stderr.read()


def test_the_token_file_must_not_lie_where_sandboxed_code_reads() -> None:
    assert sandbox.visible(Path(sys.prefix) / "token") and sandbox.visible(Path("/usr/share/token"))
    assert not sandbox.visible(Path.home() / "token") and not sandbox.visible(Path("/tmp/token"))


@pytest.mark.gpu
def test_sandboxed_benchmarks_verify_on_the_gpu(host: Host) -> None:
    """A kernel-level launch spec and a torch-extension problem, benchmarked by the sandboxed team server, come
    back verified; a static initializer of the extension (host code the client sent) cannot touch the host."""
    saxpy = call(host, "bench", {"text": (ROOT / "examples" / "saxpy.cu").read_text(), "path": "saxpy.cu",
                                 "timeout": 120})
    [kernel] = saxpy["kernels"]
    assert saxpy["gpu"] and kernel["verified"] and kernel["speedup_vs_ref"], saxpy
    problem = ROOT / "bench" / "problems" / "kb_relu_scale"
    good = (problem / "candidates" / "good.cu").read_text()
    planted = host.home / "planted-by-an-initializer"
    initializer = f'#include <cstdlib>\nstatic int planted = std::system("id > {planted}; id > /tmp/planted");\n'
    for text in (good, initializer + good):
        report = call(host, "bench", {"text": text, "path": "good.cu", "ref": "reference.py", "timeout": 120,
                                      "files": {"reference.py": (problem / "reference.py").read_text()}})
        [kernel] = report["kernels"]
        assert report["gpu"] and report["compile"]["ok"] and kernel["verified"], report
    assert not planted.exists() and not Path("/tmp/planted").exists()
