"""The MoE router and expert compute against plain-numpy references written from the HF semantics."""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import struct

from dgjax.config import ModelConfig
from dgjax.models import moe

E, H, F, N = 8, 16, 12, 24


def _cfg(**kw) -> ModelConfig:
    base = dict(architecture="Glm4MoeForCausalLM", model_type="glm4_moe", vocab_size=32, hidden_size=H,
                intermediate_size=24, num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=1,
                head_dim=8, max_position_embeddings=64, num_experts=E, num_experts_per_tok=3,
                moe_intermediate_size=F)
    return ModelConfig(**{**base, **kw})


def _np_route(x, w, bias, cfg):
    """HF Qwen3MoeTopKRouter / Glm4MoeTopkRouter in numpy (float64), one token at a time."""
    logits = x.astype(np.float64) @ w.astype(np.float64)
    ids, weights = [], []
    for row in logits:
        if cfg.moe_scoring_func == "softmax":
            scores = np.exp(row - row.max())
            scores /= scores.sum()
            choice = scores
        else:
            scores = 1.0 / (1.0 + np.exp(-row))
            choice = scores + (bias if bias is not None else 0.0)
            per = E // cfg.n_group
            group_scores = [np.sort(choice[g * per:(g + 1) * per])[-2:].sum() for g in range(cfg.n_group)]
            kept = np.argsort(group_scores)[::-1][: cfg.topk_group]
            mask = np.zeros(E, bool)
            for g in kept:
                mask[g * per:(g + 1) * per] = True
            choice = np.where(mask, choice, -np.inf)
        top = np.argsort(choice, kind="stable")[::-1][: cfg.num_experts_per_tok]
        wt = scores[top]
        if cfg.norm_topk_prob:
            wt = wt / wt.sum()
        ids.append(top)
        weights.append(wt * cfg.routed_scaling_factor)
    return np.array(ids), np.array(weights)


def _route_inputs(seed=0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(N, H)).astype(np.float32)
    w = rng.normal(size=(H, E)).astype(np.float32) * 0.3
    bias = (rng.normal(size=(E,)) * 0.3).astype(np.float32)
    return x, w, bias


def _sorted_pairs(ids, weights):
    """(ids, weights) per token in ascending expert order (top-k order is not part of the contract)."""
    order = np.argsort(ids, axis=-1)
    return np.take_along_axis(ids, order, -1), np.take_along_axis(weights, order, -1)


@pytest.mark.parametrize("norm", [True, False])
def test_softmax_router_matches_reference(norm):
    cfg = _cfg(norm_topk_prob=norm)
    x, w, _ = _route_inputs()
    ids, weights = moe.route(moe.RouterParams(weight=jnp.asarray(w)), jnp.asarray(x), cfg)
    ref_ids, ref_w = _np_route(x, w, None, cfg)
    got_ids, got_w = _sorted_pairs(np.asarray(ids), np.asarray(weights))
    want_ids, want_w = _sorted_pairs(ref_ids, ref_w)
    np.testing.assert_array_equal(got_ids, want_ids)
    np.testing.assert_allclose(got_w, want_w, atol=1e-6, rtol=0)
    assert ids.dtype == jnp.int32 and weights.dtype == jnp.float32


def test_sigmoid_group_limited_router_with_bias_matches_reference_and_each_part_matters():
    cfg = _cfg(moe_scoring_func="sigmoid", moe_score_correction_bias=True, norm_topk_prob=True,
               routed_scaling_factor=2.5, n_group=4, topk_group=2)
    x, w, bias = _route_inputs(1)
    p = moe.RouterParams(weight=jnp.asarray(w), score_bias=jnp.asarray(bias))
    ids, weights = moe.route(p, jnp.asarray(x), cfg)
    got = _sorted_pairs(np.asarray(ids), np.asarray(weights))
    want = _sorted_pairs(*_np_route(x, w, bias, cfg))
    np.testing.assert_array_equal(got[0], want[0])
    np.testing.assert_allclose(got[1], want[1], atol=1e-6, rtol=0)
    # The inputs are such that dropping the group limit or the bias changes some token's experts.
    ungrouped = _sorted_pairs(*_np_route(x, w, bias, dataclasses.replace(cfg, n_group=1, topk_group=1)))[0]
    unbiased = _sorted_pairs(*_np_route(x, w, None, cfg))[0]
    assert (ungrouped != got[0]).any() and (unbiased != got[0]).any()


