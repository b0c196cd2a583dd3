"""Where compilers and user code run: every nvcc call goes through `run_tool`, every harness child through
`spawn`.

nvcc runs its sub-steps (cudafe++, cicc, ptxas, the host compiler) through a shell, and a compile reads
whatever its `#include`s name; a benchmark runs a client's host code (a torch extension's initializers, a
KernelBench `ref.py`). The arguments are made safe before they get here (`toolchain.flags`,
`toolchain.nvcc`); this module decides *where* the process runs. In the editor and the CLI it runs as the
user, who asked for it. The team server (`dice-lsp serve`, Ray replicas) switches confinement on once, at
start (`switch_on`), and from then on every run happens inside bubblewrap, as Compiler Explorer runs its
compilers inside nsjail:

- visible, read-only: /usr (the system compiler and libraries), the few /etc files the loader and the
  compiler's alternatives need, the CUDA toolkit of the nvcc being run (followed through symlinks and
  wrapper scripts such as `/usr/local/bin/nvcc` -> `/usr/local/cuda-13.0`), the Python runtime and the
  dice_lsp package; the caller's `readable` folders (the request's folder, a cached build);
- writable: only the caller's `writable` folders (the scratch folder of this run);
- private: /tmp (a size-capped tmpfs), /dev (null, zero, urandom, ...; the NVIDIA device nodes only for a
  GPU run), /proc of its own PID namespace; nothing else of the host: not $HOME, not the server's working
  directory, not the token file, not the environment (the run gets a fixed one);
- its own user, network (loopback only, not the host's), IPC, UTS and PID namespaces, and no user
  namespace of its own making (`user.max_user_namespaces` is 0 inside); the sandbox dies with its parent,
  so a `setsid` grandchild cannot outlive the run;
- an unprivileged user inside (uid 65534, without capabilities) and rlimits: CPU time, file size,
  processes, no core files, and address space for compiles (a CUDA program reserves far more virtual
  memory than it uses, so the GPU child is watched by its memory, /tmp included, and by what it writes to
  disk instead: `harness.isolate`); at most `compile_slots` confined compiles at once on the machine.

RLIMIT_NPROC is counted per user namespace and user, and the kernel never applies it to host root. A server
running as an ordinary user gets that from bubblewrap's own mapping (uid 65534 inside = the server's uid
outside, the limit set inside). A server running as root maps the sandbox's user to the host's `nobody`
itself (`--userns-block-fd`): root stays mapped only so that bubblewrap can set up the mounts, and the
command is started through `setpriv`, which drops to 65534 before anything of the request runs. bubblewrap's
--disable-userns does not go with that mapping, so the server itself sets the sandbox's
`user.max_user_namespaces` to 0 while bubblewrap waits for it (`_no_user_namespaces`). As root, the folders
handed to a run are given to that user first (root's 0700 temporary folders would otherwise be closed to
it); they are the run's own folders.

Every run, confined or not, has stdin closed (an `#include "/dev/stdin"` reads nothing instead of
blocking), its own process group (killed whole on a timeout, a cancellation or a shutdown, so `cicc` does
not outlive a killed `nvcc`: `dice_lsp.lifetime` tracks every group while it runs), and a timeout. A
tool's output is read as it comes and only its first TOOL_OUTPUT_KEPT bytes per stream are kept (a
compiler that writes 300 MB of errors costs no more memory than one that writes 256 KiB).
"""

from __future__ import annotations

import atexit
import contextlib
import json
import logging
import math
import os
import re
import select
import selectors
import shutil
import signal
import site
import stat
import subprocess
import sys
import sysconfig
import tempfile
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import IO, Any

from dice_lsp.errors import DiceError
from dice_lsp.lifetime import Stopped, check_running, track, untrack

LOG = logging.getLogger("dice_lsp.sandbox")
SANDBOX_ID = 65534  # uid and gid inside the sandbox (and, for a root server, outside: the host's nobody)
HOSTNAME = "dice-sandbox"
MODE_ON = "bubblewrap"
MODE_UNSAFE = "off (--unsafe-no-sandbox)"
MODE_OFF = "off"  # the editor and the CLI: the user's own compiles
_MIB = 1 << 20
_ETC = ("/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/alternatives")
TOOL_OUTPUT_KEPT = 256 << 10  # bytes of each of a tool's streams kept (whole lines); the rest is counted, not kept
_POLL_S = 0.1  # how often a waiting run looks at its deadline and its cancellation
_PASSED_ENV = ("CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", "NVIDIA_VISIBLE_DEVICES", "NVIDIA_DRIVER_CAPABILITIES",
               "TORCH_CUDA_ARCH_LIST", "MAX_JOBS")  # GPU selection and build parallelism, nothing else


class SandboxError(DiceError):
    """The sandbox cannot be created here (no bubblewrap, namespaces refused)."""


@dataclass(frozen=True)
class Quota:
    """Per-process rlimits of one confined run, and the size of its private /tmp."""

    cpu_s: int  # CPU seconds per process (SIGXCPU, then SIGKILL a second later)
    file_mb: int  # largest file it may write
    processes: int  # tasks (processes and threads) inside the sandbox
    address_space_mb: int | None = None  # virtual memory; None for CUDA programs
    tmp_mb: int = 2048  # the private /tmp (a tmpfs: memory, counted by `harness.isolate`'s watch for a child)


