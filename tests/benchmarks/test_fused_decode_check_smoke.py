"""benchmarks/fused_decode_check.py on the CPU (interpreted, tiny shapes): every split count it times writes
the same K/V as the reference and attends within bf16 rounding of it."""

from __future__ import annotations

import subprocess
import sys


def test_fused_decode_check_smoke_over_split_counts():
    out = subprocess.run([sys.executable, "-m", "benchmarks.fused_decode_check", "--smoke", "--splits", "0,1,3"],
                         capture_output=True, text=True, check=True, timeout=600).stdout
    rows = [line.split("|")[1:-1] for line in out.splitlines() if line.startswith("| tiny")]
    assert [r[3].strip() for r in rows] == ["sdefault stdefault bkdefault", "s1 stdefault bkdefault",
                                            "s3 stdefault bkdefault"]
    for r in rows:
        assert float(r[4]) < 2e-2 and float(r[5]) == 0.0 and r[6].strip() == "True", r


def test_fused_decode_check_smoke_over_stages_and_blocks_with_a_padding_row():
    """The kernel called directly (pipeline depth, keys per step, warps) next to the engine's idle padding row."""
    out = subprocess.run([sys.executable, "-m", "benchmarks.fused_decode_check", "--smoke", "--splits", "2",
                          "--stages", "3", "--block-tokens", "0,8", "--warps", "0,8", "--padding-row"],
                         capture_output=True, text=True, check=True, timeout=600).stdout
    rows = [line.split("|")[1:-1] for line in out.splitlines() if line.startswith("| tiny")]
    assert [r[3].strip() for r in rows] == ["s2 st3 bkdefault", "s2 st3 bkdefault w8", "s2 st3 bk8",
                                            "s2 st3 bk8 w8"]
    for r in rows:
        assert float(r[4]) < 2e-2 and float(r[5]) == 0.0 and r[6].strip() == "True", r
