"""The test package; importing it (before any test module, fixture or torch) sets the environment every test
process and every server it starts inherits."""

import os
import sys

# One intra-op thread per process (this one and the servers it starts): the test models are too small for a
# second thread to pay, and on 2 cores shared with a server, nvcc or another job every op waits for a
# descheduled thread (dice-tiny's 13 model calls of a completion: 0.5 s with one thread, 2.8-7.2 s with two;
# an 80-step training run of the test model: 4 s against 37 s). A run that sets OMP_NUM_THREADS keeps its own.
os.environ.setdefault("OMP_NUM_THREADS", "1")

# Compiled bytecode, kept between processes: each of the suite's ~250 Python processes (the pytest workers, every
# language server, team server and CLI run it starts) imports dice_lsp, and where PYTHONDONTWRITEBYTECODE=1 is set
# (this machine sets it) each of them compiled every module from source again (~0.4 s of CPU a process:
# `dice-lsp complete` 2.2 s -> 1.8 s) and each worker rewrote every test module's asserts (collection 10 s -> 5 s).
# Python writes __pycache__ beside the sources (ignored by git) and checks each file against its source's time and
# size before using it. A sandboxed child sets its own environment.
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
sys.dont_write_bytecode = False
