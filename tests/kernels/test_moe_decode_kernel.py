"""The MoE decode kernel (interpreted on CPU) against ref.py, ref.py against a numpy loop, and the api's dispatch.

Experts no token picked hold NaN weights (and NaN fp8 scales): a kernel that reads any of them returns NaN.
"""

from __future__ import annotations

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from dgjax.pallas.moe_decode import api, kernel, ref, tiles
from dgjax.quant import int_group, nvfp4

from moe_weights import (  # tests/kernels is on sys.path (pytest's prepend import mode)
    _abstract_node, E, H, F, FP8_BLOCK, _np_moe, _dense, _fp8, _fp8_dense, INT4_GROUP, _node, _poison, _routing, _check,
    bf12_escape_experts,
)


# ---------------------------------------------------------------- ref.py against numpy


@pytest.mark.parametrize("fmt", ["plain", "fp8", "nvfp4", "int4"])
def test_reference_matches_a_numpy_loop(fmt):
    rng = np.random.default_rng(1)
    gate, up, down = _dense(rng)
    ids, weights = _routing(rng, 5, 3)
    ids[3] = ids[1]  # two tokens on the same experts
    x = rng.standard_normal((5, H)).astype(np.float32)
    if fmt == "plain":
        nodes, dense = (gate, up, down), (gate, up, down)
    elif fmt == "fp8":
        nodes = tuple(_fp8(w) for w in (gate, up, down))
        dense = tuple(_fp8_dense(n) for n in nodes)
    elif fmt == "nvfp4":
        packed = [nvfp4.quantize_np(np.swapaxes(w, 1, 2)) for w in (gate, up, down)]
        nodes = tuple(_node(fmt, w) for w in (gate, up, down))
        dense = tuple(np.swapaxes(nvfp4.dequantize_np(*p), 1, 2) for p in packed)
    else:
        nodes = tuple(_node(fmt, w) for w in (gate, up, down))
        quantized = [int_group.quantize_np(np.swapaxes(w, 1, 2), 4, INT4_GROUP, False) for w in (gate, up, down)]
        dense = tuple(np.swapaxes(int_group.dequantize_np(q, s, z, INT4_GROUP), 1, 2) for q, s, z in quantized)
    got = ref.moe_decode(jnp.asarray(x), jnp.asarray(ids), jnp.asarray(weights), *nodes)
    np.testing.assert_allclose(np.asarray(got), _np_moe(x, ids, weights, *dense), atol=2e-5, rtol=1e-5)


# ---------------------------------------------------------------- kernel against ref.py

L = kernel.Launch
CASES = [
    # tokens, top_k, dtype, weight format, config (None: the default choice)
    (1, 2, jnp.float32, "plain", None),
    (3, 2, jnp.float32, "plain", kernel.Config(L(16, 16, 2), L(16, 16, 2))),  # split K in both stages
    (5, 3, jnp.bfloat16, "plain", kernel.Config(L(32, 64), L(64, 32))),
    (16, 2, jnp.float32, "plain", kernel.Config(L(32, 32), L(32, 32))),  # the most tokens one tile holds
    (2, 4, jnp.bfloat16, "fp8", None),
    (6, 2, jnp.bfloat16, "fp8", kernel.Config(L(32, 16, 2), L(16, 32))),  # 2 scale blocks per column block
    (3, 2, jnp.bfloat16, "nvfp4", None),
    (2, 3, jnp.float32, "mxfp4", kernel.Config(L(16, 32, 2), L(32, 32))),
    (4, 2, jnp.bfloat16, "int4", None),  # asymmetric: zero points
    (2, 2, jnp.float32, "int8", kernel.Config(L(32, 64), L(64, 32))),
    # unrolled K loops (a remainder where the unroll does not divide the steps)
    (3, 2, jnp.bfloat16, "plain", kernel.Config(L(32, 16, unroll=3), L(16, 16, unroll=2))),  # 4 steps: 3 + 1
    (1, 3, jnp.float32, "plain", kernel.Config(L(32, 16, 2, unroll=2), L(16, 16, 2, unroll=3))),
    (2, 3, jnp.bfloat16, "fp8", kernel.Config(L(16, 16, 2, unroll=2), L(16, 16, unroll=2))),
    (3, 2, jnp.float32, "fp8", kernel.Config(L(16, 16, unroll=3), L(16, 32))),
    # bf12 (lossless; its rows hold escapes): row scales, escapes once per live slot and column block
    (1, 2, jnp.bfloat16, "bf12", None),
    (3, 2, jnp.float32, "bf12", kernel.Config(L(16, 32, 2), L(16, 32))),  # gate/up split: escapes on split 0
    (5, 3, jnp.bfloat16, "bf12", kernel.Config(L(32, 64), L(32, 32))),  # tokens sharing experts: dead slots
]


