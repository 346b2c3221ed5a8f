"""benchmarks/dump_decode_hlo on the CPU: writes the decode executable's HLO and lists one layer's launches,
each with the model scopes it covers (attention, MLP, norms)."""

from __future__ import annotations

import os
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_lists_the_layers_launches_with_their_scopes(tmp_path):
    args = [sys.executable, "-m", "benchmarks.dump_decode_hlo", "--preset", "tiny", "--tiny", "--out", str(tmp_path)]
    proc = subprocess.run(args, cwd=REPO, env=dict(os.environ, JAX_PLATFORMS="cpu"), capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    hlo = (tmp_path / "decode.hlo.txt").read_text()
    assert "ENTRY" in hlo and "layer_1/" in hlo
    head, *rows = proc.stdout.strip().splitlines()
    assert "layer 1 has" in head and len(rows) == int(head.split(" has ")[1].split()[0]) > 3
    scopes = " ".join(rows)
    assert "attention" in scopes and "mlp" in scopes and "rms_norm" in scopes