def compile_quota(timeout: float) -> Quota:
    """A compiler: one chain of single-threaded tools, a few GiB of address space at most, and nvcc's
    intermediate files in /tmp (a kernel's are a few MB; a GiB leaves room for a big translation unit)."""
    return Quota(cpu_s=math.ceil(timeout) + 1, file_mb=1024, processes=64, address_space_mb=COMPILE_ADDRESS_SPACE_MB,
                 tmp_mb=COMPILE_TMP_MB)


def child_quota(timeout: float) -> Quota:
    """A harness child (torch, the CUDA driver, a ninja build): many threads, huge virtual reservations."""
    cores = os.cpu_count() or 1
    return Quota(cpu_s=math.ceil(timeout * cores) + 1, file_mb=4096, processes=max(1024, 32 * cores), tmp_mb=4096)


COMPILE_ADDRESS_SPACE_MB = 4096  # nvcc, cicc and the host compiler of one kernel-level compile
COMPILE_TMP_MB = 1024  # a compile's private /tmp
COMPILE_MEMORY_SHARE = 0.5  # the part of the machine's memory that confined compiles may hold between them


@dataclass(frozen=True)
class Jail:
    """What one run sees and may use besides the system, the toolkit and the Python runtime."""

    quota: Quota
    writable: tuple[Path, ...] = ()
    readable: tuple[Path, ...] = ()
    gpu: bool = False  # the NVIDIA device nodes


@dataclass
class Process:
    """A started run: the process, and for a confined one the PID namespace that holds all of it."""

    popen: subprocess.Popen[Any]
    pid_namespace: int | None = None

    def members(self) -> list[int]:
        """PIDs (as the host sees them) of everything the run started: its PID namespace when confined,
        else its process group."""
        pids = []
        for entry in os.scandir("/proc"):
            if not entry.name.isdigit():
                continue
            try:
                if self.pid_namespace is not None:
                    mine = os.stat(f"/proc/{entry.name}/ns/pid").st_ino == self.pid_namespace
                else:
                    mine = os.getpgid(int(entry.name)) == self.popen.pid
            except OSError:
                continue
            if mine:
                pids.append(int(entry.name))
        return pids

    def running(self) -> bool:
        """Not reaped yet (so its process group cannot belong to anyone else)."""
        return self.popen.returncode is None

    def kill(self) -> None:
        """SIGKILL to the whole process group; a confined run's namespace goes down with bubblewrap."""
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.popen.pid, signal.SIGKILL)
        self.popen.kill()


