"""The CUDA-Infill suite as committed: its size, its splits, and holes that point where they say."""

from __future__ import annotations

from collections import Counter

import pytest

from dice_lsp.evals.suite import KINDS, Suite, inner_path, load_suite, split_of


@pytest.fixture(scope="module")
def splits() -> dict[str, Suite]:
    return {split: load_suite("cuda-infill", split) for split in ("test", "dev")}


def test_the_test_split_has_500_holes_of_every_kind_and_150_executable(splits: dict[str, Suite]) -> None:
    test = splits["test"]
    counts = Counter(h.kind for h in test.holes)
    assert set(counts) == set(KINDS) and min(counts.values()) >= 500
    assert sum(h.executable for h in test.holes) >= 150
    assert all(test.files[h.file].launch for h in test.holes if h.executable)


def test_a_source_file_is_in_one_split_only_whichever_part_holds_it(splits: dict[str, Suite]) -> None:
    """Library files and the standalone kernels made from them follow the same rule, so dev never holds the
    code of a test hole."""
    homes: dict[tuple[str, str], set[str]] = {}
    for split, suite in splits.items():
        for file in suite.files.values():
            source, path = (file.origin.split(":")[:2] if file.launch else (file.source, inner_path(file.path)))
            assert split_of(source, path) == split, file.id
            homes.setdefault((source, path), set()).add(split)
    assert all(len(found) == 1 for found in homes.values())


def test_holes_are_non_empty_spans_inside_their_files(splits: dict[str, Suite]) -> None:
    for suite in splits.values():
        ids = [h.id for h in suite.holes]
        assert len(ids) == len(set(ids))
        for hole in suite.holes:
            text = suite.text(hole)
            assert 0 <= hole.start < hole.end <= len(text)
            assert hole.truth(text).strip()
