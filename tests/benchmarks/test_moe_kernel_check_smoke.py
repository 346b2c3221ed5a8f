"""The MoE kernel check runs on the CPU (tiny shapes, kernel interpreted): every path is timed, the kernel
agrees with ref.py in both weight formats, the sweep runs, and the summary table comes last."""

from __future__ import annotations

from benchmarks import moe_kernel_check


def test_smoke_run_times_every_path_checks_the_kernel_and_sweeps(capsys):
    rows = moe_kernel_check.main(["--smoke", "--tokens", "2", "--sweep", "--sweep-tokens", "2"])
    assert [(r.fmt, r.tokens) for r in rows] == [("bf16", 2), ("fp8", 2)]
    for r in rows:
        assert r.us["kernel"] > 0 and r.us["ref.py"] > 0
        assert r.rel < 1e-2, r
        assert r.touched <= 2 * 4 and r.mb > 0
    assert all(r.us["ragged"] > 0 and r.us["gather"] > 0 for r in rows)
    out = capsys.readouterr().out
    assert out.count("sweep at T=2") == 2 and out.count("  best: ") == 2 and "failed" not in out
    table = [line for line in out.splitlines() if line.startswith("| smoke")]
    assert len(table) == 2 and out.rstrip().splitlines()[-4].startswith("| smoke")


def test_smoke_run_of_bf12_experts(capsys):
    """--formats bf12: the lossless re-encoding of the bf16 experts, checked against ref.py like the others."""
    rows = moe_kernel_check.main(["--smoke", "--tokens", "1", "--formats", "bf12"])
    assert [(r.fmt, r.tokens) for r in rows] == [("bf12", 1)]
    assert rows[0].us["kernel"] > 0 and rows[0].rel < 1e-2
    assert "failed" not in capsys.readouterr().out
