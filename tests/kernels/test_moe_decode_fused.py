"""The one-kernel MoE decode path (dgjax/pallas/moe_decode/fused.py), interpreted on CPU, against ref.py:
unrouted experts hold NaN weights, so reading one shows; repeated experts are computed once and the other
slots store zeros; every fp8 dot mode; the api's switch; a valid Triton lowering at qwen3-30b-a3b shapes."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from dgjax.pallas.moe_decode import api, fused, kernel, ref
from moe_weights import E, _abstract_node, _check, _dense, _fp8, _node, _poison, _routing  # tests/kernels is on sys.path

H = 64  # moe_weights' embedding (its ffw F is 32)


def _weights(fmt: str, dtype, rng, unrouted):
    """gate, up, down with NaN in the unrouted experts (the reference only ever takes the routed ones)."""
    gate, up, down = _dense(rng, poisoned=unrouted)
    if fmt == "fp8":
        return [_fp8(w, (16, 16)) for w in (gate, up, down)]  # 16-wide scale blocks: 2 ffw blocks of 16
    if fmt == "int8":
        return [_poison(_node("int8", np.nan_to_num(w)), np.asarray(unrouted)) for w in (gate, up, down)]
    return [jnp.asarray(w, dtype) for w in (gate, up, down)]


@pytest.mark.parametrize("tokens,top_k,dtype,fmt,dot", [
    (1, 2, jnp.float32, "plain", "f16"),
    (2, 2, jnp.bfloat16, "plain", "f16"),
    (2, 4, jnp.bfloat16, "fp8", "f16"),  # the engine's one-stream width
    (3, 2, jnp.bfloat16, "fp8", "x"),
    (2, 3, jnp.bfloat16, "fp8", "swap"),
    (2, 4, jnp.bfloat16, "fp8", "a8"),  # x and h rounded per 16-wide K step (the reference rounds alike)
    (2, 4, jnp.bfloat16, "fp8", "a8x2"),  # ... as two e4m3 terms
    (5, 2, jnp.float32, "int8", "f16"),
])
def test_fused_kernel_matches_reference(tokens, top_k, dtype, fmt, dot, set_fp8_dot):
    set_fp8_dot(dot)
    rng = np.random.default_rng(tokens * 7 + top_k)
    unrouted = (0, 5)
    weights_in = _weights(fmt, dtype, rng, unrouted)
    ids, weights = _routing(rng, tokens, top_k, [e for e in range(E) if e not in unrouted])
    if tokens > 1:
        ids[-1] = ids[0][::-1]  # the same experts as token 0: computed once, the repeats store zeros
    x = jnp.asarray(rng.standard_normal((tokens, H)), dtype)
    args = (x, jnp.asarray(ids), jnp.asarray(weights))
    g, _, d = (kernel.describe(w) for w in weights_in)
    assert fused.supports(tokens, *weights_in, "silu")
    bf, bn, bk = fused.launch_for(g, d)
    assert (bf, bn, bk) == ((16, 64, 16) if fmt == "fp8" else (32, 64, 64))
    a8 = dict(a8_groups=(bk, bf), a8_terms=2 if dot == "a8x2" else 1) if dot.startswith("a8") else {}
    _check(fused.moe_decode(*args, *weights_in, interpret=True), ref.moe_decode(*args, *weights_in, **a8), dtype)
    parts = fused.expert_partials(*args, *weights_in, interpret=True)
    assert parts.shape == (g.n // bf, tokens * top_k, tokens, H)
    first = {}
    for slot, e in enumerate(np.asarray(ids).reshape(-1)):
        first.setdefault(int(e), slot)
        if first[int(e)] != slot:  # a repeat of an expert: its partials are zeros, its weights were not read
            assert not np.asarray(parts[:, slot]).any()


def test_packed_formats_stay_on_the_two_stage_kernel():
    rng = np.random.default_rng(0)
    nodes = [_node("int4", w) for w in _dense(rng)]
    assert not fused.supports(2, *nodes, "silu")
    assert kernel.supports(2, *nodes, "silu")


def test_api_switch_routes_to_the_fused_kernel(monkeypatch):
    """DGJAX_MOE_FUSE=expert: the api's kernel path is the one-kernel version (its name in the jaxpr); the
    result still equals the reference; a bad value is refused."""
    rng = np.random.default_rng(4)
    gate, up, down = (jnp.asarray(w, jnp.float32) for w in _dense(rng))
    ids, weights = _routing(rng, 2, 2)
    args = (jnp.asarray(rng.standard_normal((2, H)), jnp.float32), jnp.asarray(ids), jnp.asarray(weights))
    monkeypatch.setenv(api.ENV_VAR, "kernel")
    for mode, name in (("expert", "moe_fused_plain"), ("none", "moe_down_plain")):
        monkeypatch.setenv(api.FUSE_ENV_VAR, mode)
        jaxpr = str(jax.make_jaxpr(lambda *a: api.moe_decode(*a, gate, up, down))(*args))
        assert name in jaxpr
        _check(api.moe_decode(*args, gate, up, down), ref.moe_decode(*args, gate, up, down), jnp.float32)
    monkeypatch.setenv(api.FUSE_ENV_VAR, "everything")
    with pytest.raises(ValueError, match=api.FUSE_ENV_VAR):
        api.moe_decode(*args, gate, up, down)


@pytest.mark.parametrize("fmt,dot", [("fp8", "f16"), ("fp8", "x"), ("plain", "f16")])
def test_fused_kernel_lowers_at_qwen3_moe_shapes(fmt, dot, set_fp8_dot, verified_triton_lowering):
    """Lower for CUDA without a GPU and verify the Triton module (qwen3-30b-a3b: 128 experts, 2048 x 768)."""
    set_fp8_dot(dot)
    gate, down = _abstract_node(fmt, 128, 2048, 768), _abstract_node(fmt, 128, 768, 2048)
    spec = jax.ShapeDtypeStruct
    args = (spec((2, 2048), jnp.bfloat16), spec((2, 8), jnp.int32), spec((2, 8), jnp.float32), gate, gate, down)
    lowered = jax.jit(lambda *a: fused.moe_decode(*a)).trace(*args).lower(lowering_platforms=("cuda",))
    assert verified_triton_lowering == [True] and f"moe_fused_{fmt}_t2_bn64_bk128" in lowered.as_text()
