"""The pooled KV cache is updated in place: with the cache donated, the compiled step holds no copy of a
pool (a copy would move every layer's K/V each step, where per-layer caches risked one layer's)."""

from __future__ import annotations

import functools
import re

import jax
import jax.numpy as jnp
import numpy as np
from dense_cases import build_case

from dgjax.checkpoint.loader import load_params
from dgjax.models import llama
from dgjax.models.batch import ForwardBatch, create_kv_cache
from dgjax.sharding import DEFAULT_RULES


def test_compiled_step_writes_the_pools_in_place(tmp_path):
    case = build_case("qwen3_qk_norm_head_dim_sliding_layer", tmp_path)
    params = load_params(str(tmp_path), case.cfg, "float32", case.mesh, DEFAULT_RULES)
    kv = create_kv_cache(case.cfg, 8, 4, jnp.float32, case.mesh, DEFAULT_RULES)
    batch = ForwardBatch(tokens=jnp.ones((2, 1), jnp.int32), positions=jnp.asarray([[5], [2]], jnp.int32),
                         query_lens=jnp.asarray([1, 1], jnp.int32), block_tables=jnp.asarray([[3, 2], [1, 0]], jnp.int32),
                         context_lens=jnp.asarray([6, 3], jnp.int32))
    step = jax.jit(functools.partial(llama.forward, cfg=case.cfg), donate_argnums=1)
    hlo = step.lower(params, kv, batch).compile().as_text()
    pool = ",".join(map(str, kv.k[0].shape))
    copies = [line for line in hlo.splitlines()
              if re.search(r"= f32\[" + pool + r"\]\{[^}]*\} copy\(", line)]
    assert kv.layers_per_pool > 1 and len(kv.k) == 1 and not copies, copies[:3]
    assert f"f32[{pool}]" in hlo  # the pattern does match the pool's shape in this dump


def test_caches_split_into_several_pools_give_the_same_logits(tmp_path, monkeypatch):
    """A cache too large for one pool is split into runs of layers; the layer -> (pool, page offset) map must
    give exactly the logits of the one-pool cache, through prefill and decode with shuffled pages."""
    from paged_runner import PagedRunner

    from dgjax.models import batch as batch_mod

    case = build_case("qwen3_qk_norm_head_dim_sliding_layer", tmp_path)
    params = load_params(str(tmp_path), case.cfg, "float32", case.mesh, DEFAULT_RULES)
    prompt = list(case.hf_tokens)

    def run():
        runner = PagedRunner(case.cfg, params, case.mesh)
        return runner.prefill("a", prompt, width=8), runner.greedy("b", prompt[:5], 4, width=8), runner.kv

    want_prefill, want_greedy, one = run()
    layer_elements = one.num_pages * one.page_size * case.cfg.num_key_value_heads * case.cfg.head_dim
    monkeypatch.setattr(batch_mod, "MAX_POOL_ELEMENTS", layer_elements)  # one layer per pool
    got_prefill, got_greedy, split = run()
    assert len(one.k) == 1 and split.layers_per_pool == 1 and len(split.k) == case.cfg.num_hidden_layers > 1
    np.testing.assert_array_equal(got_prefill, want_prefill)
    assert got_greedy == want_greedy
