"""The child side of `isolate.run_isolated`: `python -m dice_lsp.harness.child JOB.json`.

Runs `module:function(payload)` and writes `{"value": ...}` or `{"error": "one line"}` to the job's result
file. A DiceError is an expected failure (a kernel that is wrong); anything else is reported with its type.
"""

from __future__ import annotations

import importlib
import json
import sys
import traceback
from pathlib import Path

from dice_lsp.errors import DiceError


def main(job_file: str) -> int:
    job = json.loads(Path(job_file).read_text())
    module_name, function_name = job["call"].split(":")
    try:
        function = getattr(importlib.import_module(module_name), function_name)
        answer = {"value": function(job["payload"])}
    except DiceError as exc:
        answer = {"error": str(exc)}
    except Exception as exc:  # a crash of the code under test, reported, never raised to the caller
        traceback.print_exc()
        answer = {"error": f"{type(exc).__name__}: {str(exc).strip().splitlines()[0] if str(exc).strip() else ''}"}
    Path(job["result"]).write_text(json.dumps(answer))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