@pytest.mark.parametrize("tokens,top_k,dtype,fmt,config", CASES)
def test_kernel_matches_reference_reading_only_routed_experts(tokens, top_k, dtype, fmt, config):
    rng = np.random.default_rng(tokens * 10 + top_k)
    unrouted = (0, 5)
    gate, up, down = _dense(rng, poisoned=unrouted)
    ids, weights = _routing(rng, tokens, top_k, [e for e in range(E) if e not in unrouted])
    if tokens > 2:
        ids[-1] = ids[0][::-1]  # the same experts as token 0, in another order
    x = jnp.asarray(rng.standard_normal((tokens, H)), dtype)
    clean = _dense(np.random.default_rng(tokens * 10 + top_k))  # same draws, no NaN
    weights_in = [jnp.asarray(w) for w in (gate, up, down)]
    clean_in = [jnp.asarray(w) for w in clean]
    if fmt == "fp8":
        weights_in = [_fp8(w) for w in (gate, up, down)]
        clean_in = [_fp8(w) for w in clean]
    elif fmt != "plain":
        clean_in = [_node(fmt, w) for w in clean]
        weights_in = [_poison(n, np.asarray(unrouted)) for n in clean_in]
    elif dtype == jnp.bfloat16:
        weights_in = [w.astype(dtype) for w in weights_in]
        clean_in = [w.astype(dtype) for w in clean_in]
    args = (x, jnp.asarray(ids), jnp.asarray(weights))
    got = kernel.moe_decode(*args, *weights_in, config=config, interpret=True)
    _check(got, ref.moe_decode(*args, *clean_in), dtype)


def test_all_tokens_on_the_same_experts_are_computed_once_per_expert():
    rng = np.random.default_rng(7)
    gate, up, down = (jnp.asarray(w) for w in _dense(rng))
    tokens, top_k = 4, 3
    ids = np.tile(np.array([[6, 2, 4]], np.int32), (tokens, 1))
    ids[1] = [2, 4, 6]
    ids[3] = [4, 6, 2]
    weights = rng.uniform(0.1, 1.0, (tokens, top_k)).astype(np.float32)
    x = jnp.asarray(rng.standard_normal((tokens, H)), jnp.float32)
    args = (x, jnp.asarray(ids), jnp.asarray(weights), gate, up, down)
    config = kernel.Config(L(32, 32), L(32, 16, 2))
    parts = np.asarray(kernel.expert_partials(*args, config=config, interpret=True))
    assert parts.shape == (2, tokens * top_k, tokens, H)
    per_slot = np.abs(parts).sum(axis=(0, 2, 3))
    first = {int(e): a for a, e in reversed(list(enumerate(ids.reshape(-1))))}
    live = sorted(first.values())
    assert live == [0, 1, 2]  # token 0's slots hold the three experts; every later slot is a duplicate
    assert (per_slot[live] > 0).all() and (per_slot[3:] == 0).all()
    _check(parts.sum(axis=(0, 1)), ref.moe_decode(*args), jnp.float32)


def _outer_primitives(closed) -> list[str]:
    """Primitive names of a jaxpr and its nested calls, not looking inside pallas_call (the kernels)."""
    names = []
    for eqn in closed.jaxpr.eqns:
        names.append(eqn.primitive.name)
        inner = eqn.params.get("jaxpr")  # a jit's closed jaxpr
        if eqn.primitive.name != "pallas_call" and hasattr(inner, "jaxpr"):
            names += _outer_primitives(inner)
    return names


@pytest.mark.parametrize("fmt,dtype,gate_up", [("plain", jnp.float32, L(16, 16, 2)), ("plain", jnp.float32, L(16, 16, 4)),
                                               ("fp8", jnp.bfloat16, L(16, 16, 2))])
