"""The launch sweep runs on the CPU (tiny shapes, kernels interpreted): every swept launch, unrolled or not,
split or not, agrees with ref.py, and the trace attribution splits kernels by run order."""

from __future__ import annotations

from benchmarks import launch_sweep


def test_smoke_sweep_checks_every_launch_against_the_reference(capsys):
    rows = launch_sweep.main(["--smoke"])
    kinds = {(r.case, r.fmt, r.stage) for r in rows}
    assert ("smoke", "fp8", "gemv") in kinds and ("smoke experts", "bf16", "both") in kinds
    assert any("_u2" in r.launch for r in rows) and any("_s2_" in r.launch for r in rows)
    assert all(not r.note and r.rel_err is not None and r.rel_err < 1e-2 for r in rows)
    assert sum(r.default for r in rows if r.stage == "both") == 2  # the default config of each format
    assert capsys.readouterr().out.rstrip().splitlines()[-1].startswith("| smoke | fp8 | gemv |")


def test_default_only_with_float16_rows_checks_one_launch_a_case(monkeypatch):
    """--default-only --x-dtype float16 under DGJAX_FP8_DOT=x (s21's probe of the per-step x work): one launch
    a case, the default, and the fp8 GEMV on float16 rows (not rescaled under that dot) agrees with ref.py."""
    import jax

    monkeypatch.setenv("DGJAX_FP8_DOT", "x")
    jax.clear_caches()
    try:
        rows = launch_sweep.main(["--smoke", "--only", "dense", "--default-only", "--x-dtype", "float16"])
    finally:
        jax.clear_caches()
    assert [(r.case, r.fmt, r.stage, r.default) for r in rows] == [("smoke", "fp8", "gemv", True)]
    assert rows[0].rel_err is not None and rows[0].rel_err < 1e-2 and not rows[0].note


def test_experts_on_float16_rows_check_against_the_reference():
    """--x-dtype float16 reaches the MoE cases too (the gate/up stage on carried-f16-like rows, session 22)."""
    rows = launch_sweep.main(["--smoke", "--only", "moe", "--default-only", "--fmts", "fp8", "--x-dtype", "float16"])
    assert {(r.case, r.fmt, r.stage, r.default) for r in rows} == {
        ("smoke experts", "fp8", stage, True) for stage in ("gate_up", "down", "both")}
    assert all(r.rel_err is not None and r.rel_err < 1e-2 and not r.note for r in rows)


def test_trace_attribution_follows_run_order(monkeypatch):
    events = [{"name": n, "dur": d} for n, d in [
        ("gemm_fusion_dot", 5.0), ("quant_gemv_fp8_r2_bn32_bk128_s2_w4_st3", 3.0), ("loop_reduce_fusion", 1.0),
        ("quant_gemv_fp8_r2_bn32_bk128_s2_w4_st3", 3.0), ("loop_reduce_fusion", 1.0),
        ("quant_gemv_fp8_r2_bn32_bk128_s2_w4_st3_u2", 2.0)]]
    monkeypatch.setattr(launch_sweep, "trace_events", lambda run: events)
    runs = [((), lambda: 0, ()), (("bn32_bk128_s2_w4_st3",), lambda: 0, ()), (("bn32_bk128_s2_w4_st3_u2",), lambda: 0, ())]
    per = launch_sweep.timed_trace(runs, calls=1)
    assert per[0] == {"gemm_fusion_dot": 5.0}
    assert per[1] == {"quant_gemv_fp8_r2_bn32_bk128_s2_w4_st3": 6.0, "loop_reduce_fusion": 2.0}
    assert per[2] == {"quant_gemv_fp8_r2_bn32_bk128_s2_w4_st3_u2": 2.0}


def test_moe_runs_whose_tags_cross_stages_are_told_apart(monkeypatch):
    """Config 2's gate/up tag is config 1's down tag: stage-qualified markers still split the runs."""
    from dgjax.pallas.launch import Launch
    from dgjax.pallas.moe_decode.kernel import Config

    a, b = Launch(64, 128, 2), Launch(64, 128, 1)
    first, second = Config(a, b), Config(b, Launch(128, 128, 1))
    names = [f"moe_gate_up_fp8_t2_{a.tag()}", f"moe_down_fp8_t2_{b.tag()}", "loop_add_fusion",
             f"moe_gate_up_fp8_t2_{b.tag()}", f"moe_down_fp8_t2_{second.down.tag()}"]
    monkeypatch.setattr(launch_sweep, "trace_events", lambda run: [{"name": n, "dur": 1.0} for n in names])
    runs = [(launch_sweep._stage_markers(c, "fp8", 2), lambda: 0, ()) for c in (first, second)]
    per = launch_sweep.timed_trace(runs, calls=1)
    assert list(per[0]) == names[:3] and list(per[1]) == names[3:]
    bare = [((c.gate_up.tag(), c.down.tag()), lambda: 0, ()) for c in (first, second)]
    assert len(launch_sweep.timed_trace(bare, calls=1)[0]) == 4  # bare tags lump the second run's gate/up in


def test_expert_launch_sets_cut_k_unevenly_but_never_below_two_steps():
    """glm-4.5-air's expert down (K = 1408 = 11 steps of 128): the wide and stage sets offer 2 and 4 splits (6 + 5,
    3+3+3+2), never 8 (a split of 1 step) or a split of none; qwen3's down (768 = 6 steps) stops at 2 (3 + 3)."""
    for launches in (launch_sweep._wide_moe_launches, launch_sweep._stages_moe_launches):
        glm = {la.splits for la in launches(1408, 4096)}
        qwen3 = {la.splits for la in launches(768, 2048)}
        assert {1, 2, 4} <= glm and 8 not in glm
        assert qwen3 == {1, 2}
    assert {la.num_stages for la in launch_sweep._stages_moe_launches(1408, 4096)} == {2, 3, 4}


def test_balanced_set_takes_uneven_splits_the_kernels_accept():
    """--balanced: split counts beyond powers of two where K's 128-wide steps allow them (qwen3 q/k/v: 16 steps in
    3 splits, 6 + 6 + 4), each a launch the quantized GEMV accepts, grids of 96-800 programs."""
    from dgjax.pallas.quant_gemv import kernel as gemv_kernel

    op = gemv_kernel.tiles.Operand("fp8", 1, 2048, 5120, 2, (128, 128), (40, 16))
    launches = launch_sweep._balanced_launches(op.k, op.n)
    assert launch_sweep.Launch(64, 128, 3) in launches and launch_sweep.Launch(128, 128, 8) in launches
    for la in launches:
        gemv_kernel.check_launch(op, la)
        assert 96 <= (op.n // la.block_n) * la.splits <= 800
    assert all(la.splits in (1, 2, 3, 4, 8) for la in launches)  # 5-7 would leave a last split under 2 steps
