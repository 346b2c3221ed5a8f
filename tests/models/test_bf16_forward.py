"""bfloat16 weights and cache: the forward keeps bf16 activations, float32 logits, and stays near float32."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
from dense_cases import build_case
from paged_runner import PagedRunner

from dgjax.checkpoint.loader import load_params
from dgjax.models import llama
from dgjax.models.batch import ForwardBatch, create_kv_cache
from dgjax.sharding import DEFAULT_RULES


def test_bfloat16_forward_tracks_float32_transformers(tmp_path):
    case = build_case("qwen3_qk_norm_head_dim_sliding_layer", tmp_path)
    params = load_params(str(tmp_path), case.cfg, "bfloat16", case.mesh, DEFAULT_RULES)
    runner = PagedRunner(case.cfg, params, case.mesh, dtype=jnp.bfloat16)
    logits = runner.prefill("seq", case.hf_tokens)
    assert logits.dtype == np.float32
    logprobs = np.asarray(jax.nn.log_softmax(logits, axis=-1))
    err = np.abs(logprobs - case.hf_logprobs).max()
    assert 0 < err < 0.15, err  # bf16 rounding, not a layout error (those give O(1))

    kv = create_kv_cache(case.cfg, 8, 4, jnp.bfloat16, case.mesh, DEFAULT_RULES)
    batch = ForwardBatch(tokens=jnp.ones((1, 2), jnp.int32), positions=jnp.asarray([[0, 1]], jnp.int32),
                         query_lens=jnp.asarray([2], jnp.int32), block_tables=jnp.asarray([[3, 0]], jnp.int32),
                         context_lens=jnp.asarray([2], jnp.int32))
    hidden, kv = jax.eval_shape(functools.partial(llama.forward, cfg=case.cfg), params, kv, batch)
    assert hidden.dtype == jnp.bfloat16 and kv.k[0].dtype == jnp.bfloat16
