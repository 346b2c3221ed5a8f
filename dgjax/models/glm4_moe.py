"""GLM-4.5 / 4.6 / 4.7 (HF `Glm4MoeForCausalLM`): the sparse-MoE decoder plus its MTP layer(s).

Everything GLM-specific in the main model is configuration (ModelConfig): sigmoid router scores with an
`e_score_correction_bias` used only to choose experts, group-limited top-k, `routed_scaling_factor`, a
shared expert, `first_k_dense_replace` dense layers, q/k/v biases without an o_proj bias, optional q/k
norm, and partial rotary embeddings. HF's Glm4Moe applies rope rotate-half style (not interleaved) to
the first `partial_rotary_factor * head_dim` features, which is exactly `blocks.apply_rope`.

The checkpoint's multi-token-prediction layers (`model.layers.{num_hidden_layers + i}.*`) are loaded into
`params.mtp` for speculative decoding later; `forward` does not run them. An MTP layer predicts the token
after next from the main model's last hidden state h and the next token's embedding:
block(eh_proj([enorm(embed(next)), hnorm(h)])), then shared_head.norm and the main lm_head.
"""

from __future__ import annotations

from typing import Any

from flax import struct

from dgjax.config import ModelConfig
from dgjax.models import blocks, qwen3_moe
from dgjax.models.params import ParamSpec, normal_init, resolve_dtype


@struct.dataclass
class MTPLayerParams:
    enorm: Any  # [embed] RMSNorm of the next token's embedding
    hnorm: Any  # [embed] RMSNorm of the previous hidden state
    eh_proj: Any  # [2 * embed, embed]: [enorm(embedding), hnorm(hidden)] -> embed
    block: qwen3_moe.MoEDecoderLayerParams  # a full decoder layer (attention + MoE)
    head_norm: Any  # [embed] shared_head.norm, applied before the main model's lm_head


def mtp_layer_specs(cfg: ModelConfig, dtype: Any, layer: int) -> MTPLayerParams:
    e = cfg.hidden_size
    return MTPLayerParams(
        enorm=blocks.norm_spec(e, dtype),
        hnorm=blocks.norm_spec(e, dtype),
        eh_proj=ParamSpec((2 * e, e), dtype, (None, "embed"), normal_init()),
        block=qwen3_moe.decoder_layer_specs(cfg, dtype, layer),
        head_norm=blocks.norm_spec(e, dtype),
    )


def param_specs(cfg: ModelConfig, dtype: Any = "auto") -> qwen3_moe.MoEModelParams:
    dt = resolve_dtype(cfg.torch_dtype, dtype)
    base = qwen3_moe.param_specs(cfg, dt)
    n = cfg.num_hidden_layers
    return base.replace(mtp=tuple(mtp_layer_specs(cfg, dt, n + i) for i in range(cfg.num_nextn_predict_layers)))


forward = qwen3_moe.forward
logits = qwen3_moe.logits