def test_split_gate_up_partials_are_finished_inside_the_down_stage(fmt, dtype, gate_up):
    """With K splits in the gate/up stage, the down stage sums the float32 partials, applies the activation
    and rounds as it loads h (no jnp finish between the two kernels), giving what the jnp finish gives."""
    rng = np.random.default_rng(gate_up.splits)
    dense = _dense(rng)
    weights_in = [_fp8(w) for w in dense] if fmt == "fp8" else [jnp.asarray(w, dtype) for w in dense]
    ids, weights = _routing(rng, 3, 2)
    x = jnp.asarray(rng.standard_normal((3, H)), dtype)
    args = (x, jnp.asarray(ids), jnp.asarray(weights), *weights_in)
    config = kernel.Config(gate_up, L(16, 16))
    inside = kernel.moe_decode(*args, config=config, interpret=True)
    outside = kernel.moe_decode(*args, config=config, interpret=True, act_in_down=False)
    tol = 1e-6 if dtype == jnp.float32 else 1e-2
    np.testing.assert_allclose(np.asarray(inside, np.float32), np.asarray(outside, np.float32), atol=tol, rtol=tol)
    _check(inside, ref.moe_decode(*args), dtype)

    def outer(fuse):
        closed = jax.make_jaxpr(lambda *a: kernel.moe_decode(*a, config=config, act_in_down=fuse))(*args)
        return _outer_primitives(closed)

    assert outer(True).count("pallas_call") == 2 and "logistic" not in outer(True)
    assert "logistic" in outer(False)  # the jnp finish the fusion removes


# ---------------------------------------------------------------- launch choices and dispatch


def test_default_launches_tile_real_expert_shapes_without_k_splits():
    """The H200 sweep's choice: no K split, 256-row K steps for gate/up where the weight's format allows
    them (fp8 stays on its 128-wide scale blocks), 128 for down."""
    for k, n in ((2048, 768), (4096, 1408), (7168, 2048)):  # qwen3-30b-a3b, glm-4.5-air, deepseek-v3 gate/up
        gate, down = kernel.Operand("plain", 128, k, n), kernel.Operand("plain", 128, n, k)
        g, d = kernel.default_launch(gate, kernel.GATE_UP_BLOCK_K), kernel.default_launch(down)
        kernel.check_launch(gate, g)
        kernel.check_launch(down, d)
        assert (g.block_n, g.block_k, g.splits) == (64, 256, 1)
        assert (d.block_k, d.splits) == (128, 1) and n % d.block_k == 0
    fp8 = kernel.Operand("fp8", 128, 2048, 768, num_arrays=2, scale_block=(128, 128), scale_grid=(6, 16))
    launch = kernel.default_launch(fp8, kernel.GATE_UP_BLOCK_K)
    kernel.check_launch(fp8, launch)
    assert launch.block_k == 128 and launch.splits == 1


@pytest.mark.parametrize("wide", ["on", "off"])
def test_fp8_experts_at_decode_widths_take_the_swept_launch(wide, monkeypatch):
    """1-2 tokens of fp8 experts (qwen3-30b-a3b, glm-4.5-air shapes): the wide-tile rule, or with
    DGJAX_MOE_FP8_WIDE=off FP8_SMALL_BATCH; more tokens, or a scale grid 128-wide steps do not fit: the
    split-to-fill rule."""
    monkeypatch.setenv(kernel.FP8_WIDE_ENV_VAR, wide)
    L128 = lambda s: L(128, 128, s)  # noqa: E731
    want = {(2048, 768): kernel.Config(L128(4), L128(2)), (4096, 1408): kernel.Config(L128(2), L128(2))}  # swept, s16
    for (h, f), wide_config in want.items():
        gate, down = _abstract_node("fp8", 128, h, f), _abstract_node("fp8", 128, f, h)
        for tokens in (1, 2):
            got = kernel.default_config(gate, down, tokens, 8)
            assert got == (wide_config if wide == "on" else kernel.FP8_SMALL_BATCH)
        assert kernel.default_config(gate, down, 4, 8) not in (wide_config, kernel.FP8_SMALL_BATCH)
    tiny = _fp8(np.zeros((E, H, F), np.float32))  # 16 x 32 scale blocks: 128-wide steps do not fit
    tiny_config = kernel.default_config(tiny, _fp8(np.zeros((E, F, H), np.float32)), 1, 2)
    assert tiny_config != kernel.FP8_SMALL_BATCH and tiny_config.gate_up.block_n < 128
    monkeypatch.setenv(kernel.FP8_WIDE_ENV_VAR, "sometimes")
    with pytest.raises(ValueError, match=kernel.FP8_WIDE_ENV_VAR):
        kernel.default_config(gate, down, 1, 8)


