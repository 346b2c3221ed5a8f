"""HF tensor names of the MoE families (Qwen3-MoE, GLM-4.5/4.6/4.7) -> dgjax parameter leaves.

Checkpoints store routed experts one tensor per expert (`mlp.experts.{e}.gate_proj.weight` ...); they
become `HFStackedSource`s, stacked at load into dgjax's [experts, in, out] weights. GLM's MTP layers sit
after the decoder layers (`model.layers.{num_hidden_layers + i}.*`); their copies of the embedding and
the lm_head (GLM-4.5 stores them, GLM-4.6 does not) duplicate the main model's and are not read.
"""

from __future__ import annotations

from dgjax.checkpoint.hf_names import HFSource, HFStackedSource, NameMap
from dgjax.config import ModelConfig
from dgjax.models import blocks, moe
from dgjax.models.glm4_moe import MTPLayerParams
from dgjax.models.qwen3_moe import MoEDecoderLayerParams, MoEModelParams


def _weight(prefix: str) -> HFSource:
    return HFSource(f"{prefix}.weight", transpose=True)


def _bias(prefix: str, present: bool) -> HFSource | None:
    return HFSource(f"{prefix}.bias") if present else None


def _attention(cfg: ModelConfig, pre: str) -> blocks.AttentionParams:
    a = f"{pre}.self_attn"
    return blocks.AttentionParams(
        q=_weight(f"{a}.q_proj"), k=_weight(f"{a}.k_proj"), v=_weight(f"{a}.v_proj"), o=_weight(f"{a}.o_proj"),
        q_bias=_bias(f"{a}.q_proj", cfg.attention_bias),
        k_bias=_bias(f"{a}.k_proj", cfg.attention_bias),
        v_bias=_bias(f"{a}.v_proj", cfg.attention_bias),
        o_bias=_bias(f"{a}.o_proj", cfg.o_proj_bias),
        q_norm=HFSource(f"{a}.q_norm.weight") if cfg.qk_norm else None,
        k_norm=HFSource(f"{a}.k_norm.weight") if cfg.qk_norm else None,
    )


def _mlp(cfg: ModelConfig, pre: str) -> blocks.MLPParams:
    return blocks.MLPParams(
        gate=_weight(f"{pre}.gate_proj"), up=_weight(f"{pre}.up_proj"), down=_weight(f"{pre}.down_proj"),
        gate_bias=_bias(f"{pre}.gate_proj", cfg.mlp_bias),
        up_bias=_bias(f"{pre}.up_proj", cfg.mlp_bias),
        down_bias=_bias(f"{pre}.down_proj", cfg.mlp_bias),
    )


def _experts(cfg: ModelConfig, pre: str) -> moe.ExpertParams:
    stacked = lambda proj: HFStackedSource(  # noqa: E731
        tuple(f"{pre}.experts.{e}.{proj}.weight" for e in range(cfg.num_experts)), transpose=True
    )
    return moe.ExpertParams(gate=stacked("gate_proj"), up=stacked("up_proj"), down=stacked("down_proj"))


def _moe(cfg: ModelConfig, pre: str) -> moe.MoEParams:
    return moe.MoEParams(
        router=moe.RouterParams(
            weight=_weight(f"{pre}.gate"),
            score_bias=HFSource(f"{pre}.gate.e_score_correction_bias") if cfg.moe_score_correction_bias else None,
        ),
        experts=_experts(cfg, pre),
        shared=_mlp(cfg, f"{pre}.shared_experts") if cfg.shared_expert_intermediate_size else None,
    )


def decoder_layer_sources(cfg: ModelConfig, layer: int) -> MoEDecoderLayerParams:
    pre = f"model.layers.{layer}"
    return MoEDecoderLayerParams(
        input_norm=HFSource(f"{pre}.input_layernorm.weight"),
        attn=_attention(cfg, pre),
        post_attention_norm=HFSource(f"{pre}.post_attention_layernorm.weight"),
        ffn=_moe(cfg, f"{pre}.mlp") if cfg.is_moe_layer(layer) else _mlp(cfg, f"{pre}.mlp"),
    )


def _mtp_layer_sources(cfg: ModelConfig, layer: int) -> MTPLayerParams:
    pre = f"model.layers.{layer}"
    return MTPLayerParams(
        enorm=HFSource(f"{pre}.enorm.weight"),
        hnorm=HFSource(f"{pre}.hnorm.weight"),
        eh_proj=_weight(f"{pre}.eh_proj"),
        block=decoder_layer_sources(cfg, layer),
        head_norm=HFSource(f"{pre}.shared_head.norm.weight"),
    )


def _sources(cfg: ModelConfig) -> MoEModelParams:
    n = cfg.num_hidden_layers
    return MoEModelParams(
        embed=HFSource("model.embed_tokens.weight"),
        layers=tuple(decoder_layer_sources(cfg, i) for i in range(n)),
        final_norm=HFSource("model.norm.weight"),
        lm_head=None if cfg.tie_word_embeddings else _weight("lm_head"),
        mtp=tuple(_mtp_layer_sources(cfg, n + i) for i in range(cfg.num_nextn_predict_layers)),
    )


def _ignored(cfg: ModelConfig) -> tuple[str, ...]:
    n = cfg.num_hidden_layers
    mtp_copies = tuple(
        f"model.layers.{n + i}.{name}"
        for i in range(cfg.num_nextn_predict_layers)
        for name in ("embed_tokens.weight", "shared_head.head.weight")
    )
    return (("lm_head.weight",) if cfg.tie_word_embeddings else ()) + mtp_copies


MOE_NAMES = NameMap(sources=_sources, ignored=_ignored)