@dataclass(frozen=True)
class Sandbox:
    """The confinement of this process, found once by `switch_on`."""

    bwrap: str
    prlimit: str
    setpriv: str | None  # a root server drops to SANDBOX_ID through it
    nvcc: Path | None  # the server's nvcc: its toolkit is visible to harness children too
    python: tuple[Path, ...]  # the runtime, its packages and the dice_lsp package

    @property
    def as_root(self) -> bool:
        return self.setpriv is not None

    def command(self, argv: Sequence[str], cwd: Path, jail: Jail, env: Mapping[str, str],
                info_fd: int, block_fd: int | None) -> list[str]:
        """The bwrap command line that runs `argv` in `cwd` confined as `jail` says."""
        tools = _toolkits([Path(argv[0]), *([self.nvcc] if self.nvcc else [])])
        args = [self.bwrap, "--unshare-all", "--unshare-user", "--hostname", HOSTNAME, "--die-with-parent",
                "--cap-drop", "ALL", "--info-fd", str(info_fd)]
        if block_fd is not None:  # root: we write the user mapping; setpriv needs these two until it drops them
            args += ["--userns-block-fd", str(block_fd), "--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID"]
        else:
            args += ["--uid", str(SANDBOX_ID), "--gid", str(SANDBOX_ID), "--disable-userns"]
        args += ["--clearenv"]
        for key, value in sorted(self.environment(tools, jail, env).items()):
            args += ["--setenv", key, value]
        args += _system_mounts()
        args += ["--proc", "/proc", "--dev", "/dev", "--perms", "1777", "--size", str(jail.quota.tmp_mb * _MIB),
                 "--tmpfs", "/tmp"]
        if jail.gpu:
            for node in sorted(Path("/dev").glob("nvidia*")):
                args += ["--dev-bind", str(node), str(node)]
        bound = [Path("/usr"), *(Path(p) for p in _ETC)]
        libraries = _library_path() if jail.gpu else ()  # where a GPU host keeps its driver
        shown = [root for root in _outermost([*tools.roots, *self.python, *libraries]) if not _inside(root, bound)]
        bound += shown
        extra = tools.mounts(bound)
        readable = sorted(set(jail.readable) - set(jail.writable), key=lambda p: len(p.parts))
        writable = sorted(set(jail.writable), key=lambda p: len(p.parts))
        for parent in _parents([*shown, *readable, *writable, *tools.scripts, *(w for w, _ in tools.links)]):
            args += ["--perms", "0755", "--dir", str(parent)]  # bubblewrap would make them 0700: closed to 65534
        for folder in shown:
            args += ["--ro-bind", str(folder), str(folder)]
        args += extra
        for folder in readable:
            args += ["--ro-bind", str(folder), str(folder)]
        for folder in writable:
            args += ["--bind", str(folder), str(folder)]
        args += ["--remount-ro", "/", "--"]
        if self.setpriv is not None:
            args += [self.setpriv, f"--reuid={SANDBOX_ID}", f"--regid={SANDBOX_ID}", "--clear-groups", "--"]
        args += ["env", f"--chdir={cwd}"]  # as the sandbox's user: root without capabilities may not enter it
        limits = [f"--cpu={jail.quota.cpu_s}:{jail.quota.cpu_s + 1}", f"--fsize={jail.quota.file_mb * _MIB}",
                  f"--nproc={jail.quota.processes}", "--core=0"]
        if jail.quota.address_space_mb is not None:
            limits.append(f"--as={jail.quota.address_space_mb * _MIB}")
        return [*args, self.prlimit, *limits, "--", *argv]

    def environment(self, tools: Toolkits, jail: Jail, extra: Mapping[str, str]) -> dict[str, str]:
        """A fixed environment: nothing of the server's but GPU selection; the toolkit and Python on PATH."""
        path = [*(str(b) for b in tools.bins), str(Path(sys.prefix) / "bin"), "/usr/local/bin", "/usr/bin", "/bin"]
        env = {"PATH": ":".join(dict.fromkeys(path)), "HOME": "/tmp", "TMPDIR": "/tmp", "LANG": "C.UTF-8",
               "PYTHONPATH": str(_package_parent()), "PYTHONDONTWRITEBYTECODE": "1"}
        if tools.roots:
            env["CUDA_HOME"] = str(tools.roots[0])
        if jail.gpu:
            env.update({key: os.environ[key] for key in _PASSED_ENV if key in os.environ})
            libraries = _library_path()
            if libraries:
                env["LD_LIBRARY_PATH"] = ":".join(str(p) for p in libraries)
        env.update(extra)
        return env

    def start(self, argv: Sequence[str], cwd: Path, jail: Jail, env: Mapping[str, str],
              stdout: int | IO[Any], stderr: int | IO[Any], text: bool) -> Process:
        """Start `argv` confined; returns once the sandbox's user mapping is in place. Every folder of `jail`
        must be one this process made for its runs (`own`) or one the sandbox shows everyone (`visible`):
        anything else raises SandboxError before anything runs, whoever named it."""
        for folder in (*jail.writable, *jail.readable):
            if not made_here(folder) and not (folder not in jail.writable and visible(folder)):
                raise SandboxError(f"refused to show {folder} to a sandboxed run: not a folder dice-lsp made for it")
        if self.as_root:
            for folder in jail.writable:
                _give_to_sandbox(folder, write=True)
            for folder in jail.readable:
                if made_here(folder):
                    _give_to_sandbox(folder, write=False)
        info_read, info_write = os.pipe()
        block_read, block_write = os.pipe() if self.as_root else (None, None)
        passed = (info_write,) if block_read is None else (info_write, block_read)
        try:
            popen = subprocess.Popen(self.command(argv, cwd, jail, env, info_write, block_read), cwd="/",
                                     stdin=subprocess.DEVNULL, stdout=stdout, stderr=stderr, text=text,
                                     errors="replace" if text else None, start_new_session=True, pass_fds=passed,
                                     env={}, extra_groups=[] if self.as_root else None)
        finally:
            for fd in passed:
                os.close(fd)
        try:
            info = _read_info(info_read)
            if block_write is not None:
                if info is not None:
                    _map_users(int(info["child-pid"]))
                os.close(block_write)
                block_write = None
        except OSError as exc:
            Process(popen).kill()
            popen.wait()
            raise SandboxError(f"cannot set up the sandbox's user: {exc.strerror or exc}") from exc
        finally:
            if block_write is not None:
                os.close(block_write)
        return Process(popen, int(info["pid-namespace"]) if info and "pid-namespace" in info else None)


@dataclass(frozen=True)
class Toolkits:
    """The CUDA installations behind some nvcc paths: the folders to show and how to reach nvcc itself."""

    roots: tuple[Path, ...]  # installation folders (bin/.., resolved)
    bins: tuple[Path, ...]  # folders on PATH inside, in order
    links: tuple[tuple[Path, str], ...]  # symlinks on the way to nvcc: (where, target)
    scripts: tuple[Path, ...]  # wrapper scripts on the way

    def mounts(self, bound: Sequence[Path]) -> list[str]:
        """Arguments that recreate the wrappers and links outside folders already shown."""
        args: list[str] = []
        for script in self.scripts:
            if not _inside(script, bound):
                args += ["--ro-bind", str(script), str(script)]
        for where, target in self.links:
            if not _inside(where, bound):
                args += ["--symlink", target, str(where)]
        return args


def toolkit_roots(nvcc: Path) -> tuple[Path, ...]:
    """The installation folders of `nvcc` (through symlinks and wrapper scripts): what an absolute
    `#include` may name on a team server."""
    return _toolkits([nvcc]).roots


@cache
def _toolkit(nvcc: Path) -> Toolkits:
    roots: list[Path] = []
    bins: list[Path] = []
    links: list[tuple[Path, str]] = []
    scripts: list[Path] = []
    pending, seen = [nvcc], set()
    while pending:
        path = pending.pop(0)
        if path in seen or not path.is_absolute():
            continue
        seen.add(path)
        bins.append(path.parent)
        if path.is_symlink():
            target = os.readlink(path)
            links.append((path, target))
            pending.append(Path(os.path.normpath(path.parent / target)))
            continue
        real = Path(os.path.realpath(path))
        if _is_script(real):
            scripts.append(real)
            pending += [Path(found) for found in re.findall(r"(/[^\s\"'`;|&]+/nvcc)(?![\w.-])", _head(real))]
        elif real.is_file():
            roots.append(real.parent.parent)
            bins.append(real.parent)
    return Toolkits(tuple(dict.fromkeys(roots)), tuple(dict.fromkeys(bins)), tuple(links), tuple(scripts))


