"""How long the processes dice-lsp starts may live: never longer than the request, nor than dice-lsp.

Every compiler and harness child starts in its own process group (`dice_lsp.sandbox.spawn`) and is
tracked here while it runs. `stop_all` kills every tracked group at once (nvcc with its cicc, cudafe++ and
ptxas) and refuses new runs from then on; the servers call it when they shut down, so the threads that
waited on those runs finish at once and remove their scratch folders on the way out. `terminated` turns
SIGTERM into that orderly shutdown for an asyncio server. A helper process that the server starts with
Python's multiprocessing (the team server's completion workers) calls `watch_parent`, so that it exits when the
server dies without a word (SIGKILL from the OOM killer).

`stop_all` needs a clean exit. So that nothing dice-lsp started outlives a dice-lsp killed with SIGKILL, the first
run also starts a reaper (`dice_lsp.reaper`: a small Python process of its own session, holding the read end of a
pipe whose write end only this process has), and `track`/`untrack` tell it each process group as it starts and
once it is reaped (one write of a few bytes). When this process ends however it ends, the kernel closes the pipe,
and the reaper SIGKILLs every group still registered and exits; a clean exit also waits for it (`atexit`), so no
reaper is left behind. A process forked from this one (not exec'd) does not keep the pipe open: it starts its own
reaper should it start runs.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Awaitable
from typing import Protocol, TypeVar

from dice_lsp.errors import DiceError

LOG = logging.getLogger("dice_lsp.lifetime")
PARENT_POLL_S = 1.0  # how often a helper process looks whether its parent is still there
REAPER_EXIT_WAIT_S = 5.0  # how long a clean exit waits for the reaper to finish (it exits at once)
T = TypeVar("T")


class Stopped(DiceError):
    """A run was refused or ended because it was cancelled or dice-lsp is shutting down."""


class Run(Protocol):
    """A started process group: `dice_lsp.sandbox.Process`."""

    def running(self) -> bool: ...

    def kill(self) -> None: ...


_LOCK = threading.Lock()
_RUNS: dict[int, Run] = {}
_STOPPED = False


def track(run: Run) -> None:
    """Remember `run` until it ends, so that `stop_all` can kill it, and tell the reaper its process group;
    Stopped (after killing it) once shutdown has begun."""
    with _LOCK:
        for key in [key for key, old in _RUNS.items() if not old.running()]:
            _REAPER.forget(_RUNS.pop(key))
        if not _STOPPED:
            _RUNS[id(run)] = run
            _REAPER.register(run)
            return
    run.kill()
    raise Stopped("dice-lsp is shutting down")


def untrack(run: Run) -> None:
    with _LOCK:
        if _RUNS.pop(id(run), None) is not None:
            _REAPER.forget(run)


def check_running() -> None:
    """Stopped once shutdown has begun (before starting a run or writing a scratch folder)."""
    if _STOPPED:
        raise Stopped("dice-lsp is shutting down")


def stop_all() -> None:
    """Kill every tracked process group and refuse new runs from now on."""
    global _STOPPED
    with _LOCK:
        _STOPPED = True
        runs = list(_RUNS.values())
        _RUNS.clear()
    for run in runs:
        if run.running():
            run.kill()
    if runs:
        LOG.info("stopped %d running compiler or child process(es)", len(runs))


def reset() -> None:
    """Accept runs again (tests that stop and then keep using this process)."""
    global _STOPPED
    with _LOCK:
        _STOPPED = False


async def terminated(work: Awaitable[T]) -> T | None:
    """`work`, unless SIGTERM arrives first: then every run is stopped (`stop_all`), `work` is cancelled
    and None is returned, so the caller shuts down as it would at the end of its input."""
    loop = asyncio.get_running_loop()
    task = asyncio.ensure_future(work)
    signalled = False

    def on_sigterm() -> None:
        nonlocal signalled
        LOG.info("SIGTERM: shutting down")
        signalled = True
        stop_all()
        task.cancel()

    loop.add_signal_handler(signal.SIGTERM, on_sigterm)
    try:
        return await task
    except asyncio.CancelledError:
        if signalled:
            return None
        raise
    finally:
        loop.remove_signal_handler(signal.SIGTERM)


def watch_parent(parent: int) -> None:
    """End this process (a helper started by dice-lsp) as soon as `parent` is no longer its parent; from
    a daemon thread that looks every PARENT_POLL_S seconds."""

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(PARENT_POLL_S)
        with contextlib.suppress(Exception):
            LOG.info("the server (pid %d) is gone; exiting", parent)
        os._exit(1)

    if os.getppid() != parent:
        os._exit(1)
    threading.Thread(target=watch, name="dice-parent-watch", daemon=True).start()


def _group(run: Run) -> int | None:
    """The process group of `run` (a `sandbox.Process`: its leader's pid, every run starting a session)."""
    pid = getattr(getattr(run, "popen", None), "pid", None)
    return pid if isinstance(pid, int) and pid > 1 else None


class _Reaper:
    """This process's end of the reaper (`dice_lsp.reaper`): started on the first run; its methods are called
    with _LOCK held."""

    def __init__(self) -> None:
        self.process: subprocess.Popen[bytes] | None = None
        self.fd: int | None = None  # the pipe's write end (non-blocking, closed on exec)
        self.failed = False  # it could not be started or has died (said once); one that died is started again
        self.broken = False  # it cannot be started here: not tried again

    def register(self, run: Run) -> None:
        """`run` (in _RUNS already) has started: its group is the reaper's to kill should this process die."""
        group = _group(run)
        if group is None:
            return
        if self.fd is not None:
            self._send(f"+{group}\n".encode())
        else:
            self._start()  # registers every running run, this one too

    def forget(self, run: Run) -> None:
        group = _group(run)
        if group is not None and self.fd is not None:
            self._send(f"-{group}\n".encode())

    def pid(self) -> int | None:
        return self.process.pid if self.process is not None and self.fd is not None else None

    def _start(self) -> None:
        if self.broken:
            return
        self.close()  # one that died: reaped
        script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "reaper.py")
        read, write = os.pipe()  # both ends close on exec: the reaper gets the read end as its stdin only
        try:
            self.process = subprocess.Popen([sys.executable, "-I", "-S", script], stdin=read,
                                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd="/",
                                            start_new_session=True)  # not killed with this process's group
        except (OSError, ValueError) as exc:  # no interpreter to run it with
            os.close(write)
            self.broken = True
            self._failed(f"cannot start the reaper ({exc})")
            return
        finally:
            os.close(read)
        os.set_blocking(write, False)  # a reaper that stopped reading never blocks a run
        self.fd = write
        for run in _RUNS.values():  # with those started while there was none (it died)
            group = _group(run)
            if group is not None and run.running():
                self._send(f"+{group}\n".encode())

    def _send(self, message: bytes) -> None:
        if self.fd is None:
            return
        try:
            os.write(self.fd, message)  # a few bytes: one atomic write
        except BlockingIOError:
            LOG.debug("the reaper is not reading; %r not sent", message)
        except OSError as exc:  # it was killed
            self.close()
            self._failed(f"the reaper is gone ({exc})")

    def _failed(self, why: str) -> None:
        if not self.failed:
            LOG.warning("%s: compilers may outlive dice-lsp if it is killed", why)
        self.failed = True

    def close(self, wait: float = 0.0) -> None:
        """Close the pipe: the reaper kills what is still registered and exits; wait for it up to `wait` s."""
        fd, self.fd = self.fd, None
        if fd is not None:
            with contextlib.suppress(OSError):
                os.close(fd)
        if self.process is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.process.wait(timeout=wait)
            if self.process.returncode is not None:
                self.process = None

    def forked(self) -> None:
        """In a child forked from this process: the parent's pipe is not this process's to keep open."""
        fd, self.fd, self.process, self.failed = self.fd, None, None, False
        if fd is not None:
            with contextlib.suppress(OSError):
                os.close(fd)


_REAPER = _Reaper()


def reaper_pid() -> int | None:
    """The reaper's pid while it runs (None before the first run)."""
    with _LOCK:
        return _REAPER.pid()


@atexit.register
def _close_reaper() -> None:
    """A clean exit: after what ran was killed or ended, the reaper is told (end-of-file) and waited for."""
    if _LOCK.acquire(timeout=1.0):  # (a daemon thread stopped inside `track` must not hold the exit up)
        try:
            _REAPER.close(REAPER_EXIT_WAIT_S)
        finally:
            _LOCK.release()


os.register_at_fork(after_in_child=_REAPER.forked)
