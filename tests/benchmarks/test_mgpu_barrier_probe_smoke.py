"""benchmarks/mgpu_barrier_probe.py on the CPU: each case lowers for CUDA to Mosaic-GPU custom calls, the barrier
cases as one kernel and the launch chain as one a round (the GPU run times them)."""

from __future__ import annotations

from benchmarks import mgpu_barrier_probe


def test_cases_lower_to_one_kernel_or_one_a_round():
    lines = dict(line.split(": ", 1) for line in mgpu_barrier_probe.main(["--smoke"]))
    assert set(lines) == {"barrier", "barrier_spread", "launches"}
    assert lines["barrier"] == lines["barrier_spread"] == "mosaic_gpu, 1 custom calls"
    assert lines["launches"] == "mosaic_gpu, 3 custom calls"  # smoke: 3 rounds