def _toolkits(nvccs: Sequence[Path]) -> Toolkits:
    found = [_toolkit(n) for n in nvccs if n.name.startswith("nvcc")]  # argv[0] of a compile, or python
    return Toolkits(tuple(dict.fromkeys(r for t in found for r in t.roots)),
                    tuple(dict.fromkeys(b for t in found for b in t.bins)),
                    tuple(dict.fromkeys(link for t in found for link in t.links)),
                    tuple(dict.fromkeys(s for t in found for s in t.scripts)))


def _is_script(path: Path) -> bool:
    try:
        with path.open("rb") as file:
            return file.read(2) == b"#!"
    except OSError:
        return False


def _head(path: Path) -> str:
    with path.open("rb") as file:
        return file.read(65536).decode("utf-8", errors="replace")


def _inside(path: Path, folders: Sequence[Path]) -> bool:
    return any(path == f or f in path.parents for f in folders)


def _parents(paths: Sequence[Path]) -> list[Path]:
    """The folders above `paths` that the sandbox's empty root does not have yet (not /tmp, /usr, ...)."""
    made = {Path("/"), Path("/tmp"), Path("/usr"), Path("/etc"), Path("/dev"), Path("/proc")}
    parents: set[Path] = set()
    for path in paths:
        parents.update(p for p in path.parents if not _inside(p, [Path("/usr"), Path("/proc"), Path("/dev")]))
    return sorted(parents - made, key=lambda p: (len(p.parts), p))


def _outermost(paths: Sequence[Path]) -> list[Path]:
    """`paths` without those inside another one of them."""
    unique = sorted(set(paths), key=lambda p: len(p.parts))
    kept: list[Path] = []
    for path in unique:
        if not _inside(path, kept):
            kept.append(path)
    return kept


@cache
def _system_mounts() -> tuple[str, ...]:
    """/usr read-only, the merged-/usr links (or the real folders), the loader's and compiler's /etc files."""
    args = ["--ro-bind", "/usr", "/usr"]
    for name in ("bin", "sbin", "lib", "lib32", "lib64", "libx32"):
        path = Path("/") / name
        if path.is_symlink():
            args += ["--symlink", os.readlink(path), str(path)]
        elif path.is_dir():
            args += ["--ro-bind", str(path), str(path)]
    args += ["--perms", "0755", "--dir", "/etc"]
    for name in _ETC:
        args += ["--ro-bind-try", name, name]
    return tuple(args)


@cache
def _python_dirs() -> tuple[Path, ...]:
    """The interpreter's installation, its packages, and the folder that holds the dice_lsp package."""
    found = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix,
             *(sysconfig.get_paths().get(k, "") for k in ("stdlib", "platstdlib", "purelib", "platlib", "include"))}
    user = site.getusersitepackages() if site.ENABLE_USER_SITE else ""
    if user in sys.path:
        found.add(user)  # packages installed with `pip install --user`: that folder, not the rest of $HOME
    paths = [Path(os.path.realpath(p)) for p in found if p and Path(p).is_dir()]
    paths += [Path(p) for p in found if p and Path(p).is_dir()]  # as Python names them, should a link lead there
    return (*_outermost(paths), _package_dir())


def _package_dir() -> Path:
    import dice_lsp

    return Path(dice_lsp.__file__).resolve().parent


def _package_parent() -> Path:
    return _package_dir().parent


def _library_path() -> tuple[Path, ...]:
    """Absolute, existing folders of the server's LD_LIBRARY_PATH (where a GPU host keeps its driver)."""
    return tuple(dict.fromkeys(Path(p) for p in os.environ.get("LD_LIBRARY_PATH", "").split(":")
                               if p.startswith("/") and Path(p).is_dir()))


def _give_to_sandbox(folder: Path, write: bool) -> None:
    """A root server's folder made for a run (`own`), opened to the sandbox's user: what others may not read (a
    0700 temporary folder, a file written under umask 077) becomes that user's, and so does a folder it writes
    into. What everyone may read stays as it is, and so does anything this process did not make: an entry
    owned by another user, or reached through a link, is never changed."""
    uid = os.geteuid()
    for top, _dirs, files in os.walk(folder):  # links are not followed
        _open_to_sandbox(Path(top), 0o005, write and Path(top) == folder, uid)
        for name in files:
            _open_to_sandbox(Path(top, name), 0o004, False, uid)


def _open_to_sandbox(path: Path, needed: int, always: bool, uid: int) -> None:
    status = os.lstat(path)
    if stat.S_ISLNK(status.st_mode) or status.st_uid != uid:
        return
    if always or status.st_mode & needed != needed:
        os.chown(path, SANDBOX_ID, SANDBOX_ID, follow_symlinks=False)


_OWN: dict[Path, int] = {}  # folders this process made for its runs (how many times each is held)
_OWN_LOCK = threading.Lock()


