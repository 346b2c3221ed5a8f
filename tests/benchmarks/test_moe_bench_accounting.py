"""MoE roofline accounting: a decode step reads only the experts its tokens touch, prefill FLOPs count a
token's top_k experts, and MTP layers (never run by decode) are not charged."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import pytest

from benchmarks import roofline
from benchmarks.presets import PRESETS
from dgjax.config import ModelConfig


def _hand_count(hf: dict) -> tuple[int, int, int, int]:
    """bf16 bytes of (the weights outside the routed experts, the routed experts, the MTP layers) and the
    active MLP parameters per token of a MoE layer, from the public config fields. GLM keeps its router
    and score correction bias in float32."""
    e, v, layers, d = hf["hidden_size"], hf["vocab_size"], hf["num_hidden_layers"], hf["head_dim"]
    q, kv = hf["num_attention_heads"] * d, hf["num_key_value_heads"] * d
    glm = hf["model_type"] == "glm4_moe"
    n_exp = hf["n_routed_experts"] if glm else hf["num_experts"]
    f, k = hf["moe_intermediate_size"], hf["num_experts_per_tok"]
    shared = f * hf["n_shared_experts"] if glm else 0
    dense_layers = hf["first_k_dense_replace"] if glm else 0
    attn = e * q + 2 * e * kv + q * e + (q + 2 * kv if hf.get("attention_bias") else 0)
    norms = 2 * e + (2 * d if not glm else 0)  # Qwen3 q/k norms; GLM-4.5-Air has none
    router_bytes = (4 if glm else 2) * (e * n_exp + (n_exp if glm else 0))  # weight, score bias
    moe_rest = 2 * 3 * e * shared + router_bytes
    experts_per_layer = 2 * 3 * n_exp * e * f
    outside = 2 * (layers * (attn + norms) + dense_layers * 3 * e * hf["intermediate_size"] + e + 2 * v * e) \
        + (layers - dense_layers) * moe_rest
    mtp_layer = 2 * (attn + norms + 2 * e * e + 3 * e) + moe_rest + experts_per_layer  # + eh_proj, 3 norms
    mtp = hf.get("num_nextn_predict_layers", 0) * mtp_layer
    return outside, (layers - dense_layers) * experts_per_layer, mtp, e * n_exp + 3 * e * (k * f + shared)


@pytest.mark.parametrize("preset", ["qwen3-30b-a3b", "glm-4.5-air"])
def test_moe_decode_bytes_count_only_the_touched_experts(preset):
    hf = PRESETS[preset]
    cfg = ModelConfig.from_hf_dict(hf)
    outside, experts, mtp, _ = _hand_count(hf)
    assert roofline.param_bytes(cfg, jnp.bfloat16) == outside + experts + mtp
    e, v = hf["hidden_size"], hf["vocab_size"]
    for rows in (1, 4, 16):
        touched = 1 - (1 - cfg.num_experts_per_tok / cfg.num_experts) ** rows
        want = outside + 2 * (rows * e - v * e) + round(experts * touched)
        assert roofline.decode_weight_bytes(cfg, jnp.bfloat16, rows) == want
    one = roofline.decode_weight_bytes(cfg, jnp.bfloat16, 1)
    assert outside + 2 * (e - v * e) + experts * cfg.num_experts_per_tok // cfg.num_experts == one
    # Enough tokens touch every expert: the whole decoder (still without the MTP layer).
    all_experts = outside + 2 * (4096 * e - v * e) + experts
    assert roofline.decode_weight_bytes(cfg, jnp.bfloat16, 4096) == pytest.approx(all_experts)


def test_public_total_and_active_sizes_of_qwen3_30b_a3b():
    cfg = ModelConfig.from_hf_dict(PRESETS["qwen3-30b-a3b"])
    assert roofline.param_bytes(cfg, jnp.bfloat16) / 2 == pytest.approx(30.5e9, rel=0.01)
    active = roofline.decode_weight_bytes(cfg, jnp.bfloat16, 1) / 2 + cfg.vocab_size * cfg.hidden_size
    assert active == pytest.approx(3.3e9, rel=0.03)  # "30B total, 3.3B activated" incl. the embedding


def test_expected_distinct_experts_matches_a_simulation():
    rng = np.random.default_rng(0)
    num_experts, top_k = 128, 8
    for tokens in (1, 3, 16, 64):
        trials = [len(np.unique(np.concatenate([rng.choice(num_experts, top_k, replace=False)
                                                 for _ in range(tokens)]))) for _ in range(2000)]
        expected = roofline.expected_distinct_experts(num_experts, top_k, tokens)
        assert expected == pytest.approx(np.mean(trials), rel=0.01)


@pytest.mark.parametrize("preset", ["qwen3-30b-a3b", "glm-4.5-air"])
def test_moe_prefill_flops_count_top_k_experts_per_token(preset):
    hf = PRESETS[preset]
    cfg = ModelConfig.from_hf_dict(hf)
    e, d, layers = hf["hidden_size"], hf["head_dim"], hf["num_hidden_layers"]
    q, kv = hf["num_attention_heads"] * d, hf["num_key_value_heads"] * d
    dense_layers = hf.get("first_k_dense_replace", 0)
    attn = e * q + 2 * e * kv + q * e
    moe_active = _hand_count(hf)[3]
    per_token = layers * attn + dense_layers * 3 * e * hf["intermediate_size"] + (layers - dense_layers) * moe_active
    n = 100
    want = 2.0 * per_token * n + 4.0 * layers * q * n * (n + 1) / 2 + 2.0 * e * hf["vocab_size"]
    assert roofline.prefill_flops(cfg, n) == pytest.approx(want, rel=1e-12)


@pytest.mark.parametrize("preset", ["tiny", "tiny-moe"])
def test_bytes_of_loaded_params_equal_the_spec_count_and_shrink_with_quantization(preset):
    """decode_bench counts the loaded tree's bytes (packed formats included); for bf16 that is the spec count."""
    import jax

    from dgjax import sharding
    from dgjax.checkpoint.convert import convert_params, parse_quantize
    from dgjax.checkpoint.hf_names import hf_sources
    from dgjax.models.params import init_params
    from dgjax.models.registry import get_family

    cfg = ModelConfig.from_hf_dict(PRESETS[preset])
    mesh, rules = sharding.make_mesh(1), sharding.DEFAULT_RULES
    specs = get_family(cfg).param_specs(cfg, jnp.bfloat16)
    params = init_params(specs, jax.random.key(0), mesh, rules)
    for rows in (1, 4):
        assert roofline.decode_weight_bytes_of(params, cfg, rows) == roofline.decode_weight_bytes(cfg, jnp.bfloat16, rows)
    fp8 = convert_params(params, hf_sources(cfg), specs, parse_quantize("fp8"), mesh, rules)
    bf16_bytes, fp8_bytes = (roofline.decode_weight_bytes_of(p, cfg, 1) for p in (params, fp8))
    # projections drop to one byte (plus block scales); embedding, lm_head, norms and routers stay
    assert fp8_bytes < bf16_bytes
    kept = 2 * cfg.hidden_size * (1 + cfg.vocab_size * (1 if cfg.tie_word_embeddings else 2))
    assert fp8_bytes > (bf16_bytes - kept) / 2
