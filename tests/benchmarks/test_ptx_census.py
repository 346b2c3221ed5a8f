"""The PTX census tool: the real MoE decode stages lower to Triton IR on the CPU (fp8 with either
DGJAX_FP8_DOT), and the opcode census counts instructions, not directives or labels."""

from __future__ import annotations

import jax

from benchmarks import ptx_census


def test_stages_lower_to_triton_ir_in_both_fp8_dot_modes(monkeypatch):
    for mode, f16_tiles in (("x", False), ("f16", True), ("swap", True)):
        monkeypatch.setenv("DGJAX_FP8_DOT", mode)
        jax.clear_caches()
        modules = ptx_census.triton_modules("qwen3-30b-a3b", "fp8", 2)
        assert sorted(n.split("_fp8")[0] for n in modules) == ["moe_down", "moe_gate_up"]
        assert all(("tt.fp_to_fp" in text) for text in modules.values())
        assert any(("xf16>" in text) for text in modules.values()) == f16_tiles
    monkeypatch.setenv("DGJAX_FP8_DOT", "a8")  # both dot operands e4m3, marked for Hopper's fp8 wgmma
    jax.clear_caches()
    for text in ptx_census.triton_modules("qwen3-30b-a3b", "fp8", 2).values():
        dots = [line for line in text.splitlines() if "tt.dot" in line]
        assert dots and all("maxNumImpreciseAcc = 128" in d and d.count("xf8E4M3FN>") == 2 for d in dots)
    jax.clear_caches()


def test_f16_rows_reach_the_gate_up_loop_without_its_row_max(monkeypatch):
    """`--x-dtype float16` (the carried rows of dgjax/pallas/carrier.py): under the default f16 dot the gate/up stage
    takes the rows as they are, so its row max (an arith.maxnumf reduction) is gone; on bf16 rows it is there."""
    monkeypatch.delenv("DGJAX_FP8_DOT", raising=False)
    jax.clear_caches()
    gate_up = {dt: next(t for n, t in ptx_census.triton_modules("qwen3-30b-a3b", "fp8", 2, dt).items()
                        if n.startswith("moe_gate_up")) for dt in ("bfloat16", "float16")}
    jax.clear_caches()
    assert "arith.maxnumf" in gate_up["bfloat16"] and "arith.maxnumf" not in gate_up["float16"]
    assert "xf16>" in gate_up["float16"]


def test_census_counts_opcodes_only():
    ptx = """.version 8.7
.target sm_90
$L__BB0_1:
	cvt.rn.f16x2.e4m3x2 %r1, %rs1;
	cvt.rn.f16x2.e4m3x2 %r2, %rs2;
	@%p1 bra $L__BB0_1;
	mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%f1}, {%r1}, {%r2}, {%f2};
"""
    counts = ptx_census.census(ptx)
    assert counts["cvt.rn.f16x2.e4m3x2"] == 2 and counts["bra"] == 1
    assert counts["mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"] == 1
    assert not any(op.startswith((".", "$")) for op in counts)
