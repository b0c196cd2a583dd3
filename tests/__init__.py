"""The test package; importing it (before any test module, fixture or torch) sets the environment every test
process and every server it starts inherits."""

import os

# One intra-op thread per process (this one and the servers it starts): the test models are too small for a
# second thread to pay, and on 2 cores shared with a server, nvcc or another job every op waits for a
# descheduled thread (dice-tiny's 13 model calls of a completion: 0.5 s with one thread, 2.8-7.2 s with two;
# an 80-step training run of the test model: 4 s against 37 s). A run that sets OMP_NUM_THREADS keeps its own.
os.environ.setdefault("OMP_NUM_THREADS", "1")
