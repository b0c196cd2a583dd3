#!/bin/bash
# The GPU tests of issue 51 items 5, 6 and 8 on the device machine: the harness on real kernels
# (tests/test_harness_gpu.py: every problem's candidates, kb_sum_dim's limited kernel, a second bench that builds
# nothing, the compute-sanitizer passes), the team server's sandbox with a real bwrap (tests/test_sandbox.py, its
# GPU test among them), and the CPU tests of the same changes (test_harness_limitations.py,
# test_harness_build_cache.py). Run it through with_bwrap.sh, which puts the carried bubblewrap on PATH:
#
#   OUT=/some/folder bash bench/device/with_bwrap.sh bash bench/device/harness_gpu_tests.sh
#
# Needs python3 with torch (CUDA) and pytest-xdist (the device image's), this package's other dependencies as
# wheels installed into /tmp/site and on PYTHONPATH (the device command does that), and the package itself from
# the checkout (PYTHONPATH, set here). Writes $OUT/env.txt (GPU, versions, tools, what the sandbox needs) and
# $OUT/tests.log; prints env.txt and the end of the log. LIMIT (default 520) bounds the tests in seconds.
set -u
OUT=${OUT:?set OUT to the folder for the results}
PYTHON=${PYTHON:-python3}
LIMIT=${LIMIT:-520}
WORKERS=${WORKERS:-8}
cd "$(dirname "$0")/../.." || exit 2
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
mkdir -p "$OUT"
{
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
    "$PYTHON" --version
    "$PYTHON" -m pytest --version
    "$PYTHON" -c "import torch; print('torch', torch.__version__, 'cuda', torch.cuda.is_available())"
    echo "glibc $(getconf GNU_LIBC_VERSION) uid $(id -u) kernel $(uname -r)"
    echo "bwrap: $(command -v bwrap) $(bwrap --version 2>&1 | head -1)"
    for tool in ninja c++ nvcc compute-sanitizer prlimit setpriv nsenter; do echo "$tool: $(command -v $tool)"; done
    echo "LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}"
    ldconfig -p 2>/dev/null | grep -m2 'libcuda\.so'
    echo "max_user_namespaces $(cat /proc/sys/user/max_user_namespaces 2>&1)"
    echo "code: $(git rev-parse --short HEAD 2>/dev/null || echo 'no git here')"
} > "$OUT/env.txt" 2>&1
started=$SECONDS
timeout "$LIMIT" "$PYTHON" -m pytest -q -rs -n "$WORKERS" -p no:cacheprovider tests/test_harness_gpu.py \
    tests/test_sandbox.py tests/test_harness_limitations.py tests/test_harness_build_cache.py > "$OUT/tests.log" 2>&1
echo "tests rc=$? in $((SECONDS - started)) s" >> "$OUT/env.txt"
cat "$OUT/env.txt"
tail -60 "$OUT/tests.log"
