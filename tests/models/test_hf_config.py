"""Parsing HF config.json / generation_config.json dialects into ModelConfig."""

from __future__ import annotations

import json

import pytest

from dgjax.config import ModelConfig

LLAMA31_8B = {  # transformers 4.x spelling: rope_scaling + rope_theta, torch_dtype
    "architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": 128256, "hidden_size": 4096,
    "intermediate_size": 14336, "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8,
    "max_position_embeddings": 131072, "rms_norm_eps": 1e-05, "rope_theta": 500000.0,
    "rope_scaling": {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                     "original_max_position_embeddings": 8192, "rope_type": "llama3"},
    "bos_token_id": 128000, "eos_token_id": [128001, 128008, 128009], "tie_word_embeddings": False,
    "torch_dtype": "bfloat16", "attention_bias": False, "mlp_bias": False, "hidden_act": "silu",
}
LLAMA31_GEN = {"bos_token_id": 128000, "do_sample": True, "eos_token_id": [128001, 128008, 128009],
               "temperature": 0.6, "top_p": 0.9}
QWEN25_05B = {
    "architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "vocab_size": 151936, "hidden_size": 896,
    "intermediate_size": 4864, "num_hidden_layers": 24, "num_attention_heads": 14, "num_key_value_heads": 2,
    "max_position_embeddings": 32768, "rope_theta": 1000000.0, "rms_norm_eps": 1e-06, "sliding_window": 32768,
    "use_sliding_window": False, "max_window_layers": 21, "tie_word_embeddings": True, "eos_token_id": 151643,
    "bos_token_id": 151643, "torch_dtype": "bfloat16",
}
QWEN3_06B = {  # transformers 5.x spelling: rope_parameters, dtype
    "architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "vocab_size": 151936, "hidden_size": 1024,
    "intermediate_size": 3072, "num_hidden_layers": 28, "num_attention_heads": 16, "num_key_value_heads": 8,
    "head_dim": 128, "max_position_embeddings": 40960, "rope_parameters": {"rope_theta": 1000000, "rope_type": "default"},
    "attention_bias": False, "use_sliding_window": False, "sliding_window": None, "tie_word_embeddings": True,
    "eos_token_id": 151645, "bos_token_id": 151643, "dtype": "bfloat16",
}
QWEN3_GEN = {"eos_token_id": [151645, 151643], "pad_token_id": 151643, "temperature": 0.6, "top_k": 20,
             "top_p": 0.95, "repetition_penalty": 1.05}
MISTRAL_7B_V01 = {
    "architectures": ["MistralForCausalLM"], "model_type": "mistral", "vocab_size": 32000, "hidden_size": 4096,
    "intermediate_size": 14336, "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8,
    "max_position_embeddings": 32768, "rope_theta": 10000.0, "sliding_window": 4096, "bos_token_id": 1,
    "eos_token_id": 2, "torch_dtype": "bfloat16",
}


def test_llama31_rope_scaling_eos_union_and_generation_defaults():
    cfg = ModelConfig.from_hf_dict(LLAMA31_8B, LLAMA31_GEN)
    rs = LLAMA31_8B["rope_scaling"]
    assert (cfg.rope_scaling.rope_type, cfg.rope_scaling.factor) == ("llama3", rs["factor"])
    assert cfg.rope_scaling.original_max_position_embeddings == rs["original_max_position_embeddings"]
    assert cfg.rope_theta == LLAMA31_8B["rope_theta"]
    assert cfg.head_dim == LLAMA31_8B["hidden_size"] // LLAMA31_8B["num_attention_heads"]
    assert cfg.eos_token_ids == tuple(LLAMA31_8B["eos_token_id"])
    assert (cfg.default_temperature, cfg.default_top_p) == (LLAMA31_GEN["temperature"], LLAMA31_GEN["top_p"])
    assert cfg.default_top_k is None and cfg.default_repetition_penalty is None
    assert not (cfg.attention_bias or cfg.qk_norm or cfg.tie_word_embeddings) and cfg.sliding_window is None
    assert cfg.rms_norm_eps == LLAMA31_8B["rms_norm_eps"] and cfg.torch_dtype == "bfloat16"
    hash(cfg)


