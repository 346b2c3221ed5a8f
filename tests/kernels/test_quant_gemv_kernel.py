"""The quantized dense GEMV kernel (interpreted on CPU) against ref.py, ref.py against numpy decoders, the api's
dispatch, the CUDA lowering at llama shapes, and a tiny quantized model decoding the same with either path."""

from __future__ import annotations

import os

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest

from dgjax.pallas.moe_decode import tiles
from dgjax.pallas.quant_gemv import api, kernel, ref
from dgjax.quant import Fp8BlockWeight, IntWeight, Mxfp4Weight, Nvfp4Weight, bf12, fp8_block, int_group, mxfp4, nvfp4

N, K = 64, 256
FP8_BLOCK = (32, 64)  # 4 scale blocks along K, 2 along N: column blocks and K steps cross them
GROUPS = {"int4": 32, "int4-sym": 64, "int8": 64, "int8-zero": 32}


def _encode(fmt: str, rows: np.ndarray, in_shape=(K,)):
    """float32 [N, K] rows -> (node standing for dense [*in_shape, N], numpy float32 dequantized rows)."""
    geo = dict(shape=tuple(in_shape) + (rows.shape[0],), in_dims=len(in_shape), expert_dims=0)
    if fmt == "bf12":  # the rows rounded to bf16, re-encoded losslessly, with values below their row's window
        rows = np.array(rows, np.float32)
        rows[::7, 3::37] = 1e-20  # escapes: exact values from the table, x[col] * value added once per block
        bits = rows.astype(ml_dtypes.bfloat16)
        node = bf12.node_from(jnp.asarray(bits), geo["shape"], geo["in_dims"])
        return node, bits.astype(np.float32)
    if fmt == "fp8":
        v, s = fp8_block.quantize_np(rows, FP8_BLOCK)
        node = Fp8BlockWeight(weight=jnp.asarray(v), scale=jnp.asarray(s), block=FP8_BLOCK, **geo)
        return node, fp8_block.dequantize_np(v, s, FP8_BLOCK)
    if fmt == "nvfp4":
        p, bs, gs = nvfp4.quantize_np(rows)
        node = Nvfp4Weight(packed=jnp.asarray(p), block_scale=jnp.asarray(bs), global_scale=jnp.asarray(gs), **geo)
        return node, nvfp4.dequantize_np(p, bs, gs)
    if fmt == "mxfp4":
        p, s = mxfp4.quantize_np(rows)
        return Mxfp4Weight(packed=jnp.asarray(p), scale=jnp.asarray(s), **geo), mxfp4.dequantize_np(p, s)
    bits, group = (4 if fmt.startswith("int4") else 8), GROUPS[fmt]
    q, scale, zero = int_group.quantize_np(rows, bits, group, symmetric=fmt in ("int4-sym", "int8"))
    node = IntWeight(values=jnp.asarray(int_group.values_from_q_np(q, bits)), scale=jnp.asarray(scale),
                     zero_point=None if zero is None else jnp.asarray(zero), bits=bits, group_size=group, **geo)
    return node, int_group.dequantize_np(q, scale, zero, group)


def _rows(rng, n=N, k=K):
    """Weights with adversarial rows: all zero, and tiny (subnormal-scale) values."""
    w = (0.2 * rng.standard_normal((n, k))).astype(np.float32)
    w[3] = 0.0
    w[5] *= np.float32(1e-30)
    return w


def _check(got, want, dtype):
    got = np.asarray(jnp.asarray(got, jnp.float32))
    want = np.asarray(jnp.asarray(want, jnp.float32))
    assert got.shape == want.shape and np.isfinite(got).all()
    scale = max(1.0, float(np.abs(want).max()))
    if dtype == jnp.float32:
        np.testing.assert_allclose(got, want, atol=2e-5 * scale, rtol=0)
    else:
        np.testing.assert_allclose(got, want, rtol=2e-2, atol=1e-2 * scale)


# ---------------------------------------------------------------- ref.py against numpy