def _experts(seed=0, n_experts=E):
    rng = np.random.default_rng(seed)
    arr = lambda *s: (rng.normal(size=s) * 0.3).astype(np.float32)  # noqa: E731
    return moe.ExpertParams(gate=arr(n_experts, H, F), up=arr(n_experts, H, F), down=arr(n_experts, F, H))


def _np_experts(x, ids, weights, p):
    silu = lambda v: v / (1.0 + np.exp(-v))  # noqa: E731
    out = np.zeros_like(x, dtype=np.float64)
    for t in range(x.shape[0]):
        for j, e in enumerate(ids[t]):
            h = silu(x[t] @ p.gate[e]) * (x[t] @ p.up[e])
            out[t] += weights[t, j] * (h @ p.down[e])
    return out


@pytest.mark.parametrize("impl", ["ragged", "gather"])
def test_expert_paths_match_reference_with_idle_and_crowded_experts(impl):
    rng = np.random.default_rng(2)
    x = rng.normal(size=(N, H)).astype(np.float32)
    ids = rng.choice([1, 3, 4, 6], size=(N, 3)).astype(np.int32)  # experts 0, 2, 5, 7 get no tokens
    ids[:, 1] = (ids[:, 0] + 1) % E  # a token's experts are distinct, as top-k gives them
    ids[:, 2] = (ids[:, 0] + 3) % E
    weights = rng.uniform(0.1, 1.0, size=(N, 3)).astype(np.float32)
    p = _experts()
    p_dev = jax.tree_util.tree_map(jnp.asarray, p)
    got = moe.moe_experts(jnp.asarray(x), jnp.asarray(ids), jnp.asarray(weights), p_dev, "silu", impl=impl)
    np.testing.assert_allclose(np.asarray(got), _np_experts(x, ids, weights, p), atol=2e-5, rtol=0)


def test_auto_picks_gather_for_few_assignments_and_env_overrides(monkeypatch):
    monkeypatch.delenv(moe.ENV_VAR, raising=False)
    assert moe.resolve_impl(None, 8, 128) == "gather"
    assert moe.resolve_impl(None, 64, 128) == "ragged"
    monkeypatch.setenv(moe.ENV_VAR, "ragged")
    assert moe.resolve_impl(None, 1, 128) == "ragged"
    assert moe.resolve_impl("gather", 1024, 128) == "gather"
    monkeypatch.setenv(moe.ENV_VAR, "fast")
    with pytest.raises(ValueError, match="DGJAX_MOE"):
        moe.resolve_impl(None, 1, 128)


@struct.dataclass
class _PackedWeight:
    """Stands in for a quantized weight node the expert op does not know yet."""

    packed: jax.Array


def test_expert_matmul_rejects_unknown_weight_nodes_and_ambiguous_routing():
    x = jnp.ones((4, H))
    w = jnp.ones((E, H, F))
    with pytest.raises(NotImplementedError, match="_PackedWeight"):
        moe.expert_matmul(x, _PackedWeight(packed=w), expert_ids=jnp.zeros(4, jnp.int32))
    with pytest.raises(ValueError, match="exactly one"):
        moe.expert_matmul(x, w)
    with pytest.raises(ValueError, match="exactly one"):
        moe.expert_matmul(x, w, group_sizes=jnp.zeros(E, jnp.int32), expert_ids=jnp.zeros(4, jnp.int32))


