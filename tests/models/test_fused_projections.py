"""Fused q/k/v and gate/up weights (dgjax.models.fused) against transformers, and the fused layout."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
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


@pytest.mark.parametrize("hf_config", ["qwen3_head_dim_32", "llama_head_dim_32"])
def test_fused_decode_kernel_path_matches_transformers(hf_config, tmp_path, monkeypatch):
    """Decode through the fused decode attention kernel (interpreted on the CPU) keeps greedy parity with
    transformers (head_dim 32: the kernel's rope segments need >= 16 columns)."""
    import torch
    import transformers

    from dense_cases import TINY
    from dgjax.checkpoint.loader import load_params
    from dgjax.config import ModelConfig

    cls = transformers.Qwen3Config if hf_config.startswith("qwen3") else transformers.LlamaConfig
    torch.manual_seed(0)
    hf_cfg = cls(**{**TINY, "hidden_size": 64, "num_attention_heads": 4, "head_dim": 32})
    model = transformers.AutoModelForCausalLM.from_config(hf_cfg, attn_implementation="eager", dtype=torch.float32)
    model.eval().save_pretrained(tmp_path)
    with torch.no_grad():
        want = model.generate(torch.tensor([PROMPT]), max_new_tokens=NEW_TOKENS, do_sample=False)[0].tolist()
    cfg = ModelConfig.from_dir(str(tmp_path))
    mesh = sharding.make_mesh(1)
    params = fuse_projections(load_params(str(tmp_path), cfg, "float32", mesh, sharding.DEFAULT_RULES),
                              mesh, sharding.DEFAULT_RULES)
    monkeypatch.setenv("DGJAX_ATTENTION", "kernel")
    runner = PagedRunner(cfg, params, mesh, seed=3)
    assert PROMPT + runner.greedy("seq", PROMPT, NEW_TOKENS) == want
