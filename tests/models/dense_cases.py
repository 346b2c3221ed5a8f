"""Tiny random HF models of each dense family, saved with safetensors and loaded with dgjax's loader."""

from __future__ import annotations

import torch
import transformers
from hf_cases import NEW_TOKENS, PROMPT, HFCase, load_case, randomize_vectors  # noqa: F401 (re-exported)

TINY = dict(
    vocab_size=128, hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
    num_key_value_heads=2, max_position_embeddings=64, initializer_range=0.1,
    bos_token_id=None, eos_token_id=None, pad_token_id=None,
)

# name -> (transformers config class, overrides, save with several safetensors shards)
CASES = {
    "llama3_rope_untied_sharded": (transformers.LlamaConfig, dict(rope_parameters=dict(
        rope_type="llama3", factor=8.0, low_freq_factor=1.0, high_freq_factor=4.0,
        original_max_position_embeddings=16, rope_theta=500000.0)), True),
    "llama_yarn_tied": (transformers.LlamaConfig, dict(tie_word_embeddings=True, rope_parameters=dict(
        rope_type="yarn", factor=4.0, original_max_position_embeddings=16, rope_theta=10000.0)), False),
    "llama_linear_biases": (transformers.LlamaConfig, dict(attention_bias=True, mlp_bias=True, rope_parameters=dict(
        rope_type="linear", factor=2.0, rope_theta=10000.0)), False),
    "qwen2_qkv_bias_tied": (transformers.Qwen2Config, dict(tie_word_embeddings=True), False),
    "qwen3_qk_norm_head_dim_sliding_layer": (transformers.Qwen3Config, dict(
        head_dim=24, use_sliding_window=True, sliding_window=4, max_window_layers=1), False),
    "mistral_sliding_window": (transformers.MistralConfig, dict(sliding_window=5), False),
}


DenseCase = HFCase


def build_case(name: str, path) -> DenseCase:
    """Create, randomize and save the HF model `name`, then load it with dgjax."""
    config_cls, overrides, sharded = CASES[name]
    torch.manual_seed(0)
    hf_cfg = config_cls(**{**TINY, **overrides})
    model = transformers.AutoModelForCausalLM.from_config(hf_cfg, attn_implementation="eager", dtype=torch.float32)
    model.eval()
    randomize_vectors(model)
    model.save_pretrained(path, max_shard_size="40KB" if sharded else "1GB")
    if sharded:
        assert (path / "model.safetensors.index.json").exists()
    return load_case(HFCase, name, model, path)
