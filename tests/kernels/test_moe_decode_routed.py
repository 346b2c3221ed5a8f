"""The MoE decode kernel selecting its own experts in the gate/up stage (moe_decode.routed, interpreted on CPU):
the ids and weights moe_routing.ref selects, and the output moe_decode.ref gives with them, reading only the
selected experts (the others hold NaN: reading one gives NaN), each once when tokens share experts."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from dgjax.pallas.launch import Launch as L
from dgjax.pallas.moe_decode import kernel, ref, routed
from dgjax.pallas.moe_routing import ref as routing_ref
from dgjax.pallas.moe_routing.ref import RoutingRule

from moe_weights import E, H, _check, _dense, _fp8  # tests/kernels is on sys.path

QWEN3_LIKE = RoutingRule("softmax", 2, norm_topk_prob=True)
RULES = [QWEN3_LIKE, RoutingRule("softmax", 3), RoutingRule("sigmoid", 2, norm_topk_prob=True, routed_scaling_factor=2.5)]
UNROUTED = (0, 5)  # NaN weights; their logits lose every ranking


def _inputs(rng, tokens, same_rows=False):
    logits = rng.normal(size=(tokens, E)).astype(np.float32) * 2.0
    if same_rows and tokens > 1:
        logits[-1] = logits[0]  # the last token picks token 0's experts
    logits[:, list(UNROUTED)] = -30.0
    bias = (rng.normal(size=(E,)) * 0.3).astype(np.float32)
    bias[list(UNROUTED)] = -10.0  # sigmoid scoring ranks sigmoid(logit) + bias
    return jnp.asarray(logits), jnp.asarray(bias)


@pytest.mark.parametrize("rule", RULES, ids=lambda r: f"{r.scoring}-k{r.top_k}-norm{int(r.norm_topk_prob)}")
@pytest.mark.parametrize("tokens,valid,same_rows", [
    (1, None, False), (2, None, False), (2, [True, False], False), (3, None, True), (3, [False, True, True], False),
])
def test_routed_kernel_selects_and_computes_like_the_references(rule, tokens, valid, same_rows):
    rng = np.random.default_rng(tokens * 7 + rule.top_k)
    logits, bias = _inputs(rng, tokens, same_rows)
    valid = jnp.ones((tokens,), bool) if valid is None else jnp.asarray(valid)
    gate, up, down = _dense(rng, poisoned=UNROUTED)
    clean = [jnp.asarray(np.nan_to_num(w, nan=0.0)) for w in (gate, up, down)]
    x = jnp.asarray(rng.standard_normal((tokens, H)), jnp.float32)
    out, ids, wts = routed.moe_decode_routed(x, logits, valid, bias, *map(jnp.asarray, (gate, up, down)),
                                             rule=rule, interpret=True)
    want_ids, want_w = routing_ref.select_experts(logits, rule, bias, valid)
    np.testing.assert_array_equal(np.asarray(ids), np.asarray(want_ids))
    np.testing.assert_allclose(np.asarray(wts), np.asarray(want_w), rtol=1e-6, atol=1e-7)
    _check(out, ref.moe_decode(x, want_ids, want_w, *clean), jnp.float32)


@pytest.mark.parametrize("config", [kernel.Config(L(16, 16, 2), L(16, 32)), kernel.Config(L(32, 32), L(32, 16, 2))])
def test_split_and_fp8_launches_too(config):
    """K-split gate/up (the jnp finish of its partials), a split down, fp8 experts in bf16 rows."""
    rng = np.random.default_rng(3)
    logits, bias = _inputs(rng, 2)
    valid = jnp.asarray([True, False])
    dense = _dense(rng)
    x = jnp.asarray(rng.standard_normal((2, H)), jnp.bfloat16)
    experts = [_fp8(w) for w in dense]
    out, ids, wts = routed.moe_decode_routed(x, logits, valid, bias, *experts, rule=QWEN3_LIKE, config=config,
                                             interpret=True)
    want_ids, want_w = routing_ref.select_experts(logits, QWEN3_LIKE, bias, valid)
    np.testing.assert_array_equal(np.asarray(ids), np.asarray(want_ids))
    _check(out, ref.moe_decode(x, want_ids, want_w, *experts), jnp.bfloat16)


@pytest.mark.parametrize("scoring,h,f", [("softmax", 2048, 768), ("sigmoid", 4096, 1408)])  # qwen3, glm-4.5-air
def test_lowers_to_a_valid_triton_module_at_model_shapes(scoring, h, f, verified_triton_lowering):
    from dgjax.quant import Fp8BlockWeight

    spec = jax.ShapeDtypeStruct
    e = 128
    node = lambda i, o: Fp8BlockWeight(weight=spec((e, o, i), jnp.float8_e4m3fn),  # noqa: E731
                                       scale=spec((e, o // 128, i // 128), jnp.float32), shape=(e, i, o),
                                       in_dims=1, expert_dims=1)
    rule = RoutingRule(scoring, 8, norm_topk_prob=True)
    args = (spec((2, h), jnp.bfloat16), spec((2, e), jnp.float32), spec((2,), jnp.bool_), spec((e,), jnp.float32),
            node(h, f), node(h, f), node(f, h))
    text = jax.jit(lambda *a: routed.moe_decode_routed(*a, rule=rule)).trace(*args).lower(
        lowering_platforms=("cuda",)).as_text()
    assert verified_triton_lowering == [True, True] and f"moe_gate_up_routed_{scoring}_fp8_t2" in text
