"""Latency through the language server, as an editor sees it: a real `dice-lsp` process over stdio.

    python bench/lsp_latency.py [--holes 30]

1. inlineCompletion on 1-3-line holes: held-out kernels with 1-3 statement lines removed, the cursor on the
   emptied line; p50/p95 of the request's round trip with the embedded model on the CPU, with the default
   settings, in bf16 (the CPU's arithmetic before int8 products) and, on the same holes, with the whole model
   window as context, 8 steps and fp32. The background nvcc compile is off: every hole opens a new document,
   which would start a compile each.
2. codeAction while a completion runs: a long completion is started, then codeAction requests are sent
   one after another until it ends; p50/p99 of their round trips (the event loop must stay free).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from lsprotocol import types
from pygls.lsp.client import LanguageClient

from dice_lsp.cuda.functions import parse_functions

HELDOUT = Path(__file__).resolve().parent / "heldout" / "kernels.jsonl"
# The settings before the defaults were tuned for latency, measured in the same run for the ratio.
FULL = {"device": "cpu", "dtype": "float32", "steps": 8, "contextTokens": None, "diagnostics": False}


def holes(count: int, seed: int = 0) -> list[tuple[str, int, int, int]]:
    """(text with lines removed, cursor line, cursor character, lines removed) from held-out kernels."""
    rng = random.Random(seed)
    cases = []
    for record in (json.loads(line) for line in HELDOUT.read_text().splitlines()):
        text = record["text"]
        for kernel in (f for f in parse_functions(text) if f.is_kernel):
            first = text.count("\n", 0, kernel.body_open) + 1
            last = text.count("\n", 0, kernel.body_close) - 1
            lines = text.split("\n")
            for start in range(first, last):
                size = rng.choice((1, 2, 3))
                block = lines[start:start + size]
                if start + size > last or not all(line.strip().endswith((";", "{", "}")) for line in block):
                    continue
                indent = block[0][: len(block[0]) - len(block[0].lstrip())]
                edited = "\n".join([*lines[:start], indent, *lines[start + size:]])
                cases.append((edited, start, len(indent), size))
    rng.shuffle(cases)
    return cases[:count]


def fill_requests(model: Any, count: int, seed: int = 0, settings: Any = None) -> list[Any]:
    """The fill each of `holes(count, seed)`'s completions sends to `model` (a `LoadedModel`), editor defaults
    unless `settings` says otherwise."""
    from dice_lsp.complete import prepare
    from dice_lsp.settings import Settings
    from dice_lsp.textdoc import Position

    chosen = settings if settings is not None else Settings()
    prepared = (prepare(model.tokenizer, model.window, text, Position(line, character), chosen)
                for text, line, character, _ in holes(count, seed))
    return [p.request for p in prepared if p is not None]


async def start(settings: dict[str, Any]) -> LanguageClient:
    client = LanguageClient("dice-lsp-bench", "1")
    ready = asyncio.Event()

    @client.feature(types.WORKSPACE_CONFIGURATION)
    def configuration(params: types.ConfigurationParams) -> list[Any]:
        return [settings for _ in params.items]

    @client.feature("dice/status")
    def status(params: Any) -> None:
        if getattr(params, "state", None) in ("ready", "error"):
            ready.set()

    await client.start_io(sys.executable, "-m", "dice_lsp.cli")
    await client.initialize_async(types.InitializeParams(capabilities=types.ClientCapabilities(
        workspace=types.WorkspaceClientCapabilities(configuration=True))))
    client.initialized(types.InitializedParams())
    await ready.wait()
    return client


def open_doc(client: LanguageClient, uri: str, text: str) -> None:
    client.text_document_did_open(types.DidOpenTextDocumentParams(
        types.TextDocumentItem(uri=uri, language_id="cuda-cpp", version=1, text=text)))


async def inline_latency(client: LanguageClient, cases: list[tuple[str, int, int, int]]) -> list[float]:
    times = []
    for index, (text, line, character, _) in enumerate(cases):
        uri = f"file:///bench/hole{index}.cu"
        open_doc(client, uri, text)
        started = time.perf_counter()
        await client.text_document_inline_completion_async(types.InlineCompletionParams(
            text_document=types.TextDocumentIdentifier(uri), position=types.Position(line, character),
            context=types.InlineCompletionContext(types.InlineCompletionTriggerKind.Automatic)))
        times.append((time.perf_counter() - started) * 1000)
    return times


async def code_action_latency(client: LanguageClient, case: tuple[str, int, int, int]) -> list[float]:
    text, line, character, _ = case
    uri = "file:///bench/busy.cu"
    open_doc(client, uri, text)
    busy = asyncio.ensure_future(client.text_document_inline_completion_async(types.InlineCompletionParams(
        text_document=types.TextDocumentIdentifier(uri), position=types.Position(line, character),
        context=types.InlineCompletionContext(types.InlineCompletionTriggerKind.Invoked))))
    await asyncio.sleep(0.05)
    times = []
    while not busy.done():
        started = time.perf_counter()
        await client.text_document_code_action_async(types.CodeActionParams(
            text_document=types.TextDocumentIdentifier(uri), range=types.Range(types.Position(0, 0),
                                                                                types.Position(line + 1, 0)),
            context=types.CodeActionContext(diagnostics=[])))
        times.append((time.perf_counter() - started) * 1000)
    await busy
    return times


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--holes", type=int, default=30)
    args = parser.parse_args()
    cases = holes(args.holes)
    rows = []
    for name, settings in (("inlineCompletion, 1-3-line holes (defaults)", {"device": "cpu", "diagnostics": False}),
                           ("inlineCompletion, same holes, bf16 (not int8 products)",
                            {"device": "cpu", "dtype": "bfloat16", "diagnostics": False}),
                           ("inlineCompletion, same holes, whole window, 8 steps, fp32", FULL)):
        client = await start(settings)
        rows.append((name, await inline_latency(client, cases)))
        await client.shutdown_async(None)
        client.exit(None)
    slow = await start({"device": "cpu", "steps": 64, "maxCanvas": 64})
    actions = await code_action_latency(slow, cases[0])
    await slow.shutdown_async(None)
    slow.exit(None)
    print("| request | n | p50 ms | p95 ms | p99 ms | max ms |")
    print("|---|---|---|---|---|---|")
    for name, values in (*rows, ("codeAction during a completion", actions)):
        print(f"| {name} | {len(values)} | {statistics.median(values):.0f} | {percentile(values, 0.95):.0f} | "
              f"{percentile(values, 0.99):.0f} | {max(values):.0f} |")


if __name__ == "__main__":
    asyncio.run(main())
