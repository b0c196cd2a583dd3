"""Three completions in a row in each held-out file that includes CUB or Thrust, over a real `dice-lsp` (scratch
driver of the nineteenth session's measurement; run from the repository root: python docs/bench-logs/...)."""

import asyncio
import json
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "bench"))
from lsp_latency import HELDOUT, _file_holes, inline_params, open_doc, start
from lsprotocol import types


async def main() -> None:
    files = [json.loads(line)["text"] for line in HELDOUT.read_text().splitlines()]
    files = [text for text in files if "cub/" in text or "thrust/" in text][:8]
    rng = random.Random(1)
    client = await start({"device": "cpu", "diagnostics": False})
    out = []
    for i, text in enumerate(files):
        cases = _file_holes(text, rng)
        if len(cases) < 3:
            continue
        uri = f"file:///bench/cub{i}.cu"
        times = []
        for n, (edited, line, character, _) in enumerate(rng.sample(cases, 3)):
            if n == 0:
                open_doc(client, uri, edited)
            else:
                client.text_document_did_change(types.DidChangeTextDocumentParams(
                    types.VersionedTextDocumentIdentifier(uri=uri, version=n + 1),
                    [types.TextDocumentContentChangeWholeDocument(text=edited)]))
            started = time.perf_counter()
            await client.text_document_inline_completion_async(inline_params(uri, line, character))
            times.append(round((time.perf_counter() - started) * 1000))
        out.append(times)
    print(out)
    await client.shutdown_async(None)
    client.exit(None)


asyncio.run(main())
