"""The checkpoint's tokenizer and the special tokens diffusion decoding needs.

Reads `tokenizer.json` with the `tokenizers` library (fast, no transformers import) and the special
tokens from `tokenizer_config.json`, which both our own checkpoints and Qwen3/SDAR folders carry.
"""

from __future__ import annotations

import itertools
import json
import re
import shutil
import threading
from collections import OrderedDict
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

from tokenizers import Tokenizer as HFTokenizer

from dice_lsp.errors import ModelLoadError

# A piece of a text starts where a run of white space that holds a line break starts (a piece is about a line).
_PIECE_START = re.compile(r"[^\S\n]*\n\s*")
PIECES_KEPT = 50_000  # pieces whose token starts a tokenizer remembers (least recently used dropped first)
# Code whose token starts one encoding and the pieces' encodings must give alike, for pieces to be used at all
# (a tokenizer whose pre-tokenizer joins text across a line break would differ here).
_PROBE = ("#include <cuda_runtime.h>\r\n#define SQ(x) \\\n    ((x) * (x))\n\n"
          "__global__ void k(float* out,\tint n) {  \n\tint i = blockIdx.x * blockDim.x + threadIdx.x;   // ünïcode ✓\n"
          "    if (i < n) {\n        out[i] = "
          "SQ(1.5e-3f);\n    }\n\n\n    const char* s = \"a\\nb\";\r\n}\n  \n\t\n")

FIM_TOKENS = {"fim_prefix": "<|fim_prefix|>", "fim_suffix": "<|fim_suffix|>", "fim_middle": "<|fim_middle|>"}


@dataclass(frozen=True)
class SpecialTokens:
    mask_id: int
    pad_id: int
    eos_id: int
    fim_prefix_id: int | None = None
    fim_suffix_id: int | None = None
    fim_middle_id: int | None = None

    @property
    def never_generated(self) -> list[int]:
        """Ids a fill must never contain (pad/EOS are allowed: they end a region early)."""
        ids = (self.mask_id, self.fim_prefix_id, self.fim_suffix_id, self.fim_middle_id)
        return [i for i in ids if i is not None]

    @property
    def stop_ids(self) -> set[int]:
        return {self.pad_id, self.eos_id}


def _token_text(value: Any) -> str | None:
    """tokenizer_config.json stores a token as a string or as an AddedToken dict."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and isinstance(value.get("content"), str):
        return str(value["content"])
    return None


class Tokenizer:
    def __init__(self, folder: Path) -> None:
        self.folder = folder
        path = folder / "tokenizer.json"
        if not path.is_file():
            raise ModelLoadError(f"{folder}: no tokenizer.json")
        try:
            self._tok = HFTokenizer.from_file(str(path))
        except Exception as exc:
            raise ModelLoadError(f"{path}: unreadable tokenizer ({exc})") from exc
        config_path = folder / "tokenizer_config.json"
        config: dict[str, Any] = {}
        if config_path.is_file():
            config = json.loads(config_path.read_text(encoding="utf-8"))
        self.special = self._special_tokens(config, folder)
        self._pieces: OrderedDict[str, tuple[int, ...]] = OrderedDict()
        self._pieces_lock = threading.Lock()

    def token_id(self, text: str | None) -> int | None:
        """The id of a whole token (a special token, say), or None if the vocabulary lacks it."""
        return None if text is None else self._tok.token_to_id(text)

    def _special_tokens(self, config: dict[str, Any], folder: Path) -> SpecialTokens:
        mask = self.token_id(_token_text(config.get("mask_token")))
        if mask is None:
            raise ModelLoadError(f"{folder}: the tokenizer defines no mask token (mask_token)")
        eos = self.token_id(_token_text(config.get("eos_token")))
        pad = self.token_id(_token_text(config.get("pad_token")))
        if eos is None and pad is None:
            raise ModelLoadError(f"{folder}: the tokenizer defines neither eos_token nor pad_token")
        pad_id = pad if pad is not None else eos
        eos_id = eos if eos is not None else pad
        assert pad_id is not None and eos_id is not None
        fim = {key: self.token_id(_token_text(config.get(f"{key}_token")) or text) for key, text in FIM_TOKENS.items()}
        return SpecialTokens(
            mask_id=mask,
            pad_id=pad_id,
            eos_id=eos_id,
            fim_prefix_id=fim["fim_prefix"],
            fim_suffix_id=fim["fim_suffix"],
            fim_middle_id=fim["fim_middle"],
        )

    @property
    def vocab_size(self) -> int:
        return int(self._tok.get_vocab_size(with_added_tokens=True))

    def encode(self, text: str) -> list[int]:
        return list(self._tok.encode(text, add_special_tokens=False).ids)

    def token_starts(self, text: str) -> list[int]:
        """Where each token of `text` starts (string offsets): counts tokens in any span after one encoding."""
        return [start for start, _ in self._tok.encode(text, add_special_tokens=False).offsets]

    def counting_starts(self, text: str) -> list[int]:
        """`token_starts(text)`, from line-sized pieces whose starts are remembered across calls (a language
        server sizes the context of the same file, a few characters changed, again and again; a whole file
        of 200 KB takes ~70 ms to encode), where pieces give exactly one encoding's starts (checked once per
        tokenizer); otherwise `token_starts`."""
        return self._piece_starts(text) if self._pieces_exact else self.token_starts(text)

    @cached_property
    def _pieces_exact(self) -> bool:
        return self._piece_starts(_PROBE) == self.token_starts(_PROBE)

    def _piece_starts(self, text: str) -> list[int]:
        cuts = [0, *(m.start() for m in _PIECE_START.finditer(text) if m.start() > 0), len(text)]
        pieces = [text[a:b] for a, b in itertools.pairwise(cuts) if b > a]
        with self._pieces_lock:
            missing = [piece for piece in dict.fromkeys(pieces) if piece not in self._pieces]
        encoded = self._tok.encode_batch(missing, add_special_tokens=False) if missing else []
        with self._pieces_lock:
            known = self._pieces
            for piece, encoding in zip(missing, encoded, strict=True):
                known[piece] = tuple(start for start, _ in encoding.offsets)
            found = []
            for piece in pieces:
                known.move_to_end(piece)
                found.append(known[piece])
            while len(known) > max(PIECES_KEPT, len(pieces)):
                known.popitem(last=False)
        starts: list[int] = []
        at = 0
        for piece, offsets in zip(pieces, found, strict=True):
            starts.extend(at + start for start in offsets)
            at += len(piece)
        return starts

    def decode(self, ids: list[int]) -> str:
        return str(self._tok.decode(ids, skip_special_tokens=False))

    def save(self, folder: Path) -> None:
        """Copy the tokenizer files next to a saved checkpoint."""
        for name in ("tokenizer.json", "tokenizer_config.json"):
            source, target = self.folder / name, folder / name
            if source.is_file() and source.resolve() != target.resolve():
                shutil.copyfile(source, target)