def test_down_splits_default_by_length_and_the_switch_keeps_two_steps_a_split(monkeypatch):
    """Unset: glm-4.5-air's 11-step down and qwen3-30b-a3b's 6 steps in 2 (>= LONG_DOWN_STEPS), a 5-step one
    unsplit.
    DGJAX_MOE_DOWN_SPLITS: glm in 1, 2 (6 + 5), 4 (3+3+3+2), 5 asked -> 4; qwen3: 3 (2+2+2), 4 asked -> 3;
    not a count: refused by name."""
    L128 = lambda s: L(128, 128, s)  # noqa: E731
    glm = _abstract_node("fp8", 128, 4096, 1408), _abstract_node("fp8", 128, 1408, 4096)
    qwen3 = _abstract_node("fp8", 128, 2048, 768), _abstract_node("fp8", 128, 768, 2048)
    monkeypatch.delenv(kernel.FP8_WIDE_ENV_VAR, raising=False)
    for value, glm_down, qwen3_down in (("", 2, 2), ("1", 1, 1), ("2", 2, 2), ("4", 4, 3), ("5", 4, 3)):
        monkeypatch.setenv(kernel.DOWN_SPLITS_ENV_VAR, value)
        assert kernel.default_config(*glm, 1, 8) == kernel.Config(L128(2), L128(glm_down))
        assert kernel.default_config(*qwen3, 2, 8) == kernel.Config(L128(4), L128(qwen3_down))
    monkeypatch.delenv(kernel.DOWN_SPLITS_ENV_VAR)
    assert kernel.down_splits(5) == 1 and kernel.down_splits(6) == 2
    monkeypatch.setenv(kernel.DOWN_SPLITS_ENV_VAR, "two")
    with pytest.raises(ValueError, match=kernel.DOWN_SPLITS_ENV_VAR):
        kernel.default_config(*glm, 1, 8)


@pytest.mark.parametrize("dot,wide", [("x", "off"), ("f16", "off"), ("f16", "on"), ("swap", "on"), ("a8", "on"),
                                      ("a8x2", "on"), ("fma", "on")])
