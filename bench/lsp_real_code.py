"""The language server on real CUDA files, as an editor drives it: a real `dice-lsp` over stdio, each file opened,
its code lenses asked for, three new lines typed after random statements with an inline completion and a
code action at each, then saved and closed.

    python bench/lsp_real_code.py PATH [PATH ...] [--files 30] [--seed 5] [--json log.json]

PATH: `.cu`/`.cuh` files or folders of them (never written: the edits live in the editor's copy only).
Prints per request kind: how many, how many failed (an error reply or no reply within 60 s), p50/p95/max ms,
and for completions how many showed something. Any failure is a bug; `--json` keeps every request.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import sys
import time
from collections.abc import Awaitable
from pathlib import Path
from typing import Any

from lsp_latency import start
from lsprotocol import types
from pygls.lsp.client import LanguageClient
from real_code import sampled_files

TIMEOUT_S = 60
SETTINGS = {"device": "cpu", "diagnostics": True, "benchOnSave": False}


async def timed(name: str, request: Awaitable[Any], log: list[dict[str, Any]]) -> Any:
    started = time.perf_counter()
    try:
        result = await asyncio.wait_for(request, TIMEOUT_S)
    except Exception as exc:  # an error reply or a timeout: a finding
        log.append({"request": name, "ms": (time.perf_counter() - started) * 1000, "ok": False,
                    "error": repr(exc)[:300]})
        return None
    log.append({"request": name, "ms": (time.perf_counter() - started) * 1000, "ok": True})
    return result


def insert_text(item: types.InlineCompletionItem) -> str:
    text = item.insert_text
    return text if isinstance(text, str) else text.value


async def one_file(client: LanguageClient, path: Path, rng: random.Random, log: list[dict[str, Any]]) -> None:
    text = path.read_text(encoding="utf-8", errors="replace")
    uri, version = path.resolve().as_uri(), 1
    client.text_document_did_open(types.DidOpenTextDocumentParams(
        types.TextDocumentItem(uri=uri, language_id="cuda-cpp", version=version, text=text)))
    document = types.TextDocumentIdentifier(uri=uri)
    await timed("codeLens", client.text_document_code_lens_async(types.CodeLensParams(text_document=document)), log)
    lines = text.split("\n")
    statements = [i for i, line in enumerate(lines) if line.strip().endswith(";") and line.startswith((" ", "\t"))]
    for _ in range(3 if statements else 0):
        i = rng.choice(statements)
        indent = lines[i][:len(lines[i]) - len(lines[i].lstrip())]
        version += 1
        end = types.Position(i, len(lines[i]))
        client.text_document_did_change(types.DidChangeTextDocumentParams(
            text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=version),
            content_changes=[types.TextDocumentContentChangePartial(range=types.Range(end, end),
                                                                    text="\n" + indent)]))
        lines = [*lines[:i + 1], indent, *lines[i + 1:]]
        statements = [s + (s > i) for s in statements]
        cursor = types.Position(i + 1, len(indent))
        reply = await timed("inlineCompletion", client.text_document_inline_completion_async(
            types.InlineCompletionParams(text_document=document, position=cursor,
                                         context=types.InlineCompletionContext(
                                             trigger_kind=types.InlineCompletionTriggerKind.Invoked))), log)
        if reply is not None:
            items = reply.items if isinstance(reply, types.InlineCompletionList) else reply
            log[-1]["shown"] = [insert_text(item) for item in items or []]
        await timed("codeAction", client.text_document_code_action_async(types.CodeActionParams(
            text_document=document, range=types.Range(cursor, cursor),
            context=types.CodeActionContext(diagnostics=[]))), log)
    client.text_document_did_save(types.DidSaveTextDocumentParams(text_document=document))
    client.text_document_did_close(types.DidCloseTextDocumentParams(text_document=document))


def table(log: list[dict[str, Any]]) -> str:
    out = ["| request | n | failed | p50 ms | p95 ms | max ms | shown |", "|---|---|---|---|---|---|---|"]
    for name in ("inlineCompletion", "codeAction", "codeLens"):
        rows = [r for r in log if r["request"] == name]
        if not rows:
            continue
        times = sorted(r["ms"] for r in rows)
        shown = str(sum(bool(r.get("shown")) for r in rows)) if name == "inlineCompletion" else "-"
        out.append(f"| {name} | {len(rows)} | {sum(not r['ok'] for r in rows)} | {statistics.median(times):.0f} | "
                   f"{times[min(len(times) - 1, int(0.95 * len(times)))]:.0f} | {times[-1]:.0f} | {shown} |")
    return "\n".join(out)


async def run(files: list[Path], seed: int) -> list[dict[str, Any]]:
    client = await start(SETTINGS)
    log: list[dict[str, Any]] = []
    rng = random.Random(seed)
    for number, path in enumerate(files, 1):
        await one_file(client, path, rng, log)
        print(f"[{number}/{len(files)}] {path.name}", file=sys.stderr)
    await timed("shutdown", client.shutdown_async(None), log)
    client.exit(None)
    await client.stop()
    return log


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("paths", nargs="+")
    parser.add_argument("--files", type=int, default=30, help="at most this many files (a seeded sample)")
    parser.add_argument("--seed", type=int, default=5)
    parser.add_argument("--json", type=Path, help="also write every request here")
    args = parser.parse_args()
    files = sampled_files(args.paths, args.files, random.Random(args.seed))
    if not files:
        print("bench: no .cu or .cuh files", file=sys.stderr)
        return 2
    log = asyncio.run(run(files, args.seed))
    if args.json:
        args.json.write_text(json.dumps(log))
    print(table(log))
    return 1 if any(not r["ok"] for r in log) else 0


if __name__ == "__main__":
    sys.exit(main())