@pytest.mark.parametrize("fmt", ["fp8", "nvfp4", "mxfp4", "int4", "int8-zero", "bf12"])
def test_reference_equals_dequantize_then_dot(fmt):
    rng = np.random.default_rng(1)
    node, dense_rows = _encode(fmt, _rows(rng), in_shape=(4, K // 4))  # two input dims, as o_proj has
    x = rng.standard_normal((3, K)).astype(np.float32)
    got = ref.quant_gemv(jnp.asarray(x), node)
    np.testing.assert_allclose(np.asarray(got), x.astype(np.float64) @ dense_rows.T.astype(np.float64),
                               atol=2e-5 * np.abs(got).max(), rtol=0)


# ---------------------------------------------------------------- kernel against ref.py

L = kernel.Launch
CASES = [
    # rows, x dtype, format, launch (None: the default choice, split K at these tiny shapes)
    (1, jnp.float32, "fp8", None),
    (3, jnp.bfloat16, "fp8", L(32, 64)),  # unsplit, 4 K steps, each column block inside one scale row
    (16, jnp.float32, "fp8", L(64, 32, 2)),  # a column block spans 2 scale rows
    (16, jnp.float32, "nvfp4", None),
    (3, jnp.bfloat16, "nvfp4", L(16, 32, 2)),
    (1, jnp.float32, "mxfp4", L(32, 64)),
    (16, jnp.bfloat16, "mxfp4", None),
    (3, jnp.float32, "int4", None),  # zero points, 8 groups per 256-input step
    (1, jnp.bfloat16, "int4-sym", L(32, 32, 2)),  # a group spans two K steps
    (16, jnp.float32, "int8", None),
    (3, jnp.bfloat16, "int8-zero", L(64, 64)),
    # unrolled K loops (a remainder where the unroll does not divide the steps)
    (3, jnp.bfloat16, "fp8", L(32, 32, unroll=3)),  # 8 K steps: 2 iterations of 3, then 2 single steps
    (16, jnp.float32, "nvfp4", L(32, 32, unroll=4)),
    (2, jnp.bfloat16, "fp8", L(16, 32, 2, unroll=2)),
    # bf12: escapes added once per column block (split 0), row scales, even/odd halves
    (1, jnp.bfloat16, "bf12", None),
    (3, jnp.float32, "bf12", L(32, 64, 2)),
    (16, jnp.bfloat16, "bf12", L(16, 32, 4)),
]


@pytest.mark.parametrize("rows,dtype,fmt,launch", CASES)
def test_kernel_matches_reference(rows, dtype, fmt, launch):
    rng = np.random.default_rng(rows * 7 + len(fmt))
    node, _ = _encode(fmt, _rows(rng))
    x = jnp.asarray(rng.standard_normal((rows, K)), dtype)
    if rows > 1:
        x = x.at[1].set(0.0)
    got = kernel.quant_gemv(x, node, launch=launch, interpret=True)
    assert got.dtype == dtype
    _check(got, ref.quant_gemv(x, node), dtype)


def test_default_launch_fills_the_gpu_at_llama_shapes():
    h200 = 2 * 132
    for k, n in ((4096, 6144), (4096, 4096), (4096, 28672), (14336, 4096)):
        for op in (kernel.Operand("fp8", 1, k, n, 2, (128, 128), (n // 128, k // 128)),
                   kernel.Operand("nvfp4", 1, k, n, 3, group=16)):
            launch = kernel.default_launch(op, h200)
            kernel.check_launch(op, launch)
            programs = (n // launch.block_n) * launch.splits
            can_split = launch.splits < kernel.MAX_SPLITS and k % (2 * launch.splits * launch.block_k) == 0
            assert programs >= h200 or not can_split
            assert programs < 4 * h200 or launch.splits == 1
            assert launch.block_k * (1 if op.fmt == "fp8" else 0.5) == kernel.ROW_BYTES_PER_STEP


@pytest.mark.parametrize("wide", ["on", "off"])
def test_fp8_takes_wide_blocks_where_its_splits_still_fill_the_gpu(wide, monkeypatch):
    """DGJAX_QUANT_GEMV_WIDE (default on): fp8 at the swept shapes takes 128 columns and as many programs as
    the 64-column rule; where K cannot split far enough for 128 (glm's shared down, K = 11 x 128: 4 uneven
    splits at most) it keeps 64; other formats keep 64; off: 64 everywhere."""
    monkeypatch.setenv(kernel.WIDE_ENV_VAR, wide)
    h200 = 2 * 132
    fp8 = lambda k, n: kernel.Operand("fp8", 1, k, n, 2, (128, 128), (n // 128, k // 128))  # noqa: E731
    want = {(4096, 14336): (128, 4), (12288, 4096): (128, 16), (4096, 2048): (128, 16), (2048, 5120): (128, 8),
            (1408, 4096): (64, 4)}
    for (k, n), (bn, splits) in want.items():
        launch = kernel.default_launch(fp8(k, n), h200)
        kernel.check_launch(fp8(k, n), launch)
        if wide == "on":
            assert (launch.block_n, launch.splits) == (bn, splits), (k, n, launch)
        else:
            assert launch.block_n == 64
    assert kernel.default_launch(kernel.Operand("nvfp4", 1, 4096, 14336, 3, group=16), h200).block_n == 64
    monkeypatch.setenv(kernel.WIDE_ENV_VAR, "maybe")
    with pytest.raises(ValueError, match=kernel.WIDE_ENV_VAR):
        kernel.default_launch(fp8(4096, 2048), h200)


@pytest.mark.parametrize("fmt,launch", [
    ("fp8", L(64, 64, 4)),  # 11 K steps: 3, 3, 3, 2
    ("fp8", L(32, 64, 2, unroll=2)),  # 6 + 5 steps, unrolled by 2: a remainder step in each split
    ("int4", L(32, 64, 3)),  # 22 steps of 32 inputs: 8, 8, 6
])
def test_uneven_k_splits_match_the_reference(fmt, launch):
    """K splits that do not cut the steps evenly (the last split runs fewer), against ref.py, summed inside
    and kept as partials (SplitSums) for a consumer."""
    rng = np.random.default_rng(13)
    k = 11 * 64
    node, _ = _encode(fmt, _rows(rng, k=k), in_shape=(k,))
    x = jnp.asarray(rng.standard_normal((2, k)), jnp.float32)
    want = ref.quant_gemv(x, node)
    _check(kernel.quant_gemv(x, node, launch=launch, interpret=True), want, jnp.float32)
    kept = kernel.quant_gemv(x, node, launch=launch, keep_splits=True, interpret=True)
    assert kept.parts.shape[0] == launch.splits
    _check(kept.value(), want, jnp.float32)


def test_uneven_splits_where_k_does_not_halve(monkeypatch):
    """glm-4.5-air's shared down (K = 11 x 128) splits in 4 uneven parts (64 -> 256 programs); a split count
    that would leave a split empty is refused, and so is any uneven split for the late norm."""
    monkeypatch.setenv(kernel.WIDE_ENV_VAR, "on")
    op = kernel.Operand("fp8", 1, 1408, 4096, 2, (128, 128), (32, 11))
    assert kernel.default_launch(op, 264) == L(64, 128, 4)
    assert kernel.default_launch(op, 264, even=True) == L(64, 128, 1)
    assert kernel.split_steps(11, 4) == 3 and kernel.split_steps(11, 8) is None
    with pytest.raises(ValueError, match="does not tile"):
        kernel.check_launch(op, L(64, 128, 8))
    with pytest.raises(ValueError, match="even K splits"):
        kernel.check_launch(op, L(64, 128, 4), even=True)


def test_bad_launch_knobs_are_rejected():
    node, _ = _encode("fp8", _rows(np.random.default_rng(0)))
    op = kernel.describe(node)
    with pytest.raises(ValueError):
        kernel.check_launch(op, L(128, 32))  # 128 columns do not tile 64
    with pytest.raises(ValueError):
        kernel.check_launch(op, L(32, 128))  # a K step across two fp8 scale blocks
    with pytest.raises(ValueError):
        kernel.check_launch(op, L(32, 64, 8))  # 8 splits of 64 do not fit 256
    with pytest.raises(ValueError):
        kernel.check_launch(op, L(32, 64, 8, unroll=2))  # 8 splits of 64 do not fit 256, unrolled or not


# ---------------------------------------------------------------- dispatch


def _uses_kernel(fn, *args) -> bool:
    return "pallas_call" in str(jax.make_jaxpr(fn)(*args))


def test_dispatch_rules_and_multi_dim_weights(monkeypatch, caplog):
    rng = np.random.default_rng(3)
    node, _ = _encode("nvfp4", _rows(rng), in_shape=(4, K // 4))
    x = jnp.asarray(rng.standard_normal((2, 1, 4, K // 4)), jnp.float32)
    call = lambda impl: lambda a: api.quant_matmul(a, node, contract=2, impl=impl)  # noqa: E731
    monkeypatch.delenv(api.ENV_VAR, raising=False)
    assert _uses_kernel(call("kernel"), x)
    assert not _uses_kernel(call("ref"), x)
    assert _uses_kernel(call("auto"), x) == (jax.default_backend() == "gpu")
    got = call("kernel")(x)
    assert got.shape == (2, 1, N)
    _check(got, call("ref")(x), jnp.float32)
    monkeypatch.setenv(api.ENV_VAR, "kernel")
    assert _uses_kernel(call(None), x)
    assert not _uses_kernel(call(None), jnp.zeros((17, 4, K // 4)))  # prefill-sized: the reference
    odd, _ = _encode("nvfp4", _rows(rng, n=24))  # 24 rows: no power-of-two column block
    with caplog.at_level("WARNING", logger=api.__name__):
        assert not _uses_kernel(lambda a: api.quant_matmul(a, odd), jnp.zeros((2, K)))
    assert "does not read" in caplog.text
    monkeypatch.setenv(api.ENV_VAR, "ref")
    assert not _uses_kernel(call(None), x)
    monkeypatch.setenv(api.ENV_VAR, "fast")
    with pytest.raises(ValueError, match=api.ENV_VAR):
        call(None)(x)


# ---------------------------------------------------------------- the GPU lowering, checked on the CPU


def _abstract_node(fmt: str, k: int, n: int):
    spec = jax.ShapeDtypeStruct
    geo = dict(shape=(k, n), in_dims=1, expert_dims=0)
    if fmt == "fp8":
        return Fp8BlockWeight(weight=spec((n, k), jnp.float8_e4m3fn), scale=spec((n // 128, k // 128), jnp.float32),
                              **geo)
    if fmt == "nvfp4":
        return Nvfp4Weight(packed=spec((n, k // 2), jnp.uint8), block_scale=spec((n, k // 16), jnp.float8_e4m3fn),
                           global_scale=spec((), jnp.float32), **geo)
    if fmt == "mxfp4":
        return Mxfp4Weight(packed=spec((n, k // 2), jnp.uint8), scale=spec((n, k // 32), jnp.uint8), **geo)
    bits, group = (4, 128) if fmt == "int4" else (8, 64)
    values = spec((n, k // 2), jnp.uint8) if bits == 4 else spec((n, k), jnp.int8)
    zero = spec((n, k // group), jnp.int8) if bits == 4 else None
    return IntWeight(values=values, scale=spec((n, k // group), jnp.bfloat16), zero_point=zero, bits=bits,
                     group_size=group, **geo)


@pytest.mark.parametrize("rows,fmt,k,n", [(1, "fp8", 4096, 6144), (16, "fp8", 14336, 4096), (4, "nvfp4", 4096, 4096),
                                          (1, "mxfp4", 4096, 28672), (3, "int4", 4096, 4096), (1, "int8", 4096, 4096)])
def test_kernel_lowers_to_valid_triton_modules_at_llama_shapes(rows, fmt, k, n, verified_triton_lowering):
    """Lower for CUDA without a GPU and verify the Triton module (mistyped loop bounds, fill values for fp8
    loads and the like otherwise only fail inside XLA's GPU compile)."""
    verified = verified_triton_lowering
    node = _abstract_node(fmt, k, n)
    x = jax.ShapeDtypeStruct((rows, k), jnp.bfloat16)
    assert kernel.supports(rows, node)
    lowered = jax.jit(lambda a, w: kernel.quant_gemv(a, w)).trace(x, node).lower(lowering_platforms=("cuda",))
    assert verified == [True] and "quant_gemv" in lowered.as_text()


# ---------------------------------------------------------------- a tiny quantized model


def test_tiny_fp8_model_decodes_the_same_with_the_kernel_and_the_reference(monkeypatch):
    runtime_tests = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "runtime")
    model_tests = os.path.join(os.path.dirname(runtime_tests), "models")
    monkeypatch.syspath_prepend(runtime_tests)
    monkeypatch.syspath_prepend(model_tests)
    from engine_harness import MODEL_DIR, small_engine_config
    import paged_runner

    from dgjax.config import ModelConfig
    from dgjax.runtime.loading import load_model

    cfg = ModelConfig.from_dir(MODEL_DIR)
    ecfg = small_engine_config(quantize="fp8", load_format="dummy", decode_buckets=(1,), prefill_buckets=(16,))
    loaded = load_model(MODEL_DIR, cfg, ecfg, 64)
    assert isinstance(loaded.params.layers[0].attn.o, Fp8BlockWeight)
    prompt = [12, 400, 77, 1030, 5, 999, 63]
    results, traced = {}, {}
    real_gemv = kernel.quant_gemv

    def counted(*args, **kwargs):
        traced[impl] += 1
        return real_gemv(*args, **kwargs)

    monkeypatch.setattr(api.kernel, "quant_gemv", counted)
    step = paged_runner.step_logits.__wrapped__  # jitted afresh per impl below: jit caches traces per function
    for impl in ("ref", "kernel"):
        traced[impl] = 0
        monkeypatch.setenv(api.ENV_VAR, impl)  # read at trace time: trace afresh for each
        monkeypatch.setattr(paged_runner, "step_logits", jax.jit(lambda p, kv, b, cfg: step(p, kv, b, cfg),
                                                                 static_argnames=("cfg",)))
        runner = paged_runner.PagedRunner(cfg, loaded.params, loaded.mesh)
        tokens = runner.greedy("seq", prompt, 4)
        results[impl] = (tokens, runner.step([("seq", [tokens[-1]])], 1)[0])
    assert traced["ref"] == 0 and traced["kernel"] >= 7 * cfg.num_hidden_layers  # q k v o gate up down per layer
    assert results["kernel"][0] == results["ref"][0]
    np.testing.assert_allclose(results["kernel"][1], results["ref"][1], atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("rows,launch", [(2, L(64, 128, 4, unroll=3)), (4, L(64, 128, 2, unroll=2))])
def test_unrolled_launches_lower_at_glm_shapes(rows, launch, verified_triton_lowering):
    verified = verified_triton_lowering
    node = _abstract_node("fp8", 4096, 14336)  # glm-4.5-air q/k/v
    x = jax.ShapeDtypeStruct((rows, 4096), jnp.bfloat16)
    lowered = jax.jit(lambda a, w: kernel.quant_gemv(a, w, launch=launch)).trace(x, node).lower(
        lowering_platforms=("cuda",))
    assert verified == [True] and launch.tag() in lowered.as_text()


@pytest.mark.parametrize("launch", [L(64, 128, 4), L(64, 128, 4, unroll=2)])
def test_uneven_splits_lower_at_the_glm_shared_down_shape(launch, verified_triton_lowering):
    """The split's step count is a runtime value (3 or 2 of 11): the loop bounds must still verify."""
    node = _abstract_node("fp8", 1408, 4096)
    x = jax.ShapeDtypeStruct((2, 1408), jnp.bfloat16)
    lowered = jax.jit(lambda a, w: kernel.quant_gemv(a, w, launch=launch)).trace(x, node).lower(
        lowering_platforms=("cuda",))
    assert verified_triton_lowering == [True] and launch.tag() in lowered.as_text()


@pytest.mark.parametrize("magnitude,dot", [(m, "f16") for m in (1e-30, 1e-3, 1.0, 3e5, 1e30)]
                         + [(m, "swap") for m in (1e-30, 1e30)])
def test_fp8_f16_dot_scales_rows_into_f16_range(magnitude, dot, set_fp8_dot):
    """DGJAX_FP8_DOT=f16 (and swap, its weight-first form): x rows far outside f16's range either way (bf16
    holds 1e-30 and 1e30) are scaled by powers of two and back, so the product matches the reference at every
    magnitude, row by row."""
    set_fp8_dot(dot)
    rng = np.random.default_rng(5)
    node, _ = _encode("fp8", _rows(rng))
    x = (magnitude * rng.standard_normal((3, K))).astype(np.float32)
    x[1] *= 1e-4  # rows of different scales in one tile
    x = jnp.asarray(x, jnp.bfloat16)
    got = np.asarray(kernel.quant_gemv(x, node, launch=L(32, 64), interpret=True), np.float32)
    want = np.asarray(ref.quant_gemv(x, node), np.float32)
    assert np.isfinite(got).all()
    for r in range(3):
        np.testing.assert_allclose(got[r], want[r], rtol=2e-2, atol=1e-2 * np.abs(want[r]).max())


@pytest.mark.parametrize("magnitude", [1e-30, 1.0, 1e30])
def test_fp8_a8_dot_matches_the_reference_on_rounded_rows(magnitude, set_fp8_dot):
    """DGJAX_FP8_DOT=a8: x rounded to e4m3 per row and K step, an fp8 x fp8 dot: equal to the reference on x
    rounded by `fp8_block.round_activations` in groups of the K step (to the bf16 output's rounding), and
    measurably off the exact product (the rounding happened), at magnitudes f16 and e4m3 cannot hold."""
    set_fp8_dot("a8")
    rng = np.random.default_rng(6)
    node, _ = _encode("fp8", _rows(rng))
    x = (magnitude * rng.standard_normal((3, K))).astype(np.float32)
    x[1] *= 1e-4
    x = jnp.asarray(x, jnp.bfloat16)
    got = np.asarray(kernel.quant_gemv(x, node, launch=L(32, 64), interpret=True), np.float32)
    want = np.asarray(ref.quant_gemv(x, node, a8_group=64), np.float32)
    exact = np.asarray(ref.quant_gemv(x, node), np.float32)
    for r in range(3):
        scale = np.abs(exact[r]).max()
        assert np.abs(got[r] - want[r]).max() <= 8e-3 * scale
        assert np.abs(got[r] - exact[r]).max() >= 8e-3 * scale


@pytest.mark.parametrize("magnitude", [1e-30, 1.0, 1e30])
def test_fp8_a8x2_dot_matches_the_two_term_reference_and_is_near_exact(magnitude, set_fp8_dot):
    """DGJAX_FP8_DOT=a8x2: x as two e4m3 terms (value and rounded residual), two fp8 x fp8 dots on each weight
    tile: equal to the reference on x rounded the same way (`round_activations(..., terms=2)`), and within
    2e-3 of the largest output of the exact product, where one term (a8) is measurably further off."""
    rng = np.random.default_rng(6)
    node, _ = _encode("fp8", _rows(rng))
    x = (magnitude * rng.standard_normal((3, K))).astype(np.float32)
    x[1] *= 1e-4
    x = jnp.asarray(x, jnp.bfloat16)
    set_fp8_dot("a8x2")
    got = np.asarray(kernel.quant_gemv(x, node, launch=L(32, 64), interpret=True), np.float32)
    set_fp8_dot("a8")
    one = np.asarray(kernel.quant_gemv(x, node, launch=L(32, 64), interpret=True), np.float32)
    want = np.asarray(ref.quant_gemv(x, node, a8_group=64, a8_terms=2), np.float32)
    exact = np.asarray(ref.quant_gemv(x, node), np.float32)
    for r in range(3):
        scale = np.abs(exact[r]).max()
        assert np.abs(got[r] - want[r]).max() <= 8e-3 * scale  # the bf16 output's rounding
        assert np.abs(got[r] - exact[r]).max() <= 8e-3 * scale
        assert np.abs(one[r] - exact[r]).max() >= 2 * np.abs(got[r] - exact[r]).max()


@pytest.mark.parametrize("rows", [1, 2, tiles.FMA_MAX_ROWS, tiles.FMA_MAX_ROWS + 1])
def test_fp8_fma_products_match_the_reference(rows, set_fp8_dot):
    """DGJAX_FP8_DOT=fma: up to FMA_MAX_ROWS real rows are multiplied on the CUDA cores (each row picked out of
    the tile, products summed along K), more rows take the f16 dot; both match the reference row by row, rows
    of different scales in one tile."""
    set_fp8_dot("fma")
    rng = np.random.default_rng(7)
    node, _ = _encode("fp8", _rows(rng))
    x = rng.standard_normal((rows, K)).astype(np.float32)
    x[0] *= 1e-3
    x = jnp.asarray(x, jnp.bfloat16)
    got = np.asarray(kernel.quant_gemv(x, node, launch=L(32, 64), interpret=True), np.float32)
    want = np.asarray(ref.quant_gemv(x, node), np.float32)
    for r in range(rows):
        np.testing.assert_allclose(got[r], want[r], rtol=2e-2, atol=1e-2 * np.abs(want[r]).max())


def test_fp8_dot_mode_is_validated(set_fp8_dot):
    node, _ = _encode("fp8", _rows(np.random.default_rng(0)))
    set_fp8_dot("e5m2")
    with pytest.raises(ValueError, match="DGJAX_FP8_DOT"):
        kernel.quant_gemv(jnp.zeros((1, K), jnp.bfloat16), node, interpret=True)


# ---------------------------------------------------------------- the fused input RMSNorm


@pytest.mark.parametrize("late", [False, True])
@pytest.mark.parametrize("rows,dtype,fmt,launch", [
    (1, jnp.bfloat16, "fp8", None),  # split K: every split computes the whole rows' scale
    (3, jnp.float32, "fp8", L(32, 64)),
    (16, jnp.bfloat16, "nvfp4", None),  # packed: even and odd columns take their own norm entries
    (3, jnp.float32, "int4", L(32, 32, 2, unroll=3)),
])
def test_fused_norm_matches_norm_then_reference(rows, dtype, fmt, launch, late):
    """The kernel with a [layers, K] norm stack and a row: rms_norm(x, stack[row]) . w, the reference's, with
    the scale from a prologue or (late) summed alongside the weight stream and applied to the result."""
    rng = np.random.default_rng(rows + len(fmt))
    node, _ = _encode(fmt, _rows(rng))
    x = jnp.asarray(3 * rng.standard_normal((rows, K)), dtype)
    stack = jnp.asarray(1 + 0.5 * rng.standard_normal((4, K)), dtype)
    got = kernel.quant_gemv(x, node, stack, 2, launch=launch, eps=1e-5, late_norm=late, interpret=True)
    _check(got, ref.quant_gemv(x, node, stack[2], eps=1e-5), dtype)
    other = kernel.quant_gemv(x, node, stack, 1, launch=launch, eps=1e-5, late_norm=late, interpret=True)
    assert not np.allclose(np.asarray(other, np.float32), np.asarray(got, np.float32), atol=1e-2)  # the row matters


@pytest.mark.parametrize("late", [False, True])
def test_fused_norm_with_the_swapped_fp8_dot(late, set_fp8_dot):
    """DGJAX_FP8_DOT=swap keeps [bn, 16] accumulators: the late norm's row scales apply after they turn."""
    set_fp8_dot("swap")
    rng = np.random.default_rng(11)
    node, _ = _encode("fp8", _rows(rng))
    x = jnp.asarray(3 * rng.standard_normal((3, K)), jnp.bfloat16)
    x = x * jnp.asarray([[1.0], [1e-3], [40.0]], jnp.bfloat16)  # rows of different scales
    stack = jnp.asarray(1 + 0.5 * rng.standard_normal((4, K)), jnp.bfloat16)
    got = kernel.quant_gemv(x, node, stack, 2, launch=L(64, 64, 2), eps=1e-5, late_norm=late, interpret=True)
    _check(got, ref.quant_gemv(x, node, stack[2], eps=1e-5), jnp.bfloat16)


def test_api_takes_stacked_rows_on_both_paths(monkeypatch):
    """quant_matmul(norm=StackedRow) reads the row in place in the kernel and slices it for the reference."""
    from dgjax.pallas.stacked import StackedRow

    rng = np.random.default_rng(9)
    node, _ = _encode("fp8", _rows(rng))
    x = jnp.asarray(rng.standard_normal((2, K)), jnp.float32)
    stack = jnp.asarray(1 + 0.5 * rng.standard_normal((3, K)), jnp.float32)
    want = ref.quant_gemv(x, node, stack[1])
    monkeypatch.setenv(api.ENV_VAR, "kernel")
    via_kernel = api.quant_matmul(x, node, norm=StackedRow(stack, 1))
    monkeypatch.setenv(api.ENV_VAR, "ref")
    via_ref = api.quant_matmul(x, node, norm=StackedRow(stack, 1))
    _check(via_kernel, want, jnp.float32)
    np.testing.assert_array_equal(np.asarray(via_ref), np.asarray(want))
    with pytest.raises(ValueError, match="norm"):
        api.quant_matmul(x.reshape(2, 16, 16), node.replace(shape=(16, 16, N), in_dims=2), contract=2, norm=stack[0])


@pytest.mark.parametrize("fmt", ["fp8", "nvfp4"])
def test_fused_norm_lowers_to_one_kernel_for_every_row(fmt, verified_triton_lowering):
    """Two layers' rows give valid Triton modules and the very same kernel (the row is an argument)."""
    import re

    node = _abstract_node(fmt, 2048, 5120)
    x = jax.ShapeDtypeStruct((1, 2048), jnp.bfloat16)
    stack = jax.ShapeDtypeStruct((48, 2048), jnp.bfloat16)

    def two_layers(a, w, s):
        return [kernel.quant_gemv(a, w, s, row) for row in (3, 47)]

    text = jax.jit(two_layers).trace(x, node, stack).lower(lowering_platforms=("cuda",)).as_text()
    late = jax.jit(lambda a, w, s: kernel.quant_gemv(a, w, s, 1, late_norm=True)).trace(x, node, stack)
    assert "_latenorm" in late.lower(lowering_platforms=("cuda",)).as_text()
    assert verified_triton_lowering and all(verified_triton_lowering)
    assert len(set(re.findall(r'custom_call @__gpu\$xla\.gpu\.triton\(.*? ir = "(.*?)", ', text))) == 1
    assert "quant_gemv_" + fmt + "_rmsnorm" in text


def test_keep_splits_returns_the_partials_whose_sum_is_the_result():
    from dgjax.pallas.split_sums import SplitSums

    rng = np.random.default_rng(4)
    node, _ = _encode("fp8", _rows(rng))
    x = jnp.asarray(rng.standard_normal((2, K)), jnp.bfloat16)
    launch = L(32, 32, 4)
    sums = kernel.quant_gemv(x, node, launch=launch, keep_splits=True, interpret=True)
    assert isinstance(sums, SplitSums) and sums.parts.shape == (4, 2, N) and sums.parts.dtype == jnp.float32
    plain = kernel.quant_gemv(x, node, launch=launch, interpret=True)
    np.testing.assert_array_equal(np.asarray(sums.value(), np.float32), np.asarray(plain, np.float32))
    unsplit = kernel.quant_gemv(x, node, launch=L(32, 32), keep_splits=True, interpret=True)
    assert not isinstance(unsplit, SplitSums) and unsplit.dtype == jnp.bfloat16  # one split: the result itself


@pytest.mark.parametrize("fuse", ["all", "norm", "splits", "none"])
def test_fusions_follow_the_environment_and_keep_the_result(fuse, monkeypatch):
    """DGJAX_QUANT_GEMV_FUSE picks which fusions quant_matmul uses (the fused-norm kernel, SplitSums); every
    choice gives the norm-then-reference result."""
    from dgjax.pallas.split_sums import SplitSums
    from dgjax.pallas.stacked import StackedRow

    rng = np.random.default_rng(11)
    node, _ = _encode("fp8", _rows(rng))
    x = jnp.asarray(rng.standard_normal((2, K)), jnp.float32)
    stack = jnp.asarray(1 + 0.5 * rng.standard_normal((3, K)), jnp.float32)
    monkeypatch.setenv(api.ENV_VAR, "kernel")
    monkeypatch.setenv(api.FUSE_ENV_VAR, fuse)
    names = []
    real = kernel.quant_gemv
    monkeypatch.setattr(api.kernel, "quant_gemv", lambda *a, **k: names.append((a[2] is not None)) or real(*a, **k))
    out = api.quant_matmul(x, node, norm=StackedRow(stack, 2), keep_splits=True, launch=L(32, 32, 4))
    assert names == [fuse in ("all", "norm")]  # the kernel got the norm stack only where the norm is fused
    assert isinstance(out, SplitSums) == (fuse in ("all", "splits"))
    _check(out.value() if isinstance(out, SplitSums) else out, ref.quant_gemv(x, node, stack[2]), jnp.float32)
    monkeypatch.setenv(api.FUSE_ENV_VAR, "both")
    with pytest.raises(ValueError, match=api.FUSE_ENV_VAR):
        api.quant_matmul(x, node)


@pytest.mark.parametrize("mode", ["auto", "prefetch", "vector"])
def test_fp8_block_scale_as_a_scalar_or_per_column(mode, monkeypatch):
    """DGJAX_FP8_SCALE: a tile inside one scale block takes its scale as a scalar (auto; prefetch: loaded one K
    step ahead and carried), else per column; all match the reference where tiles sit inside a block (bn 32 on
    32-row blocks, also in an uneven 3-way K split and with the late norm) and where they span two (bn 64);
    an unknown mode is refused by name."""
    monkeypatch.setenv(tiles.FP8_SCALE_ENV, mode)
    jax.clear_caches()
    rng = np.random.default_rng(2)
    node, _ = _encode("fp8", _rows(rng))
    op = kernel.describe(node)
    assert tiles.one_scale_block(op, 32) == (mode != "vector") and not tiles.one_scale_block(op, 64)
    assert tiles.ScalePrefetch(op, 32).on == (mode == "prefetch") and not tiles.ScalePrefetch(op, 64).on
    x = jnp.asarray(rng.standard_normal((2, K)), jnp.bfloat16)
    want = np.asarray(ref.quant_gemv(x, node), np.float32)
    for launch in (L(32, 64, 2), L(32, 32, 3), L(64, 64)):
        got = np.asarray(kernel.quant_gemv(x, node, launch=launch, interpret=True), np.float32)
        np.testing.assert_allclose(got, want, rtol=2e-2, atol=1e-2 * np.abs(want).max())
    g = jnp.asarray(1.0 + 0.1 * rng.standard_normal(K), jnp.float32)
    want = np.asarray(ref.quant_gemv(x, node, g), np.float32)
    got = np.asarray(kernel.quant_gemv(x, node, g, launch=L(32, 64, 2), late_norm=True, interpret=True), np.float32)
    np.testing.assert_allclose(got, want, rtol=2e-2, atol=1e-2 * np.abs(want).max())
    monkeypatch.setenv(tiles.FP8_SCALE_ENV, "rows")
    with pytest.raises(ValueError, match=tiles.FP8_SCALE_ENV):
        tiles.one_scale_block(op, 32)
    jax.clear_caches()


def test_after_operands_order_the_kernel_without_changing_it(verified_triton_lowering):
    """`after` arrays reach the kernel as extra operands it never reads: same result, and the CUDA custom call
    takes them (so a dependency-built CUDA graph runs the GEMV after their producers)."""
    rng = np.random.default_rng(3)
    w, _ = _encode("fp8", _rows(rng))
    x = jnp.asarray(rng.standard_normal((2, K)), jnp.bfloat16)
    token = jnp.ones((4, 256), jnp.uint32)
    base = kernel.quant_gemv(x, w, interpret=True)
    got = kernel.quant_gemv(x, w, after=(token, token), interpret=True)
    np.testing.assert_array_equal(np.asarray(got, np.float32), np.asarray(base, np.float32))
    spec = jax.ShapeDtypeStruct
    lowered = jax.jit(lambda a, ww, t: kernel.quant_gemv(a, ww, after=(t,))).trace(
        spec((2, 2048), jnp.bfloat16), _abstract_node("fp8", 2048, 5120),
        spec((132, 256), jnp.uint32)).lower(lowering_platforms=("cuda",)).as_text()
    assert verified_triton_lowering and all(verified_triton_lowering)
    call = next(line for line in lowered.splitlines() if "quant_gemv_fp8" in line and "custom_call" in line)
    assert "tensor<132x256xui32>" in call


@pytest.mark.parametrize("launch", [None, L(32, 64, 2)])
def test_bf12_escapes_carry_the_whole_result_when_x_skips_the_outliers(launch):
    """Each row: an outlier 2**20 in input 0 (its window then starts at 2**6), 40 values ~1 below that window
    (escapes, exact values from the table) and zeros; x[:, 0] = 0, so the product is the escapes alone."""
    rng = np.random.default_rng(3)
    rows = np.zeros((N, K), np.float32)
    rows[:, 0] = 2.0**20
    for r in range(N):
        rows[r, rng.choice(np.arange(1, K), 40, replace=False)] = rng.standard_normal(40)
    node, dense = _encode("bf12", rows)
    assert int(np.count_nonzero(np.asarray(node.escape_bits))) >= 40 * N
    x = jnp.asarray(rng.standard_normal((3, K)), jnp.float32).at[:, 0].set(0.0)
    got = np.asarray(kernel.quant_gemv(x, node, launch=launch, interpret=True))
    want = np.asarray(x, np.float64) @ dense.T.astype(np.float64)
    assert np.abs(want).max() > 1.0
    np.testing.assert_allclose(got, want, atol=1e-4, rtol=0)
