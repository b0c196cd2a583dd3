"""The pack's per-file train index (written by the pack, rebuilt from old shards) and window weights per dialect."""

from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from dice_lsp.training import corpus
from dice_lsp.training.holes import WindowSampler
from dice_lsp.training.packindex import INDEX_NAME, file_weights, parse_weights, read_index

from .conftest import CUDA_SNIPPETS, write_tokenizer

SEP = "<|file_sep|>"
KINDS = [("cuda", "cuda"), ("cuda", "hip"), ("cuda", "opencl"), ("cpp", "cpp")]


def corpus_records() -> list[dict[str, Any]]:
    """24 files over four dialects and three sources (one GPL file, never packed), of varied lengths."""
    records = []
    for i in range(24):
        lang, dialect = KINDS[i % 4]
        text = "\n".join(CUDA_SNIPPETS[(i + j) % len(CUDA_SNIPPETS)] for j in range(1 + i % 3)) + f"// file {i}\n"
        records.append({"source": f"src{i % 3}", "path": f"dir/f{i}.{'cu' if lang == 'cuda' else 'cpp'}",
                        "lang": lang, "dialect": dialect, "license": "GPL-3.0" if i == 5 else "MIT", "text": text})
    return records


def write_corpus(folder: Path, records: list[dict[str, Any]]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for split, rows in (("train", records), ("valid", records)):
        (folder / f"{split}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return folder


@pytest.fixture(scope="module")
def packed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Any]:
    """A real pack of corpus_records(), its budget cutting the last C/C++ files, in 512-token shards."""
    from tokenizers import Tokenizer

    root = tmp_path_factory.mktemp("weights")
    write_tokenizer(root / "tok", extra_specials=(SEP,))
    source = write_corpus(root / "corpus", corpus_records())
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(corpus, "record_pack", lambda meta: None)  # the manifest in the repo stays as it is
        corpus.pack(source, root / "tok", root / "pack", max_train_tokens=1800, max_valid_tokens=10_000,
                    shard_bytes=1024)
    return root / "pack", source, Tokenizer.from_file(str(root / "tok" / "tokenizer.json"))


def copy_without_index(pack: Path, copy: Path) -> Path:
    """The pack as an older pack was: shards, valid.bin and meta.json, no train-files.json."""
    copy.mkdir()
    for f in pack.iterdir():
        if f.name != INDEX_NAME:
            copy.joinpath(f.name).write_bytes(f.read_bytes())
    return copy


def train_stream(pack: Path) -> np.ndarray:
    return np.concatenate([np.fromfile(f, dtype=np.uint16) for f in sorted(pack.glob("train-*.bin"))])


def test_the_pack_indexes_every_file_it_packs(packed: tuple[Path, Path, Any]) -> None:
    pack, _, tok = packed
    meta = json.loads((pack / "meta.json").read_text())
    assert meta["train"]["files_index"] == INDEX_NAME and "file_list" not in meta["train"]
    files = read_index(pack)
    stream, sep = train_stream(pack), tok.token_to_id(SEP)
    texts = {(r["source"], r["path"]): r for r in corpus_records()}
    order = corpus._pack_order(corpus.trainable(iter(corpus_records())))
    assert len(meta["train"]["shards"]) > 2 and meta["train"]["skipped_files"]["cpp"] > 0  # the budget cut some
    skipped = sum(meta["train"]["skipped_files"].values())
    assert len(files) == sum(meta["train"]["files"].values()) == len(order) - skipped
    assert [(f["source"], f["path"]) for f in files] == [(r["source"], r["path"]) for r in order[:len(files)]]
    offset = 0
    for f in files:
        record = texts[(f["source"], f["path"])]
        assert (f["offset"], f["lang"], f["dialect"]) == (offset, record["lang"], record["dialect"])
        assert stream[offset:offset + f["length"]].tolist() == tok.encode(record["text"], add_special_tokens=False).ids
        assert stream[offset + f["length"]] == sep
        offset += f["length"] + 1
    assert offset == len(stream) == meta["train"]["total_tokens"]
    assert "src2/dir/f5.cu" not in {f"{f['source']}/{f['path']}" for f in files}  # GPL: not packed


def test_the_index_rebuilt_from_the_shards_equals_the_packed_one(packed: tuple[Path, Path, Any], tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    pack, source, _ = packed
    copy = copy_without_index(pack, tmp_path / "pack")
    digests = {f.name: hashlib.sha256(f.read_bytes()).hexdigest() for f in copy.iterdir()}
    assert corpus.main(["index", "--pack", str(copy), "--corpus", str(source), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert read_index(copy) == read_index(pack)
    assert summary["files"] == len(read_index(pack))
    assert summary["dialect_tokens"] == json.loads((pack / "meta.json").read_text())["train"]["dialect_tokens"]
    after = {f.name: hashlib.sha256(f.read_bytes()).hexdigest() for f in copy.iterdir() if f.name != INDEX_NAME}
    assert after == digests  # shards and meta.json untouched
    assert corpus.main(["index", "--pack", str(copy), "--corpus", str(source)]) == 0
    assert "matches meta.json" in capsys.readouterr().out


@pytest.mark.parametrize("change", ["extra_file", "fewer_files", "other_source"])
def test_the_rebuild_refuses_a_corpus_the_pack_was_not_made_from(packed: tuple[Path, Path, Any], tmp_path: Path,
                                                                 change: str) -> None:
    pack, _, _ = packed
    copy = copy_without_index(pack, tmp_path / "pack")
    records = corpus_records()
    if change == "extra_file":  # one more GPU file: as many packed files, but each paired with another's tokens
        records.append(dict(records[1], path="dir/new.hip"))
    elif change == "fewer_files":
        records = [r for r in records if r["lang"] == "cuda"]
    else:  # the same texts under another source name shift per-source sums but not per-dialect ones
        records = [dict(r, source="elsewhere") if r["source"] == "src0" else r for r in records]
    other = write_corpus(tmp_path / "other", records)
    with pytest.raises(SystemExit) as refused:
        corpus.main(["index", "--pack", str(copy), "--corpus", str(other)])
    message = str(refused.value)
    assert "does not match" in message and "\n" not in message
    assert not (copy / INDEX_NAME).exists()


def synthetic_files(rng: np.random.Generator, count: int = 400) -> list[dict[str, Any]]:
    lengths = rng.integers(50, 3000, count)
    offsets = np.concatenate(([0], np.cumsum(lengths + 1)[:-1]))
    return [{"source": "hashcat" if i % 7 == 0 else f"s{i % 5}", "path": f"f{i}", "lang": KINDS[i % 4][0],
             "dialect": KINDS[i % 4][1], "offset": int(o), "length": int(n)}
            for i, (o, n) in enumerate(zip(offsets, lengths, strict=True))]


def test_windows_start_in_each_dialect_as_often_as_its_weight_times_its_tokens() -> None:
    rng = np.random.default_rng(7)
    files = synthetic_files(rng)
    offsets, lengths = np.array([f["offset"] for f in files]), np.array([f["length"] for f in files])
    size, span = int(offsets[-1] + lengths[-1] + 1), 700
    weights = file_weights(files, parse_weights("cuda=4,hip=2,opencl=0.5,cpp=1,source:hashcat=0"))
    sampler = WindowSampler.build(offsets, lengths, weights, size, span)
    starts = np.array([sampler.draw(rng) for _ in range(40_000)])
    assert starts.min() >= 0 and starts.max() < size - span
    owner = np.searchsorted(offsets, starts, side="right") - 1
    assert not any(files[i]["source"] == "hashcat" for i in owner)  # weight 0: never drawn
    # expected share: weight x the file's tokens that can start a window (the last files are clipped)
    room = np.clip(np.minimum(offsets + lengths + 1, size - span) - offsets, 0, None)
    mass = weights * room
    dialects = np.array([f["dialect"] for f in files])
    shares = sampler.shares(dialects)
    for dialect in ("cuda", "hip", "opencl", "cpp"):
        p = float(mass[dialects == dialect].sum() / mass.sum())
        seen = float((dialects[owner] == dialect).mean())
        assert abs(seen - p) < 4 * math.sqrt(p * (1 - p) / len(starts)), dialect
        assert shares[dialect] == pytest.approx(p)
    # uniform within a file: starts spread over the whole of the largest kept file
    big = int(np.argmax(np.where(weights > 0, lengths, 0)))
    inside = starts[owner == big] - offsets[big]
    assert inside.min() < lengths[big] * 0.2 and inside.max() > lengths[big] * 0.8


def test_a_dialect_of_weight_zero_is_never_drawn() -> None:
    rng = np.random.default_rng(3)
    files = synthetic_files(rng)
    offsets, lengths = np.array([f["offset"] for f in files]), np.array([f["length"] for f in files])
    size = int(offsets[-1] + lengths[-1] + 1)
    sampler = WindowSampler.build(offsets, lengths, file_weights(files, parse_weights("opencl=0")), size, 500)
    owner = np.searchsorted(offsets, [sampler.draw(rng) for _ in range(20_000)], side="right") - 1
    drawn = {files[i]["dialect"] for i in owner}
    assert drawn == {"cuda", "hip", "cpp"}
    with pytest.raises(ValueError, match="weight 0"):
        WindowSampler.build(offsets, lengths, file_weights(files, parse_weights("cuda=0,hip=0,opencl=0,cpp=0")),
                            size, 500)


@pytest.mark.parametrize("spec", ["cuda=-1", "cuda", "cuda=x", "=2", "cuda=inf"])
def test_malformed_weights_are_refused(spec: str) -> None:
    with pytest.raises(ValueError, match="--weights"):
        parse_weights(spec)


def test_weights_name_only_what_the_pack_holds() -> None:
    files = synthetic_files(np.random.default_rng(0), 8)
    parsed = parse_weights(" cuda=4, source:hashcat=0 ,")
    assert (parsed.dialects, parsed.sources) == ({"cuda": 4.0}, {"hashcat": 0.0})
    assert file_weights(files, parsed).tolist() == [0.0, 1.0, 1.0, 1.0, 4.0, 1.0, 1.0, 0.0]
    with pytest.raises(ValueError, match="unknown dialect sycl; the pack has cpp, cuda, hip, opencl"):
        file_weights(files, parse_weights("sycl=2"))
    with pytest.raises(ValueError, match="unknown source nope"):
        file_weights(files, parse_weights("source:nope=2"))


def test_training_draws_windows_from_the_index_of_the_pack(packed: tuple[Path, Path, Any]) -> None:
    from dice_lsp.training.train import weighted_sampler

    pack, _, _ = packed
    files, size = read_index(pack), len(train_stream(pack))
    sampler = weighted_sampler(pack, "cpp=0,hip=0,opencl=0", size, 64)
    rng = np.random.default_rng(0)
    offsets = np.array([f["offset"] for f in files])
    owner = np.searchsorted(offsets, [sampler.draw(rng) for _ in range(2000)], side="right") - 1
    assert {files[i]["dialect"] for i in owner} == {"cuda"}
    with pytest.raises(SystemExit, match="weight 0"):  # the C/C++ at the end is too short to start a window
        weighted_sampler(pack, "cuda=0,hip=0,opencl=0", size, 64)
    with pytest.raises(SystemExit, match="covers"):
        weighted_sampler(pack, "cuda=2", size - 1, 64)
    with pytest.raises(SystemExit, match="unknown dialect"):
        weighted_sampler(pack, "sycl=2", size, 64)


def test_a_training_run_takes_weights_and_refuses_a_pack_without_an_index(packed: tuple[Path, Path, Any],
                                                                          tmp_path: Path) -> None:
    from dice_lsp.training.train import main

    pack, _, _ = packed
    args = ["--tokenizer", str(pack.parent / "tok"), "--out", str(tmp_path / "run"), "--steps", "2", "--batch", "4",
            "--length", "64", "--hidden", "64", "--layers", "2", "--workers", "0", "--log-every", "1"]
    assert main(["--data", str(pack), "--weights", "cpp=0,opencl=0.5", *args]) == 0
    assert json.loads((tmp_path / "run" / "train_log.json").read_text())["args"]["weights"] == "cpp=0,opencl=0.5"
    with pytest.raises(SystemExit, match="give one"):
        main(["--data", str(pack), "--weights", "cuda=2", "--gpu-weight", "4", *args])
    with pytest.raises(SystemExit, match="no per-file index"):
        main(["--data", str(copy_without_index(pack, tmp_path / "old")), "--weights", "cuda=2", *args])
