"""MoE config parsing: field spellings, HF's per-family defaults, and which layers are sparse."""

from __future__ import annotations

import json

import pytest
import torch
import transformers

from dgjax.config import ModelConfig

SMALL = dict(vocab_size=32, hidden_size=16, intermediate_size=24, moe_intermediate_size=8, num_attention_heads=2,
             num_key_value_heads=1, num_experts_per_tok=2)


def _saved_config(hf_cfg, tmp_path) -> dict:
    hf_cfg.save_pretrained(tmp_path)
    return json.loads((tmp_path / "config.json").read_text())


@pytest.mark.parametrize("config_cls, kwargs", [
    (transformers.Qwen3MoeConfig, dict(num_experts=4, num_hidden_layers=6, decoder_sparse_step=2, mlp_only_layers=[3])),
    (transformers.Qwen3MoeConfig, dict(num_experts=4, num_hidden_layers=3, mlp_only_layers=[0, 2])),
    (transformers.Glm4MoeConfig, dict(n_routed_experts=4, num_hidden_layers=4, first_k_dense_replace=2)),
])
def test_sparse_layers_are_the_ones_transformers_builds(config_cls, kwargs, tmp_path):
    hf_cfg = config_cls(**SMALL, **kwargs)
    cfg = ModelConfig.from_hf_dict(_saved_config(hf_cfg, tmp_path))
    model = transformers.AutoModelForCausalLM.from_config(hf_cfg, dtype=torch.float32)
    hf_sparse = [hasattr(layer.mlp, "experts") for layer in model.model.layers]
    assert [cfg.is_moe_layer(i) for i in range(cfg.num_hidden_layers)] == hf_sparse
    assert True in hf_sparse and False in hf_sparse


def test_qwen3_moe_fields_in_both_expert_count_spellings():
    public = dict(architectures=["Qwen3MoeForCausalLM"], model_type="qwen3_moe", **SMALL, num_hidden_layers=2,
                  num_experts=16, norm_topk_prob=True)
    saved_by_transformers5 = {**{k: v for k, v in public.items() if k != "num_experts"}, "num_local_experts": 16}
    for hf in (public, saved_by_transformers5):
        cfg = ModelConfig.from_hf_dict(hf)
        assert (cfg.num_experts, cfg.num_experts_per_tok, cfg.moe_intermediate_size) == (16, 2, 8)
        assert cfg.norm_topk_prob and cfg.qk_norm and cfg.moe_scoring_func == "softmax"
        assert cfg.shared_expert_intermediate_size == 0 and not cfg.moe_score_correction_bias


def test_qwen3_moe_sliding_window_applies_to_every_layer():
    hf = dict(architectures=["Qwen3MoeForCausalLM"], model_type="qwen3_moe", **SMALL, num_hidden_layers=2,
              num_experts=4, use_sliding_window=True, sliding_window=8)
    cfg = ModelConfig.from_hf_dict(hf)
    assert [cfg.layer_sliding_window(i) for i in range(2)] == [8, 8]
    assert ModelConfig.from_hf_dict({**hf, "use_sliding_window": False}).sliding_window is None


def test_glm4_moe_fields_and_transformers_defaults():
    hf = dict(architectures=["Glm4MoeForCausalLM"], model_type="glm4_moe", **SMALL, num_hidden_layers=3,
              n_routed_experts=8, n_shared_experts=2, n_group=2, topk_group=1, routed_scaling_factor=2.5,
              attention_bias=True, num_nextn_predict_layers=1, rope_theta=1e6)
    cfg = ModelConfig.from_hf_dict(hf)
    assert cfg.moe_scoring_func == "sigmoid" and cfg.moe_score_correction_bias
    assert (cfg.n_group, cfg.topk_group, cfg.routed_scaling_factor) == (2, 1, 2.5)
    assert cfg.shared_expert_intermediate_size == 16  # moe_intermediate_size * n_shared_experts
    assert cfg.attention_bias and not cfg.o_proj_bias and not cfg.qk_norm
    assert cfg.num_nextn_predict_layers == 1
    # Absent keys take Glm4MoeConfig's defaults: half-rotary, renormalized top-k, one dense layer.
    defaults = transformers.Glm4MoeConfig()
    assert cfg.partial_rotary_factor == defaults.rope_parameters["partial_rotary_factor"] == 0.5
    assert cfg.norm_topk_prob == defaults.norm_topk_prob
    assert cfg.first_k_dense_replace == defaults.first_k_dense_replace
    assert ModelConfig.from_hf_dict({**hf, "use_qk_norm": True, "partial_rotary_factor": 1.0}).qk_norm
    assert ModelConfig.from_hf_dict({**hf, "partial_rotary_factor": 1.0}).partial_rotary_factor == 1.0
