"""What a decode step must read and what a prefill must compute, from the model's static config.

Decode is memory-bound: a step reads every weight once (the embedding table only for the rows it looks
up, unless it is tied to the lm_head) plus each row's K/V up to its context. That byte count over the
measured read ceiling is the step's floor. Prefill is compute-bound: useful FLOPs are the matmuls for
every prompt token, causal attention, and the lm_head for the one sampled position.
"""

from __future__ import annotations

import math

import jax.numpy as jnp

from dgjax.config import ModelConfig
from dgjax.models.params import total_bytes
from dgjax.models.registry import get_family


def param_bytes(cfg: ModelConfig, dtype) -> int:
    """Bytes of every parameter as the engine creates them."""
    return total_bytes(get_family(cfg).param_specs(cfg, dtype))


def embed_bytes(cfg: ModelConfig, dtype) -> int:
    return cfg.vocab_size * cfg.hidden_size * jnp.dtype(dtype).itemsize


def kv_bytes_per_token(cfg: ModelConfig, dtype) -> int:
    """K and V of one token across all layers."""
    return 2 * cfg.num_hidden_layers * cfg.num_key_value_heads * cfg.head_dim * jnp.dtype(dtype).itemsize


def decode_weight_bytes(cfg: ModelConfig, dtype, rows: int) -> int:
    """Weight bytes one decode step over `rows` sequences must read."""
    total = param_bytes(cfg, dtype)
    if cfg.tie_word_embeddings:
        return total  # the table is read whole as the lm_head
    return total - embed_bytes(cfg, dtype) + rows * cfg.hidden_size * jnp.dtype(dtype).itemsize


def decode_kv_bytes(cfg: ModelConfig, dtype, total_context_tokens: float) -> float:
    """K/V bytes a step must read when its rows' contexts add up to `total_context_tokens`."""
    return kv_bytes_per_token(cfg, dtype) * total_context_tokens


def ref_attention_gather_bytes(cfg: ModelConfig, dtype, width: int, max_model_len: int, page_size: int) -> int:
    """K/V bytes the plain-jnp paged attention gathers per decode step: every row's whole block table
    (max_model_len rounded up to pages), whatever its context, and padded rows too."""
    pages = math.ceil(max_model_len / page_size)
    return width * pages * page_size * kv_bytes_per_token(cfg, dtype)


def matmul_params_per_layer(cfg: ModelConfig) -> int:
    e = cfg.hidden_size
    attn = e * cfg.q_size + 2 * e * cfg.kv_size + cfg.q_size * e
    mlp = 3 * e * cfg.intermediate_size
    return attn + mlp


def prefill_flops(cfg: ModelConfig, prompt_tokens: int) -> float:
    """Useful FLOPs of a cold prefill: projections and MLP per token, causal attention, one lm_head row."""
    n = prompt_tokens
    dense = 2.0 * cfg.num_hidden_layers * matmul_params_per_layer(cfg) * n
    causal_pairs = n * (n + 1) / 2
    attention = 4.0 * cfg.num_hidden_layers * cfg.num_attention_heads * cfg.head_dim * causal_pairs
    lm_head = 2.0 * cfg.hidden_size * cfg.vocab_size
    return dense + attention + lm_head
