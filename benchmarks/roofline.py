"""What a decode step must read and what a prefill must compute, from the model's static config.

Decode is memory-bound: a step reads every weight once (the embedding table only for the rows it looks
up, unless it is tied to the lm_head) plus each row's K/V up to its context. That byte count over the
measured read ceiling is the step's floor. Prefill is compute-bound: useful FLOPs are the matmuls for
every prompt token, causal attention, and the lm_head for the one sampled position.
MoE: a decode step reads only the routed experts its tokens touch (the expected number of distinct
experts under uniform routing), a token's FLOPs count its top_k experts, and MTP layers (not run by
decode) are left out.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp

from dgjax.config import ModelConfig
from dgjax.models.batch import kv_bytes_per_page
from dgjax.models.moe import ExpertParams
from dgjax.models.params import total_bytes
from dgjax.models.registry import get_family


def param_bytes(cfg: ModelConfig, dtype) -> int:
    """Bytes of every parameter as the engine creates them."""
    return total_bytes(get_family(cfg).param_specs(cfg, dtype))


def embed_bytes(cfg: ModelConfig, dtype) -> int:
    return cfg.vocab_size * cfg.hidden_size * jnp.dtype(dtype).itemsize


def kv_bytes_per_token(cfg: ModelConfig, dtype) -> int:
    """K and V of one token over all layers in the cache's page dtype (fp8 pages: plus their scales)."""
    return kv_bytes_per_page(cfg, 1, dtype)


def expected_distinct_experts(num_experts: int, top_k: int, tokens: int) -> float:
    """Expected number of distinct experts `tokens` tokens route to, each picking top_k of num_experts
    uniformly at random: a token misses a given expert with probability 1 - top_k / num_experts."""
    return num_experts * (1.0 - (1.0 - top_k / num_experts) ** tokens)


def routed_expert_bytes(specs) -> int:
    """Bytes of the decoder layers' routed-expert weights in a parameter spec tree (MTP layers excluded)."""
    layers = getattr(specs, "layers", ())
    nodes = jax.tree_util.tree_leaves(layers, is_leaf=lambda x: isinstance(x, ExpertParams))
    return sum(total_bytes(n) for n in nodes if isinstance(n, ExpertParams))


def decode_weight_bytes(cfg: ModelConfig, dtype, rows: int) -> int:
    """Weight bytes one decode step over `rows` sequences must read (MoE: only the touched experts)."""
    specs = get_family(cfg).param_specs(cfg, dtype)
    total = total_bytes(specs) - total_bytes(getattr(specs, "mtp", ()))
    experts = routed_expert_bytes(specs)
    if experts:
        touched = expected_distinct_experts(cfg.num_experts, cfg.num_experts_per_tok, rows) / cfg.num_experts
        total = total - experts + round(experts * touched)
    if cfg.tie_word_embeddings:
        return total  # the table is read whole as the lm_head
    return total - embed_bytes(cfg, dtype) + rows * cfg.hidden_size * jnp.dtype(dtype).itemsize


def _nbytes(tree) -> int:
    return sum(int(x.nbytes) for x in jax.tree_util.tree_leaves(tree))


def decode_weight_bytes_of(params, cfg: ModelConfig, rows: int) -> int:
    """`decode_weight_bytes` measured on a loaded parameter tree, so packed formats (--quantize, quantized
    checkpoints) count the bytes they really hold: packed values plus their scales."""
    total = _nbytes(params) - _nbytes(getattr(params, "mtp", ()))
    layers = getattr(params, "layers", ())
    experts = sum(_nbytes(n) for n in jax.tree_util.tree_leaves(layers, is_leaf=lambda x: isinstance(x, ExpertParams))
                  if isinstance(n, ExpertParams))
    if experts:
        touched = expected_distinct_experts(cfg.num_experts, cfg.num_experts_per_tok, rows) / cfg.num_experts
        total = total - experts + round(experts * touched)
    if cfg.tie_word_embeddings:
        return total
    embed = params.embed
    return total - _nbytes(embed) + rows * cfg.hidden_size * embed.dtype.itemsize


def decode_kv_bytes(cfg: ModelConfig, dtype, total_context_tokens: float) -> float:
    """K/V bytes a step must read when its rows' contexts add up to `total_context_tokens`."""
    return kv_bytes_per_token(cfg, dtype) * total_context_tokens


def ref_attention_gather_bytes(cfg: ModelConfig, dtype, width: int, max_model_len: int, page_size: int) -> int:
    """K/V bytes the plain-jnp paged attention gathers per decode step: every row's whole block table
    (max_model_len rounded up to pages), whatever its context, and padded rows too."""
    pages = math.ceil(max_model_len / page_size)
    return width * pages * page_size * kv_bytes_per_token(cfg, dtype)


def matmul_params_per_layer(cfg: ModelConfig, layer: int = 0) -> int:
    """Weights one token multiplies with in decoder layer `layer` (MoE: router, top_k experts, shared)."""
    e = cfg.hidden_size
    attn = e * cfg.q_size + 2 * e * cfg.kv_size + cfg.q_size * e
    if cfg.is_moe_layer(layer):
        active_ffw = cfg.num_experts_per_tok * cfg.moe_intermediate_size + cfg.shared_expert_intermediate_size
        return attn + e * cfg.num_experts + 3 * e * active_ffw
    return attn + 3 * e * cfg.intermediate_size


def prefill_flops(cfg: ModelConfig, prompt_tokens: int) -> float:
    """Useful FLOPs of a cold prefill: projections and MLP per token, causal attention, one lm_head row."""
    n = prompt_tokens
    dense = 2.0 * sum(matmul_params_per_layer(cfg, i) for i in range(cfg.num_hidden_layers)) * n
    causal_pairs = n * (n + 1) / 2
    attention = 4.0 * cfg.num_hidden_layers * cfg.num_attention_heads * cfg.head_dim * causal_pairs
    lm_head = 2.0 * cfg.hidden_size * cfg.vocab_size
    return dense + attention + lm_head
