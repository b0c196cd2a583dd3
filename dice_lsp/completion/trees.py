"""A LightGBM binary classifier read from its text format and evaluated in plain Python.

The show filter is trained with LightGBM (`dice_lsp.training.show_filter`) and shipped in LightGBM's text format.
Serving it needs only the trees: importing LightGBM (and the SciPy it brings) costs every language-server and
command process ~0.15 s of CPU, and a prediction for the few candidates of one completion is a handful of
comparisons per tree. `Forest.parse` reads the text's header and its `Tree=` sections; `Forest.probability` walks
each tree as LightGBM does for a numerical split (the only kind the filter's features make):

- `decision_type` bit 1 says where a missing value goes (left when set), bits 2-3 what counts as missing
  (0 none, 1 zero, 2 NaN); a NaN where NaN is not the missing kind is read as 0;
- otherwise `value <= threshold` goes left; a negative child index `~k` is leaf k.

The raw score is the sum of the trees' leaves; a `binary sigmoid:S` objective turns it into a probability
`1 / (1 + exp(-S * raw))`. Anything else (categorical splits, linear trees, several classes) is refused with a
`DiceError` when the text is read, never misread. tests/test_trees.py holds the evaluator to LightGBM's own
predictions on the shipped filter's training rows.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from dice_lsp.errors import DiceError

_ZERO = 1e-35  # LightGBM's kZeroThreshold: |x| at most this is zero for a "zero is missing" split
_DEFAULT_LEFT = 2
_CATEGORICAL = 1


@dataclass(frozen=True)
class Tree:
    """One tree: internal node k splits on `feature[k]` at `threshold[k]`; children >= 0 are nodes, ~leaf else."""

    feature: tuple[int, ...]
    threshold: tuple[float, ...]
    decision: tuple[int, ...]
    left: tuple[int, ...]
    right: tuple[int, ...]
    leaves: tuple[float, ...]

    def value(self, row: Sequence[float]) -> float:
        if not self.feature:  # a single leaf
            return self.leaves[0]
        node = 0
        while node >= 0:
            value = row[self.feature[node]]
            decision = self.decision[node]
            missing = (decision >> 2) & 3
            if math.isnan(value) and missing != 2:
                value = 0.0
            if (missing == 1 and abs(value) <= _ZERO) or (missing == 2 and math.isnan(value)):
                node = self.left[node] if decision & _DEFAULT_LEFT else self.right[node]
            else:
                node = self.left[node] if value <= self.threshold[node] else self.right[node]
        return self.leaves[~node]


@dataclass(frozen=True)
class Forest:
    """A binary LightGBM model: its trees and the objective's sigmoid scale."""

    trees: tuple[Tree, ...]
    sigmoid: float
    features: int

    @classmethod
    def parse(cls, text: str) -> Forest:
        """The model in LightGBM's text format (`Booster.model_to_string`); DiceError for what this reader does not
        evaluate."""
        header, _, body = text.partition("\nTree=")
        fields = _fields(header)
        objective = fields.get("objective", "").split()
        if fields.get("num_class", "1") != "1" or not objective or objective[0] != "binary":
            raise DiceError(f"show filter: objective {fields.get('objective')!r} is not a binary classifier")
        scale = next((float(part.split(":", 1)[1]) for part in objective[1:] if part.startswith("sigmoid:")), 1.0)
        trees = []
        for section in ("Tree=" + body).split("\nTree=") if body else []:
            section = section.split("\nend of trees", 1)[0]
            trees.append(_tree(_fields(section)))
        if not trees:
            raise DiceError("show filter: the model has no trees")
        return cls(tuple(trees), scale, int(fields.get("max_feature_idx", "-1")) + 1)

    def probability(self, row: Sequence[float]) -> float:
        if len(row) < self.features:
            raise DiceError(f"show filter: a row of {len(row)} features for a model of {self.features}")
        raw = math.fsum(tree.value(row) for tree in self.trees)
        return 1.0 / (1.0 + math.exp(-self.sigmoid * raw))


def _fields(section: str) -> dict[str, str]:
    return dict(line.split("=", 1) for line in section.splitlines() if "=" in line)


def _tree(fields: dict[str, str]) -> Tree:
    if fields.get("is_linear", "0") != "0" or fields.get("num_cat", "0") != "0":
        raise DiceError("show filter: linear or categorical trees are not read here")
    leaves = tuple(float(v) for v in fields["leaf_value"].split())  # the learning rate applied already
    if int(fields.get("num_leaves", "1")) <= 1:
        return Tree((), (), (), (), (), leaves)
    decision = tuple(int(v) for v in fields["decision_type"].split())
    if any(d & _CATEGORICAL for d in decision):
        raise DiceError("show filter: categorical splits are not read here")
    return Tree(tuple(int(v) for v in fields["split_feature"].split()),
                tuple(float(v) for v in fields["threshold"].split()), decision,
                tuple(int(v) for v in fields["left_child"].split()),
                tuple(int(v) for v in fields["right_child"].split()), leaves)
