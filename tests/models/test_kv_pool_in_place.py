"""The pooled KV cache is updated in place: with the cache donated, the compiled step holds no copy of a
pool (a copy would move every layer's K/V each step, where per-layer caches risked one layer's)."""

from __future__ import annotations

import functools
import re

import jax
import jax.numpy as jnp
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
    pool = ",".join(map(str, kv.k.shape))
    copies = [line for line in hlo.splitlines()
              if re.search(r"= f32\[" + pool + r"\]\{[^}]*\} copy\(", line)]
    assert kv.num_layers > 1 and not copies, copies[:3]
    assert f"f32[{pool}]" in hlo  # the pattern does match the pool's shape in this dump
