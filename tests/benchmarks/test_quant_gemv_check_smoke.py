"""The quantized GEMV check runs on the CPU (tiny shape, kernel interpreted): every path is timed, the kernel
agrees with the reference, the sweep runs, and the summary table comes last."""

from __future__ import annotations

from benchmarks import quant_gemv_check


def test_smoke_run_times_every_path_checks_the_kernel_and_sweeps(capsys):
    rows = quant_gemv_check.main(["--smoke", "--rows", "2", "--formats", "nvfp4", "--sweep"])
    assert [(r.shape, r.fmt, r.rows) for r in rows] == [("smoke", "nvfp4", 2)]
    r = rows[0]
    assert not r.note and r.rel < 1e-2 and r.mb > 0
    assert all(r.us[impl] > 0 for impl in ("kernel", "ref", "bf16"))
    out = capsys.readouterr().out
    assert "failed" not in out and "    bn" in out  # one sweep launch timed
    lines = out.rstrip().splitlines()
    assert lines[-1].startswith("| smoke | nvfp4 | 2 |") and lines[-3].startswith("| shape |")
