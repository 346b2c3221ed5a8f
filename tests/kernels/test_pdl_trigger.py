"""dgjax/pallas/pdl: with DGJAX_PDL_TRIGGER=auto or on, a Pallas kernel lowered for CUDA sm_90+ reads its
program id through `griddepcontrol.launch_dependents`; off (the default) it does not; auto leaves older GPUs
and ROCm alone; a kernel list limits it to the named kernels; interpreted kernels are untouched either way;
a bad value is refused by name."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax
from jax.experimental import pallas as pl
from jax.experimental.pallas import triton as plgpu

from dgjax.pallas import pdl
from triton_text import cuda_triton_modules  # tests/kernels is on sys.path


def _double(x_ref, o_ref):
    idx = pl.program_id(0) * 128 + lax.broadcasted_iota(jnp.int32, (128,), 0)
    plgpu.store(o_ref.at[idx], plgpu.load(x_ref.at[idx]) * 2)


def _call(interpret: bool):
    return pl.pallas_call(_double, grid=(4,), out_shape=jax.ShapeDtypeStruct((512,), jnp.float32),
                          in_specs=[pl.BlockSpec((512,), lambda i: (0,))],
                          out_specs=pl.BlockSpec((512,), lambda i: (0,)), interpret=interpret,
                          compiler_params=plgpu.CompilerParams(num_warps=4, num_stages=1))


def _ttir() -> str:
    (text,) = cuda_triton_modules(_call(False), jax.ShapeDtypeStruct((512,), jnp.float32))
    return text


@pytest.fixture
def trigger(monkeypatch):
    def set_mode(mode: str | None, at: str | None = None):
        for var, value in ((pdl.ENV_VAR, mode), (pdl.AT_ENV_VAR, at)):
            if value is None:
                monkeypatch.delenv(var, raising=False)
            else:
                monkeypatch.setenv(var, value)
        jax.clear_caches()

    yield set_mode
    jax.clear_caches()


def test_auto_and_on_read_the_program_id_through_the_trigger_and_the_default_does_not(trigger):
    """Lowered for CUDA without a GPU, Pallas targets compute capability 9.0, where auto triggers."""
    assert pdl.install()  # installed at import already: idempotent
    for mode in ("auto", "on"):
        trigger(mode)
        text = _ttir()
        assert "griddepcontrol.launch_dependents" in text and "tt.elementwise_inline_asm" in text, mode
        asm_line = next(line for line in text.splitlines() if "elementwise_inline_asm" in line)
        assert "tt.get_program_id" in text and ": i32 -> i32" in asm_line  # the scalar id passes through
    for mode in (None, "off"):
        trigger(mode)
        assert "griddepcontrol" not in _ttir()


def test_auto_triggers_only_for_cuda_at_sm90_or_newer(trigger):
    trigger(None)
    assert not pdl.trigger_enabled("cuda", 90)  # off by default
    trigger("auto")
    assert pdl.trigger_enabled("cuda", 90) and pdl.trigger_enabled("cuda", 100)
    assert not pdl.trigger_enabled("cuda", 89) and not pdl.trigger_enabled("cuda", 80)
    assert not pdl.trigger_enabled("rocm", None) and not pdl.trigger_enabled("cuda", None)
    trigger("on")
    assert pdl.trigger_enabled("cuda", 80)  # forced: the user's call
    trigger("off")
    assert not pdl.trigger_enabled("cuda", 90)


def test_interpreted_kernels_are_untouched_and_bad_values_are_refused(trigger):
    x = jnp.arange(512, dtype=jnp.float32)
    trigger("on")
    np.testing.assert_array_equal(np.asarray(_call(True)(x)), 2 * np.arange(512))
    trigger("sometimes")
    with pytest.raises(ValueError, match=pdl.ENV_VAR):
        _ttir()


def _engine_kernel_modules() -> list[str]:
    """TTIR of the fp8 GEMV, both MoE decode stages (qwen3-30b-a3b shapes), the decode attention and its merge."""
    from benchmarks import ptx_census
    from dgjax.pallas.fused_decode_attention import kernel as attention
    from dgjax.pallas.quant_gemv import kernel as quant_gemv
    from dgjax.quant import Fp8BlockWeight

    spec = jax.ShapeDtypeStruct
    node = Fp8BlockWeight(weight=spec((5120, 2048), jnp.float8_e4m3fn), scale=spec((40, 16), jnp.float32),
                          shape=(2048, 5120), in_dims=1, expert_dims=0)
    modules = cuda_triton_modules(quant_gemv.quant_gemv, spec((2, 2048), jnp.bfloat16), node)
    modules += list(ptx_census.triton_modules("qwen3-30b-a3b", "fp8", 2).values())
    b, kvh, g, d, pages = 2, 4, 8, 128, 64
    attn_args = [spec((b, kvh, g + 2, d), jnp.bfloat16), spec((b, d), jnp.float32), spec((b, d), jnp.float32),
                 spec((pages, 16, kvh, d), jnp.bfloat16), spec((pages, 16, kvh, d), jnp.bfloat16),
                 spec((b, 32), jnp.int32), spec((b,), jnp.int32), spec((b,), jnp.int32), spec((b,), jnp.int32)]
    modules += cuda_triton_modules(lambda *a: attention.fused_decode_attention(*a, scale=d**-0.5, num_splits=4),
                                   *attn_args)
    return modules


def _asm_lines(text: str) -> list[int]:
    return [i for i, line in enumerate(text.splitlines()) if "griddepcontrol.launch_dependents" in line]


def test_engine_kernels_trigger_at_start_before_their_loops_and_at_end_after_them(trigger, verified_triton_lowering):
    """Every engine kernel verifies and triggers in both positions: at "start" through its program-id reads,
    before its first loop; at "end" only through the value it stores, after its loops (the attention's merge
    has none) and with no program id passing through the asm."""
    trigger("on")
    start = _engine_kernel_modules()
    trigger("on", "end")
    end = _engine_kernel_modules()
    assert len(start) == len(end) == 5 and verified_triton_lowering and all(verified_triton_lowering)
    for s_text, e_text in zip(start, end):
        s_lines, e_lines = s_text.splitlines(), e_text.splitlines()
        loops_s = [i for i, line in enumerate(s_lines) if "scf.for" in line]
        loops_e = [i for i, line in enumerate(e_lines) if "scf.yield" in line]
        assert _asm_lines(s_text) and _asm_lines(e_text)
        assert all(": i32 -> i32" in s_lines[i] for i in _asm_lines(s_text))  # program ids
        assert not any(": i32 -> i32" in e_lines[i] for i in _asm_lines(e_text))  # stored values
        assert all(('"=f,f"' in e_lines[i] and "xf32>" in e_lines[i]) or ('"=h,h"' in e_lines[i] and "xbf16>" in
                                                                         e_lines[i]) for i in _asm_lines(e_text))
        if loops_s:  # the merge has no loop
            assert min(_asm_lines(s_text)) < min(loops_s)
            assert min(_asm_lines(e_text)) > max(loops_e)


def test_trigger_after_is_the_identity_off_the_gpu_and_refuses_wide_types(trigger):
    trigger("on", "end")

    def kernel(x_ref, o_ref):
        o_ref[...] = pdl.trigger_after(x_ref[...] * 2)

    x = jnp.arange(256, dtype=jnp.bfloat16)
    out = pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((256,), jnp.bfloat16), interpret=True)(x)
    np.testing.assert_array_equal(np.asarray(out, np.float32), 2 * np.asarray(x, np.float32))
    assert pdl.trigger_after(jnp.ones(3, jnp.float32)).tolist() == [1.0, 1.0, 1.0]  # plain jax too
    with pytest.raises(TypeError, match="float32, int32"):
        pdl.trigger_after(jnp.ones(3, jnp.int8))
    trigger("on", "middle")
    with pytest.raises(ValueError, match=pdl.AT_ENV_VAR):
        _ttir()


def test_a_kernel_list_triggers_only_in_kernels_whose_name_starts_with_one(trigger):
    trigger("kernels:fused_decode_attention, split_merge")
    assert pdl.trigger_enabled("cuda", 90, "fused_decode_attention_g16_d128_bk64_s17")
    assert pdl.trigger_enabled("cuda", 90, "split_merge_s17_g16_d128")
    assert not pdl.trigger_enabled("cuda", 90, "moe_gate_up_fp8_t2_bn128_bk128_s4_w4_st3")
    assert not pdl.trigger_enabled("cuda", 80, "split_merge_s17_g16_d128")  # still sm_90+ only
    assert "griddepcontrol" not in _ttir()  # the test kernel `_double` is not listed
    trigger("kernels:_dou,_double")
    assert "griddepcontrol.launch_dependents" in _ttir()
    trigger("kernels:")
    with pytest.raises(ValueError, match="names no kernel-name prefix"):
        pdl.trigger_enabled("cuda", 90, "x")


def test_the_model_default_applies_where_the_variable_is_unset_and_yields_to_it(trigger):
    trigger(None)
    with pdl.model_default("auto"):
        assert "griddepcontrol.launch_dependents" in _ttir()
        trigger("off")
        assert "griddepcontrol" not in _ttir()  # the variable overrides the model's default
    trigger(None)
    assert "griddepcontrol" not in _ttir()  # outside: off
    with pytest.raises(ValueError, match="pdl default"):
        with pdl.model_default("sometimes"):
            pass


def test_the_model_default_is_auto_only_for_dense_models_with_plain_weights():
    from dgjax.quant import Fp8BlockWeight

    dense = {"q": jnp.zeros((4, 4), jnp.bfloat16), "norm": jnp.ones((4,), jnp.bfloat16)}
    assert pdl.mode_for_model(0, dense) == "auto"
    assert pdl.mode_for_model(8, dense) == "off"
    fp8 = Fp8BlockWeight(weight=jnp.zeros((128, 128), jnp.float8_e4m3fn), scale=jnp.ones((1, 1), jnp.float32),
                         shape=(128, 128), in_dims=1, expert_dims=0)
    assert pdl.mode_for_model(0, {**dense, "o": fp8}) == "off"
