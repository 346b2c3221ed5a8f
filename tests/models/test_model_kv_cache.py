"""The paged KV cache as the model sees it: layout, zero init, byte accounting."""

from __future__ import annotations

import jax.numpy as jnp

from dgjax.models.batch import create_kv_cache, kv_bytes_per_page, kv_cache_specs
from dgjax.models.hf_config import parse_hf_config
from dgjax.sharding import DEFAULT_RULES, make_mesh

CFG = parse_hf_config({"architectures": ["Qwen3ForCausalLM"], "vocab_size": 64, "hidden_size": 32,
                       "intermediate_size": 48, "num_hidden_layers": 3, "num_attention_heads": 4,
                       "num_key_value_heads": 2, "head_dim": 24}, {})


def test_cache_layout_zeros_and_bytes_per_page():
    cache = create_kv_cache(CFG, 10, 4, jnp.bfloat16, make_mesh(1), DEFAULT_RULES)
    assert len(cache.k) == len(cache.v) == CFG.num_hidden_layers
    assert cache.k[0].shape == (10, 4, 2, 24) and cache.v[2].dtype == jnp.bfloat16
    assert (cache.page_size, cache.num_pages) == (4, 10)
    assert all(float(jnp.abs(x).max()) == 0.0 for x in cache.k + cache.v)
    total = sum(x.nbytes for x in cache.k + cache.v)
    assert kv_bytes_per_page(CFG, 4, jnp.bfloat16) * 10 == total
    spec = kv_cache_specs(CFG, 10, 4, jnp.bfloat16).k[0]
    assert spec.axes == ("pages", None, "kv_heads", "head_dim") and spec.shape == cache.k[0].shape
