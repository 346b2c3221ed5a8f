"""fp8 (e4m3) KV pages: the quantizer against numpy + ml_dtypes, and write_kv + reference attention on fp8
pages against the same steps on float32 pages (e4m3 rounding bounds), padding still only in the trash page."""

from __future__ import annotations

import jax.numpy as jnp
import ml_dtypes
import numpy as np
from test_paged_attention_ref import D, PAGE, _scenario

from dgjax.pallas.paged_attention import api

E4M3_HALF_ULP = 2.0**-4  # 3 mantissa bits: round-to-nearest is within 2^-4 relative for normal values
E4M3_SUBNORMAL_HALF_ULP = 2.0**-10  # absolute, in the scaled domain (subnormal spacing 2^-9)


def _numpy_quantize(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The format's definition step by step in numpy float32, cast by ml_dtypes."""
    x = x.astype(np.float32)
    scale = np.max(np.abs(x), axis=-1) * np.float32(1.0 / 448.0)
    scale = np.where(scale > 0, scale, np.float32(1.0)).astype(np.float32)
    scaled = np.clip(x / scale[..., None], np.float32(-448.0), np.float32(448.0))
    return scaled.astype(ml_dtypes.float8_e4m3fn), scale


def _adversarial_rows(rng, d: int) -> np.ndarray:
    rows = [
        rng.standard_normal(d),
        np.zeros(d),  # all-zero row: scale guarded to 1
        np.r_[np.zeros(d - 1), -3.5],  # one non-zero element
        rng.uniform(-1, 1, d) * 3.4e38,  # near float32's max
        rng.standard_normal(d) * 1e-30,
        rng.standard_normal(d) * 1e-43,  # subnormal float32 inputs: amax / 448 may underflow
        np.r_[1e4, rng.standard_normal(d - 1) * 1e-3],  # huge dynamic range: the small ones flush to 0
        rng.uniform(-448, 448, d).round(),
    ]
    return np.asarray(rows, np.float32)


def test_quantizer_is_bit_exact_against_ml_dtypes():
    rng = np.random.default_rng(0)
    x = np.concatenate([
        _adversarial_rows(rng, 64),
        (rng.standard_normal((40, 64)) * np.exp(rng.uniform(-20, 20, (40, 1)))).astype(np.float32),
    ]).reshape(6, 8, 64)
    values, scales = api.quantize_fp8(jnp.asarray(x))
    want_values, want_scales = _numpy_quantize(x)
    assert values.dtype == jnp.float8_e4m3fn and scales.dtype == jnp.float32
    np.testing.assert_array_equal(np.asarray(values).view(np.uint8), want_values.view(np.uint8))
    np.testing.assert_array_equal(np.asarray(scales).view(np.uint32), want_scales.view(np.uint32))
    # Independent of the numpy steps: nothing overflows to NaN, and a row's largest element lands on +-448.
    v = np.asarray(values.astype(jnp.float32))
    assert np.isfinite(v).all()
    nonzero = np.abs(x).max(-1) > 0
    amax_hit = np.abs(v).max(-1)[nonzero]
    assert ((amax_hit == 448.0) | (np.abs(x).max(-1)[nonzero] < 1e-40)).all()
    assert (v[~nonzero] == 0).all() and (np.asarray(scales)[~nonzero] == 1.0).all()


def test_bfloat16_inputs_quantize_like_their_float32_values():
    x = np.random.default_rng(1).standard_normal((5, 2, 32)).astype(np.float32)
    xb = jnp.asarray(x, jnp.bfloat16)
    got_v, got_s = api.quantize_fp8(xb)
    want_v, want_s = _numpy_quantize(np.asarray(xb.astype(jnp.float32)))
    np.testing.assert_array_equal(np.asarray(got_v).view(np.uint8), want_v.view(np.uint8))
    np.testing.assert_array_equal(np.asarray(got_s), want_s)


def _fp8_pool(k_pages: np.ndarray) -> api.QuantizedPages:
    values, scales = api.quantize_fp8(jnp.asarray(k_pages))
    return api.QuantizedPages(values=values, scales=scales)


def _dequantized(pages: api.QuantizedPages) -> np.ndarray:
    return np.asarray(api.dequantize_fp8(pages.values, pages.scales, jnp.float32))


def test_write_kv_round_trip_stays_within_e4m3_rounding():
    rng = np.random.default_rng(2)
    q, k, v, k_pages, v_pages, new_k, new_v, tables, ctx, positions, qlen = _scenario(rng, 7)
    slots = api.kv_slots(jnp.asarray(positions), jnp.asarray(qlen), jnp.asarray(tables), PAGE)
    kp32, _ = api.write_kv(jnp.asarray(k_pages), jnp.asarray(v_pages), jnp.asarray(new_k), jnp.asarray(new_v), slots)
    kp8, vp8 = api.write_kv(_fp8_pool(k_pages), _fp8_pool(v_pages), jnp.asarray(new_k), jnp.asarray(new_v), slots)
    assert isinstance(kp8, api.QuantizedPages) and kp8.values.dtype == jnp.float8_e4m3fn
    exact = np.asarray(kp32)
    got = _dequantized(kp8)
    scale = np.asarray(kp8.scales)[..., None]
    bound = np.abs(exact) * E4M3_HALF_ULP + scale * E4M3_SUBNORMAL_HALF_ULP
    assert (np.abs(got - exact) <= bound * (1 + 1e-6)).all()
    rel = np.abs(got - exact).max() / np.abs(exact).max()
    assert 0 < rel < E4M3_HALF_ULP  # it is lossy, and no worse than half an e4m3 ulp of the row max
    np.testing.assert_array_equal(_dequantized(vp8)[0] * 0, 0)  # trash page stays finite


def test_reference_attention_on_fp8_pages_is_close_to_float32_pages():
    errors = []
    for seed, (t, window) in enumerate([(1, None), (7, None), (7, 5)]):
        rng = np.random.default_rng(10 + seed)
        q, k, v, k_pages, v_pages, new_k, new_v, tables, ctx, positions, qlen = _scenario(rng, t)
        args = [jnp.asarray(a) for a in (tables, ctx, positions, qlen)]
        slots = api.kv_slots(args[2], args[3], args[0], PAGE)
        new = (jnp.asarray(new_k), jnp.asarray(new_v))
        kp32, vp32 = api.write_kv(jnp.asarray(k_pages), jnp.asarray(v_pages), *new, slots)
        kp8, vp8 = api.write_kv(_fp8_pool(k_pages), _fp8_pool(v_pages), *new, slots)
        kw = dict(scale=D**-0.5, sliding_window=window, impl="ref")
        want = np.asarray(api.paged_attention(jnp.asarray(q), kp32, vp32, *args, **kw))
        got = np.asarray(api.paged_attention(jnp.asarray(q), kp8, vp8, *args, **kw))
        # The reference on fp8 pages is exactly the reference on the dequantized pages.
        on_dequantized = np.asarray(api.paged_attention(
            jnp.asarray(q), jnp.asarray(_dequantized(kp8)), jnp.asarray(_dequantized(vp8)), *args, **kw))
        np.testing.assert_array_equal(got, on_dequantized)
        errors.append(np.abs(got - want).max() / np.abs(want).max())
    print(f"fp8 vs float32 pages, reference attention, max abs error / max |out|: {max(errors):.4f}")
    assert 0 < max(errors) < 0.1


def test_padding_tokens_write_only_into_the_trash_page_of_fp8_pages():
    rng = np.random.default_rng(3)
    q, k, v, k_pages, v_pages, new_k, new_v, tables, ctx, positions, qlen = _scenario(rng, 7)
    positions[qlen[:, None] <= np.arange(7)] = 0
    slots = api.kv_slots(jnp.asarray(positions), jnp.asarray(qlen), jnp.asarray(tables), PAGE)
    before = _fp8_pool(k_pages)
    marker = jnp.full(new_k.shape, 1e6, jnp.float32)
    after, _ = api.write_kv(before, _fp8_pool(v_pages), marker, marker, slots)
    changed = np.any(np.asarray(after.values).view(np.uint8) != np.asarray(before.values).view(np.uint8), axis=(2, 3))
    changed |= np.any(np.asarray(after.scales) != np.asarray(before.scales), axis=2)
    real = {(tables[i, p // PAGE], p % PAGE) for i in range(len(qlen)) for p in positions[i, : qlen[i]]}
    assert {tuple(x) for x in np.argwhere(changed) if x[0] != 0} == real
    assert np.allclose(np.asarray(after.scales)[tuple(np.array(sorted(real)).T)], 1e6 / 448)
