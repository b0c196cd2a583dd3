"""Which index a two-dimensional bounds test names first, counted on the training corpus's CUDA files.

    python docs/bench-logs/idioms/2026-12-07_guard_order/count.py [data/corpus/train.jsonl]

Every `if (A < X && B < Y)` / `if (A >= X || B >= Y)` whose two names are declared in the 8 lines above it as a
thread's global index (`... blockIdx.a ... threadIdx.a ...`): which axis it tests first, against which it declared
first and which it uses first below.
"""

from __future__ import annotations

import json
import re
import sys
from collections import Counter

INDEX = re.compile(r"^\s*(?:const\s+)?(?:unsigned\s+)?(?:int|size_t|long|unsigned)\s+(\w+)\s*=\s*"
                   r"[^;]*blockIdx\.([xyz])[^;]*threadIdx[^;]*;")
GUARD = re.compile(r"^\s*if\s*\(\s*(\w+)\s*(<|>=)\s*\w+\s*(&&|\|\|)\s*(\w+)\s*(<|>=)\s*\w+\s*\)")


def count(path: str) -> Counter[tuple[str, ...]]:
    found: Counter[tuple[str, ...]] = Counter()
    with open(path, encoding="utf-8") as handle:
        for entry in map(json.loads, handle):
            if entry.get("lang") != "cuda":
                continue
            lines = entry["text"].split("\n")
            for at, line in enumerate(lines):
                guard = GUARD.match(line)
                if guard is None:
                    continue
                first, second = guard[1], guard[4]
                order: list[str] = []
                axes: dict[str, str] = {}
                for above in lines[max(0, at - 8):at]:
                    index = INDEX.match(above)
                    if index is not None and index[1] in (first, second):
                        order.append(index[1])
                        axes[index[1]] = index[2]
                if set(order) != {first, second}:
                    continue
                below = line[guard.end():] + " " + " ".join(lines[at + 1:at + 7])
                used = {name: (m.start() if (m := re.search(rf"\b{name}\b", below)) else 10**9)
                        for name in (first, second)}
                found[("declared first", axes[order[0]], "tested first", axes[first])] += 1
                found[("tested first in the order of use below",
                       "yes" if min((first, second), key=lambda n: used[n]) == first else "no")] += 1
                found[("names", "row/col" if {first.lower(), second.lower()} & {"row", "col", "r", "c"} else "other",
                       "tested first", axes[first])] += 1
    return found


if __name__ == "__main__":
    for key, number in sorted(count(sys.argv[1] if len(sys.argv) > 1 else "data/corpus/train.jsonl").items()):
        print(number, " ".join(key))
