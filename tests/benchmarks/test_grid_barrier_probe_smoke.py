"""benchmarks/grid_barrier_probe.py on the CPU: the two-launch pair (interpreted) matches the float32 chain,
and the one-launch pair with its grid barrier lowers to a valid Triton module for CUDA."""

from __future__ import annotations

from benchmarks import grid_barrier_probe


def test_split_pair_matches_and_fused_pair_lowers(verified_triton_lowering):
    lines = grid_barrier_probe.main(["--smoke"])
    rows = {r.split("|")[1].strip(): r.split("|") for r in lines if r.startswith("| ") and "---" not in r}
    assert float(rows["split"][4]) < 2e-2 and float(rows["xla"][4]) < 2e-2
    assert float(rows["split, prefetch 8 tiles"][4]) < 2e-2  # the next phase's tiles read, the result unchanged
    assert lines[-1] == "fused: lowered for CUDA (not run)"
    assert len(verified_triton_lowering) >= 3 and all(verified_triton_lowering)  # both polls, and a prefetch
