"""The routed MoE check runs on the CPU (kernels interpreted): the kernel that selects its own experts picks the
selection's experts and weights, gives the same output as the selection plus the MoE decode kernel, both
paths are timed, and the summary table comes last."""

from __future__ import annotations

from benchmarks import moe_routed_check


def test_smoke_run_checks_and_times_both_paths(capsys):
    rows = moe_routed_check.main(["--smoke", "--tokens", "1,3"])
    assert [(r["preset"], r["tokens"]) for r in rows] == [("smoke", 1), ("smoke", 3)]
    assert all(r["same_ids"] and r["weight_err"] < 1e-6 and r["out_err"] < 1e-5 for r in rows)
    assert all(r["fused_us"] > 0 and r["separate_us"] > 0 for r in rows)
    lines = capsys.readouterr().out.rstrip().splitlines()
    assert lines[-1].startswith("| smoke | 3 |") and lines[-4].startswith("| preset |")
