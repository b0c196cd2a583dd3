"""dice-lsp: a language server that writes and optimizes CUDA kernels with a diffusion LLM."""

import os

__version__ = "0.1.0"

# The CPU model's OpenMP threads sleep when they wait for work instead of spinning (read once, when torch loads its
# OpenMP runtime: every entry point imports this package first). Spinning threads wait for a thread the OS has
# descheduled whenever another process is busy (an editor, clang, nvcc, a build): on 2 cores with one other busy
# process a dice-tiny fill took 4.7-6.7 s with two spinning threads and 0.21-0.22 s with two sleeping ones (0.20 s
# with one thread; bench/cpu_contention.py, docs/PERFORMANCE.md). A value the user sets is kept.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
