#!/bin/bash
# The SDAR-8B-shaped step against its floor (issue 51 item 7) on one GPU: the captured step's replays
# (bench/static_step_replay.py) and the engine's step at 1/2/4 tokens per step (bench/engine_latency.py gpu --quick),
# each beside the floor (engine_latency.step_floor: every weight but the input embedding table, plus the table's rows
# a step reads, at the read bandwidth measured in the run) and the legacy floor (every weight at the copy bandwidth).
#
#   OUT=/some/folder bash bench/device/gpu_floor.sh      # from the repository root
#
# Needs python with torch (CUDA), triton and transformers installed (not this repo's .venv); the package runs from
# the checkout through PYTHONPATH (the two benches import dice_lsp.engine only: torch, tokenizers, numpy). Writes
# $OUT/all.txt (every log, one after another, as the earlier device folders), $OUT/static_step_replay.log,
# $OUT/engine_latency.log, $OUT/engine_latency.json, and prints the ratios last. About 1.5-2 minutes on an H100
# (the H200 of 2026-12-06a: 14 s and 52 s for the two benches); each bench has its own time guard.
set -u
OUT=${OUT:?set OUT to the folder for the results}
PYTHON=${PYTHON:-python}
command -v "$PYTHON" >/dev/null || PYTHON=python3
cd "$(dirname "$0")/../.." || exit 2
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
mkdir -p "$OUT"
summary=$OUT/summary.txt
: > "$summary"

{
  nvidia-smi --query-gpu=name,memory.total,clocks.max.sm --format=csv 2>&1
  "$PYTHON" --version 2>&1
  "$PYTHON" -c "import torch, transformers, triton; print('torch', torch.__version__, 'transformers',
transformers.__version__, 'triton', triton.__version__)" 2>&1
  echo "code: $(git rev-parse --short HEAD 2>/dev/null || echo 'no git here') $(git status --short 2>/dev/null | wc -l) changed files"
} > "$OUT/gpu.txt"
cat "$OUT/gpu.txt"

step() {  # step NAME LIMIT_S COMMAND...: run under a time guard, log to $OUT/NAME.log, note rc and seconds
  local name=$1 limit=$2 began=$SECONDS
  shift 2
  timeout "$limit" "$@" > "$OUT/$name.log" 2>&1
  local rc=$?
  echo "$name rc=$rc $((SECONDS - began))s" | tee -a "$summary"
}

step static_step_replay 150 "$PYTHON" bench/static_step_replay.py
step engine_latency 300 "$PYTHON" bench/engine_latency.py gpu --quick --json "$OUT/engine_latency.json"
echo "total ${SECONDS}s" >> "$summary"

for f in gpu.txt summary.txt static_step_replay.log engine_latency.log; do
  echo "=== $f"
  cat "$OUT/$f"
done > "$OUT/all.txt"

echo "=== the step against the floor"
grep -E "^(floor|read bandwidth by pass|copy floor|\| eager|replay:)" "$OUT/static_step_replay.log"
"$PYTHON" - "$OUT/engine_latency.json" <<'PY'
import json
import sys

try:
    data = json.load(open(sys.argv[1]))
except (OSError, ValueError) as error:
    sys.exit(f"no engine_latency.json: {error}")
meta = data["meta"]
print(f"engine ({meta['gpu']}): floor {meta['floor_ms_per_step']:.3f} ms ({meta['step_read_bytes'] / 1e9:.3f} GB at "
      f"{meta['read_bandwidth_GBps']:.0f} GB/s read, {meta['read_bandwidth_method']}); legacy copy floor "
      f"{meta['copy_floor_ms']:.3f} ms ({meta['weight_bytes'] / 1e9:.3f} GB at {meta['copy_bandwidth_GBps']:.0f} GB/s)")
print("read bandwidth by pass: " + "; ".join(f"{k} {v:.0f} GB/s" for k, v in meta["read_bandwidth_GBps_by_method"].items()))
copy_no_table = meta["step_read_bytes"] / meta["copy_bandwidth_GBps"] / 1e6
for row in data["rows"]:
    if "CUDA graph" in row["engine"]:
        ms = row["ms_per_step"]
        print(f"graph step, {row['tokens_per_step']} tokens per step: {ms:.3f} ms = {ms / meta['floor_ms_per_step']:.3f}x "
              f"the floor ({ms / copy_no_table:.3f}x the table-less bytes at the copy bandwidth, "
              f"{ms / meta['copy_floor_ms']:.3f}x the legacy floor)")
print(f"graph_step_over_floor {meta['graph_step_over_floor']:.3f} (target <= 1.5); legacy "
      f"{meta['graph_step_over_copy_floor']:.3f}; 4 per step vs generate {meta['graph_4_per_step_speedup_vs_generate']:.1f}x")
PY
cat "$summary"
