"""benchmarks/ncu_sass.py on a small export in the layout `ncu --page source --csv --print-source sass` writes."""

from __future__ import annotations

import gzip

import pytest

from benchmarks import ncu_sass

HEADER = ('"Address","Source","Warp Stall Sampling (All Samples)","Warp Stall Sampling (Not-issued Samples)",'
          '"stall_long_sb","stall_long_sb (Not Issued)","stall_barrier","stall_short_sb"')
EXPORT = "\n".join([
    '"Kernel Name","quant_gemv_fp8_demo",',
    HEADER,
    '"0x10","      LDC R1, c[0x0][0x28]","2","2","0","0","0","0"',
    '"0x20","      DEPBAR.LE SB0, 0x2","0","0","0","0","0","0"',
    '"0x30","      UISETP.GT.AND UP1, UPT, UR5, 0x1, UPT","60","58","57","55","0","3"',
    '"0x40","      BAR.SYNC.DEFER_BLOCKING 0x0","8","8","0","0","8","0"',
    '"0x50","@!P0  STG.E.128 desc[UR8][R2.64], R8","30","20","0","0","0","1,024"',
    '"Kernel Name","moe_down_demo",',
    HEADER,
    '"0x10","      FMUL R19, R3, R80","5","5","5","5","0","0"',
])


@pytest.mark.parametrize("compressed", [False, True])
def test_reads_each_kernel_and_ranks_its_waits(tmp_path, compressed, capsys):
    path = tmp_path / ("sass.csv.gz" if compressed else "sass.csv")
    (gzip.open(path, "wt") if compressed else open(path, "w")).write(EXPORT + "\n")
    kernels = ncu_sass.main([str(path), "--top", "2"])
    assert [k.name for k in kernels] == ["quant_gemv_fp8_demo", "moe_down_demo"]
    gemv = kernels[0]
    assert len(gemv.rows) == 5 and gemv.total == 100.0
    ops = ncu_sass.by_opcode(gemv)
    assert ops["UISETP"] == pytest.approx(0.60) and ops["STG"] == pytest.approx(0.30)  # predicate dropped
    (i, share, text, lead), second = ncu_sass.hottest(gemv, 2)
    assert (i, share, text.split()[0]) == (2, 0.60, "UISETP.GT.AND")
    assert lead == [("stall_long_sb", 57.0), ("stall_short_sb", 3.0)]  # "(Not Issued)" columns left out
    assert second[2].startswith("@!P0  STG") and second[3] == [("stall_short_sb", 1024.0)]  # thousands separator
    out = capsys.readouterr().out
    assert "== quant_gemv_fp8_demo: 5 instructions, 100 samples; UISETP 60.0%" in out
    assert "== moe_down_demo: 1 instructions, 5 samples" in out
