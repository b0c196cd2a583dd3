"""How long the processes dice-lsp starts may live: never longer than the request, nor than dice-lsp.

Every compiler and harness child starts in its own process group (`dice_lsp.sandbox.spawn`) and is
tracked here while it runs. `stop_all` kills every tracked group at once (nvcc with its cicc, cudafe++ and
ptxas) and refuses new runs from then on; the servers call it when they shut down, so the threads that
waited on those runs finish at once and remove their scratch folders on the way out. `terminated` turns
SIGTERM into that orderly shutdown for an asyncio server. A helper process that the server starts with
Python's multiprocessing (the team server's completion workers) calls `watch_parent`, so that it exits when the
server dies without a word (SIGKILL from the OOM killer).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import threading
import time
from collections.abc import Awaitable
from typing import Protocol, TypeVar

from dice_lsp.errors import DiceError

LOG = logging.getLogger("dice_lsp.lifetime")
PARENT_POLL_S = 1.0  # how often a helper process looks whether its parent is still there
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
    """Remember `run` until it ends, so that `stop_all` can kill it; Stopped (after killing it) once
    shutdown has begun."""
    with _LOCK:
        for key in [key for key, old in _RUNS.items() if not old.running()]:
            del _RUNS[key]
        if not _STOPPED:
            _RUNS[id(run)] = run
            return
    run.kill()
    raise Stopped("dice-lsp is shutting down")


def untrack(run: Run) -> None:
    with _LOCK:
        _RUNS.pop(id(run), None)


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
