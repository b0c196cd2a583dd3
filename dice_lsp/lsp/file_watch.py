"""Changes made outside the editor (git checkout, a generator, another editor) to CUDA sources and headers.

The editor reports edits to open documents itself; a header changed on disk is seen only here. Events come
from watchdog's thread and are handed to the event loop; a burst (a checkout touches many files) is
coalesced there by the compile scheduler, which lets only the newest compile of a document run.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable
from pathlib import Path

from watchdog.events import FileSystemEvent, FileSystemEventHandler
from watchdog.observers import Observer

LOG = logging.getLogger("dice_lsp.watch")
# .json: compile_commands.json; C/C++ sources and .gitignore: the workspace index (`sources.workspace`)
WATCHED_SUFFIXES = (".cu", ".cuh", ".cuinl", ".h", ".hpp", ".hh", ".inl", ".c", ".cc", ".cpp", ".cxx", ".json",
                    ".gitignore")
CHANGES = ("created", "modified", "moved", "deleted", "closed")


class _Forward(FileSystemEventHandler):
    def __init__(self, loop: asyncio.AbstractEventLoop, changed: Callable[[Path], None]) -> None:
        self.loop = loop
        self.changed = changed

    def on_any_event(self, event: FileSystemEvent) -> None:
        if event.is_directory or event.event_type not in CHANGES:
            return
        for raw in (event.src_path, getattr(event, "dest_path", "")):
            path = raw.decode() if isinstance(raw, bytes) else raw
            if path and path.endswith(WATCHED_SUFFIXES):
                if self.loop.is_closed():  # the server is shutting down: nobody left to tell
                    return
                try:
                    self.loop.call_soon_threadsafe(self.changed, Path(path).resolve())
                except RuntimeError:  # closed between the check and the call
                    return


class FileWatch:
    """Watches folders (each once) and calls `changed(path)` on the event loop for each source file event."""

    def __init__(self, loop: asyncio.AbstractEventLoop, changed: Callable[[Path], None]) -> None:
        self.loop = loop
        self.changed = changed
        self.observer: Observer | None = None  # type: ignore[valid-type]
        self.folders: set[tuple[Path, bool]] = set()
        self.lock = threading.Lock()

    def watch(self, folder: Path, recursive: bool) -> None:
        """Start watching `folder` (from any thread: a recursive watch of a large tree takes a while)."""
        key = (folder.resolve(), recursive)
        with self.lock:
            covered = any(key[0].is_relative_to(root) for root, below in self.folders if below)
            if key in self.folders or covered or not folder.is_dir():
                return
            self.folders.add(key)
            if self.observer is None:
                self.observer = Observer()
                self.observer.daemon = True
                self.observer.start()
        try:
            self.observer.schedule(_Forward(self.loop, self.changed), str(key[0]), recursive=recursive)
        except OSError as exc:  # e.g. out of inotify watches: diagnostics still follow the editor's edits
            LOG.warning("cannot watch %s: %s", folder, exc)
        else:
            LOG.info("watching %s%s", folder, " and below" if recursive else "")

    def stop(self) -> None:
        if self.observer is not None:
            self.observer.stop()
