"""The routed-expert benchmark runs on the CPU (tiny shapes): both paths agree and every row is printed."""

from __future__ import annotations

from benchmarks import moe_experts_bench


def test_smoke_run_checks_both_paths_and_prints_every_token_count(capsys):
    moe_experts_bench.main(["--smoke", "--tokens", "1,16"])
    rows = [line.split() for line in capsys.readouterr().out.splitlines() if line.strip()[:1].isdigit()]
    assert [r[0] for r in rows] == ["1", "16"]
    assert rows[0][-1] == "gather" and rows[1][-1] == "ragged"  # auto's choice per token count
    assert rows[1][5] == "-"  # too many assignments to gather
    assert all(float(r[3]) > 0 for r in rows)
