"""The per-file index of a pack's train stream, and sampling weights per GPU dialect and source.

The pack writes train files one after another, each followed by `<|file_sep|>`, over uint16 shards
(`train-NN.bin`, read as one stream). `train-files.json` next to `meta.json` says where each file lies:

    {"file_sep_id": 6, "total_tokens": N, "files": [{"source", "path", "lang", "dialect", "offset", "length"}]}

`offset` is in the whole train stream, `length` counts the file's tokens without its separator (as in the
valid split's list in meta.json), so file i+1 starts at offset_i + length_i + 1. The pack writes the index
itself; for an older pack, `python -m dice_lsp.training.corpus index` rebuilds it from the shards and the
corpus (no tokenizing) and checks it against the counts in meta.json before writing.

`--weights cuda=4,hip=2,opencl=0.5,source:hashcat=0` (train.py) turns the index into one weight per file:
a dialect's weight (default 1), replaced by its source's where one is given.
"""

from __future__ import annotations

import json
import math
import sys
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from tqdm import tqdm

INDEX_NAME = "train-files.json"
SOURCE_PREFIX = "source:"


class IndexMismatch(ValueError):
    """The shards, the corpus and meta.json do not describe the same files."""


def dialect_of(record: Mapping[str, Any]) -> str:
    """A record's dialect; records older than the dialect field are "cuda" (GPU) or "cpp"."""
    return str(record.get("dialect") or ("cuda" if record["lang"] == "cuda" else "cpp"))


def file_entry(record: Mapping[str, Any], offset: int, length: int) -> dict[str, Any]:
    """One row of the index: where a packed file lies and what it is."""
    return {"source": record["source"], "path": record["path"], "lang": record["lang"],
            "dialect": dialect_of(record), "offset": offset, "length": length}


def write_index(pack_dir: Path, files: list[dict[str, Any]], file_sep_id: int) -> Path:
    """train-files.json: compact JSON, one file per line (75,082 files of the v3 pack: 11.6 MB, 1.2 MB as xz)."""
    total = files[-1]["offset"] + files[-1]["length"] + 1 if files else 0
    rows = ",\n".join(json.dumps(f, separators=(",", ":")) for f in files)
    head = json.dumps({"file_sep_id": file_sep_id, "total_tokens": total})[:-1]
    path = pack_dir / INDEX_NAME
    path.write_text(f'{head}, "files": [\n{rows}\n]}}\n')
    return path


def read_index(pack_dir: Path) -> list[dict[str, Any]]:
    """The index's files; a one-line SystemExit when the pack has none."""
    path = pack_dir / INDEX_NAME
    if not path.exists():
        raise SystemExit(f"{path}: no per-file index; rebuild it with "
                         f"`python -m dice_lsp.training.corpus index --pack {pack_dir} --corpus CORPUS`")
    files: list[dict[str, Any]] = json.loads(path.read_text())["files"]
    return files


def separator_offsets(pack_dir: Path, shards: list[dict[str, Any]], separator: int) -> tuple[np.ndarray, int]:
    """Positions of `separator` in the whole train stream (shards in meta order), and the stream's length."""
    found: list[np.ndarray] = []
    base = 0
    for shard in tqdm(shards, desc="scan", unit="shard", file=sys.stderr):
        tokens = np.fromfile(pack_dir / shard["file"], dtype=np.uint16)
        if len(tokens) != shard["tokens"]:
            raise IndexMismatch(f"{shard['file']}: {len(tokens)} tokens on disk, meta.json says {shard['tokens']}")
        found.append(np.flatnonzero(tokens == separator) + base)
        base += len(tokens)
    return (np.concatenate(found) if found else np.zeros(0, dtype=np.int64)), base


def index_from_separators(records: list[dict[str, Any]], separators: np.ndarray,
                          total: int) -> list[dict[str, Any]]:
    """Pair the packed records (in pack order) with the files the separators delimit."""
    if len(separators) != len(records):
        raise IndexMismatch(f"{len(separators)} separators in the shards, {len(records)} packed files in meta.json")
    if total and (len(separators) == 0 or int(separators[-1]) != total - 1):
        raise IndexMismatch("the train stream does not end with a separator")
    starts = np.concatenate(([0], separators[:-1] + 1)) if len(separators) else separators
    return [file_entry(r, int(s), int(e - s)) for r, s, e in zip(records, starts, separators, strict=True)]


def token_sums(files: Iterable[Mapping[str, Any]], key: str) -> dict[str, int]:
    """Tokens per `key` (dialect, source, lang), separators included, as meta.json counts them."""
    sums: dict[str, int] = defaultdict(int)
    for f in files:
        sums[f[key]] += f["length"] + 1
    return dict(sums)


def check_against_meta(files: list[dict[str, Any]], train_meta: Mapping[str, Any]) -> None:
    """Refuse an index whose per-dialect, per-source or per-language token sums differ from meta.json's."""
    for key, meta_key in (("dialect", "dialect_tokens"), ("source", "source_tokens"), ("lang", "tokens")):
        expected = {k: v for k, v in train_meta.get(meta_key, {}).items() if v}
        got = token_sums(files, key)
        if got != expected:
            wrong = sorted(k for k in set(got) | set(expected) if got.get(k) != expected.get(k))
            shown = ", ".join(f"{k} {got.get(k, 0)} vs {expected.get(k, 0)}" for k in wrong[:3])
            raise IndexMismatch(f"{meta_key} differ from meta.json for {len(wrong)} of {len(expected)} "
                                f"({shown}{', ...' if len(wrong) > 3 else ''})")


# ---------------------------------------------------------------- weights


@dataclass(frozen=True)
class Weights:
    """Sampling weight per dialect (default 1) and per-source overrides."""

    dialects: dict[str, float]
    sources: dict[str, float]

    def of(self, dialect: str, source: str) -> float:
        if source in self.sources:
            return self.sources[source]
        return self.dialects.get(dialect, 1.0)


def parse_weights(spec: str) -> Weights:
    """`cuda=4,hip=2,opencl=0.5,cpp=1,source:hashcat=0` -> Weights; a one-line ValueError when malformed."""
    dialects: dict[str, float] = {}
    sources: dict[str, float] = {}
    for item in filter(None, (part.strip() for part in spec.split(","))):
        name, eq, value = item.partition("=")
        name = name.strip()
        try:
            weight = float(value)
        except ValueError:
            weight = math.nan
        if not eq or not name or not math.isfinite(weight) or weight < 0:
            raise ValueError(f"--weights: {item!r} is not NAME=WEIGHT with a weight >= 0")
        if name.startswith(SOURCE_PREFIX):
            sources[name[len(SOURCE_PREFIX):]] = weight
        else:
            dialects[name] = weight
    return Weights(dialects, sources)


def file_weights(files: list[dict[str, Any]], weights: Weights) -> np.ndarray:
    """One weight per indexed file; refuses dialect or source names the index does not hold."""
    known_dialects = {f["dialect"] for f in files}
    known_sources = {f["source"] for f in files}
    unknown = sorted(set(weights.dialects) - known_dialects)
    if unknown:
        raise ValueError(f"--weights: unknown dialect {', '.join(unknown)}; "
                         f"the pack has {', '.join(sorted(known_dialects))}")
    unknown = sorted(set(weights.sources) - known_sources)
    if unknown:
        raise ValueError(f"--weights: unknown source {', '.join(unknown)}")
    return np.array([weights.of(f["dialect"], f["source"]) for f in files], dtype=np.float64)
