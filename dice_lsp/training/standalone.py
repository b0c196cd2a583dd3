"""Held-out kernels that compile on their own: CUDA source kept in Python string literals.

The packed corpus only reads C/C++/CUDA files, so kernels that libraries such as CuPy and PyCUDA keep as
strings in `.py` files (RawKernel, SourceModule, ElementwiseKernel preambles) never reach training. Many of
them are complete translation units: `extern "C" __global__ ...` with nothing to include. Those that nvcc
compiles as they are, and that hold a kernel that is not a template (a template that is never
instantiated compiles whatever its body holds), make the held-out set on which the infilling
evaluation's compile rate means something.

    python -m dice_lsp.training.standalone --out bench/heldout/standalone.jsonl
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import json
import logging
from collections.abc import Iterator
from pathlib import Path

from tqdm import tqdm

from dice_lsp.cuda.functions import parse_functions
from dice_lsp.toolchain.nvcc import compile_source
from dice_lsp.training.corpus import SOURCES, CorpusSource, fetch, iter_files

LOG = logging.getLogger("dice_lsp.standalone")
PACKAGES = ("cupy", "pycuda", "tilelang", "flash-attn", "vllm")
MAX_CHARS = 20_000
MIN_BODY_LINES = 3


def cuda_strings(python_source: str) -> Iterator[str]:
    """String literals of a Python file that define a CUDA kernel."""
    try:
        tree = ast.parse(python_source)
    except (SyntaxError, ValueError):
        return
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and "__global__" in node.value:
            yield node.value


def usable(text: str) -> bool:
    """A non-template kernel with a body of a few lines, in a file small enough to fill and compile."""
    if len(text) > MAX_CHARS:
        return False
    return any(f.is_kernel and f.head == f.start and text.count("\n", f.body_open, f.body_close) >= MIN_BODY_LINES
               for f in parse_functions(text))


def candidates(source: CorpusSource) -> Iterator[tuple[str, str]]:
    for location in fetch(source):
        for path, raw in iter_files(location, lambda name: name.endswith(".py")):
            for text in cuda_strings(raw.decode("utf-8", errors="replace")):
                if usable(text):
                    yield path, text


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m dice_lsp.training.standalone")
    parser.add_argument("--out", type=Path, default=Path("bench/heldout/standalone.jsonl"))
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    seen: set[str] = set()
    records = []
    for source in (s for s in SOURCES if s.name in PACKAGES):
        found = [(p, t) for p, t in candidates(source) if hashlib.sha256(t.encode()).hexdigest() not in seen]
        for path, text in tqdm(found, desc=source.name, unit="kernel"):
            digest = hashlib.sha256(text.encode()).hexdigest()
            if digest in seen or not compile_source(text).ok:
                continue
            seen.add(digest)
            records.append({"source": source.name, "version": source.version, "path": path,
                            "license": source.license, "text": text})
        LOG.info("%s: %d of %d candidate strings compile", source.name,
                 sum(r["source"] == source.name for r in records), len(found))
    args.out.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    LOG.info("%d self-contained kernel files -> %s", len(records), args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
