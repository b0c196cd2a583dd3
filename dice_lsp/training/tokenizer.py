"""Byte-level BPE tokenizer for dice-tiny, trained on the corpus train split.

    python -m dice_lsp.training.tokenizer --corpus data/corpus --out data/tokenizer [--vocab 8192]

Byte-level without a prefix space, so decode(encode(x)) == x for any text; digits are split one by one
and whitespace runs (indentation) stay tokens of their own. After training, tokens are counted per
source and split into the corpus manifest.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections import defaultdict
from collections.abc import Iterable, Sequence
from pathlib import Path

from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers
from tqdm import tqdm

from dice_lsp.training import corpus

LOG = logging.getLogger("dice_lsp.tokenizer")

SPECIAL_TOKENS = (
    "<|pad|>", "<|eos|>", "<|mask|>", "<|fim_prefix|>", "<|fim_suffix|>", "<|fim_middle|>", "<|file_sep|>",
)
TOKENIZER_CONFIG = {
    "mask_token": "<|mask|>", "pad_token": "<|pad|>", "eos_token": "<|eos|>",
    "fim_prefix_token": "<|fim_prefix|>", "fim_suffix_token": "<|fim_suffix|>",
    "fim_middle_token": "<|fim_middle|>",
}
# Identifiers (with one leading space), single digits, punctuation runs, then whitespace runs kept whole
# except for the last space, which joins the next word (the GPT-2 scheme, with digits split).
SPLIT_PATTERN = r" ?[\p{L}_]+| ?[^\s\p{L}\p{N}_]+|\p{N}|\s+(?!\S)|\s+"


def new_tokenizer() -> Tokenizer:
    """An untrained byte-level BPE with the code-friendly pre-tokenizer."""
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(SPLIT_PATTERN), behavior="isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel()
    return tok


def train_tokenizer(texts: Iterable[str], vocab_size: int = 8192, min_frequency: int = 2) -> Tokenizer:
    """Train on `texts`; the special tokens land at ids 0..6 in SPECIAL_TOKENS order, then all 256 bytes."""
    tok = new_tokenizer()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size, min_frequency=min_frequency, special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False,
    )
    tok.train_from_iterator(texts, trainer=trainer)
    return tok


def save(tok: Tokenizer, out: Path) -> None:
    """tokenizer.json plus the tokenizer_config.json the engine reads special tokens from."""
    out.mkdir(parents=True, exist_ok=True)
    tok.save(str(out / "tokenizer.json"))
    (out / "tokenizer_config.json").write_text(json.dumps(TOKENIZER_CONFIG, indent=2) + "\n")


def training_texts(corpus_dir: Path, max_mb: float) -> list[str]:
    """Train-split texts for BPE: all CUDA first (the merges should fit CUDA best), then C/C++ up to
    `max_mb` in total, which also bounds training time and memory."""
    records = sorted(corpus.read_split(corpus_dir, "train"), key=lambda r: r["lang"] != "cuda")
    texts: list[str] = []
    budget = int(max_mb * corpus.MiB)
    for record in records:
        budget -= len(record["text"])
        if budget < 0:
            break
        texts.append(record["text"])
    LOG.info("training on %d files", len(texts))
    return texts


def count_tokens(tok: Tokenizer, corpus_dir: Path, batch: int = 256) -> dict[str, dict[str, int]]:
    """Tokens per source and split (no special tokens), for the manifest."""
    counts: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for split in corpus.SPLITS:
        records = list(corpus.read_split(corpus_dir, split))
        starts = range(0, len(records), batch)
        for start in tqdm(starts, desc=f"count {split}", unit="batch", file=sys.stderr):
            chunk = records[start:start + batch]
            encodings = tok.encode_batch([r["text"] for r in chunk], add_special_tokens=False)
            for record, enc in zip(chunk, encodings, strict=True):
                counts[record["source"]][split] += len(enc.ids)
    return {name: dict(per_split) for name, per_split in counts.items()}


def record_tokens(per_source: dict[str, dict[str, int]], vocab_size: int) -> None:
    """Store token counts in the manifest and re-render docs/CORPUS.md."""
    per_split: dict[str, int] = defaultdict(int)
    for splits in per_source.values():
        for split, n in splits.items():
            per_split[split] += n
    manifest = corpus.load_manifest()
    manifest["tokens"] = {"vocab_size": vocab_size, "per_split": dict(per_split), "per_source": per_source}
    corpus.save_manifest(manifest)


def main(argv: Sequence[str] | None = None) -> int:
    """Train, save, then count tokens into the manifest."""
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s", stream=sys.stderr)
    parser = argparse.ArgumentParser(prog="python -m dice_lsp.training.tokenizer")
    parser.add_argument("--corpus", type=Path, default=Path("data/corpus"))
    parser.add_argument("--out", type=Path, default=Path("data/tokenizer"))
    parser.add_argument("--vocab", type=int, default=8192)
    parser.add_argument("--max-mb", type=float, default=120.0, help="text budget for BPE training")
    parser.add_argument("--no-count", action="store_true", help="skip counting tokens into the manifest")
    args = parser.parse_args(argv)
    tok = train_tokenizer(training_texts(args.corpus, args.max_mb), args.vocab)
    save(tok, args.out)
    LOG.info("saved %d-token vocabulary to %s", tok.get_vocab_size(), args.out)
    if not args.no_count:
        per_source = count_tokens(tok, args.corpus)
        record_tokens(per_source, tok.get_vocab_size())
        totals = corpus.load_manifest()["tokens"]["per_split"]
        print(f"tokenizer vocab {tok.get_vocab_size()} -> {args.out}; tokens per split {totals}",
              file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
