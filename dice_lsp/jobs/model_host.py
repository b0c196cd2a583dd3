"""One thread owns the model: it loads it, then runs generations one at a time.

The language server's event loop never touches the model. A request gets a `Ticket`; a newer request
for the same document cancels the older ticket, and the denoising loop checks it before every model call,
so stale work stops within one step. Loading and generations share the thread, so a completion asked
for while the model loads simply waits for it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, TypeVar

from dice_lsp.engine import LoadedModel, load_model
from dice_lsp.errors import DiceError
from dice_lsp.settings import Settings

T = TypeVar("T")
StatusListener = Callable[[dict[str, Any]], None]


class Ticket:
    """A cancellation flag for one request; callable as the engine's cancel check."""

    def __init__(self) -> None:
        self._event = threading.Event()

    def cancel(self) -> None:
        self._event.set()

    def __call__(self) -> bool:
        return self._event.is_set()


class ModelHost:
    def __init__(self, on_status: StatusListener) -> None:
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="dice-model")
        self._on_status = on_status
        self._model: LoadedModel | None = None
        self._error: str | None = None
        self._tickets: dict[str, Ticket] = {}
        self._lock = threading.Lock()
        self.status: dict[str, Any] = {"state": "idle"}

    def _set_status(self, **status: Any) -> None:
        self.status = status
        self._on_status(status)

    def load(self, settings: Settings) -> Future[None]:
        """Replace the model in the background (the current one serves until then)."""
        self._set_status(state="loading", model=settings.model or "dice-tiny")

        def work() -> None:
            try:
                model = load_model(settings.model, settings.device, settings.dtype, settings.trust_remote_code)
            except DiceError as exc:
                self._model, self._error = None, str(exc)
                self._set_status(state="error", model=settings.model or "dice-tiny", message=str(exc))
                return
            self._model, self._error = model, None
            self._set_status(state="ready", model=model.name, device=str(model.device), dtype=str(model.dtype))

        return self._executor.submit(work)

    def ticket(self, key: str) -> Ticket:
        """A new ticket for `key` (a document); the previous one for it is cancelled."""
        ticket = Ticket()
        with self._lock:
            previous = self._tickets.get(key)
            self._tickets[key] = ticket
        if previous is not None:
            previous.cancel()
        return ticket

    def submit(self, job: Callable[[LoadedModel], T]) -> Future[T]:
        def work() -> T:
            if self._model is None:
                raise DiceError(f"no model: {self._error or 'not loaded'}")
            return job(self._model)

        return self._executor.submit(work)

    def close(self) -> None:
        with self._lock:
            for ticket in self._tickets.values():
                ticket.cancel()
        self._executor.shutdown(wait=False, cancel_futures=True)
