"""The paged KV cache as the model sees it: layout, zero init, byte accounting."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from dgjax.models.batch import create_kv_cache, kv_bytes_per_page, kv_cache_specs
from dgjax.pallas.paged_attention import api as paged
from dgjax.models.hf_config import parse_hf_config
from dgjax.sharding import DEFAULT_RULES, make_mesh

_HF = {"architectures": ["Qwen3ForCausalLM"], "vocab_size": 64, "hidden_size": 32, "intermediate_size": 48,
       "num_hidden_layers": 3, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 24}
CFG = parse_hf_config(_HF, {})


def test_cache_layout_zeros_and_bytes_per_page():
    cache = create_kv_cache(CFG, 10, 4, jnp.bfloat16, make_mesh(1), DEFAULT_RULES)
    assert len(jax.tree.leaves(cache)) == 2  # one K and one V pool for all layers: two arguments per step
    assert cache.k[0].shape == (3 * 10, 4, 2, 24) and cache.v[0].dtype == jnp.bfloat16
    assert (cache.page_size, cache.num_pages, cache.layers_per_pool) == (4, 10, 3)
    assert all(float(jnp.abs(x).max()) == 0.0 for x in cache.k + cache.v)
    assert kv_bytes_per_page(CFG, 4, jnp.bfloat16) * 10 == sum(x.nbytes for x in cache.k + cache.v)
    spec = kv_cache_specs(CFG, 10, 4, jnp.bfloat16).k[0]
    assert spec.axes == ("pages", None, "kv_heads", "head_dim") and spec.shape == cache.k[0].shape


def test_pools_stay_under_int32_element_offsets():
    """The kernels address a pool with int32 element offsets: a cache too big for one pool is split into runs
    of consecutive layers, each pool under 2**31 elements; the layer -> (pool, offset) map covers every page."""
    big = parse_hf_config({**_HF, "num_hidden_layers": 5, "num_key_value_heads": 8, "head_dim": 128}, {})
    pages = (2**31 // (16 * 8 * 128)) // 2 + 1  # one layer takes just over half the limit
    specs = kv_cache_specs(big, pages, 16, jnp.bfloat16)
    assert specs.layers_per_pool == 1 and len(specs.k) == 5
    pages = (2**31 // (16 * 8 * 128)) // 3  # three layers fit
    specs = kv_cache_specs(big, pages, 16, jnp.bfloat16)
    assert specs.layers_per_pool == 3 and [s.shape[0] for s in specs.k] == [3 * pages, 2 * pages]
    assert all(np.prod(s.shape) < 2**31 for s in specs.k)
    assert [specs.pool_of(i) for i in range(5)] == [0, 0, 0, 1, 1] and specs.num_pages == pages
    assert [specs.page_offset(i) for i in range(5)] == [0, pages, 2 * pages, 0, pages]


def test_layers_own_disjoint_page_ranges_of_the_pool():
    cache = create_kv_cache(CFG, 10, 4, jnp.bfloat16, make_mesh(1), DEFAULT_RULES)
    tables = jnp.asarray([[0, 3, 9]], jnp.int32)
    slots = jnp.asarray([[0, 13, 39]], jnp.int32)  # page 0 slot 0, page 3 slot 1, page 9 slot 3
    for layer in range(3):
        pool_tables, got = paged.offset_pages(tables, slots, cache.page_offset(layer), cache.page_size)
        np.testing.assert_array_equal(pool_tables, np.asarray([[0, 3, 9]]) + 10 * layer)
        assert cache.pool_of(layer) == 0
        np.testing.assert_array_equal(np.asarray(got) // 4, np.asarray(pool_tables))  # same pages
        np.testing.assert_array_equal(np.asarray(got) % 4, [[0, 1, 3]])
