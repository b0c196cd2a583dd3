"""The file watch hands source-file events to the event loop, and says nothing once that loop is closed (a
language server shutting down used to print `RuntimeError: Event loop is closed` from watchdog's thread)."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

from watchdog.events import FileModifiedEvent

from dice_lsp.lsp.file_watch import FileWatch, _Forward


def test_an_event_after_the_loop_closed_is_dropped_quietly(tmp_path: Path) -> None:
    loop = asyncio.new_event_loop()
    seen: list[Path] = []
    forward = _Forward(loop, seen.append)
    forward.on_any_event(FileModifiedEvent(str(tmp_path / "k.cu")))
    loop.run_until_complete(asyncio.sleep(0))
    assert seen == [(tmp_path / "k.cu").resolve()]
    forward.on_any_event(FileModifiedEvent(str(tmp_path / "notes.txt")))  # not a source: not forwarded
    loop.run_until_complete(asyncio.sleep(0))
    assert len(seen) == 1
    loop.close()
    errors: list[BaseException] = []
    thread = threading.Thread(target=lambda: _call(forward, tmp_path / "late.cu", errors))
    thread.start()
    thread.join()
    assert errors == [] and len(seen) == 1


def _call(forward: _Forward, path: Path, errors: list[BaseException]) -> None:
    try:
        forward.on_any_event(FileModifiedEvent(str(path)))
    except BaseException as exc:  # whatever escaped watchdog's thread
        errors.append(exc)


def test_a_real_change_on_disk_reaches_the_loop(tmp_path: Path) -> None:
    async def watch() -> list[Path]:
        seen: list[Path] = []
        arrived = asyncio.Event()

        def changed(path: Path) -> None:
            seen.append(path)
            arrived.set()

        watcher = FileWatch(asyncio.get_running_loop(), changed)
        watcher.watch(tmp_path, recursive=False)
        try:
            (tmp_path / "kernel.cuh").write_text("#pragma once\n")
            await asyncio.wait_for(arrived.wait(), 30)
        finally:
            watcher.stop()
        return seen

    assert (tmp_path / "kernel.cuh").resolve() in asyncio.run(watch())
