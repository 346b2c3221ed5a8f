"""MoE models under tensor-parallel (tp=2, 4) and expert-parallel (ep=2, 4) sharding on fake CPU devices
load the same weights and give the same logits and KV cache as one device (within 1e-5, float32); see
moe_sharding_check.py for which family runs which layout."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

SCRIPT = pathlib.Path(__file__).with_name("moe_sharding_check.py")
REPO = SCRIPT.parents[2]


def test_tp_and_expert_parallel_moe_forward_equals_single_device_forward():
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    env.pop("DGJAX_MOE", None)
    proc = subprocess.run([sys.executable, str(SCRIPT)], capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr[-5000:]
    assert "MOE_SHARDING_OK" in proc.stdout
