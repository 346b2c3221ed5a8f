"""Model shapes to benchmark, as HF `config.json` dicts, and the throwaway model folders built from them.

The weights are random (the engine's `load_format="dummy"` creates them on the device), so a folder
needs only `config.json` and a tokenizer. The tokenizer comes from `checkpoints/tiny-chat`: its
2048-token vocabulary is smaller than the presets', and ids beyond it decode to empty text
(`tokenizers` skips unknown ids), which the engine's detokenizer handles without error.
"""

from __future__ import annotations

import json
import os
import shutil

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOKENIZER_SOURCE = os.path.join(REPO, "checkpoints", "tiny-chat")
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json")

# Public config.json facts (see /work/shared/REFERENCE.md); only what dgjax's parser reads matters.
PRESETS: dict[str, dict] = {
    "llama-3.1-8b": {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "vocab_size": 128256,
        "hidden_size": 4096,
        "intermediate_size": 14336,
        "num_hidden_layers": 32,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "head_dim": 128,
        "max_position_embeddings": 131072,
        "rms_norm_eps": 1e-5,
        "rope_theta": 500000.0,
        "rope_scaling": {
            "rope_type": "llama3",
            "factor": 8.0,
            "low_freq_factor": 1.0,
            "high_freq_factor": 4.0,
            "original_max_position_embeddings": 8192,
        },
        "hidden_act": "silu",
        "attention_bias": False,
        "mlp_bias": False,
        "tie_word_embeddings": False,
        "bos_token_id": 128000,
        "eos_token_id": [128001, 128008, 128009],
        "torch_dtype": "bfloat16",
    },
    "qwen3-8b": {
        "architectures": ["Qwen3ForCausalLM"],
        "model_type": "qwen3",
        "vocab_size": 151936,
        "hidden_size": 4096,
        "intermediate_size": 12288,
        "num_hidden_layers": 36,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "head_dim": 128,
        "max_position_embeddings": 40960,
        "rms_norm_eps": 1e-6,
        "rope_theta": 1000000.0,
        "hidden_act": "silu",
        "attention_bias": False,
        "use_sliding_window": False,
        "tie_word_embeddings": False,
        "bos_token_id": 151643,
        "eos_token_id": 151645,
        "torch_dtype": "bfloat16",
    },
    "qwen3-30b-a3b": {
        "architectures": ["Qwen3MoeForCausalLM"],
        "model_type": "qwen3_moe",
        "vocab_size": 151936,
        "hidden_size": 2048,
        "intermediate_size": 6144,
        "moe_intermediate_size": 768,
        "num_hidden_layers": 48,
        "num_attention_heads": 32,
        "num_key_value_heads": 4,
        "head_dim": 128,
        "num_experts": 128,
        "num_experts_per_tok": 8,
        "norm_topk_prob": True,
        "decoder_sparse_step": 1,
        "mlp_only_layers": [],
        "max_position_embeddings": 40960,
        "rms_norm_eps": 1e-6,
        "rope_theta": 1000000.0,
        "hidden_act": "silu",
        "attention_bias": False,
        "use_sliding_window": False,
        "tie_word_embeddings": False,
        "bos_token_id": 151643,
        "eos_token_id": 151645,
        "torch_dtype": "bfloat16",
    },
    "glm-4.5-air": {
        "architectures": ["Glm4MoeForCausalLM"],
        "model_type": "glm4_moe",
        "vocab_size": 151552,
        "hidden_size": 4096,
        "intermediate_size": 10944,
        "moe_intermediate_size": 1408,
        "num_hidden_layers": 46,
        "num_attention_heads": 96,
        "num_key_value_heads": 8,
        "head_dim": 128,
        "partial_rotary_factor": 0.5,
        "n_routed_experts": 128,
        "n_shared_experts": 1,
        "num_experts_per_tok": 8,
        "n_group": 1,
        "topk_group": 1,
        "routed_scaling_factor": 1.0,
        "norm_topk_prob": True,
        "first_k_dense_replace": 1,
        "num_nextn_predict_layers": 1,
        "use_qk_norm": False,
        "attention_bias": True,
        "max_position_embeddings": 131072,
        "rms_norm_eps": 1e-5,
        "rope_theta": 1000000,
        "hidden_act": "silu",
        "tie_word_embeddings": False,
        "pad_token_id": 151329,
        "eos_token_id": [151329, 151336, 151338],
        "torch_dtype": "bfloat16",
    },
    # CPU smoke tests: the llama3 rope path and a vocabulary larger than the tokenizer's, like the
    # real presets, at a size that compiles and runs in seconds.
    "tiny": {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "vocab_size": 4096,
        "hidden_size": 128,
        "intermediate_size": 256,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "head_dim": 32,
        "max_position_embeddings": 4096,
        "rms_norm_eps": 1e-5,
        "rope_theta": 500000.0,
        "rope_scaling": {
            "rope_type": "llama3",
            "factor": 8.0,
            "low_freq_factor": 1.0,
            "high_freq_factor": 4.0,
            "original_max_position_embeddings": 1024,
        },
        "hidden_act": "silu",
        "tie_word_embeddings": False,
        "bos_token_id": 1,
        "eos_token_id": 2,
        "torch_dtype": "bfloat16",
    },
    # CPU smoke runs of the MoE path: GLM-4.5 routing (sigmoid + groups), a shared expert, a dense first
    # layer, partial rope and an MTP layer in the parameters.
    "tiny-moe": {
        "architectures": ["Glm4MoeForCausalLM"],
        "model_type": "glm4_moe",
        "vocab_size": 4096,
        "hidden_size": 128,
        "intermediate_size": 256,
        "moe_intermediate_size": 64,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "head_dim": 32,
        "partial_rotary_factor": 0.5,
        "n_routed_experts": 16,
        "n_shared_experts": 1,
        "num_experts_per_tok": 4,
        "n_group": 2,
        "topk_group": 1,
        "routed_scaling_factor": 2.5,
        "first_k_dense_replace": 1,
        "num_nextn_predict_layers": 1,
        "attention_bias": True,
        "max_position_embeddings": 4096,
        "rms_norm_eps": 1e-5,
        "rope_theta": 1000000,
        "hidden_act": "silu",
        "tie_word_embeddings": False,
        "bos_token_id": 1,
        "eos_token_id": 2,
        "torch_dtype": "bfloat16",
    },
}


def write_model_dir(preset: str, dest: str) -> str:
    """Write `config.json` for `preset` and copy the tokenizer files into `dest`; returns `dest`."""
    if preset not in PRESETS:
        raise ValueError(f"unknown preset {preset!r}; known: {sorted(PRESETS)}")
    os.makedirs(dest, exist_ok=True)
    with open(os.path.join(dest, "config.json"), "w") as f:
        json.dump(PRESETS[preset], f, indent=2)
    for name in TOKENIZER_FILES:
        shutil.copyfile(os.path.join(TOKENIZER_SOURCE, name), os.path.join(dest, name))
    return dest