def own(folder: Path) -> None:
    """`folder` was made by this process for its runs (a scratch folder, its build cache): a sandboxed run may
    be shown it, and a root server may give it to the sandbox's user. Held until `disown`."""
    real = Path(os.path.realpath(folder))
    with _OWN_LOCK:
        _OWN[real] = _OWN.get(real, 0) + 1


def disown(folder: Path) -> None:
    real = Path(os.path.realpath(folder))
    with _OWN_LOCK:
        left = _OWN.get(real, 0) - 1
        if left > 0:
            _OWN[real] = left
        else:
            _OWN.pop(real, None)


@contextlib.contextmanager
def owning(folder: Path) -> Iterator[Path]:
    """`own(folder)` for the length of a block."""
    own(folder)
    try:
        yield folder
    finally:
        disown(folder)


def made_here(path: Path) -> bool:
    """Whether `path` (links followed) lies in a folder this process made for its runs (`own`)."""
    real = Path(os.path.realpath(path))
    with _OWN_LOCK:
        roots = list(_OWN)
    return _inside(real, roots)


def _read_info(fd: int) -> dict[str, Any] | None:
    """bubblewrap's --info-fd report (child-pid, pid-namespace); None when it failed before writing it."""
    data = b""
    try:
        while chunk := os.read(fd, 4096):
            data += chunk
    finally:
        os.close(fd)
    try:
        info = json.loads(data) if data else None
    except ValueError:
        return None
    return info if isinstance(info, dict) else None


def _map_users(pid: int) -> None:
    """Root inside stays root outside (bubblewrap's mounts need it, and nothing of the request runs as it);
    SANDBOX_ID inside is the host's nobody, so RLIMIT_NPROC and file ownership apply."""
    mapping = f"0 0 1\n{SANDBOX_ID} {SANDBOX_ID} 1\n"
    for name in ("uid_map", "gid_map"):
        with open(f"/proc/{pid}/{name}", "w") as file:
            file.write(mapping)
    _no_user_namespaces(pid)


def _no_user_namespaces(pid: int) -> None:
    """No user namespace may be made inside the sandbox's: user.max_user_namespaces = 0 in it. A new one would
    give the sandbox's user every capability there (and mounts, and the kernel's code behind them); bubblewrap's
    --disable-userns does the same on the other path, but refuses to go with --userns-block-fd. A sysctl of this
    kind is the writer's own user namespace's, so the value is written by a process that joins the sandbox's
    (`nsenter --user`, nothing else of it), while bubblewrap still waits for its mapping: before anything of the
    request runs. Nothing inside can change it back (it runs as SANDBOX_ID, without capabilities, under no new
    privileges). Raises OSError where it cannot be done."""
    tools = _userns_tools()
    if tools is None:
        raise OSError("nsenter (util-linux) or tee not found")
    nsenter, tee = tools
    try:
        done = subprocess.run([nsenter, f"--user=/proc/{pid}/ns/user", "--preserve-credentials", "--", tee,
                               "/proc/sys/user/max_user_namespaces"], input=b"0", stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE, timeout=30, env={}, cwd="/")
    except subprocess.SubprocessError as exc:
        raise OSError(f"nsenter: {exc}") from exc
    if done.returncode != 0:
        said = done.stderr.decode(errors="replace").strip().splitlines() or [f"exit code {done.returncode}"]
        raise OSError(f"cannot forbid user namespaces in the sandbox: {said[-1]}")


@cache
def _userns_tools() -> tuple[str, str] | None:
    nsenter, tee = shutil.which("nsenter"), shutil.which("tee")
    return None if nsenter is None or tee is None else (nsenter, tee)


_ACTIVE: Sandbox | None = None
_MODE = MODE_OFF


def mode() -> str:
    """What `status` reports: "bubblewrap", "off (--unsafe-no-sandbox)", or "off" (editor, CLI)."""
    return _MODE


def active() -> Sandbox | None:
    return _ACTIVE


def switch_on(unsafe_no_sandbox: bool, nvcc: Path | None) -> str:
    """For the team server: confine every compile and every run of user code from now on, in this process.
    Probes once with a trivial command; raises SandboxError (one line) where that fails. With
    `unsafe_no_sandbox` the operator has chosen to run them unconfined. `announce` says which, once the
    server is up (a server that cannot start says only why)."""
    global _ACTIVE, _MODE
    if unsafe_no_sandbox:
        _ACTIVE, _MODE = None, MODE_UNSAFE
        return _MODE
    _ACTIVE, _MODE = probe(nvcc), MODE_ON
    return _MODE


def announce() -> None:
    """Log how compiles and user code run in this process."""
    if _MODE == MODE_UNSAFE:
        LOG.warning("compiles and user code run unconfined (--unsafe-no-sandbox): a client's code runs as this "
                    "server's user")
    elif _ACTIVE is not None:
        LOG.info("compiles and user code run in the sandbox (bubblewrap, uid %d%s)", SANDBOX_ID,
                 "; this server runs as root: run it as an ordinary user where you can" if _ACTIVE.as_root else "")


def switch_off() -> None:
    """Back to running tools directly (tests; the editor and the CLI never switch on)."""
    global _ACTIVE, _MODE
    _ACTIVE, _MODE = None, MODE_OFF


@contextlib.contextmanager
def confined(nvcc: Path | None = None) -> Iterator[Sandbox]:
    """`switch_on` for the length of a block (tests)."""
    previous = (_ACTIVE, _MODE)
    switch_on(False, nvcc)
    assert _ACTIVE is not None
    try:
        yield _ACTIVE
    finally:
        _set(*previous)


