"""bf16 rows carried as f16 (dgjax/pallas/carrier.py): the conversion's exactness, and the fp8 kernels (quantized
GEMV, MoE decode, split merge; interpreted, and lowered for CUDA) taking or writing carried rows."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest
from moe_weights import _dense, _fp8, _routing

from dgjax.pallas.carrier import F16_MAX, f16_carrier
from dgjax.pallas.moe_decode import kernel as moe_kernel
from dgjax.pallas.moe_decode import ref as moe_ref
from dgjax.pallas.moe_decode import tiles
from dgjax.pallas.quant_gemv import api as gemv_api
from dgjax.pallas.quant_gemv import kernel as gemv_kernel
from dgjax.pallas.quant_gemv import ref as gemv_ref
from dgjax.pallas.split_merge import api as merge_api
from dgjax.pallas.split_merge import kernel as merge_kernel
from dgjax.pallas.split_merge import ref as merge_ref
from dgjax.quant import Fp8BlockWeight, fp8_block

K, N = 256, 64


def _bf16_values(rng, lo_exp: int, hi_exp: int, n: int = 4096) -> np.ndarray:
    """Random bf16 values (both signs, every mantissa) with exponents in [lo_exp, hi_exp]."""
    mant = rng.uniform(1.0, 2.0, n) * rng.choice([-1.0, 1.0], n)
    return (mant * 2.0 ** rng.integers(lo_exp, hi_exp + 1, n)).astype(ml_dtypes.bfloat16)


def test_carrier_holds_bf16_values_exactly_in_f16_range_and_saturates_beyond():
    rng = np.random.default_rng(0)
    normal = _bf16_values(rng, -14, 15)  # f16's normal range (max 65504 < 2**16)
    normal = normal[np.abs(normal.astype(np.float32)) <= F16_MAX]
    got = np.asarray(f16_carrier(jnp.asarray(normal)))
    assert got.dtype == np.float16
    np.testing.assert_array_equal(got.astype(np.float32), normal.astype(np.float32))  # bit for bit
    huge = jnp.asarray(np.array([7e4, -1e30, 3e38], np.float32), jnp.bfloat16)
    np.testing.assert_array_equal(np.asarray(f16_carrier(huge), np.float32), [F16_MAX, -F16_MAX, F16_MAX])
    tiny = _bf16_values(rng, -30, -15).astype(np.float32)  # f16 subnormals and below
    err = np.abs(np.asarray(f16_carrier(jnp.asarray(tiny)), np.float32) - tiny)
    assert err.max() <= 2.0 ** -25
    wide = rng.standard_normal(64).astype(np.float32)  # float32 input: rounded to bf16 first, as the model rounds
    want = wide.astype(ml_dtypes.bfloat16).astype(np.float32)
    np.testing.assert_array_equal(np.asarray(f16_carrier(jnp.asarray(wide)), np.float32), want)


def _fp8_node(rng) -> Fp8BlockWeight:
    w = (0.1 * rng.standard_normal((N, K))).astype(np.float32)  # [N, K] rows
    values, scale = fp8_block.quantize_np(w, (32, 64))
    return Fp8BlockWeight(weight=jnp.asarray(values), scale=jnp.asarray(scale), block=(32, 64), shape=(K, N),
                          in_dims=1, expert_dims=0)


@pytest.mark.parametrize("magnitude", [1e-3, 1.0, 300.0])
def test_quant_gemv_takes_carried_rows_as_they_are(magnitude):
    """fp8 under the default f16 dot: f16 rows meet the tile unscaled (no per-step rescaling) and give what bf16
    rows give through the rescaled path, up to float32 accumulation order; both match ref.py."""
    rng = np.random.default_rng(1)
    node = _fp8_node(rng)
    x = jnp.asarray(magnitude * rng.standard_normal((2, K)), jnp.bfloat16)
    launch = gemv_kernel.Launch(32, 64, 2)
    assert not tiles._scaled_rows_dot(gemv_kernel.describe(node), jnp.float16)
    assert tiles._scaled_rows_dot(gemv_kernel.describe(node), jnp.bfloat16)
    carried = np.asarray(gemv_kernel.quant_gemv(f16_carrier(x), node, launch=launch, out_dtype=jnp.float32,
                                                interpret=True))
    rescaled = np.asarray(gemv_kernel.quant_gemv(x, node, launch=launch, out_dtype=jnp.float32, interpret=True))
    want = np.asarray(gemv_ref.quant_gemv(x.astype(jnp.float32), node), np.float32)
    scale = np.abs(want).max()
    np.testing.assert_allclose(carried, rescaled, rtol=0, atol=1e-6 * scale)
    np.testing.assert_allclose(carried, want, rtol=0, atol=1e-2 * scale)


def test_quant_matmul_carries_only_when_asked_and_switched_on(monkeypatch):
    """`carry=True` hands the kernel f16 rows and keeps x's dtype for the result; DGJAX_F16_CARRY=off, an fp8
    dot other than f16, or no `carry` leave the rows bf16."""
    rng = np.random.default_rng(2)
    node = _fp8_node(rng)
    x = jnp.asarray(rng.standard_normal((2, K)), jnp.bfloat16)
    monkeypatch.setenv("DGJAX_QUANT_GEMV", "kernel")
    seen = []
    real = gemv_api.kernel.quant_gemv
    monkeypatch.setattr(gemv_api.kernel, "quant_gemv",
                        lambda a, w, *r, **k: seen.append(a.dtype) or real(a, w, *r, **k))
    on = gemv_api.quant_matmul(x, node, carry=True)
    off = gemv_api.quant_matmul(x, node)
    monkeypatch.setenv("DGJAX_F16_CARRY", "off")
    switched_off = gemv_api.quant_matmul(x, node, carry=True)
    monkeypatch.delenv("DGJAX_F16_CARRY")
    monkeypatch.setenv("DGJAX_FP8_DOT", "x")
    other_dot = gemv_api.quant_matmul(x, node, carry=True)
    assert seen == [jnp.float16, jnp.bfloat16, jnp.bfloat16, jnp.bfloat16]
    assert {on.dtype, off.dtype, switched_off.dtype, other_dot.dtype} == {jnp.dtype(jnp.bfloat16)}
    np.testing.assert_allclose(np.asarray(on, np.float32), np.asarray(off, np.float32), rtol=1e-2, atol=1e-2)
    monkeypatch.delenv("DGJAX_FP8_DOT")
    monkeypatch.setenv("DGJAX_F16_CARRY", "maybe")
    with pytest.raises(ValueError, match="DGJAX_F16_CARRY"):
        gemv_api.quant_matmul(x, node, carry=True)


def test_split_merge_writes_carried_rows_on_both_paths():
    rng = np.random.default_rng(3)
    b, kvh, s, gp, d, group = 2, 2, 5, 16, 32, 3
    m = jnp.asarray(rng.normal(size=(b, kvh, s, gp)) * 4, jnp.float32)
    l = jnp.asarray(rng.uniform(1.0, 50.0, size=(b, kvh, s, gp)), jnp.float32)
    acc = jnp.asarray(rng.normal(size=(b, kvh, s, gp, d)) * np.asarray(l)[..., None], jnp.float32)
    plain = merge_kernel.merge_splits(acc, m, l, group=group, out_dtype=jnp.bfloat16, interpret=True)
    carried = merge_kernel.merge_splits(acc, m, l, group=group, out_dtype=jnp.bfloat16, carry_f16=True,
                                        interpret=True)
    assert carried.dtype == jnp.float16 and plain.dtype == jnp.bfloat16
    np.testing.assert_array_equal(np.asarray(carried, np.float32), np.asarray(plain, np.float32))
    reps = merge_api.max_kernel_rows() // b + 1  # more rows than the kernel merges: XLA's merge
    wide = jnp.concatenate([acc] * reps), jnp.concatenate([m] * reps), jnp.concatenate([l] * reps)
    assert wide[0].shape[0] > merge_api.max_kernel_rows()
    got = merge_api.merge_for_attention(*wide, group=group, out_dtype=jnp.bfloat16, interpret=True, carry_f16=True)
    want = merge_ref.merge_splits(*wide, group, jnp.bfloat16)
    assert got.dtype == jnp.float16
    np.testing.assert_array_equal(np.asarray(got, np.float32), np.asarray(want, np.float32))


@pytest.mark.parametrize("gate_up_splits", [1, 2])
def test_moe_down_stage_takes_carried_h(gate_up_splits, monkeypatch):
    """fp8 experts with bf16 x: h reaches the down stage as f16 (written by the unsplit gate/up kernel or by the
    activation's fusion after split partials), equal to the bf16 h carried; the result matches the carry off."""
    rng = np.random.default_rng(4)
    tokens, top_k = 2, 2
    gate, up, down = (_fp8(w) for w in _dense(rng))
    ids, weights = _routing(rng, tokens, top_k, list(range(8)))
    x = jnp.asarray(rng.standard_normal((tokens, gate.shape[1])), jnp.bfloat16)
    ids_flat = jnp.asarray(ids).reshape(-1).astype(jnp.int32)
    launch = moe_kernel.Launch(16, 32, gate_up_splits)
    h_plain = moe_kernel.gate_up_stage(x, ids_flat, gate, up, launch, interpret=True)
    h_carried = moe_kernel.gate_up_stage(x, ids_flat, gate, up, launch, interpret=True, h_carrier=True)
    assert h_carried.dtype == jnp.float16 and h_plain.dtype == jnp.bfloat16
    np.testing.assert_array_equal(np.asarray(h_carried, np.float32), np.asarray(h_plain, np.float32))
    args = (x, jnp.asarray(ids), jnp.asarray(weights), gate, up, down)
    assert moe_kernel.carries_h(x.dtype, down)
    on = np.asarray(moe_kernel.moe_decode(*args, interpret=True), np.float32)
    off = np.asarray(moe_kernel.moe_decode(*args, interpret=True, carry_h=False), np.float32)
    monkeypatch.setenv("DGJAX_F16_CARRY", "off")
    assert not moe_kernel.carries_h(x.dtype, down)
    want = np.asarray(moe_ref.moe_decode(*args), np.float32)
    np.testing.assert_allclose(on, off, rtol=0, atol=1e-2 * np.abs(want).max())
    np.testing.assert_allclose(on, want, rtol=0, atol=3e-2 * np.abs(want).max())


def test_carried_rows_lower_to_valid_triton_modules(verified_triton_lowering):
    """f16 rows into an fp8 GEMV, and the merge writing f16, lower for CUDA without a GPU."""
    rng = np.random.default_rng(5)
    node = _fp8_node(rng)
    x = jax.ShapeDtypeStruct((2, K), jnp.float16)
    lowered = jax.jit(lambda a, w: gemv_kernel.quant_gemv(a, w, out_dtype=jnp.bfloat16)).trace(x, node).lower(
        lowering_platforms=("cuda",))
    assert "quant_gemv" in lowered.as_text()
    acc = jax.ShapeDtypeStruct((2, 4, 8, 16, 128), jnp.float32)
    ml = jax.ShapeDtypeStruct((2, 4, 8, 16), jnp.float32)
    lowered = jax.jit(lambda a, b, c: merge_kernel.merge_splits(a, b, c, group=16, out_dtype=jnp.bfloat16,
                                                               carry_f16=True)).trace(acc, ml, ml).lower(
        lowering_platforms=("cuda",))
    assert "split_merge" in lowered.as_text()
    assert verified_triton_lowering == [True, True]
