"""Tiny random HF models of each dense family, saved with safetensors and loaded with dgjax's loader."""

from __future__ import annotations

import dataclasses

import numpy as np
import torch
import transformers

from dgjax.checkpoint.loader import load_params
from dgjax.config import ModelConfig
from dgjax.sharding import DEFAULT_RULES, make_mesh

TINY = dict(
    vocab_size=128, hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
    num_key_value_heads=2, max_position_embeddings=64, initializer_range=0.1,
    bos_token_id=None, eos_token_id=None, pad_token_id=None,
)
PROMPT = [5, 17, 99, 3, 64, 23, 8]
NEW_TOKENS = 6

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


@dataclasses.dataclass
class DenseCase:
    name: str
    hf_model: torch.nn.Module
    cfg: ModelConfig
    params: object
    mesh: object
    hf_tokens: list[int]  # PROMPT + HF's greedy continuation
    hf_logprobs: np.ndarray  # HF teacher-forced log-probs over hf_tokens [L, V]

    def hf_greedy(self, prompt: list[int], n: int) -> list[int]:
        with torch.no_grad():
            out = self.hf_model.generate(torch.tensor([prompt]), max_new_tokens=n, do_sample=False)
        return out[0, len(prompt):].tolist()


def _randomize_vectors(model: torch.nn.Module) -> None:
    """HF inits norms to 1 and biases to 0, which would hide a missing norm or bias; perturb them."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.ndim == 1:
                p.copy_((1.0 if "norm" in name else 0.0) + 0.3 * torch.randn_like(p))


def build_case(name: str, path) -> DenseCase:
    """Create, randomize and save the HF model `name`, then load it with dgjax."""
    config_cls, overrides, sharded = CASES[name]
    torch.manual_seed(0)
    hf_cfg = config_cls(**{**TINY, **overrides})
    model = transformers.AutoModelForCausalLM.from_config(hf_cfg, attn_implementation="eager", dtype=torch.float32)
    model.eval()
    _randomize_vectors(model)
    model.save_pretrained(path, max_shard_size="40KB" if sharded else "1GB")
    if sharded:
        assert (path / "model.safetensors.index.json").exists()

    cfg = ModelConfig.from_dir(str(path))
    mesh = make_mesh(1)
    params = load_params(str(path), cfg, "float32", mesh, DEFAULT_RULES)
    case = DenseCase(name, model, cfg, params, mesh, [], np.zeros(0))
    case.hf_tokens = PROMPT + case.hf_greedy(PROMPT, NEW_TOKENS)
    with torch.no_grad():
        logits = model(torch.tensor([case.hf_tokens])).logits[0]
    case.hf_logprobs = torch.log_softmax(logits.float(), -1).numpy()
    return case