def adopt(sandbox: Sandbox | None, name: str) -> None:
    """Confine this process as another one is (`active()`, `mode()` of the team server, for its worker
    processes): a spawned process starts unconfined."""
    _set(sandbox, name)


def _set(sandbox: Sandbox | None, name: str) -> None:
    global _ACTIVE, _MODE
    _ACTIVE, _MODE = sandbox, name


def probe(nvcc: Path | None) -> Sandbox:
    """A Sandbox that has just run `id -u` as SANDBOX_ID, or SandboxError saying why not."""
    hint = "install bubblewrap (apt-get install bubblewrap) and allow user namespaces, or pass --unsafe-no-sandbox"
    bwrap = shutil.which("bwrap")
    prlimit = shutil.which("prlimit")
    setpriv = shutil.which("setpriv") if os.geteuid() == 0 else None
    if bwrap is None:
        raise SandboxError(f"cannot sandbox compiles and user code: bwrap not found; {hint}")
    if prlimit is None or (os.geteuid() == 0 and setpriv is None):
        raise SandboxError(f"cannot sandbox compiles and user code: util-linux's prlimit/setpriv not found; {hint}")
    sandbox = Sandbox(bwrap, prlimit, setpriv, nvcc, _python_dirs())
    with tempfile.TemporaryDirectory(prefix="dice-probe-") as scratch, owning(Path(scratch)):
        try:
            process = sandbox.start(["id", "-u"], Path(scratch), Jail(compile_quota(30), (Path(scratch),)), {},
                                    subprocess.PIPE, subprocess.PIPE, True)
            out, err = process.popen.communicate(timeout=30)
        except (OSError, subprocess.SubprocessError) as exc:
            raise SandboxError(f"cannot sandbox compiles and user code ({exc}); {hint}") from exc
    if process.popen.returncode != 0 or out.strip() != str(SANDBOX_ID):
        said = (err.strip().splitlines() or [f"exit code {process.popen.returncode}"])[-1].removeprefix("bwrap: ")
        raise SandboxError(f"cannot sandbox compiles and user code (bwrap: {said}); {hint}")
    return sandbox


def visible(path: Path) -> bool:
    """Whether a confined run could read `path` (the system and runtime folders it shows everyone)."""
    real = Path(os.path.realpath(path))
    shown = [Path("/usr"), *(Path(p) for p in _ETC), *_python_dirs()]
    if _ACTIVE is not None and _ACTIVE.nvcc is not None:
        shown += _toolkit(_ACTIVE.nvcc).roots
    return _inside(real, shown)


def spawn(argv: Sequence[str], cwd: Path, jail: Jail, stdout: int | IO[Any], stderr: int | IO[Any],
          env: Mapping[str, str] | None = None, text: bool = False) -> Process:
    """Start `argv` in `cwd`: confined as `jail` says when the sandbox is on, else directly (with the
    server's environment plus `env`), in its own session with stdin closed; tracked (`dice_lsp.lifetime`)
    until it is reaped. Raises `lifetime.Stopped` once shutdown has begun."""
    check_running()
    if _ACTIVE is not None:
        process = _ACTIVE.start(argv, cwd, jail, env or {}, stdout, stderr, text)
    else:
        path = os.pathsep.join(p for p in (str(_package_parent()), os.environ.get("PYTHONPATH", "")) if p)
        command, limit = _unconfined_limits(argv, jail.quota)  # a compile's memory and file size
        process = Process(subprocess.Popen(command, cwd=cwd, stdin=subprocess.DEVNULL, stdout=stdout,
                                           stderr=stderr, text=text, errors="replace" if text else None,
                                           start_new_session=True, preexec_fn=limit,  # as confined: the package first
                                           env={**os.environ, "PYTHONPATH": path, **(env or {})}))
    track(process)
    return process


def run_tool(argv: Sequence[str], cwd: Path, timeout: float, readable: Sequence[Path] = (),
             cancel: threading.Event | None = None, niceness: int = 0) -> subprocess.CompletedProcess[str]:
    """Run `argv` in `cwd` (its scratch folder, the only place it may write) and capture its output (capped:
    `TOOL_OUTPUT_KEPT`); `readable` are the folders it reads besides the toolkit (include folders). With
    its whole process group killed, raises `subprocess.TimeoutExpired` after `timeout` seconds and
    `lifetime.Stopped` once `cancel` is set or dice-lsp shuts down. `niceness` > 0: background work, at
    that lower CPU priority (`lower_priority`)."""
    nice = shutil.which("nice") if niceness else None
    lower = [nice, "-n", str(niceness)] if nice else []
    jail = Jail(compile_quota(timeout), (cwd,), tuple(readable))
    with compile_slot(jail.quota, argv, timeout, cancel):
        process = spawn([*lower, *argv], cwd, jail, subprocess.PIPE, subprocess.PIPE)
        if niceness:
            lower_priority(process.popen.pid, niceness)
        return _finish(process, timeout, cancel)


