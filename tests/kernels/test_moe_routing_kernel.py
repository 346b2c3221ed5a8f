"""The expert-selection kernel (interpreted on CPU, and lowered for CUDA) against ref.py, and its dispatch."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from dgjax.pallas.moe_routing import api, kernel, ref
from dgjax.pallas.moe_routing.ref import RoutingRule

QWEN3 = RoutingRule("softmax", 8, norm_topk_prob=True)
GLM45 = RoutingRule("sigmoid", 8, norm_topk_prob=True, routed_scaling_factor=2.5)


def _inputs(tokens, experts, seed, valid=None):
    rng = np.random.default_rng(seed)
    logits = jnp.asarray(rng.normal(size=(tokens, experts)) * 2.0, jnp.float32)
    bias = jnp.asarray(rng.normal(size=(experts,)) * 0.3, jnp.float32)
    valid = jnp.ones((tokens,), bool) if valid is None else jnp.asarray(valid)
    return logits, bias, valid


def _check(logits, bias, valid, rule, num_warps=kernel.DEFAULT_WARPS):
    got_ids, got_w = kernel.select_experts(logits, valid, bias, rule=rule, num_warps=num_warps, interpret=True)
    want_ids, want_w = ref.select_experts(logits, rule, bias, valid)
    np.testing.assert_array_equal(np.asarray(got_ids), np.asarray(want_ids))
    np.testing.assert_allclose(np.asarray(got_w), np.asarray(want_w), rtol=1e-6, atol=1e-7)
    assert got_ids.dtype == jnp.int32 and got_w.dtype == jnp.float32


@pytest.mark.parametrize("rule", [
    QWEN3, RoutingRule("softmax", 4), GLM45, RoutingRule("sigmoid", 2, routed_scaling_factor=1.5),
    RoutingRule("softmax", 1), RoutingRule("softmax", 10, norm_topk_prob=True),  # qwen3-next: 10 of 512
], ids=lambda r: f"{r.scoring}-k{r.top_k}-norm{int(r.norm_topk_prob)}-s{r.routed_scaling_factor}")
@pytest.mark.parametrize("tokens,experts", [(1, 128), (2, 128), (3, 160), (16, 64), (6, 512), (5, 16)])
def test_kernel_matches_reference(rule, tokens, experts):
    if rule.top_k > experts:
        pytest.skip("top_k above the expert count is not a routing")
    _check(*_inputs(tokens, experts, seed=tokens * 1000 + experts), rule)


@pytest.mark.parametrize("num_warps", [1, 2])
@pytest.mark.parametrize("tokens,experts,rule", [(2, 128, QWEN3), (3, 512, RoutingRule("softmax", 10, True)),
                                                 (2, 128, GLM45)])
def test_fewer_warps_rank_in_more_steps_and_select_alike(num_warps, tokens, experts, rule):
    """One or two warps take smaller comparison tiles (more loop steps: 512 experts at one warp rank in
    64 steps of 8 x 512), and pick the same experts with the same weights."""
    assert experts // max(1, kernel.RANK_TILE_PER_WARP * num_warps // experts) > 1
    _check(*_inputs(tokens, experts, seed=num_warps * 100 + tokens), rule, num_warps=num_warps)


@pytest.mark.parametrize("valid", [[False, True], [True, False, True, False], [False, False, True],
                                   [False] * 4])
@pytest.mark.parametrize("rule", [QWEN3, GLM45], ids=["softmax", "sigmoid"])
def test_padding_rows_take_the_first_valid_rows_experts_at_weight_zero(valid, rule):
    logits, bias, v = _inputs(len(valid), 128, seed=len(valid), valid=valid)
    _check(logits, bias, v, rule)
    ids, w = kernel.select_experts(logits, v, bias, rule=rule, interpret=True)
    first = int(np.argmax(valid))
    for t, ok in enumerate(valid):
        if not ok:
            assert (np.asarray(w[t]) == 0).all()
            np.testing.assert_array_equal(np.asarray(ids[t]), np.asarray(ids[first]))


def test_ties_go_to_the_lower_expert_like_lax_top_k():
    logits = jnp.asarray([[0.5, 2.0, 2.0, -1.0, 2.0, 0.5, 0.0, 0.0]], jnp.float32)
    for rule in (RoutingRule("softmax", 4), RoutingRule("sigmoid", 4)):
        ids, _ = kernel.select_experts(logits, jnp.ones((1,), bool), jnp.zeros((8,)), rule=rule, interpret=True)
        assert np.asarray(ids).tolist() == [[1, 2, 4, 0]]
        _check(logits, jnp.zeros((8,)), jnp.ones((1,), bool), rule)


def test_the_bias_steers_the_choice_but_not_the_weights():
    logits, _, valid = _inputs(4, 64, seed=7)
    bias = jnp.zeros((64,)).at[3].set(100.0)  # expert 3 always chosen; its weight is its unbiased score
    ids, w = kernel.select_experts(logits, valid, bias, rule=GLM45, interpret=True)
    assert (np.asarray(ids) == 3).any(axis=1).all()
    _check(logits, bias, valid, GLM45)
    assert float(jnp.max(w)) < 2.5 + 1e-6  # normalized weights times the scaling factor, not the bias


@pytest.mark.parametrize("tokens,experts,rule", [(2, 128, QWEN3), (16, 128, GLM45), (4, 512, RoutingRule(
    "softmax", 10, norm_topk_prob=True)), (6, 160, GLM45)])
@pytest.mark.parametrize("num_warps", [1, 4])
def test_kernel_lowers_to_a_valid_triton_module(tokens, experts, rule, num_warps, verified_triton_lowering):
    spec = jax.ShapeDtypeStruct
    args = (spec((tokens, experts), jnp.float32), spec((tokens,), jnp.bool_), spec((experts,), jnp.float32))
    lowered = jax.jit(lambda *a: kernel.select_experts(*a, rule=rule, num_warps=num_warps)).trace(*args).lower(
        lowering_platforms=("cuda",))
    assert verified_triton_lowering == [True] and f"_w{num_warps}" in lowered.as_text()


def test_warps_come_from_the_environment_and_are_checked(monkeypatch):
    logits, bias, valid = _inputs(2, 128, seed=5)
    monkeypatch.setenv(api.ENV_VAR, "kernel")
    monkeypatch.setenv(api.WARPS_ENV_VAR, "1")
    assert "moe_select_softmax_t2_e128_k8_w1" in str(jax.make_jaxpr(
        lambda a, b, c: api.select_experts(a, QWEN3, b, c))(logits, bias, valid))
    for bad in ("3", "0", "two"):
        monkeypatch.setenv(api.WARPS_ENV_VAR, bad)
        with pytest.raises(ValueError, match=api.WARPS_ENV_VAR):
            api.select_experts(logits, QWEN3, bias, valid)


def test_dispatch(monkeypatch):
    logits, bias, valid = _inputs(4, 128, seed=3)
    monkeypatch.delenv(api.ENV_VAR, raising=False)
    assert not api.use_kernel(4, 128, QWEN3) and not api.use_kernel(4, 128, GLM45)  # CPU: ref.py
    assert api.use_kernel(4, 128, QWEN3, impl="kernel")
    assert not api.use_kernel(17, 128, QWEN3, impl="kernel")  # prefill chunks: ref.py
    grouped = RoutingRule("sigmoid", 8, n_group=8, topk_group=4)
    assert not api.use_kernel(4, 256, grouped, impl="kernel") and not kernel.supports(4, 256, grouped)
    assert kernel.supports(4, 256, RoutingRule("sigmoid", 8, n_group=8, topk_group=8))  # all groups kept
    monkeypatch.setenv(api.ENV_VAR, "kernel")
    jaxpr = str(jax.make_jaxpr(lambda a, b, c: api.select_experts(a, QWEN3, b, c))(logits, bias, valid))
    assert "pallas_call" in jaxpr
    got = api.select_experts(logits, QWEN3, None, None)
    want = ref.select_experts(logits, QWEN3)
    np.testing.assert_array_equal(np.asarray(got[0]), np.asarray(want[0]))
    monkeypatch.setenv(api.ENV_VAR, "nonsense")
    with pytest.raises(ValueError, match=api.ENV_VAR):
        api.select_experts(logits, QWEN3)


def test_auto_takes_the_kernel_on_the_gpu_for_sigmoid_routing_only(monkeypatch):
    """"auto" on a GPU backend: the kernel for GLM's sigmoid scoring (it won there, session 11), ref.py for
    softmax (even) and for group-limited selection (unsupported). Only the backend query is replaced."""
    monkeypatch.delenv(api.ENV_VAR, raising=False)
    monkeypatch.setattr(api.jax, "default_backend", lambda: "gpu")
    assert api.use_kernel(1, 128, GLM45) and api.use_kernel(2, 128, GLM45)
    assert not api.use_kernel(1, 128, QWEN3)
    assert not api.use_kernel(1, 256, RoutingRule("sigmoid", 8, n_group=8, topk_group=4))
    assert not api.use_kernel(17, 128, GLM45)  # prefill chunks
    monkeypatch.setenv(api.ENV_VAR, "ref")
    assert not api.use_kernel(1, 128, GLM45)


def test_fused_selects_like_auto_wherever_the_decode_kernel_does_not_take_it(monkeypatch):
    """DGJAX_MOE_ROUTING=fused asks the MoE decode kernel to select (moe_decode/routed.py); for a standalone
    selection (prefill chunks, reference experts) it is "auto": the kernel for sigmoid on a GPU only."""
    monkeypatch.setenv(api.ENV_VAR, "fused")
    assert api.fused_requested() and not api.fused_requested("auto")
    assert not api.use_kernel(1, 128, GLM45)  # CPU
    monkeypatch.setattr(api.jax, "default_backend", lambda: "gpu")
    assert api.use_kernel(1, 128, GLM45) and not api.use_kernel(1, 128, QWEN3)
