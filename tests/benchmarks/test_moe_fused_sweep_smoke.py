"""The fused-vs-two-stage MoE sweep runs on the CPU (tiny shapes, interpreted): both paths agree with ref.py
in both formats, and the two-stage default is the row marked default."""

from __future__ import annotations

from benchmarks import moe_fused_sweep


def test_smoke_sweep_checks_both_paths_against_the_reference():
    rows = moe_fused_sweep.main(["--smoke"])
    assert {(r.fmt, r.launch.split()[0]) for r in rows} == {(f, k) for f in ("fp8", "bf16") for k in ("two-stage", "fused")}
    assert all(not r.note and r.rel_err is not None and r.rel_err < 1e-2 for r in rows)
    assert [r.launch.startswith("two-stage") for r in rows] == [r.default for r in rows]
