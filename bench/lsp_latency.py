"""Latency through the language server, as an editor sees it: a real `dice-lsp` process over stdio.

    python bench/lsp_latency.py [--holes 30]

1. inlineCompletion on 1-3-line holes: held-out kernels with 1-3 statement lines removed, the cursor on the
   emptied line; p50/p95 of the request's round trip with the embedded model on the CPU, with the default
   settings, in bf16 (the CPU's arithmetic before int8 products) and, on the same holes, with the whole model
   window as context, 8 steps and fp32. The background nvcc compile is off: every hole opens a new document,
   which would start a compile each.
   The second row: a completion in a file the editor opened earlier (the usual case): the file is opened with
   one hole and asked, then edited to another hole of the same file and asked again at once; that second
   request's round trip (same server as the first row, after it).
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


Case = tuple[str, int, int, int]  # text with lines removed, cursor line, cursor character, lines removed


def _file_holes(text: str, rng: random.Random) -> list[Case]:
    """Every hole of one held-out file's kernels: 1-3 statement lines removed, the cursor on the emptied line."""
    cases = []
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
    return cases


def _files() -> list[str]:
    return [json.loads(line)["text"] for line in HELDOUT.read_text().splitlines()]


def holes(count: int, seed: int = 0) -> list[Case]:
    """(text with lines removed, cursor line, cursor character, lines removed) from held-out kernels."""
    rng = random.Random(seed)
    cases = [case for text in _files() for case in _file_holes(text, rng)]
    rng.shuffle(cases)
    return cases[:count]


def hole_pairs(count: int, seed: int = 0) -> list[tuple[Case, Case]]:
    """Two holes of the same held-out file each (at most one pair per file, then again from the start): the
    editor's usual completion, in a file it opened earlier."""
    rng = random.Random(seed)
    per_file = [cases for text in _files() if len(cases := _file_holes(text, rng)) >= 2]
    pairs = []
    while len(pairs) < count and per_file:
        for cases in per_file:
            first, second = rng.sample(cases, 2)
            pairs.append((first, second))
    rng.shuffle(pairs)
    return pairs[:count]


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
        await client.text_document_inline_completion_async(inline_params(uri, line, character))
        times.append((time.perf_counter() - started) * 1000)
    return times


async def second_hole_latency(client: LanguageClient, pairs: list[tuple[Case, Case]]) -> list[float]:
    """The round trip of the second of two completions in one document: it is opened with the first hole, asked,
    then edited (the whole text) to the second hole and asked again right after the first answer."""
    times = []
    for index, ((text, line, character, _), (second, line2, character2, _)) in enumerate(pairs):
        uri = f"file:///bench/pair{index}.cu"
        open_doc(client, uri, text)
        await client.text_document_inline_completion_async(inline_params(uri, line, character))
        client.text_document_did_change(types.DidChangeTextDocumentParams(
            types.VersionedTextDocumentIdentifier(uri=uri, version=2),
            [types.TextDocumentContentChangeWholeDocument(text=second)]))
        started = time.perf_counter()
        await client.text_document_inline_completion_async(inline_params(uri, line2, character2))
        times.append((time.perf_counter() - started) * 1000)
    return times


def inline_params(uri: str, line: int, character: int) -> types.InlineCompletionParams:
    return types.InlineCompletionParams(
        text_document=types.TextDocumentIdentifier(uri), position=types.Position(line, character),
        context=types.InlineCompletionContext(types.InlineCompletionTriggerKind.Automatic))


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
        if name.endswith("(defaults)"):
            rows.append(("inlineCompletion, a second hole in the file (defaults)",
                         await second_hole_latency(client, hole_pairs(args.holes))))
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
