"""benchmarks/ncu_probe.py: its cases run (interpreted) and match ref.py; its ncu summary reads a raw export."""

from __future__ import annotations

from benchmarks import ncu_probe

RAW = """\
"ID","Process ID","Kernel Name","gpu__time_duration.sum","dram__bytes_read.sum","launch__grid_size",\
"smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio",\
"smsp__average_warps_issue_stalled_wait_per_issue_active.ratio",\
"smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio",\
"smsp__average_warps_issue_stalled_math_pipe_throttle_per_issue_active.ratio"
"","","","nsecond","Kbyte","","ratio","ratio","ratio","ratio"
"0","12","quant_gemv_fp8_r2_bn128","6,720","8,450","256","3.10","0.40","1.20","0.05"
"1","12","split_merge_s33","1,500","n/a","8","0.9","2.5","0","0.1"
"""


def test_ncu_table_converts_units_and_ranks_stalls(tmp_path):
    path = tmp_path / "raw.csv"
    path.write_text("==PROF== a line of ncu's own before the table\n" + RAW)
    head, rule, gemv, merge = ncu_probe.ncu_table(str(path))
    assert head.startswith("| kernel | µs | DRAM MB read | grid |")
    assert rule.count("---") == 5
    assert gemv.startswith("| `quant_gemv_fp8_r2_bn128` | 6.72 | 8.45 | 256 |")
    assert gemv.endswith("| long_scoreboard 3.10, barrier 1.20, wait 0.40 |")
    assert merge.startswith("| `split_merge_s33` | 1.5 | n/a | 8 |")
    assert merge.endswith("| wait 2.50, long_scoreboard 0.90, math_pipe_throttle 0.10 |")


def test_smoke_cases_run_interpreted_and_match_their_references():
    lines = ncu_probe.main(["--smoke"])
    rows = lines[2:]
    assert len(rows) == 5 and any("idle splits skip" in r for r in rows)
    for r in rows:
        err = float(r.rstrip(" |").rsplit("|", 1)[1])
        assert err < 2e-2, r


def test_cases_filter_builds_only_the_named_cases():
    """--cases keeps the cases whose name contains one of its parts (the rest are not built), so one ncu process
    can profile one case."""
    lines = ncu_probe.main(["--smoke", "--cases", "idle splits,smoke o"])
    names = [r.split("|")[1].strip() for r in lines[2:]]
    assert names == ["smoke o", "smoke attention (idle splits skip)"]
    assert [c[0] for c in ncu_probe.cases(False, True, keep="rotary")] == ["smoke partial rotary"]
