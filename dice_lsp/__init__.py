"""dice-lsp: a language server that writes and optimizes CUDA kernels with a diffusion LLM."""

import os

__version__ = "0.1.0"

# The CPU model's OpenMP threads sleep when they wait for work instead of spinning (read once, when torch loads its
# OpenMP runtime: every entry point imports this package first). Spinning threads wait for a thread the OS has
# descheduled whenever another process is busy (an editor, clang, nvcc, a build): on 2 cores with one other busy
# process a dice-tiny fill took 2.6-3.2 s with two threads spinning as OpenMP's default has them, 0.22 s with two
# sleeping ones (bench/cpu_contention.py, docs/PERFORMANCE.md; the model also runs with fewer threads,
# engine.device.cpu_threads). A value the user sets is kept.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
