"""Quantized checkpoints on a tp=4 mesh (fake CPU devices): scales shard with their weights, same logits."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

SCRIPT = pathlib.Path(__file__).with_name("quantized_tp_check.py")
REPO = SCRIPT.parents[2]


def test_quantized_weights_shard_with_their_scales_and_match_single_device():
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run([sys.executable, str(SCRIPT)], capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "QUANT_TP_OK" in proc.stdout