def test_padding_rows_route_to_a_real_rows_experts_with_zero_weight_and_real_rows_keep_theirs():
    """A bucket's padding rows must not add experts to the step (the decode kernel reads every distinct
    routed expert), and masking them must leave the real rows' outputs exactly as they were."""
    cfg = _cfg(moe_scoring_func="softmax", norm_topk_prob=True)
    x, w, _ = _route_inputs(3)
    x = jnp.asarray(x[:4])
    valid = jnp.asarray([False, True, False, True])
    p = moe.MoEParams(router=moe.RouterParams(weight=jnp.asarray(w)),
                      experts=jax.tree_util.tree_map(jnp.asarray, _experts(4)))
    ids, weights = moe.route(p.router, x, cfg)
    assert len(set(np.asarray(ids[0]).tolist()) - set(np.asarray(ids[1::2]).ravel().tolist())) > 0
    m_ids, m_w = moe.route(p.router, x, cfg, valid)
    np.testing.assert_array_equal(np.asarray(m_ids[0]), np.asarray(ids[1]))  # the first real row's experts
    np.testing.assert_array_equal(np.asarray(m_ids[2]), np.asarray(ids[1]))
    np.testing.assert_array_equal(np.asarray(m_ids[1::2]), np.asarray(ids[1::2]))
    assert float(jnp.abs(m_w[0::2]).max()) == 0.0
    np.testing.assert_array_equal(np.asarray(m_w[1::2]), np.asarray(weights[1::2]))
    assert set(np.asarray(m_ids).ravel().tolist()) == set(np.asarray(ids[1::2]).ravel().tolist())
    for impl in ("ragged", "gather"):
        plain = moe.moe_block(p, x[None], cfg, impl=impl)[0]
        masked = moe.moe_block(p, x[None], cfg, impl=impl, valid=valid[None])[0]
        np.testing.assert_array_equal(np.asarray(masked[1::2]), np.asarray(plain[1::2]))


@pytest.mark.parametrize("n,e,k", [(1, 128, 8), (2, 160, 8), (16, 64, 6), (3, 8, 8)])
def test_rank_top_k_equals_lax_top_k_with_ties(n, e, k):
    """The decode-size top-k (ranks: two reductions, no sort) returns lax.top_k's values and ids exactly,
    including tied values (lower index first) and the whole row (k == e)."""
    from dgjax.pallas.moe_routing import ref

    rng = np.random.default_rng(e + k)
    x = rng.standard_normal((n, e)).astype(np.float32)
    x[:, 5:9] = x[:, [2]]  # ties inside the top and elsewhere
    x[0, 10:14] = 50.0
    xj = jnp.asarray(x)
    got_v, got_i = ref.top_k_by_rank(xj, k)
    want_v, want_i = jax.lax.top_k(xj, k)
    np.testing.assert_array_equal(np.asarray(got_i), np.asarray(want_i))
    np.testing.assert_array_equal(np.asarray(got_v), np.asarray(want_v))
    assert ref.top_k(xj, k)[1].shape == (n, k)


def test_rank_top_k_keeps_ids_in_range_on_nan_and_large_inputs_take_lax_top_k():
    from dgjax.pallas.moe_routing import ref

    x = jnp.asarray(np.full((2, 16), np.nan, np.float32))
    _, ids = ref.top_k_by_rank(x, 4)
    assert int(ids.min()) >= 0 and int(ids.max()) <= 15
    big = jnp.asarray(np.random.default_rng(0).standard_normal((128, 128)).astype(np.float32))  # 2M compares
    jaxpr = str(jax.make_jaxpr(lambda a: ref.top_k(a, 8))(big))
    assert "top_k" in jaxpr
    small = big[:2]
    assert "top_k" not in str(jax.make_jaxpr(lambda a: ref.top_k(a, 8))(small))


def test_both_padding_rules_route_alike_and_a_bad_rule_is_refused(monkeypatch):
    """DGJAX_ROUTING_PAD: padding rows ranking the first real row's logits ("logits", the default) and taking its
    ids afterwards ("ids") give the same experts and weights; anything else names the variable."""
    from dgjax.pallas.moe_routing import ref

    rng = np.random.default_rng(8)
    logits = jnp.asarray(rng.standard_normal((4, 16)), jnp.float32)
    valid = jnp.asarray([False, True, False, True])
    rule = ref.RoutingRule("softmax", 4, norm_topk_prob=True)
    got = {}
    for mode in ref.PAD_MODES:
        monkeypatch.setenv(ref.PAD_ENV_VAR, mode)
        got[mode] = ref.select_experts(logits, rule, None, valid)
    for a, b in zip(got["logits"], got["ids"]):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    np.testing.assert_array_equal(np.asarray(got["ids"][0][0]), np.asarray(got["ids"][0][1]))  # row 0 pads like row 1
    monkeypatch.setenv(ref.PAD_ENV_VAR, "both")
    with pytest.raises(ValueError, match=ref.PAD_ENV_VAR):
        ref.select_experts(logits, rule, None, valid)
