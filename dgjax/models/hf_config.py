"""Parse an HF `config.json` (+ `generation_config.json`) into a `ModelConfig`.

Covers the dense families (Llama 3.x, Qwen2/2.5, Qwen3, Mistral), the MoE families Qwen3-MoE and
GLM-4.5/4.6/4.7 (Glm4Moe), and both spellings of rope settings:
transformers 4.x (`rope_scaling` + `rope_theta`) and 5.x (`rope_parameters`).
"""

from __future__ import annotations

from typing import Any

from dgjax.config import ModelConfig, RopeScaling

# HF `architectures` entry -> the model_type it implies (used when config.json lacks one or the other).
SUPPORTED_ARCHITECTURES: dict[str, str] = {
    "LlamaForCausalLM": "llama",
    "Qwen2ForCausalLM": "qwen2",
    "Qwen3ForCausalLM": "qwen3",
    "MistralForCausalLM": "mistral",
    "Qwen3MoeForCausalLM": "qwen3_moe",
    "Glm4MoeForCausalLM": "glm4_moe",
}
SUPPORTED_ROPE_TYPES = ("default", "linear", "llama3", "yarn")


def _architecture(hf: dict[str, Any]) -> str:
    archs = hf.get("architectures") or []
    if not archs:
        by_type = {t: a for a, t in SUPPORTED_ARCHITECTURES.items()}
        model_type = hf.get("model_type")
        if model_type in by_type:
            return by_type[model_type]
        raise ValueError(f"config.json names no architecture and model_type {model_type!r} is not supported")
    for arch in archs:
        if arch in SUPPORTED_ARCHITECTURES:
            return arch
    raise ValueError(
        f"unsupported architecture {archs[0]!r} (config.json architectures={archs}); "
        f"supported: {sorted(SUPPORTED_ARCHITECTURES)}"
    )


def _rope_dict(hf: dict[str, Any]) -> dict[str, Any]:
    """The flat rope settings dict, whichever key (and nesting) the config uses."""
    rope = hf.get("rope_parameters") or hf.get("rope_scaling") or {}
    nested = [v for v in rope.values() if isinstance(v, dict)]
    if nested:  # per-layer-type dicts: dense models use one rope for all layers
        if any(v != nested[0] for v in nested[1:]):
            raise ValueError(f"per-layer-type rope parameters differ; not supported: {rope}")
        rope = nested[0]
    return dict(rope)


def _rope(hf: dict[str, Any], max_pos: int) -> tuple[float, RopeScaling, float]:
    """(rope_theta, scaling, partial_rotary_factor) the way transformers standardizes them."""
    rope = _rope_dict(hf)
    theta = float(rope.get("rope_theta", hf.get("rope_theta", 10000.0)))
    partial = float(rope.get("partial_rotary_factor", hf.get("partial_rotary_factor", 1.0)) or 1.0)
    rope_type = rope.get("rope_type", rope.get("type", "default")) or "default"
    if rope_type not in SUPPORTED_ROPE_TYPES:
        raise ValueError(f"unsupported rope type {rope_type!r}; supported: {SUPPORTED_ROPE_TYPES}")
    if rope_type == "default":
        return theta, RopeScaling(), partial
    # transformers gives a top-level original_max_position_embeddings priority (Phi3-style configs).
    orig = hf.get("original_max_position_embeddings") or rope.get("original_max_position_embeddings")
    if orig is None and rope_type in ("llama3", "yarn"):
        orig = max_pos
    factor = rope.get("factor")
    if factor is None:
        if rope_type != "yarn":
            raise ValueError(f"rope type {rope_type!r} needs a factor")
        factor = max_pos / orig
    opt = lambda k: None if rope.get(k) is None else float(rope[k])  # noqa: E731
    scaling = RopeScaling(
        rope_type=rope_type,
        factor=float(factor),
        low_freq_factor=float(rope.get("low_freq_factor", 1.0)),
        high_freq_factor=float(rope.get("high_freq_factor", 4.0)),
        original_max_position_embeddings=None if orig is None else int(orig),
        beta_fast=float(rope.get("beta_fast") or 32.0),
        beta_slow=float(rope.get("beta_slow") or 1.0),
        mscale=opt("mscale"),
        mscale_all_dim=opt("mscale_all_dim"),
        attention_factor=opt("attention_factor"),
        truncate=bool(rope.get("truncate", True)),
    )
    return theta, scaling, partial


def _token_ids(*values: Any) -> tuple[int, ...]:
    """Union of int-or-list token id fields, in first-seen order."""
    out: list[int] = []
    for v in values:
        for t in v if isinstance(v, (list, tuple)) else [v]:
            if t is not None and int(t) not in out:
                out.append(int(t))
    return tuple(out)


def _sliding(hf: dict[str, Any], model_type: str, layers: int) -> tuple[int | None, tuple[str, ...]]:
    """(sliding_window, layer_types) as each family's HF attention applies them."""
    window = hf.get("sliding_window")
    if model_type == "mistral":
        return (int(window) if window else None), ()
    if model_type == "qwen3_moe":  # HF Qwen3-MoE slides every layer when enabled
        return (int(window), ()) if hf.get("use_sliding_window", False) and window else (None, ())
    if model_type in ("qwen2", "qwen3"):
        if not hf.get("use_sliding_window", False) or not window:
            return None, ()
        types = hf.get("layer_types") or [
            "sliding_attention" if i >= hf.get("max_window_layers", 28) else "full_attention"
            for i in range(layers)
        ]
        return int(window), tuple(types)
    return None, ()


