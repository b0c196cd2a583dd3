"""The training command's options, apart from the training code so that building the CLI imports no torch."""

from __future__ import annotations

import argparse

from dice_lsp.engine.presets import DICE_TINY


def build_parser(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    parser.add_argument("--data", required=True, help="folder of packed token shards (train-*.bin, valid.bin)")
    parser.add_argument("--tokenizer", required=True, help="folder with tokenizer.json + tokenizer_config.json")
    parser.add_argument("--out", required=True, help="checkpoint folder to write")
    parser.add_argument("--resume", help="checkpoint folder to continue from")
    parser.add_argument("--init", help="start from this trained checkpoint (grown to --layers when deeper)")
    parser.add_argument("--run-minutes", type=float, default=0.0,
                        help="schedule by the wall clock: the whole run lasts this long (overrides --steps)")
    parser.add_argument("--curriculum-from", type=float, default=0.0,
                        help="start the hole curriculum this far along (0..1; a grown model skips its start)")
    parser.add_argument("--gpu-weight", type=float, default=1.0,
                        help="windows from the pack's GPU code are this many times as likely per token as C/C++ ones")
    parser.add_argument("--weights", default="",
                        help="window weights per dialect of the pack's index (train-files.json), per token, default 1; "
                             "source:NAME=W overrides a source: cuda=4,hip=2,opencl=0.5,source:hashcat=0")
    parser.add_argument("--rft", default="",
                        help="kept fills of `python -m dice_lsp.training.rft collect` (JSON lines) to train on too")
    parser.add_argument("--rft-share", type=float, default=0.5,
                        help="with --rft: the share of each batch made from its fills (the rest from the pack)")
    parser.add_argument("--dropout", type=float, default=0.0, help="residual dropout while training")
    parser.add_argument("--weight-decay", type=float, default=0.1)
    parser.add_argument("--objective", choices=("diffusion", "ar"), default="diffusion",
                        help="masked diffusion (the product) or the autoregressive fill-in-the-middle baseline")
    parser.add_argument("--steps", type=int, default=20_000, help="optimizer steps of the whole run (schedule)")
    parser.add_argument("--minutes", type=float, default=9.0, help="wall-clock budget of this call")
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--length", type=int, default=DICE_TINY.max_position_embeddings)
    parser.add_argument("--hidden", type=int, default=DICE_TINY.hidden_size)
    parser.add_argument("--layers", type=int, default=DICE_TINY.num_hidden_layers)
    parser.add_argument("--vocab", type=int, default=0, help="vocabulary size (default: the tokenizer's)")
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--warmup", type=float, default=0.03, help="share of the run spent warming up")
    parser.add_argument("--workers", type=int, default=6)
    parser.add_argument("--log-every", type=int, default=50)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--device", default="auto")
    parser.add_argument("--compile", action="store_true", help="torch.compile the backbone (GPU)")
    return parser
