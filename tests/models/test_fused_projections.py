"""Fused q/k/v and gate/up weights (dgjax.models.fused) against transformers, and the fused layout."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from dense_cases import NEW_TOKENS, PROMPT
from paged_runner import PagedRunner

from dgjax import sharding
from dgjax.models import blocks
from dgjax.models.fused import fuse_projections


def _count_fused(params) -> tuple[int, int]:
    nodes = jax.tree_util.tree_leaves(
        params, is_leaf=lambda n: isinstance(n, (blocks.AttentionParams, blocks.MLPParams)))
    qkv = sum(isinstance(n, blocks.AttentionParams) and n.qkv is not None and n.q is None for n in nodes)
    gate_up = sum(isinstance(n, blocks.MLPParams) and n.gate_up is not None and n.gate is None for n in nodes)
    return qkv, gate_up


def test_fused_model_matches_transformers(dense_case):
    fused = fuse_projections(dense_case.params, dense_case.mesh, sharding.DEFAULT_RULES)
    layers = dense_case.cfg.num_hidden_layers
    assert _count_fused(fused) == (layers, layers)
    runner = PagedRunner(dense_case.cfg, fused, dense_case.mesh)
    logprobs = np.asarray(jax.nn.log_softmax(runner.prefill("seq", dense_case.hf_tokens), axis=-1))
    np.testing.assert_allclose(logprobs, dense_case.hf_logprobs, atol=1e-4, rtol=0)
    greedy = PagedRunner(dense_case.cfg, fused, dense_case.mesh, seed=1)
    assert PROMPT + greedy.greedy("seq", PROMPT, NEW_TOKENS) == dense_case.hf_tokens


def test_qkv_layout_groups_q_heads_with_their_kv_head():
    """Entry i of KV head j is q head j*group + i: the pairing transformers' repeat_kv uses."""
    e, h, kvh, d = 3, 6, 2, 4
    rng = np.random.default_rng(0)
    q, k, v = (jnp.asarray(rng.standard_normal(s), jnp.float32) for s in ((e, h, d), (e, kvh, d), (e, kvh, d)))
    p = blocks.AttentionParams(q=q, k=k, v=v, o=jnp.zeros((h, d, e)))
    qkv = np.asarray(fuse_projections(p, sharding.make_mesh(1), sharding.DEFAULT_RULES).qkv)
    assert qkv.shape == (e, kvh, h // kvh + 2, d)
    for head in range(h):
        np.testing.assert_array_equal(qkv[:, head // 3, head % 3], np.asarray(q)[:, head])
    np.testing.assert_array_equal(qkv[:, :, 3], np.asarray(k))
    np.testing.assert_array_equal(qkv[:, :, 4], np.asarray(v))