def _bias_flags(hf: dict[str, Any], model_type: str) -> tuple[bool, bool, bool]:
    """(qkv bias, o_proj bias, mlp bias) per family: HF Qwen2 hard-codes q/k/v bias and no o bias."""
    if model_type == "qwen2":
        return True, False, False
    if model_type == "mistral":
        return False, False, False
    if model_type == "glm4_moe":  # HF Glm4Moe: q/k/v bias per attention_bias, o_proj never
        return bool(hf.get("attention_bias", False)), False, False
    attn = bool(hf.get("attention_bias", False))
    return attn, attn, bool(hf.get("mlp_bias", False)) if model_type == "llama" else False


def _moe_fields(hf: dict[str, Any], model_type: str) -> dict[str, Any]:
    """MoE routing and layout fields of Qwen3-MoE and GLM-4.5 style configs, with HF's defaults."""
    if model_type == "qwen3_moe":
        return dict(
            num_experts=int(hf.get("num_experts", hf.get("num_local_experts", 128))),
            num_experts_per_tok=int(hf.get("num_experts_per_tok", 8)),
            moe_intermediate_size=int(hf.get("moe_intermediate_size", 768)),
            norm_topk_prob=bool(hf.get("norm_topk_prob", False)),
            decoder_sparse_step=int(hf.get("decoder_sparse_step", 1)),
            mlp_only_layers=tuple(int(i) for i in hf.get("mlp_only_layers") or ()),
        )
    if model_type == "glm4_moe":
        moe_ffw = int(hf.get("moe_intermediate_size", 1408))
        return dict(
            num_experts=int(hf.get("n_routed_experts", hf.get("num_local_experts", 128))),
            num_experts_per_tok=int(hf.get("num_experts_per_tok", 8)),
            moe_intermediate_size=moe_ffw,
            shared_expert_intermediate_size=moe_ffw * int(hf.get("n_shared_experts", 1)),
            moe_scoring_func="sigmoid",
            moe_score_correction_bias=True,
            norm_topk_prob=bool(hf.get("norm_topk_prob", True)),
            routed_scaling_factor=float(hf.get("routed_scaling_factor", 1.0)),
            n_group=int(hf.get("n_group", 1)),
            topk_group=int(hf.get("topk_group", 1)),
            first_k_dense_replace=int(hf.get("first_k_dense_replace", 1)),
            num_nextn_predict_layers=int(hf.get("num_nextn_predict_layers", hf.get("num_mtp_layers", 0)) or 0),
        )
    return {}


def _with_family_defaults(hf: dict[str, Any], model_type: str) -> dict[str, Any]:
    """Fill config keys whose HF default differs by family (Glm4MoeConfig defaults to half-rotary)."""
    rope = hf.get("rope_parameters") or hf.get("rope_scaling") or {}
    if model_type == "glm4_moe" and "partial_rotary_factor" not in hf and "partial_rotary_factor" not in rope:
        return {**hf, "partial_rotary_factor": 0.5}
    return hf


def _opt(d: dict[str, Any], key: str, kind: type) -> Any:
    return None if d.get(key) is None else kind(d[key])


def _first_id(hf: dict[str, Any], gen: dict[str, Any], key: str) -> int | None:
    """A single token id from config.json, else generation_config.json (first one if a list)."""
    ids = _token_ids(hf.get(key)) or _token_ids(gen.get(key))
    return ids[0] if ids else None


def parse_hf_config(hf: dict[str, Any], gen: dict[str, Any]) -> ModelConfig:
    """Build the static ModelConfig; unknown architectures or rope types raise ValueError."""
    arch = _architecture(hf)
    model_type = hf.get("model_type") or SUPPORTED_ARCHITECTURES[arch]
    hf = _with_family_defaults(hf, model_type)
    heads = int(hf["num_attention_heads"])
    hidden = int(hf["hidden_size"])
    layers = int(hf["num_hidden_layers"])
    max_pos = int(hf.get("max_position_embeddings", 2048))
    theta, scaling, partial = _rope(hf, max_pos)
    window, layer_types = _sliding(hf, model_type, layers)
    qkv_bias, o_bias, mlp_bias = _bias_flags(hf, model_type)
    return ModelConfig(
        architecture=arch,
        model_type=model_type,
        vocab_size=int(hf["vocab_size"]),
        hidden_size=hidden,
        intermediate_size=int(hf["intermediate_size"]),
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=int(hf.get("num_key_value_heads") or heads),
        head_dim=int(hf.get("head_dim") or hidden // heads),
        max_position_embeddings=max_pos,
        rms_norm_eps=float(hf.get("rms_norm_eps", 1e-6)),
        rope_theta=theta,
        rope_scaling=scaling,
        partial_rotary_factor=partial,
        hidden_act=hf.get("hidden_act", "silu"),
        tie_word_embeddings=bool(hf.get("tie_word_embeddings", False)),
        attention_bias=qkv_bias,
        o_proj_bias=o_bias,
        mlp_bias=mlp_bias,
        qk_norm=model_type in ("qwen3", "qwen3_moe") or (model_type == "glm4_moe" and bool(hf.get("use_qk_norm"))),
        sliding_window=window,
        layer_types=layer_types,
        **_moe_fields(hf, model_type),
        torch_dtype=str(hf.get("dtype") or hf.get("torch_dtype") or "bfloat16"),
        bos_token_id=_first_id(hf, gen, "bos_token_id"),
        eos_token_ids=_token_ids(hf.get("eos_token_id"), gen.get("eos_token_id")),
        pad_token_id=_first_id(hf, gen, "pad_token_id"),
        default_temperature=_opt(gen, "temperature", float),
        default_top_p=_opt(gen, "top_p", float),
        default_top_k=_opt(gen, "top_k", int),
        default_repetition_penalty=_opt(gen, "repetition_penalty", float),
    )
