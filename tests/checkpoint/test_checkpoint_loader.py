"""load_params: dtype resolution, layout, progress/logging, and clear errors for mismatched checkpoints."""

from __future__ import annotations

import dataclasses
import logging
import shutil

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch
import transformers

from dgjax.checkpoint.loader import load_params
from dgjax.checkpoint.safetensors_io import SafetensorsFolder, write_safetensors
from dgjax.config import ModelConfig
from dgjax.sharding import DEFAULT_RULES, make_mesh


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory):
    torch.manual_seed(0)
    hf_cfg = transformers.Qwen2Config(vocab_size=32, hidden_size=16, intermediate_size=24, num_hidden_layers=1,
                                      num_attention_heads=4, num_key_value_heads=2, tie_word_embeddings=False)
    model = transformers.AutoModelForCausalLM.from_config(hf_cfg, dtype=torch.float32)
    path = tmp_path_factory.mktemp("tiny")
    model.save_pretrained(path)
    return path, {k: v.detach().clone() for k, v in model.state_dict().items()}


def _rewrite(src, dst, drop=(), add=None):
    """Copy a model folder with some tensors dropped and some added."""
    shutil.copy(src / "config.json", dst / "config.json")
    folder = SafetensorsFolder(str(src))
    tensors = {k: np.array(folder[k]) for k in folder if k not in drop}
    tensors.update(add or {})
    write_safetensors(str(dst / "model.safetensors"), tensors)
    return dst


def test_bfloat16_load_places_transposed_rounded_weights(tiny_dir, caplog):
    path, state = tiny_dir
    cfg = ModelConfig.from_dir(str(path))
    seen = []
    with caplog.at_level(logging.INFO, logger="dgjax.checkpoint"):
        params = load_params(str(path), cfg, "bfloat16", make_mesh(1), DEFAULT_RULES,
                             progress=lambda done, total, name: seen.append((done, total, name)))
    leaves = jax.tree_util.tree_leaves(params)
    assert {leaf.dtype for leaf in leaves} == {jnp.dtype(jnp.bfloat16)}
    assert [d for d, _, _ in seen] == list(range(1, len(leaves) + 1)) and seen[-1][1] == len(leaves)
    assert any("loaded" in r.message for r in caplog.records)
    hf_q = state["model.layers.0.self_attn.q_proj.weight"].to(torch.bfloat16).float().numpy()  # [H*D, E]
    q = np.asarray(params.layers[0].attn.q.astype(jnp.float32))  # [E, H, D]
    np.testing.assert_array_equal(q.reshape(cfg.hidden_size, -1).T, hf_q)
    hf_kb = state["model.layers.0.self_attn.k_proj.bias"].to(torch.bfloat16).float().numpy()
    np.testing.assert_array_equal(np.asarray(params.layers[0].attn.k_bias.astype(jnp.float32)).ravel(), hf_kb)


def test_auto_dtype_follows_config(tiny_dir):
    path, _ = tiny_dir
    cfg = ModelConfig.from_dir(str(path))
    params = load_params(str(path), cfg, "auto", make_mesh(1), DEFAULT_RULES)
    assert params.embed.dtype == jnp.dtype(cfg.torch_dtype) == jnp.float32


def test_missing_and_unexpected_tensors_are_named(tiny_dir, tmp_path):
    path, _ = tiny_dir
    cfg = ModelConfig.from_dir(str(path))
    missing = "model.layers.0.mlp.up_proj.weight"
    bad = _rewrite(path, tmp_path, drop=[missing], add={"model.layers.0.extra.weight": np.zeros(3, np.float32)})
    with pytest.raises(ValueError) as err:
        load_params(str(bad), cfg, "float32", make_mesh(1), DEFAULT_RULES)
    assert missing in str(err.value) and "model.layers.0.extra.weight" in str(err.value)


def test_stale_buffers_and_tied_lm_head_are_ignored(tiny_dir, tmp_path):
    path, state = tiny_dir
    tied_cfg = dataclasses.replace(ModelConfig.from_dir(str(path)), tie_word_embeddings=True)
    extra = {"model.layers.0.self_attn.rotary_emb.inv_freq": np.ones(2, np.float32)}
    ok = _rewrite(path, tmp_path, add=extra)
    params = load_params(str(ok), tied_cfg, "float32", make_mesh(1), DEFAULT_RULES)
    assert params.lm_head is None
    np.testing.assert_array_equal(np.asarray(params.embed), state["model.embed_tokens.weight"].numpy())
