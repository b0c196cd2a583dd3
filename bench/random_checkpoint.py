"""Write a checkpoint folder of random weights in a preset's shape with the embedded model's tokenizer, for
loading benches (the team server with an SDAR/DICE-sized model: bench/server_load.py --model FOLDER).

    python bench/random_checkpoint.py FOLDER [--shape sdar-8b] [--device cuda]

Random bf16 weights (std 0.02), made on the device; the vocabulary is the tokenizer's (8,192 tokens) so every
token a fill writes decodes. No hub, nothing downloaded: this is the shape of a DICE-8B checkpoint, not one.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch
from block_batch import SHAPES
from static_step_replay import build

from dice_lsp.engine.checkpoint import EMBEDDED_MODEL, save_native
from dice_lsp.engine.tokenizer import Tokenizer


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folder", type=Path)
    parser.add_argument("--shape", choices=sorted(SHAPES), default="sdar-8b")
    parser.add_argument("--device", default="cuda")
    args = parser.parse_args()
    started = time.perf_counter()
    tokenizer = Tokenizer(EMBEDDED_MODEL)
    lm = build(SHAPES[args.shape], torch.device(args.device))
    save_native(lm, tokenizer, args.folder)
    size = sum(p.stat().st_size for p in args.folder.iterdir()) / 1e9
    print(f"{args.folder}: {args.shape}-shaped, {sum(p.numel() for p in lm.parameters()) / 1e9:.2f}B parameters, "
          f"{size:.1f} GB, {time.perf_counter() - started:.0f} s", file=sys.stderr)


if __name__ == "__main__":
    main()
