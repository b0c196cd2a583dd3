"""Guard regions around the outputs a torch extension allocates itself (the KernelBench path).

The harness cannot hand a torch extension a padded output: `forward` allocates it from torch's caching
allocator. So the harness arranges what lies around it instead. Before the call it frees a "landing"
block of each expected output's size plus a guard region on each side (the allocator hands out the
start of the best-fitting free block, and the cache is emptied first, so the output lands there with
free memory after it; an output under 1 MiB comes from the small pool instead, poisoned like the rest),
then fills every free block of the allocator with POISON_BYTE and records its history. After the call,
the bytes next to each output (a guard region on each side) that were free before the call and that
nothing allocated during it must still hold the poison; a changed one is a write out of the output's
bounds. Memory the harness holds (inputs, kept reference outputs) is guarded by its own canaries
(`verify.Guarded`), so an overrun into it is caught there.
"""

from __future__ import annotations

import types
from collections.abc import Iterable
from typing import Any

import torch

from dice_lsp.harness.verify import POISON_BYTE, guard_bytes

AddressRange = tuple[int, int]  # [start, end) in device addresses


def subtract(pieces: Iterable[AddressRange], holes: Iterable[AddressRange]) -> list[AddressRange]:
    """`pieces` without any address covered by `holes` (all half-open intervals), sorted."""
    result = sorted(p for p in pieces if p[0] < p[1])
    for lo, hi in sorted(holes):
        kept: list[AddressRange] = []
        for start, end in result:
            if hi <= start or end <= lo:
                kept.append((start, end))
                continue
            if start < lo:
                kept.append((start, lo))
            if hi < end:
                kept.append((hi, end))
        result = kept
    return result


def must_hold_poison(window: AddressRange, free_before: Iterable[AddressRange],
                     allocated: Iterable[AddressRange]) -> list[AddressRange]:
    """The parts of `window` that were free (so poisoned) before the call and that nothing allocated
    during it: any change there is a write the kernel had no buffer for."""
    inside = [(max(window[0], lo), min(window[1], hi)) for lo, hi in free_before]
    return subtract(inside, allocated)


def changed_bytes(memory: bytes) -> int:
    """How many bytes of a region that was poisoned no longer hold POISON_BYTE."""
    return len(memory) - memory.count(POISON_BYTE)


def _device_bytes(address: int, size: int) -> torch.Tensor:
    """A uint8 tensor over `size` bytes of device memory at `address` that no tensor owns (no copy, no
    allocation: the caching allocator's free blocks must stay as they are while they are checked)."""

    raw = types.SimpleNamespace(__cuda_array_interface__={"shape": (size,), "typestr": "|u1",
                                                          "data": (address, False), "version": 3})
    return torch.as_tensor(raw, device="cuda")


def _blocks(segments: list[dict[str, Any]], state: str) -> list[dict[str, Any]]:
    return [block for segment in segments for block in segment["blocks"] if block["state"] == state]


class AllocatorGuard:
    """`with AllocatorGuard(sizes) as guard: outputs = forward(...)`, then `guard.overrun(outputs)`."""

    def __init__(self, output_bytes: list[int]) -> None:
        self.output_bytes = output_bytes
        self.free_before: list[AddressRange] = []
        self.allocated: list[AddressRange] = []
        self.seen = 0

    def __enter__(self) -> AllocatorGuard:
        torch.cuda.synchronize()
        torch.cuda.empty_cache()  # no other whole free segment to compete with the landing blocks
        landing = [torch.empty(n + 2 * guard_bytes(n), dtype=torch.uint8, device="cuda") for n in self.output_bytes]
        del landing  # back to the allocator as free blocks of the right size, poisoned below
        torch.cuda.memory._record_memory_history("all", context=None, stacks="python")
        snapshot = torch.cuda.memory._snapshot()
        self.seen = len(self._trace(snapshot))  # the history before this call, if disabling did not clear it
        free = _blocks(snapshot["segments"], "inactive")
        self.free_before = [(b["address"], b["address"] + b["size"]) for b in free]
        for block in free:
            _device_bytes(block["address"], block["size"]).fill_(POISON_BYTE)
        torch.cuda.synchronize()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, *_exc: object) -> None:
        try:
            if exc_type is None:
                torch.cuda.synchronize()
                snapshot = torch.cuda.memory._snapshot()
                live = _blocks(snapshot["segments"], "active_allocated")
                requested = {b["address"]: b["requested_size"] for b in live}
                # a block still live counts only as far as it was asked for: its rounding slack is guard too
                self.allocated = [(e["addr"], e["addr"] + requested.get(e["addr"], e["size"]))
                                  for e in self._trace(snapshot)[self.seen:] if e["action"] == "alloc"]
        finally:
            torch.cuda.memory._record_memory_history(None)

    @staticmethod
    def _trace(snapshot: dict[str, Any]) -> list[dict[str, Any]]:
        traces = snapshot.get("device_traces", [])
        device = torch.cuda.current_device()
        return list(traces[device]) if device < len(traces) else []

    def overrun(self, outputs: list[torch.Tensor]) -> str | None:
        """"before output N" or "after output N" for the first output whose neighbouring guard bytes
        changed, else None."""
        for index, output in enumerate(outputs):
            storage = output.untyped_storage()
            start, end = storage.data_ptr(), storage.data_ptr() + storage.nbytes()
            pad = guard_bytes(end - start)
            for side, window in (("before", (start - pad, start)), ("after", (end, end + pad))):
                for lo, hi in must_hold_poison(window, self.free_before, self.allocated):
                    if changed_bytes(_device_bytes(lo, hi - lo).cpu().numpy().tobytes()):
                        return f"{side} output {index}"
        return None
