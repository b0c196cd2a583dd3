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
