"""Tensor-parallel (tp=4, fake CPU devices) forward equals the single-device forward within 1e-5 (float32)."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

SCRIPT = pathlib.Path(__file__).with_name("tp_forward_check.py")
REPO = SCRIPT.parents[2]


def test_tp4_forward_equals_single_device_forward():
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run([sys.executable, str(SCRIPT)], capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "TP_OK" in proc.stdout
