"""`$/progress` reports of the language server: begin, report, end, and a report function for other threads.

A client that does not support work-done progress (or refuses a token) gets none: every method then takes
the token None and does nothing, so the work goes on the same either way. A report begun with `cancel` is
cancellable from the editor; cancelling it calls `cancel` (which cancels the work's ticket or call).
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable

from lsprotocol import types
from pygls.lsp.server import LanguageServer


class Progress:
    def __init__(self, server: LanguageServer) -> None:
        self.server = server

    async def begin(self, title: str, message: str, cancel: Callable[[], None] | None = None) -> str | None:
        """Start a `$/progress` report when the client supports it; its token, or None. With `cancel`, the
        user can cancel it from the editor, which calls `cancel`."""
        capabilities = self.server.client_capabilities.window
        if capabilities is None or not capabilities.work_done_progress:
            return None
        token = f"dice-{uuid.uuid4().hex[:8]}"
        progress = self.server.work_done_progress
        try:
            await progress.create_async(token)
            progress.begin(token, types.WorkDoneProgressBegin(title=title, message=message,
                                                              cancellable=cancel is not None))
        except Exception:  # a client may refuse the token; the work goes on without progress
            return None
        if cancel is not None:
            progress.tokens[token].add_done_callback(lambda _future: cancel())
        return token

    def report(self, token: str | None, message: str) -> None:
        if token is not None:
            self.server.work_done_progress.report(token, types.WorkDoneProgressReport(message=message))

    def end(self, token: str | None, message: str) -> None:
        if token is not None:
            self.server.work_done_progress.end(token, types.WorkDoneProgressEnd(message=message))
            self.server.work_done_progress.tokens.pop(token, None)

    def reporter(self, token: str | None) -> Callable[[str], None]:
        """A report function for `token` that work on any thread (or the loop) can call."""
        loop = asyncio.get_running_loop()

        def report(message: str) -> None:
            loop.call_soon_threadsafe(self.report, token, message)

        return report