def compile_slots(quota: Quota) -> int:
    """How many confined compiles of `quota` may run at once on this machine: between them they hold at most
    COMPILE_MEMORY_SHARE of its memory (the smaller of RAM and this process's cgroup limit), each its address
    space plus its /tmp (a tmpfs); at least one. 23.5 GiB of RAM: 2 compiles of 4 + 1 GiB; 256 GiB: 25."""
    each = ((quota.address_space_mb or 0) + quota.tmp_mb) * _MIB
    return max(1, int(_memory_bytes() * COMPILE_MEMORY_SHARE) // each)


@contextlib.contextmanager
def compile_slot(quota: Quota, argv: Sequence[str], timeout: float,
                 cancel: threading.Event | None = None) -> Iterator[None]:
    """Hold one of the `compile_slots` for the length of a block, where the sandbox is on (the team server) and
    the run is a compile (a quota with an address space): a compile beyond them waits for one, up to `timeout`
    (then `subprocess.TimeoutExpired`), or until `cancel` or shutdown (`lifetime.Stopped`). The slots are
    this user's on this machine, not this process's: every dice-lsp process (completion workers, Ray replicas,
    a second server) takes them from one folder of lock files (`flock`, released by the kernel however its
    holder ends). The editor and the CLI never wait: they compile what their user asked for."""
    if _ACTIVE is None or quota.address_space_mb is None:
        yield
        return
    slot = _take_slot(compile_slots(quota), argv, timeout, cancel)
    try:
        yield
    finally:
        os.close(slot)


def _take_slot(count: int, argv: Sequence[str], timeout: float, cancel: threading.Event | None) -> int:
    """An open, locked lock file among the first `count` of the slots folder: its descriptor."""
    import fcntl

    deadline = time.monotonic() + timeout
    while True:
        check_running()
        if cancel is not None and cancel.is_set():
            raise Stopped("cancelled")
        folder = _slots_folder()
        for number in range(count):
            fd = os.open(folder / f"slot-{number}", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                continue
            except BaseException:
                os.close(fd)
                raise
            return fd
        if time.monotonic() >= deadline:
            raise subprocess.TimeoutExpired(list(argv), timeout)
        time.sleep(_POLL_S)


def _slots_folder() -> Path:
    """This user's folder of compile slots in the temporary folder (0700, this user's, not a link); where
    another user has taken its name, one of this process's own (the bound is then this process's)."""
    folder = Path(tempfile.gettempdir()) / f"dice-compile-slots-uid{os.geteuid()}"
    with contextlib.suppress(FileExistsError):
        os.mkdir(folder, 0o700)
    status = os.lstat(folder)
    if stat.S_ISDIR(status.st_mode) and status.st_uid == os.geteuid() and not status.st_mode & 0o077:
        return folder
    return _private_slots_folder(str(folder))


@cache
def _private_slots_folder(taken: str) -> Path:
    LOG.warning("%s is not this user's own folder: compile slots are counted per process", taken)
    made = Path(tempfile.mkdtemp(prefix="dice-compile-slots-own"))
    atexit.register(shutil.rmtree, made, True)
    return made


@cache
def _memory_bytes() -> int:
    """The machine's memory, or the memory limit of this process's cgroup (v2) and its parents where lower."""
    total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    try:
        line = next(line for line in Path("/proc/self/cgroup").read_text().splitlines() if line.startswith("0::"))
    except (OSError, StopIteration):
        return total
    group = Path("/sys/fs/cgroup") / line[3:].lstrip("/")
    for folder in (group, *group.parents):
        if not folder.is_relative_to("/sys/fs/cgroup"):
            break
        with contextlib.suppress(OSError, ValueError):
            total = min(total, int((folder / "memory.max").read_text()))  # "max": no limit there
    return total


def lower_priority(pid: int, niceness: int) -> None:
    """Give the session that `pid` leads (every run starts its own) `niceness` against the rest of the machine.

    `nice` alone is not enough where the kernel groups processes by session for scheduling (autogroup, on by
    default on most desktop Linux): a nice value then ranks a process only against its own session's, and
    a run in a session of its own got a whole core's share beside the model, however nice. The group's
    own nice value (`/proc/PID/autogroup`) ranks it against the other sessions. Nothing happens where the
    kernel has no such groups or does not let us (the run then has its `nice` alone)."""
    with contextlib.suppress(OSError):
        Path(f"/proc/{pid}/autogroup").write_text(str(niceness))


def run_host_tool(argv: Sequence[str], timeout: float, stdin_text: str = "") -> subprocess.CompletedProcess[str]:
    """A toolkit helper that reads nothing of a request (`nvcc --version`, `cu++filt` on ptxas's names),
    run directly even on a team server, with `stdin_text` as its input; otherwise as `run_tool`: its own
    process group, tracked, output capped, killed whole after `timeout` seconds."""
    check_running()
    popen = subprocess.Popen(list(argv), stdin=subprocess.PIPE if stdin_text else subprocess.DEVNULL,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    process = Process(popen)
    track(process)
    return _finish(process, timeout, None, stdin_text.encode())


def _finish(process: Process, timeout: float, cancel: threading.Event | None,
            stdin: bytes = b"") -> subprocess.CompletedProcess[str]:
    """Feed, read and reap a run started with pipes; its group is killed on any way out but its own end."""
    popen = process.popen
    try:
        stdout, stderr = _collect(popen, timeout, cancel, stdin)
    except BaseException:
        process.kill()
        raise
    finally:
        for stream in (popen.stdin, popen.stdout, popen.stderr):  # a process that left the group may hold them
            if stream is not None:
                stream.close()
        with contextlib.suppress(subprocess.TimeoutExpired):
            popen.wait(timeout=5)
        untrack(process)
    return subprocess.CompletedProcess(popen.args, popen.returncode, stdout, stderr)


class _Capped:
    """The first TOOL_OUTPUT_KEPT bytes of a stream, and how many more there were."""

    def __init__(self) -> None:
        self.kept = bytearray()
        self.dropped = 0

    def add(self, chunk: bytes) -> None:
        room = max(0, TOOL_OUTPUT_KEPT - len(self.kept))
        self.kept += chunk[:room]
        self.dropped += max(0, len(chunk) - room)

    def text(self) -> str:
        data = bytes(self.kept)
        if self.dropped:
            cut = data.rfind(b"\n") + 1 or len(data)  # whole lines only
            dropped = self.dropped + len(data) - cut
            data = data[:cut] + f"[dice-lsp: {dropped} more bytes of output not kept]\n".encode()
        return data.decode("utf-8", errors="replace")


def _collect(popen: subprocess.Popen[bytes], timeout: float, cancel: threading.Event | None,
             stdin: bytes) -> tuple[str, str]:
    """Write `stdin` to the run and read its stdout and stderr as they come, until it has exited."""
    deadline = time.monotonic() + timeout
    streams = {popen.stdout.fileno(): _Capped(), popen.stderr.fileno(): _Capped()}  # type: ignore[union-attr]
    pending = memoryview(stdin)
    with selectors.DefaultSelector() as selector:
        for fd in streams:
            selector.register(fd, selectors.EVENT_READ)
        if popen.stdin is not None:
            selector.register(popen.stdin.fileno(), selectors.EVENT_WRITE)
        while selector.get_map():
            for key, _events in selector.select(_wait_left(popen, deadline, timeout, cancel)):
                if key.fd in streams:
                    chunk = os.read(key.fd, 1 << 16)
                    if chunk:
                        streams[key.fd].add(chunk)
                    else:
                        selector.unregister(key.fd)
                    continue
                pending = _feed(key.fd, pending)
                if not pending and popen.stdin is not None:
                    selector.unregister(key.fd)
                    popen.stdin.close()
    while popen.poll() is None:
        left = _wait_left(popen, deadline, timeout, cancel)
        with contextlib.suppress(subprocess.TimeoutExpired):
            popen.wait(timeout=left)
    check_running()  # killed by `stop_all`: no result
    stdout, stderr = (capped.text() for capped in streams.values())
    return stdout, stderr


def _wait_left(popen: subprocess.Popen[bytes], deadline: float, timeout: float,
               cancel: threading.Event | None) -> float:
    """How long to wait for the run before looking again; raises once it is over time or cancelled."""
    if cancel is not None and cancel.is_set():
        raise Stopped("cancelled")
    left = deadline - time.monotonic()
    if left <= 0:
        raise subprocess.TimeoutExpired(popen.args, timeout)
    return min(left, _POLL_S)


def _feed(fd: int, pending: memoryview) -> memoryview:
    """What is left of `pending` after one write that cannot block (select said the pipe is writable)."""
    try:
        return pending[os.write(fd, pending[:select.PIPE_BUF]):]
    except BrokenPipeError:  # the tool does not read its input (any more)
        return pending[:0]


def _unconfined_limits(argv: Sequence[str], quota: Quota) -> tuple[list[str], _Limits | None]:
    """How `spawn` starts `argv` outside the sandbox (the editor, the CLI, `--unsafe-no-sandbox`): a compile
    (a quota with an address space: `compile_quota`, every `run_tool`) gets the sandbox's address-space and
    file-size limits, so that `#include "/dev/zero"` or a runaway template ends in an error, not in all of the
    machine's memory. Through util-linux's `prlimit` (no shell: `prlimit --as=N --fsize=N -- argv`), else set
    between fork and exec. Lower limits this process has already are kept. A harness child (no address space:
    a CUDA program reserves far more virtual memory than it uses) is left to `harness.isolate`'s
    resident-memory watch. The command, and what to run before exec (or None)."""
    import resource

    if quota.address_space_mb is None:
        return list(argv), None
    limits = _Limits(resource.setrlimit, ((resource.RLIMIT_AS, _lowest(resource.RLIMIT_AS, quota.address_space_mb)),
                                          (resource.RLIMIT_FSIZE, _lowest(resource.RLIMIT_FSIZE, quota.file_mb))))
    prlimit = _prlimit()
    if prlimit is None:
        return list(argv), limits
    (_, address_space), (_, file_size) = limits.values
    return [prlimit, f"--as={address_space}", f"--fsize={file_size}", "--", *argv], None


@dataclass(frozen=True)
class _Limits:
    """rlimits to set in a child between fork and exec (where there is no `prlimit`)."""

    setrlimit: Any  # resource.setrlimit, looked up before the fork
    values: tuple[tuple[int, int], ...]  # (resource, bytes): soft and hard

    def __call__(self) -> None:
        for which, value in self.values:
            self.setrlimit(which, (value, value))


def _lowest(which: int, wanted_mb: int) -> int:
    """`wanted_mb` in bytes, or this process's own limit of `which` where that is lower (one it may not raise)."""
    import resource

    return min([wanted_mb * _MIB, *(v for v in resource.getrlimit(which) if v != resource.RLIM_INFINITY)])


@cache
def _prlimit() -> str | None:
    return shutil.which("prlimit")
