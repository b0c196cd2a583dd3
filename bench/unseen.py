"""Which CUDA files the model has seen: each file checked against the training corpus before a real-code set uses it.

    python bench/unseen.py PATH [PATH ...] [--corpus data/corpus] [--list unseen.txt] [--json]

PATH: `.cu`/`.cuh` files or folders of them. The index is every file of the corpus's train, valid and test
splits (any language: CUDA code is copied into C++ files too), built once and cached beside the corpus. A file
is *seen* when it is an exact copy of a corpus file (whitespace aside), a MinHash near copy (the corpus's own
dedup threshold), or when more than `SEEN_SHARE` of its 4-line windows of normalised lines occur in the corpus
(a file assembled from copied functions). The verdicts are the ones `dice_lsp.training.suite_build` applies to the
CUDA-Infill suite, with a stricter window share: a real-code hole inside a copied function measures recall.

Prints one line per seen file (why) and a count per top-level folder; `--list` writes the unseen files' paths
(the input of `bench/real_code.py --files-from`).
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from dice_lsp.training import corpus
from dice_lsp.training.suite_build import CorpusIndex, window_hashes

SEEN_SHARE = 0.2  # more than this share of a file's 4-line windows in the corpus: seen
SPLITS = ("train.jsonl", "valid.jsonl", "test.jsonl")


@dataclass(frozen=True)
class Verdict:
    """One file's overlap with the corpus: an exact copy, a near copy, and its share of corpus windows."""

    path: str
    exact: bool
    near: bool
    share: float

    @property
    def seen(self) -> bool:
        return self.exact or self.near or self.share > SEEN_SHARE

    def why(self) -> str:
        if self.exact:
            return "exact copy of a corpus file"
        if self.near:
            return "near copy of a corpus file"
        return f"{self.share:.0%} of its 4-line windows are in the corpus"


def corpus_texts(folder: Path) -> list[str]:
    """Every file text of the corpus's splits."""
    texts = []
    for name in SPLITS:
        path = folder / name
        if not path.is_file():
            raise SystemExit(f"unseen: {path}: no such file (build the corpus: python -m dice_lsp.training.corpus)")
        with path.open(encoding="utf-8") as lines:
            texts += [json.loads(line)["text"] for line in lines]
    return texts


def load_index(folder: Path) -> CorpusIndex:
    """The corpus index, cached in `folder` (rebuilt when a split's size or time changes)."""
    key = json.dumps([[(folder / n).stat().st_size, (folder / n).stat().st_mtime_ns] for n in SPLITS
                      if (folder / n).is_file()])
    cache = folder / "seen-index.npz"
    if cache.is_file():
        with np.load(cache) as saved:
            if str(saved["key"]) == key:
                return CorpusIndex.from_parts([bytes(r) for r in saved["exact"]], list(saved["signatures"]),
                                              saved["windows"])
    print(f"unseen: indexing the corpus in {folder} (once; a few minutes)", file=sys.stderr)
    texts = corpus_texts(folder)
    near = corpus.NearDeduper()
    exact = [corpus.exact_key(t) for t in texts]
    signatures = [near.signature(t) for t in texts]
    windows = np.unique(np.concatenate([window_hashes(t) for t in texts]))
    np.savez(cache, key=np.array(key), exact=np.frombuffer(b"".join(exact), dtype=np.uint8).reshape(-1, 16),
             signatures=np.stack(signatures), windows=windows)
    return CorpusIndex.from_parts(exact, signatures, windows)


def verdict(index: CorpusIndex, path: Path) -> Verdict:
    text = path.read_text(encoding="utf-8", errors="replace")
    hashes = window_hashes(text)
    at = np.minimum(np.searchsorted(index.windows, hashes), len(index.windows) - 1)
    share = float((index.windows[at] == hashes).mean()) if len(hashes) and len(index.windows) else 0.0
    near = index.near.match(index.near.signature(text))
    return Verdict(str(path), corpus.exact_key(text) in index.exact, near is not None, share)


def cuda_files(paths: list[str]) -> list[Path]:
    """The `.cu`/`.cuh` files of `paths`: files, folders (searched) or `@LIST` (a file of paths, one a line)."""
    found: list[Path] = []
    for name in paths:
        if name.startswith("@"):
            found += [Path(line) for line in Path(name[1:]).read_text().split("\n") if line.strip()]
            continue
        path = Path(name)
        if path.is_dir():
            found += sorted(p for p in path.rglob("*") if p.suffix in (".cu", ".cuh") and p.is_file())
        elif path.is_file():
            found.append(path)
        else:
            raise SystemExit(f"{Path(sys.argv[0]).stem}: {name}: no such file or folder")
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("paths", nargs="+")
    parser.add_argument("--corpus", type=Path, default=Path("data/corpus"))
    parser.add_argument("--list", type=Path, help="write the unseen files' paths here, one a line")
    parser.add_argument("--json", action="store_true", help="one JSON object per file")
    args = parser.parse_args()
    files = cuda_files(args.paths)
    if not files:
        print("unseen: no .cu or .cuh files", file=sys.stderr)
        return 2
    index = load_index(args.corpus)
    verdicts = [verdict(index, path) for path in files]
    if args.json:
        for v in verdicts:
            print(json.dumps({"path": v.path, "seen": v.seen, "exact": v.exact, "near": v.near,
                              "window_share": round(v.share, 4)}))
    else:
        for v in verdicts:
            if v.seen:
                print(f"seen  {v.path}: {v.why()}")
        print(f"{sum(not v.seen for v in verdicts)} of {len(verdicts)} files unseen")
    if args.list:
        args.list.write_text("".join(f"{v.path}\n" for v in verdicts if not v.seen))
    return 0


if __name__ == "__main__":
    sys.exit(main())
