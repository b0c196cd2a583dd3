"""The model's state as the editor (`dice/status`), the team server's log and its `status` reply see it.

One value from the `ModelHost` (or, in the editor, from a team server's `status`) to each of them; its JSON
is made only where it leaves (`to_json`), with the keys each state has always had. Importing it loads no
torch.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

State = Literal["idle", "loading", "ready", "error"]


@dataclass(frozen=True)
class ModelStatus:
    """`idle` (nothing asked yet), `loading` a model, `ready` (the model, its device and dtype) or `error`
    (why, in `message`, and what kind of failure, in `code`: `load_failed` for a model that did not load here,
    a team server's error code such as `unreachable` or `unauthorized` for one there); `server` is the team
    server's address when a team server's model is meant."""

    state: State
    model: str | None = None
    device: str | None = None
    dtype: str | None = None
    message: str | None = None
    server: str | None = None
    code: str | None = None

    @classmethod
    def ready(cls, model: str | None, device: str | None, dtype: str | None, server: str | None = None
              ) -> ModelStatus:
        return cls("ready", model, device, dtype, server=server)

    @classmethod
    def failed(cls, model: str, message: str, code: str = "load_failed") -> ModelStatus:
        return cls("error", model, message=message, code=code)

    def to_json(self) -> dict[str, Any]:
        """The keys of its state: `state`; with `model` unless idle; `device` and `dtype` when ready
        (`server` too for a team server's); `message` and `code` on error."""
        data: dict[str, Any] = {"state": self.state}
        if self.state != "idle":
            data["model"] = self.model
        if self.state == "ready":
            data.update(device=self.device, dtype=self.dtype)
            if self.server is not None:
                data["server"] = self.server
        if self.state == "error":
            data.update(message=self.message, code=self.code)
        return data


__all__ = ["ModelStatus", "State"]
