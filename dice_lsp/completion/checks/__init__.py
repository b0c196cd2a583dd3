"""The checks stage of the completion pipeline: the hard filters a candidate must pass before it is shown, and
the verdicts the ranking and the decision read as features.

- `request`: one request's document and region, parsed once; each fill is placed in it (parsed incrementally
  from the base's tree) and judged against the document without it, so only what the fill changes can fail it;
- `symbols`: the document's symbol table (declarations with kind, block and arity; the names it writes; the
  header index as the outer scope), read once from the base's tree;
- `hole_scope`: what the symbol table says at the hole (in scope, out of scope, provided to the code below,
  declared in the hole's block), on which the names rules are short queries;
- `typed_line`: what the text typed before the cursor on the hole's line means for the names rules;
- `rules`: one rule per module, each a reason to withhold a fill, belonging to `parses` or `names`;
- `context.CheckContext`: asks every rule about each candidate of a request.
clang's front end (`types`) and nvcc (`compiles`) are judged elsewhere (`dice_lsp.toolchain`), by the caller.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Checks:
    """What a shown completion passed: parses, names resolve, clang's front end finds no new error (`types`,
    `dice_lsp.toolchain.clang`) and, for larger fills, nvcc finds none (`compiles`); None: not run."""

    parses: bool
    names: bool
    compiles: bool | None = None
    types: bool | None = None

    @property
    def passed(self) -> int:
        """How many checks passed (a check not run counts as not passed)."""
        return sum(1 for value in (self.parses, self.names, self.types, self.compiles) if value is True)

    def to_json(self) -> dict[str, bool | None]:
        return {"parses": self.parses, "names": self.names, "types": self.types, "compiles": self.compiles}
