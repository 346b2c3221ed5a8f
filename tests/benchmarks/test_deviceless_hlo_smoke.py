"""benchmarks/deviceless_hlo with its CPU target (the H200 target needs the CUDA plugin, absent in CI): builds a
preset with fewer layers, compiles its decode tick from abstract arguments, and counts the entry's launches,
which grow with the layers."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import jax

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _run(tmp_path, layers: int) -> tuple[int, list[str]]:
    args = [sys.executable, "-m", "benchmarks.deviceless_hlo", "--preset", "tiny", "--target", "cpu",
            "--layers", str(layers), "--layer", "1", "--out", str(tmp_path / str(layers))]
    proc = subprocess.run(args, cwd=REPO, env=dict(os.environ, JAX_PLATFORMS="cpu"), capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    total, head, *rows = proc.stdout.strip().splitlines()
    assert f"{layers} layers:" in total and "layer 1 has" in head
    assert (tmp_path / str(layers) / "decode.hlo.txt").read_text().count("layer_1/") > 0
    return int(total.split(": ")[1].split()[0]), rows


def test_counts_launches_that_grow_with_the_layers(tmp_path):
    two, rows = _run(tmp_path, 2)
    three, _ = _run(tmp_path, 3)
    assert three > two > 0 and rows and "attention" in " ".join(rows)


def test_helpers_write_fewer_layers_and_restore_the_backend():
    from benchmarks import deviceless_hlo

    with open(os.path.join(deviceless_hlo.model_dir_with_layers("tiny", 3), "config.json")) as f:
        assert json.load(f)["num_hidden_layers"] == 3
    with deviceless_hlo.backend_says_gpu():
        assert jax.default_backend() == "gpu"
    assert jax.default_backend() == "cpu"
