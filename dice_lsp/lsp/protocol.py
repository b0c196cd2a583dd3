"""pygls's language server protocol, with `$/cancelRequest` reaching command handlers too.

pygls 2.1 runs workspace/executeCommand as a generator handler that yields to the command's handler. On
`$/cancelRequest` it cancels the request's own future (and answers RequestCancelled) but not the task of
the handler it yielded to, which runs on: an optimize would go on to its end and then ask the user to
apply a rewrite whose request was cancelled. Here that task is cancelled with the request, so a command
sees `asyncio.CancelledError` as every other request's handler does (and its model ticket is cancelled).
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

from pygls.protocol import LanguageServerProtocol


class DiceProtocol(LanguageServerProtocol):
    def _run_generator(self, future: Any, *, gen: Generator[Any, Any, Any], result_future: Any) -> None:
        before = set(self._request_futures)
        super()._run_generator(future, gen=gen, result_future=result_future)
        for key in set(self._request_futures) - before:  # the handler the generator yielded to, if it started
            handler = self._request_futures.pop(key)  # filed under a made-up id no client can cancel

            def cancel_with(done: Any, handler: Any = handler) -> None:
                if done.cancelled():
                    handler.cancel()

            result_future.add_done_callback(cancel_with)


__all__ = ["DiceProtocol"]
