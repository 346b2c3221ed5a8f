"""The sparse-MoE decoder: Qwen3-MoE, and the base of GLM-4.5/4.6/4.7 (glm4_moe.py adds its MTP layers).

Attention is the dense decoder's (q/k RMSNorm, biases, partial rope all from ModelConfig); each layer's
MLP is either a MoE block (router + routed experts + optional shared expert, dgjax/models/moe.py) or a
dense SwiGLU, per `ModelConfig.is_moe_layer` (Qwen: `decoder_sparse_step` / `mlp_only_layers`; GLM:
`first_k_dense_replace`).
"""

from __future__ import annotations

from typing import Any

import jax
from flax import struct

from dgjax.config import ModelConfig
from dgjax.models import blocks, llama, moe
from dgjax.models.batch import ForwardBatch, KVCache
from dgjax.models.params import ParamSpec, normal_init, resolve_dtype


@struct.dataclass
class MoEDecoderLayerParams:
    input_norm: Any
    attn: blocks.AttentionParams
    post_attention_norm: Any
    ffn: Any  # moe.MoEParams (sparse layer) or blocks.MLPParams (dense layer)


@struct.dataclass
class MoEModelParams:
    embed: Any  # [vocab, embed]
    layers: tuple[MoEDecoderLayerParams, ...]
    final_norm: Any  # [embed]
    lm_head: Any = None  # [embed, vocab]; None when tied to `embed`
    mtp: tuple = ()  # multi-token-prediction layers (GLM), loaded for speculative decoding, not run here


def decoder_layer_specs(cfg: ModelConfig, dtype: Any, layer: int) -> MoEDecoderLayerParams:
    e = cfg.hidden_size
    return MoEDecoderLayerParams(
        input_norm=blocks.norm_spec(e, dtype),
        attn=blocks.attention_specs(cfg, dtype),
        post_attention_norm=blocks.norm_spec(e, dtype),
        ffn=moe.moe_specs(cfg, dtype) if cfg.is_moe_layer(layer) else blocks.mlp_specs(cfg, dtype),
    )


def param_specs(cfg: ModelConfig, dtype: Any = "auto") -> MoEModelParams:
    dt = resolve_dtype(cfg.torch_dtype, dtype)
    e, vocab = cfg.hidden_size, cfg.vocab_size
    return MoEModelParams(
        embed=ParamSpec((vocab, e), dt, ("vocab", "embed"), normal_init()),
        layers=tuple(decoder_layer_specs(cfg, dt, i) for i in range(cfg.num_hidden_layers)),
        final_norm=blocks.norm_spec(e, dt),
        lm_head=None if cfg.tie_word_embeddings else ParamSpec((e, vocab), dt, ("embed", "vocab"), normal_init()),
    )


def forward(params: MoEModelParams, kv: KVCache, batch: ForwardBatch, cfg: ModelConfig) -> tuple[jax.Array, KVCache]:
    """Run one step: the shared decoder with a dense MLP or an MoE block per layer (`layer.ffn`)."""
    return llama.run_decoder(params, kv, batch, cfg, lambda layer, h, valid: moe.feed_forward(layer.ffn, h, cfg, valid))


def logits(params: MoEModelParams, hidden: jax.Array, cfg: ModelConfig) -> jax.Array:
    """float32 logits [..., vocab] (same head as the dense decoder)."""
    return llama.logits(params, hidden, cfg)

