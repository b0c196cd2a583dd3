"""Export a trained checkpoint folder for the package: int8 weights with per-row scales (`engine.quant`).

    python -m dice_lsp.training.export SOURCE_FOLDER OUT_FOLDER
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from dice_lsp.engine.quant import write_int8


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m dice_lsp.training.export",
                                     description="write an int8 copy of a native checkpoint folder")
    parser.add_argument("source", type=Path)
    parser.add_argument("out", type=Path)
    ns = parser.parse_args(argv)
    if not ns.source.is_dir():
        print(f"error: {ns.source}: not a checkpoint folder", file=sys.stderr)
        return 2
    written = write_int8(ns.source, ns.out)
    total = sum(p.stat().st_size for p in written)
    print(f"{ns.out}: {len(written)} weight file(s), {total / 1e6:.1f} MB", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