def test_fp8_small_batch_launch_matches_the_reference(dot, wide, set_fp8_dot, monkeypatch):
    """The 1-2 token fp8 launches against ref.py on 128 x 128 scale blocks, interpreted: FP8_SMALL_BATCH
    (gate/up split in 2, each split 3 K steps under a 2-step unroll: a remainder) and the wide-tile rule
    (128 columns, gate/up split in 2); with the dot in x's dtype, in float16, and in float16 with the weight
    tile first (accumulators [bn, 16], turned at the end); a8 / a8x2: against the reference on x and h rounded
    per 128-wide K step as its fp8 x fp8 dot rounds them (one or two e4m3 terms)."""
    set_fp8_dot(dot)
    monkeypatch.setenv(kernel.FP8_WIDE_ENV_VAR, wide)
    e, h, f, top_k = 4, 768, 384, 2
    small = kernel.FP8_SMALL_BATCH.gate_up
    assert (h // small.block_k // small.splits) % small.unroll == 1
    rng = np.random.default_rng(3)
    w = lambda *s: (0.1 * rng.standard_normal(s)).astype(np.float32)  # noqa: E731
    block = (128, 128)
    gate, up, down = _fp8(w(e, h, f), block), _fp8(w(e, h, f), block), _fp8(w(e, f, h), block)
    want = kernel.Config(L(128, 128, 2), L(128, 128, 1)) if wide == "on" else kernel.FP8_SMALL_BATCH
    assert kernel.default_config(gate, down, 2, top_k) == want
    ids = np.array([[3, 1], [3, 1]], np.int32)  # the padding row of a width-2 tick routes like the real row
    weights = np.array([[0.7, 0.3], [0.0, 0.0]], np.float32)
    x = jnp.asarray(rng.standard_normal((2, h)), jnp.bfloat16)
    args = (x, jnp.asarray(ids), jnp.asarray(weights), gate, up, down)
    a8 = dict(a8_groups=(128, 128), a8_terms=2 if dot == "a8x2" else 1) if dot.startswith("a8") else {}
    _check(kernel.moe_decode(*args, interpret=True), ref.moe_decode(*args, **a8), jnp.bfloat16)


@pytest.mark.parametrize("config", [kernel.Config(L(128, 128, 2), L(128, 128, 2)),
                                    kernel.Config(L(128, 128, 3), L(128, 128, 1))])
def test_fp8_scales_loaded_a_step_ahead_match_the_reference(config, monkeypatch):
    """DGJAX_FP8_SCALE=prefetch: both stages carry each K step's scalar scales from the step before (gate and up
    apart), through even and uneven splits (down: 3 steps in 2 splits) and dead slots (an expert two tokens
    share); the result equals ref.py."""
    monkeypatch.setenv(tiles.FP8_SCALE_ENV, "prefetch")
    jax.clear_caches()
    e, h, f = 4, 768, 384
    rng = np.random.default_rng(6)
    w = lambda *s: (0.1 * rng.standard_normal(s)).astype(np.float32)  # noqa: E731
    gate, up, down = (_fp8(a, (128, 128)) for a in (w(e, h, f), w(e, h, f), w(e, f, h)))
    assert tiles.ScalePrefetch(kernel.describe(gate), 128).on
    ids = np.array([[3, 1], [0, 1], [2, 3]], np.int32)
    weights = np.array([[0.7, 0.3], [0.5, 0.5], [0.2, 0.8]], np.float32)
    x = jnp.asarray(rng.standard_normal((3, h)), jnp.bfloat16)
    args = (x, jnp.asarray(ids), jnp.asarray(weights), gate, up, down)
    _check(kernel.moe_decode(*args, config=config, interpret=True), ref.moe_decode(*args), jnp.bfloat16)
    jax.clear_caches()


def test_quantized_experts_split_k_until_the_gpu_is_busy():
    """Other quantized experts (and fp8 beyond 2 tokens) keep the split-to-fill rule."""
    h200 = 2 * 132
    fp8 = kernel.Operand("fp8", 128, 2048, 768, num_arrays=2, scale_block=(128, 128), scale_grid=(6, 16))
    for tokens in (1, 4, 16):
        live = kernel.expected_live_slots(128, 8, tokens)
        launch = kernel.split_launch(fp8, live, h200)
        kernel.check_launch(fp8, launch)
        programs = live * (768 // launch.block_n) * launch.splits
        assert programs >= h200 or launch.splits == kernel.MAX_SPLITS
        assert programs < 4 * h200 or launch.splits == 1  # no splits beyond what fills the GPU
    assert kernel.expected_live_slots(128, 8, 1) == 8
    assert 8 < kernel.expected_live_slots(128, 8, 16) < 128


@pytest.mark.parametrize("tokens,top_k", [(1, 2), (3, 2)])
def test_uneven_k_splits_match_the_reference(tokens, top_k):
    """K steps that splits do not cut evenly (gate/up: 3 steps in 2 splits, 2 + 1; down: 5 in 2, 3 + 2; as
    glm-4.5-air's down has 11 steps of 128): the last split runs what is left, dead slots none. Unrouted
    experts are NaN, so a dead slot or a step past K that reads a weight shows."""
    rng = np.random.default_rng(40 + tokens)
    e, h, f = 6, 48, 80
    unrouted = [1, 4]
    gate, up, down = (rng.standard_normal(s).astype(np.float32) * 0.2 for s in ((e, h, f), (e, h, f), (e, f, h)))
    ids, weights = _routing(rng, tokens, top_k, [x for x in range(e) if x not in unrouted])
    x = jnp.asarray(rng.standard_normal((tokens, h)), jnp.float32)
    args = (x, jnp.asarray(ids), jnp.asarray(weights))
    want = ref.moe_decode(*args, *(jnp.asarray(w) for w in (gate, up, down)))
    for w in (gate, up, down):
        w[unrouted] = np.nan
    config = kernel.Config(L(16, 16, 2), L(16, 16, 2))
    assert kernel.launch_fits(kernel.describe(jnp.asarray(down)), config.down)
    got = kernel.moe_decode(*args, *(jnp.asarray(w) for w in (gate, up, down)), config=config, interpret=True)
    _check(got, want, jnp.float32)


def test_uneven_k_split_lowers_at_glm_expert_shapes(verified_triton_lowering):
    """glm-4.5-air's experts (4096 -> 1408 -> 4096, fp8): down's 11 steps of 128 in 2 splits (6 + 5)."""
    spec = jax.ShapeDtypeStruct
    gate, down = _abstract_node("fp8", 128, 4096, 1408), _abstract_node("fp8", 128, 1408, 4096)
    args = (spec((2, 4096), jnp.bfloat16), spec((2, 8), jnp.int32), spec((2, 8), jnp.float32), gate, gate, down)
    config = kernel.Config(L(128, 128, 2), L(128, 128, 2))
    text = jax.jit(lambda *a: kernel.moe_decode(*a, config=config)).trace(*args).lower(
        lowering_platforms=("cuda",)).as_text()
    assert verified_triton_lowering == [True, True] and "moe_down_fp8_t2_bn128_bk128_s2" in text


def test_bad_launch_knobs_are_rejected():
    op = kernel.Operand("fp8", 8, 64, 32, num_arrays=2, scale_block=FP8_BLOCK, scale_grid=(2, 2))
    with pytest.raises(ValueError):
        kernel.check_launch(op, L(64, 32))  # 64 columns do not tile 32
    with pytest.raises(ValueError):
        kernel.check_launch(op, L(32, 64))  # a K step across two fp8 scale blocks
    with pytest.raises(ValueError):
        kernel.check_launch(op, L(16, 16, 3))  # 4 K steps in 3 splits: the third would run none


def _uses_kernel(fn, *args) -> bool:
    return "pallas_call" in str(jax.make_jaxpr(fn)(*args))


def test_dispatch_rules(monkeypatch, caplog):
    rng = np.random.default_rng(3)
    gate, up, down = (jnp.asarray(w) for w in _dense(rng))
    ids, weights = _routing(rng, 2, 2)
    x = jnp.asarray(rng.standard_normal((2, H)), jnp.float32)
    args = (x, jnp.asarray(ids), jnp.asarray(weights))
    call = lambda impl: lambda *a: api.moe_decode(*a, gate, up, down, "silu", impl=impl)  # noqa: E731
    monkeypatch.delenv(api.ENV_VAR, raising=False)
    assert _uses_kernel(call("kernel"), *args)
    assert not _uses_kernel(call("ref"), *args)
    assert _uses_kernel(call("auto"), *args) == (jax.default_backend() == "gpu")
    monkeypatch.setenv(api.ENV_VAR, "kernel")
    assert _uses_kernel(call(None), *args)
    many = (jnp.zeros((17, H)), jnp.zeros((17, 2), jnp.int32), jnp.ones((17, 2)))
    with caplog.at_level("WARNING", logger=api.__name__):
        assert not _uses_kernel(call(None), *many)  # beyond one row tile: the reference, loudly
    assert "does not support" in caplog.text
    assert not api.use_kernel(2, gate, up, down, "gelu", "kernel")
    monkeypatch.setenv(api.ENV_VAR, "ref")
    assert not _uses_kernel(call(None), *args)
    monkeypatch.setenv(api.ENV_VAR, "fast")
    with pytest.raises(ValueError, match=api.ENV_VAR):
        api.moe_decode(*args, gate, up, down)


# ---------------------------------------------------------------- the GPU lowering, checked on the CPU


@pytest.mark.parametrize("tokens,fmt,config,fp8_dot", [
    (1, "plain", None, "x"), (16, "plain", None, "x"), (3, "fp8", None, "x"), (1, "nvfp4", None, "x"),
    (2, "mxfp4", None, "x"), (4, "int4", None, "x"), (1, "int8", None, "x"),
    (2, "fp8", None, "x"), (2, "fp8", None, "f16"), (3, "fp8", None, "f16"),  # FP8_SMALL_BATCH; split-to-fill
    (2, "fp8", None, "swap"), (3, "fp8", None, "swap"), (2, "fp8", None, "fma"),
    (2, "fp8", kernel.Config(L(32, 128, 2, unroll=2), L(64, 128, unroll=4)), "x"),  # 6 down steps: 4 + 2
    (1, "plain", kernel.Config(L(32, 256, unroll=3), L(64, 64)), "x"),
    (2, "bf12", None, "x"), (4, "bf12", None, "x"),
])
def test_kernel_lowers_to_valid_triton_modules_at_qwen3_moe_shapes(tokens, fmt, config, fp8_dot, set_fp8_dot,
                                                                   verified_triton_lowering):
    """Lower for CUDA without a GPU and verify every Triton module (catches e.g. mistyped loop bounds,
    which otherwise only fail inside XLA's GPU compile); fp8 with either DGJAX_FP8_DOT."""
    set_fp8_dot(fp8_dot)
    verified = verified_triton_lowering
    experts, embed, ffw, top_k = 128, 2048, 768, 8
    spec = jax.ShapeDtypeStruct
    gate, down = _abstract_node(fmt, experts, embed, ffw), _abstract_node(fmt, experts, ffw, embed)
    args = (spec((tokens, embed), jnp.bfloat16), spec((tokens, top_k), jnp.int32),
            spec((tokens, top_k), jnp.float32), gate, gate, down)
    assert kernel.supports(tokens, gate, gate, down, "silu")
    lowered = jax.jit(lambda *a: kernel.moe_decode(*a, config=config)).trace(*args).lower(lowering_platforms=("cuda",))
    used = config or kernel.default_config(gate, down, tokens, top_k)
    assert verified == [True, True] and f"moe_gate_up_{fmt}_t{tokens}_{used.gate_up.tag()}" in lowered.as_text()
    jaxpr = str(jax.make_jaxpr(lambda *a: kernel.moe_decode(*a, config=config))(*args))
    assert bool(re.search(r"(?<!b)f16\[", jaxpr)) == (fmt == "fp8" and fp8_dot != "x")  # float16 tiles only if asked


@pytest.mark.parametrize("config", [None, kernel.Config(L(16, 32, 2), L(32, 32))])
def test_bf12_experts_escapes_carry_the_whole_result_when_x_skips_the_outliers(config):
    """moe_weights.bf12_escape_experts with x[:, 0] = 0: both stages' products are their escapes alone, added once
    per live slot and column block (split or not), scaled per row and summed over the routed experts."""
    rng = np.random.default_rng(11)
    nodes, dense = bf12_escape_experts(rng)
    ids, weights = _routing(rng, 3, 2)
    ids[2] = ids[0]  # a token on the same experts: dead slots must add nothing
    x = rng.standard_normal((3, H)).astype(np.float32)
    x[:, 0] = 0.0
    got = kernel.moe_decode(jnp.asarray(x), jnp.asarray(ids), jnp.asarray(weights), *nodes, config=config,
                            interpret=True)
    want = _np_moe(x, ids, weights, *dense)
    assert np.abs(want).max() > 1.0
    np.testing.assert_allclose(np.asarray(got), want, atol=2e-4 * np.abs(want).max(), rtol=0)


def test_bf12_down_stage_refuses_unsummed_gate_up_partials():
    """act_in_down asks the down stage to finish h from split partials; bf12's escapes read h as stored, so
    moe_decode quietly keeps the separate finish and down_stage refuses the partials."""
    rng = np.random.default_rng(2)
    nodes = [_node("bf12", w) for w in _dense(rng)]
    ids, weights = _routing(rng, 2, 2)
    x = jnp.asarray(rng.standard_normal((2, H)), jnp.float32)
    args = (x, jnp.asarray(ids), jnp.asarray(weights), *nodes)
    cfg = kernel.Config(L(16, 32, 2), L(16, 32))
    _check(kernel.moe_decode(*args, config=cfg, interpret=True, act_in_down=True), ref.moe_decode(*args),
           jnp.float32)
    parts = kernel.gate_up_stage(x, jnp.asarray(ids).reshape(-1), nodes[0], nodes[1], cfg.gate_up, True,
                                 act_in_down=True)
    with pytest.raises(ValueError, match="act_in_down"):
        kernel.down_stage(parts, jnp.asarray(ids).reshape(-1), jnp.asarray(weights).reshape(-1), nodes[2], 2,
                          cfg.down, True)


def test_bf12_experts_refuse_float16_rows():
    """bf12 tiles meet x times 2**100, which float16 cannot hold: both MoE kernels refuse f16 rows by dtype."""
    from dgjax.pallas.moe_prefill import kernel as prefill_kernel

    nodes = [_node("bf12", w) for w in _dense(np.random.default_rng(3))]
    x = jnp.zeros((2, H), jnp.float16)
    with pytest.raises(ValueError, match="float16"):
        kernel.gate_up_stage(x, jnp.zeros((4,), jnp.int32), nodes[0], nodes[1], kernel.Launch(16, 32), True)
    with pytest.raises(ValueError, match="float16"):
        prefill_kernel.grouped_mlp(x, jnp.asarray([2] + [0] * (E - 1), jnp.int32), *nodes, interpret=True)
