"""The routing check runs on the CPU (kernel interpreted): both paths timed, the kernel picks the reference's
experts, and the summary table comes last."""

from __future__ import annotations

from benchmarks import moe_routing_check


def test_smoke_run_checks_and_times_both_paths(capsys):
    rows = moe_routing_check.main(["--smoke", "--preset", "qwen3-30b-a3b", "--preset", "kimi-linear",
                                   "--tokens", "1,3"])
    assert [(r.preset, r.tokens) for r in rows] == [("qwen3-30b-a3b", 1), ("qwen3-30b-a3b", 3),
                                                    ("kimi-linear", 1), ("kimi-linear", 3)]
    assert all(r.ids_equal and r.max_weight_err < 1e-5 and r.kernel_us > 0 and r.ref_us > 0 for r in rows)
    lines = capsys.readouterr().out.rstrip().splitlines()
    assert lines[-1].startswith("| kimi-linear | 3 |") and lines[-6].startswith("| preset |")
