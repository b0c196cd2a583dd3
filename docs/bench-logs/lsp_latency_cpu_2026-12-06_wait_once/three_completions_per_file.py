import asyncio, sys, time, json, random
sys.path.insert(0, "/work/main/bench")
from lsp_latency import start, _file_holes, open_doc, inline_params, HELDOUT
from lsprotocol import types
async def main():
    files = [json.loads(l)["text"] for l in HELDOUT.read_text().splitlines()]
    files = [t for t in files if "cub/" in t or "thrust/" in t][:8]
    rng = random.Random(1)
    client = await start({"device": "cpu", "diagnostics": False})
    out = []
    for i, text in enumerate(files):
        cases = _file_holes(text, rng)
        if len(cases) < 3: continue
        a, b, c = rng.sample(cases, 3)
        uri = f"file:///bench/cub{i}.cu"
        open_doc(client, uri, a[0])
        times = []
        for n, (t, line, ch, _) in enumerate((a, b, c)):
            if n:
                client.text_document_did_change(types.DidChangeTextDocumentParams(
                    types.VersionedTextDocumentIdentifier(uri=uri, version=n + 1), [types.TextDocumentContentChangeWholeDocument(text=t)]))
            s = time.perf_counter()
            await client.text_document_inline_completion_async(inline_params(uri, line, ch))
            times.append(round((time.perf_counter() - s) * 1000))
        out.append(times)
    print(out)
    await client.shutdown_async(None); client.exit(None)
asyncio.run(main())
