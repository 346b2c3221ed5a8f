"""dgjax's rope frequencies and attention factors equal transformers' for every supported scaling."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import transformers
from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

from dgjax.config import ModelConfig
from dgjax.models.blocks import rope_cos_sin, rope_frequencies

VARIANTS = {
    "default": dict(rope_type="default", rope_theta=10000.0),
    "linear": dict(rope_type="linear", factor=4.0, rope_theta=10000.0),
    "llama3_8b": dict(rope_type="llama3", factor=8.0, low_freq_factor=1.0, high_freq_factor=4.0,
                      original_max_position_embeddings=8192, rope_theta=500000.0),
    "yarn": dict(rope_type="yarn", factor=4.0, original_max_position_embeddings=1024, rope_theta=1000000.0),
    "yarn_mscale_untruncated": dict(rope_type="yarn", factor=40.0, original_max_position_embeddings=4096,
                                    mscale=0.707, mscale_all_dim=1.0, beta_fast=16, truncate=False,
                                    rope_theta=10000.0),
    "yarn_attention_factor": dict(rope_type="yarn", factor=2.0, original_max_position_embeddings=2048,
                                  attention_factor=0.8, rope_theta=10000.0),
}


def _hf_config(rope: dict, partial: float | None = None) -> transformers.LlamaConfig:
    extra = {} if partial is None else {"partial_rotary_factor": partial}
    cfg = transformers.LlamaConfig(hidden_size=512, num_attention_heads=4, head_dim=128,
                                   max_position_embeddings=8192 * 8, rope_parameters=dict(rope), **extra)
    cfg.architectures = ["LlamaForCausalLM"]
    return cfg


def _transformers_rope(cfg: transformers.LlamaConfig) -> tuple[np.ndarray, float]:
    kind = cfg.rope_parameters["rope_type"]
    if kind == "default":
        inv, factor = transformers.models.llama.modeling_llama.LlamaRotaryEmbedding.compute_default_rope_parameters(cfg)
    else:
        inv, factor = ROPE_INIT_FUNCTIONS[kind](cfg)
    return inv.numpy(), factor


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_rope_frequencies_match_transformers(name):
    hf = _hf_config(VARIANTS[name])
    inv, factor = rope_frequencies(ModelConfig.from_hf_dict(hf.to_dict()))
    hf_inv, hf_factor = _transformers_rope(hf)
    np.testing.assert_allclose(inv, hf_inv, rtol=1e-5)
    assert factor == pytest.approx(hf_factor, rel=1e-9)


def test_partial_rotary_yarn_matches_transformers():
    hf = _hf_config(VARIANTS["yarn_mscale_untruncated"], partial=0.5)
    cfg = ModelConfig.from_hf_dict(hf.to_dict())
    inv, factor = rope_frequencies(cfg)
    hf_inv, hf_factor = _transformers_rope(hf)
    assert inv.shape == (32,)
    np.testing.assert_allclose(inv, hf_inv, rtol=1e-5)
    assert factor == pytest.approx(hf_factor, rel=1e-9)


@pytest.mark.parametrize("name", ["llama3_8b", "yarn"])
def test_rope_cos_sin_match_transformers_rotary_embedding(name):
    # Frequencies differ from transformers' in the last float32 ulp, so angles drift ~ position * 1e-7.
    hf = _hf_config(VARIANTS[name])
    rotary = transformers.models.llama.modeling_llama.LlamaRotaryEmbedding(hf)
    positions = np.array([[0, 1, 17, 1000]], np.int32)
    hf_cos, hf_sin = rotary(torch.zeros(1, dtype=torch.float32), torch.tensor(positions, dtype=torch.long))
    cos, sin = rope_cos_sin(positions, ModelConfig.from_hf_dict(hf.to_dict()))
    np.testing.assert_allclose(np.asarray(cos), hf_cos.numpy(), atol=1e-4)
    np.testing.assert_allclose(np.asarray(sin), hf_sin.numpy(), atol=1e-4)
