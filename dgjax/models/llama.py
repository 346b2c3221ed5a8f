"""The dense decoder family: Llama 3.x, Qwen2/2.5, Qwen3, Mistral (one implementation, config-driven).

Differences between the families are all in ModelConfig: q/k/v (and o) biases, q/k RMSNorm, explicit
head_dim, rope scaling, sliding windows and tied embeddings.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
from flax import struct

from dgjax.config import ModelConfig
from dgjax.models import blocks
from dgjax.models.batch import ForwardBatch, KVCache
from dgjax.models.ops import embed_lookup, matmul
from dgjax.models.params import ParamSpec, normal_init, resolve_dtype
from dgjax.pallas.l2_prefetch import api as prefetch
from dgjax.pallas.paged_attention import api as paged


@struct.dataclass
class DecoderLayerParams:
    input_norm: Any
    attn: blocks.AttentionParams
    post_attention_norm: Any
    mlp: blocks.MLPParams


@struct.dataclass
class DenseParams:
    embed: Any  # [vocab, embed]
    layers: tuple[DecoderLayerParams, ...]
    final_norm: Any  # [embed]
    lm_head: Any = None  # [embed, vocab]; None when tied to `embed`


def param_specs(cfg: ModelConfig, dtype: Any = "auto") -> DenseParams:
    dt = resolve_dtype(cfg.torch_dtype, dtype)
    e, vocab = cfg.hidden_size, cfg.vocab_size
    layer = DecoderLayerParams(
        input_norm=blocks.norm_spec(e, dt),
        attn=blocks.attention_specs(cfg, dt),
        post_attention_norm=blocks.norm_spec(e, dt),
        mlp=blocks.mlp_specs(cfg, dt),
    )
    return DenseParams(
        embed=ParamSpec((vocab, e), dt, ("vocab", "embed"), normal_init()),
        layers=(layer,) * cfg.num_hidden_layers,
        final_norm=blocks.norm_spec(e, dt),
        lm_head=None if cfg.tie_word_embeddings else ParamSpec((e, vocab), dt, ("embed", "vocab"), normal_init()),
    )


# (decoder layer params, normed x [B, T, embed], valid bool [B, T]: real tokens, not bucket padding) -> FFN output
FeedForward = Callable[[Any, jax.Array, jax.Array], jax.Array]


def run_decoder(params: Any, kv: KVCache, batch: ForwardBatch, cfg: ModelConfig,
                feed_forward: FeedForward) -> tuple[jax.Array, KVCache]:
    """The pre-norm decoder every family shares: embed, then per layer attention and `feed_forward`
    (dense MLP, MoE ...), each with a residual, then the final norm. Returns (hidden [B, T, embed],
    cache with this step's K/V). Layers need `input_norm`, `attn` and `post_attention_norm`."""
    with jax.named_scope("embed"):
        x = embed_lookup(params.embed, batch.tokens)
    slots = paged.kv_slots(batch.positions, batch.query_lens, batch.block_tables, kv.page_size)
    cos_sin = blocks.rope_cos_sin(batch.positions, cfg)
    valid = jnp.arange(batch.tokens.shape[1])[None, :] < batch.query_lens[:, None]
    k_pools, v_pools = list(kv.k), list(kv.v)  # each pool threads through its layers, each writing its pages
    warmed: tuple = ()  # this layer's attention weights' L2 prefetch results (dgjax/pallas/l2_prefetch/api.py)
    for i, layer in enumerate(params.layers):
        with jax.named_scope(f"layer_{i}"):
            g = kv.pool_of(i)
            h, k_pools[g], v_pools[g] = blocks.attention(
                layer.attn, x, k_pools[g], v_pools[g], batch, slots, cos_sin, cfg, cfg.layer_sliding_window(i),
                input_norm=layer.input_norm, page_offset=kv.page_offset(i), after=warmed,
            )
            x, h = blocks.add_rms_norm(x, h, layer.post_attention_norm, cfg.rms_norm_eps)
            warm_next = batch.tokens.shape[1] == 1 and i + 1 < len(params.layers)  # decode, a next layer to warm
            ahead = prefetch.attention_weights(params.layers[i + 1].attn) if warm_next else ()
            warmed = prefetch.prefetch(ahead, h) if ahead else ()
            x = x + feed_forward(layer, h, valid)
    with jax.named_scope("final_norm"):
        x = blocks.rms_norm(x, params.final_norm, cfg.rms_norm_eps)
    return x, kv.replace(k=tuple(k_pools), v=tuple(v_pools))


def forward(params: DenseParams, kv: KVCache, batch: ForwardBatch, cfg: ModelConfig) -> tuple[jax.Array, KVCache]:
    """Run one step: returns (hidden [B, T, embed] after the final norm, cache with this step's K/V)."""
    return run_decoder(params, kv, batch, cfg,
                       lambda layer, h, valid: blocks.gated_mlp(layer.mlp, h, cfg.hidden_act))


def logits(params: DenseParams, hidden: jax.Array, cfg: ModelConfig) -> jax.Array:
    """float32 logits [..., vocab] from final hidden states (tied or separate lm_head)."""
    with jax.named_scope("lm_head"):
        if params.lm_head is None:
            return matmul(hidden, params.embed.T, out_dtype=jnp.float32)
        return matmul(hidden, params.lm_head, out_dtype=jnp.float32)
