"""Why the product withholds fills: for each compile-checkable hole where no first-call candidate passes the
cheap checks, each candidate that parses but fails the names check, with the names it uses that resolve
nowhere, the names it redeclares, the names the code below needs that it does not declare, and the three
in-scope names closest to each unknown one (edit distance). Renames off, so it shows what they work on.

    python bench/withheld_fills.py --split dev --kinds line > withheld.txt
"""

from __future__ import annotations

import argparse
import sys

from dice_lsp.complete import prepare, suggestions
from dice_lsp.completion.checks.context import CheckContext
from dice_lsp.cuda.renames import edits
from dice_lsp.engine import EMBEDDED_MODEL, fill, load_model
from dice_lsp.evals.run import compile_checked
from dice_lsp.evals.suite import KINDS, load_suite
from dice_lsp.evals.systems import document_for
from dice_lsp.settings import Settings
from dice_lsp.textdoc import position_at
from dice_lsp.toolchain.header_index import header_names_now


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--split", default="dev", choices=("dev", "test"))
    parser.add_argument("--kinds", nargs="+", choices=("line", "midline"), default=["line"])
    args = parser.parse_args()
    assert set(args.kinds) <= set(KINDS)
    suite = load_suite("cuda-infill", args.split)
    model = load_model(str(EMBEDDED_MODEL), "cpu", "auto", False)
    headers = header_names_now()
    for hole in (h for h in suite.select(args.kinds) if compile_checked(suite, h)):
        text = suite.text(hole)
        document = document_for(text, hole)
        prepared = prepare(model.tokenizer, model.window, document, position_at(document, hole.start), Settings())
        if prepared is None:
            continue
        result = fill(model, prepared.request)
        before = prepared.context.before
        checks = CheckContext(before + prepared.context.after, len(before), len(before), headers)
        found = suggestions(result.texts, result.scores, prepared.context, checks, renames=False)
        if any(s.shown for s in found):
            continue
        print(f"== {hole.id} truth: {text[hole.start:hole.end].strip()[:90]!r}")
        for s in found:
            if not s.checks.parses:
                print(f"   does not parse: {s.text.strip()[:80]!r}")
                continue
            unknown = [name for _, name in checks.unknown_names(s.text)]
            near = {n: sorted(checks.names_in_scope, key=lambda c, n=n: edits(n, c, 99))[:3] for n in unknown}
            print(f"   fill {s.text.strip()[:80]!r}\n      unknown={unknown} "
                  f"redeclared={[n for _, n in checks.redeclared(s.text)]} undeclared={checks.undeclared(s.text)} "
                  f"closest={near}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
