"""The CPU model's threads sleep rather than spin while they wait (dice_lsp/__init__.py): checked in fresh
processes, since the OpenMP runtime reads the policy once, when torch loads it."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

PROBE = "import dice_lsp.engine.device, os, torch; print(os.environ.get('OMP_WAIT_POLICY'))"


def policy(env: dict[str, str]) -> str:
    clean = {key: value for key, value in os.environ.items() if key != "OMP_WAIT_POLICY"}
    done = subprocess.run([sys.executable, "-c", PROBE], env={**clean, **env}, capture_output=True, text=True,
                          timeout=120, check=True)
    return done.stdout.strip()


def test_the_model_process_waits_passively_before_torch_loads_openmp() -> None:
    assert policy({}) == "PASSIVE"


@pytest.mark.parametrize("chosen", ["ACTIVE", "passive"])
def test_a_policy_the_user_sets_is_kept(chosen: str) -> None:
    assert policy({"OMP_WAIT_POLICY": chosen}) == chosen


@pytest.mark.parametrize(("cores", "threads"), [(1, 1), (2, 1), (4, 2), (8, 4), (16, 8), (64, 8)])
def test_the_cpu_model_uses_half_the_cores_at_most_eight(cores: int, threads: int) -> None:
    from dice_lsp.engine.device import cpu_threads

    assert cpu_threads(cores) == threads


def test_loading_a_model_on_the_cpu_sets_its_threads_unless_the_user_chose() -> None:
    probe = ("import os, torch; from dice_lsp.engine import load_model; torch.set_num_threads(5); "
             "load_model(None, 'cpu'); print(torch.get_num_threads())")
    env = {key: value for key, value in os.environ.items() if key != "OMP_NUM_THREADS"}
    chosen = subprocess.run([sys.executable, "-c", probe], env={**env, "OMP_NUM_THREADS": "3"},
                            capture_output=True, text=True, timeout=120, check=True)
    assert chosen.stdout.strip() == "5"  # the user's (here: the program's own) choice stands
    default = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, timeout=120,
                             check=True)
    from dice_lsp.engine.device import cpu_threads

    assert default.stdout.strip() == str(cpu_threads())
