"""The MoE prefill kernel check runs on the CPU (tiny shapes, kernel interpreted): every path is timed, the
kernel agrees with ref.py, the knob sweep runs, and the summary table comes last."""

from __future__ import annotations

from benchmarks import moe_prefill_check


def test_smoke_run_times_every_path_checks_the_kernel_and_sweeps(capsys):
    rows = moe_prefill_check.main(["--smoke", "--formats", "bf16", "--sweep"])
    assert [(r.fmt, r.tokens) for r in rows] == [("bf16", 24)]
    (row,) = rows
    assert all(row.ms[p] > 0 for p in moe_prefill_check.PATHS), row
    assert row.rel < 1e-2 and row.gflop > 0, row
    out = capsys.readouterr().out
    assert "sweep (grouped GEMMs" in out and out.count("  best: ") == 1 and "failed" not in out
    lines = out.rstrip().splitlines()
    assert lines[-3].startswith("| smoke | bf16 | 24 |")
