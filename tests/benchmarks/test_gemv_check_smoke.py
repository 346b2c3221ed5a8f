"""The GEMV check runs on the CPU (tiny shape, kernel interpreted): kernel agrees with ref.py, both paths timed,
the summary table comes last."""

from __future__ import annotations

from benchmarks import gemv_check


def test_smoke_run_checks_and_times_the_kernel(capsys):
    rows = gemv_check.main(["--smoke", "--rows", "2"])
    assert [(r.shape, r.rows) for r in rows] == [("smoke qkv+norm", 2)]
    assert rows[0].rel < 1e-2 and rows[0].kernel_us > 0 and rows[0].xla_us > 0
    lines = capsys.readouterr().out.rstrip().splitlines()
    assert lines[-1].startswith("| smoke qkv+norm | 2 |") and lines[-3].startswith("| shape |")
