"""benchmarks/mgpu_pdl_probe.py on the CPU: each chain lowers for CUDA, the Mosaic-GPU cases to Mosaic's custom
call with their own griddepcontrol.wait where the case has one (the GPU run times them)."""

from __future__ import annotations

from benchmarks import mgpu_pdl_probe


def test_chains_lower_with_the_waits_each_case_asks_for():
    lines = dict(line.split(": ", 1) for line in mgpu_pdl_probe.main(["--smoke"]))
    assert lines["triton"].startswith("triton")
    for case in mgpu_pdl_probe.CASES:
        assert lines[case].startswith("mosaic_gpu_v2"), lines
    assert lines["no_wait"].endswith("x0") and not lines["wait_first"].endswith("x0")
    assert lines["load_first"] == lines["wait_first"]  # the same wait, placed after the weight copy