def test_qwen2_always_has_qkv_bias_but_no_o_bias_and_ignores_disabled_window():
    cfg = ModelConfig.from_hf_dict(QWEN25_05B, {})
    assert cfg.attention_bias and not cfg.o_proj_bias
    assert cfg.sliding_window is None and cfg.tie_word_embeddings
    assert all(cfg.layer_sliding_window(i) is None for i in range(cfg.num_hidden_layers))


def test_qwen3_head_dim_qk_norm_and_merged_eos_from_generation_config():
    cfg = ModelConfig.from_hf_dict(QWEN3_06B, QWEN3_GEN)
    assert cfg.head_dim == QWEN3_06B["head_dim"] != cfg.hidden_size // cfg.num_attention_heads
    assert cfg.qk_norm and not cfg.attention_bias
    assert cfg.rope_theta == 1000000 and cfg.rope_scaling.rope_type == "default"
    assert cfg.eos_token_ids == (151645, 151643)  # config's int first, then the new one from the list
    assert cfg.pad_token_id == QWEN3_GEN["pad_token_id"]
    assert (cfg.default_top_k, cfg.default_repetition_penalty) == (20, 1.05)


def test_qwen3_sliding_window_applies_from_max_window_layers():
    hf = {**QWEN3_06B, "use_sliding_window": True, "sliding_window": 4096, "max_window_layers": 20}
    cfg = ModelConfig.from_hf_dict(hf, {})
    assert [cfg.layer_sliding_window(i) for i in (0, 19, 20, 27)] == [None, None, 4096, 4096]


def test_mistral_sliding_window_on_every_layer_and_null_window():
    cfg = ModelConfig.from_hf_dict(MISTRAL_7B_V01, {})
    assert {cfg.layer_sliding_window(i) for i in range(32)} == {4096}
    v03 = ModelConfig.from_hf_dict({**MISTRAL_7B_V01, "sliding_window": None}, {})
    assert v03.sliding_window is None and v03.layer_sliding_window(0) is None


def test_old_type_key_yarn_and_defaults():
    hf = {**QWEN25_05B, "rope_scaling": {"type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768}}
    rs = ModelConfig.from_hf_dict(hf, {}).rope_scaling
    assert (rs.rope_type, rs.factor, rs.original_max_position_embeddings) == ("yarn", 4.0, 32768)
    assert (rs.beta_fast, rs.beta_slow, rs.truncate, rs.attention_factor) == (32.0, 1.0, True, None)


def test_rope_parameters_nested_per_layer_type_when_identical():
    rope = {"rope_type": "linear", "factor": 2.0, "rope_theta": 20000.0}
    hf = {**LLAMA31_8B, "rope_scaling": None, "rope_parameters": {"full_attention": rope, "sliding_attention": rope}}
    cfg = ModelConfig.from_hf_dict(hf, {})
    assert (cfg.rope_scaling.rope_type, cfg.rope_scaling.factor, cfg.rope_theta) == ("linear", 2.0, 20000.0)


def test_unknown_architecture_and_rope_type_are_named_in_errors():
    with pytest.raises(ValueError, match="GPT2LMHeadModel"):
        ModelConfig.from_hf_dict({**LLAMA31_8B, "architectures": ["GPT2LMHeadModel"]}, {})
    with pytest.raises(ValueError, match="longrope"):
        ModelConfig.from_hf_dict({**LLAMA31_8B, "rope_scaling": {"rope_type": "longrope", "factor": 2.0}}, {})


def test_from_dir_reads_both_files(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps(QWEN3_06B))
    (tmp_path / "generation_config.json").write_text(json.dumps(QWEN3_GEN))
    assert ModelConfig.from_dir(str(tmp_path)) == ModelConfig.from_hf_dict(QWEN3_06B, QWEN3_GEN)
