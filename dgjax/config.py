"""Static configuration: the model as described by its HF files, and the engine's own choices.

Both are frozen and hashable so they can be passed as static arguments under `jax.jit`.
"""

from __future__ import annotations

import dataclasses
import json
import os
from typing import Any

from dgjax.env import env_count


@dataclasses.dataclass(frozen=True)
class RopeScaling:
    """HF `rope_scaling` / `rope_parameters`, flattened to the fields the rope code needs."""

    rope_type: str = "default"  # default | linear | llama3 | yarn | dynamic
    factor: float = 1.0
    low_freq_factor: float = 1.0  # llama3
    high_freq_factor: float = 4.0  # llama3
    original_max_position_embeddings: int | None = None  # llama3, yarn
    beta_fast: float = 32.0  # yarn
    beta_slow: float = 1.0  # yarn
    mscale: float | None = None  # yarn
    mscale_all_dim: float | None = None  # yarn
    attention_factor: float | None = None  # yarn
    truncate: bool = True  # yarn


@dataclasses.dataclass(frozen=True)
class ModelConfig:
    """The subset of an HF `config.json` (+ `generation_config.json`) that dgjax's models use."""

    architecture: str
    model_type: str
    vocab_size: int
    hidden_size: int
    intermediate_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    max_position_embeddings: int
    rms_norm_eps: float = 1e-6
    rope_theta: float = 10000.0
    rope_scaling: RopeScaling = RopeScaling()
    partial_rotary_factor: float = 1.0
    hidden_act: str = "silu"
    tie_word_embeddings: bool = False
    attention_bias: bool = False  # bias on q/k/v projections (Qwen2 always; Llama optional)
    o_proj_bias: bool = False
    mlp_bias: bool = False
    qk_norm: bool = False  # Qwen3: RMSNorm over head_dim on q and k before rope
    sliding_window: int | None = None  # Mistral v0.1 style, applied on every layer
    # Per-layer "full_attention" / "sliding_attention" (Qwen2/Qwen3 with use_sliding_window);
    # empty: `sliding_window` (if set) applies to every layer.
    layer_types: tuple[str, ...] = ()
    # Mixture of experts (num_experts == 0: dense). Which layers are sparse: see `is_moe_layer`.
    num_experts: int = 0
    num_experts_per_tok: int = 0
    moe_intermediate_size: int = 0  # each routed expert's hidden size
    shared_expert_intermediate_size: int = 0  # 0: no shared expert (GLM: moe_intermediate * n_shared_experts)
    moe_scoring_func: str = "softmax"  # softmax (Qwen3-MoE) | sigmoid (GLM-4.5, DeepSeek-V3)
    moe_score_correction_bias: bool = False  # e_score_correction_bias added to scores for selection only
    norm_topk_prob: bool = False  # renormalize the selected experts' weights to sum to 1
    routed_scaling_factor: float = 1.0  # multiplies the routed experts' weights
    n_group: int = 1  # group-limited routing: experts in n_group groups, top topk_group groups kept
    topk_group: int = 1
    first_k_dense_replace: int = 0  # the first k layers are dense (GLM, DeepSeek)
    decoder_sparse_step: int = 1  # every step-th layer is sparse (Qwen MoE)
    mlp_only_layers: tuple[int, ...] = ()  # dense layers by index (Qwen MoE)
    num_nextn_predict_layers: int = 0  # MTP layers stored after the decoder layers (loaded, not run)
    torch_dtype: str = "bfloat16"
    bos_token_id: int | None = None
    eos_token_ids: tuple[int, ...] = ()
    pad_token_id: int | None = None
    # generation_config.json defaults (None: not given)
    default_temperature: float | None = None
    default_top_p: float | None = None
    default_top_k: int | None = None
    default_repetition_penalty: float | None = None

    @property
    def q_size(self) -> int:
        return self.num_attention_heads * self.head_dim

    @property
    def kv_size(self) -> int:
        return self.num_key_value_heads * self.head_dim

    def layer_sliding_window(self, layer: int) -> int | None:
        """The attention window of `layer` (keys at positions > query position - window), None: full."""
        if self.sliding_window is None:
            return None
        if self.layer_types and self.layer_types[layer] != "sliding_attention":
            return None
        return self.sliding_window

    def is_moe_layer(self, layer: int) -> bool:
        """Whether decoder layer `layer` (MTP layers continue the numbering) has a sparse MoE block."""
        if self.num_experts <= 0 or layer < self.first_k_dense_replace or layer in self.mlp_only_layers:
            return False
        return (layer + 1) % self.decoder_sparse_step == 0

    @staticmethod
    def from_dir(model_dir: str) -> "ModelConfig":
        """Parse `config.json` and (if present) `generation_config.json` of an HF model folder."""
        with open(os.path.join(model_dir, "config.json")) as f:
            hf = json.load(f)
        gen: dict[str, Any] = {}
        gen_path = os.path.join(model_dir, "generation_config.json")
        if os.path.exists(gen_path):
            with open(gen_path) as f:
                gen = json.load(f)
        return ModelConfig.from_hf_dict(hf, gen)

    @staticmethod
    def from_hf_dict(hf: dict[str, Any], gen: dict[str, Any] | None = None) -> "ModelConfig":
        from dgjax.models.hf_config import parse_hf_config

        return parse_hf_config(hf, gen or {})


DEFAULT_DECODE_BUCKETS = (1, 2, 4, 8, 16)
# A single stream decodes in the width-2 executable (its padding row uses the executor's pad slot): XLA's
# batch-1 decode step measured 2.2x slower than its batch-2 step on an H200 (10.1 vs 4.6 ms for
# Llama-3.1-8B); with --max-concurrency 1 (then still width 1) the fp8 MoE engines left the device idle
# 63-66% of each tick (benchmarks/results/2026-12-01-*-fp8-*), so a single slot gets width 2 as well.
MIN_DECODE_WIDTH = 2
MIN_DECODE_WIDTH_ENV = "DGJAX_MIN_DECODE_WIDTH"  # a probe of that choice on today's kernels (benchmarks)
DEFAULT_PREFILL_BUCKETS = (16, 64, 256, 1024)


@dataclasses.dataclass(frozen=True)
class EngineConfig:
    """What the engine decides independently of the model: buckets, paging, limits, dtypes."""

    dtype: str = "auto"  # auto (checkpoint's torch_dtype) | bfloat16 | float32
    # KV pages: auto (= dtype) | bfloat16 | float32 | fp8_e4m3 (alias fp8; e4m3 + per-token-head f32 scales)
    kv_cache_dtype: str = "auto"
    load_format: str = "safetensors"  # safetensors | dummy (random weights on device: benchmarks)
    # Load-time weight conversion (dgjax.checkpoint.convert): none | fp8 | nvfp4 | nvfp4-experts | fp8+nvfp4-experts
    quantize: str = "none"
    max_model_len: int | None = None  # None: min(model's max_position_embeddings, 8192)
    max_concurrency: int = 16  # decode slots; also the largest decode bucket used
    max_queue: int = 256  # waiting requests beyond which new ones get 503
    page_size: int = 16
    num_pages: int | None = None  # None: sized from kv_memory_bytes
    kv_memory_bytes: int | None = None  # None: a default per platform (see runtime.kv_cache)
    decode_buckets: tuple[int, ...] = DEFAULT_DECODE_BUCKETS
    prefill_buckets: tuple[int, ...] = DEFAULT_PREFILL_BUCKETS
    enable_prefix_cache: bool = True
    # Also compile the top-logprobs / prompt-logprobs variants ahead of time (else on first use).
    aot_logprob_variants: bool = True
    # Also compile the split tick (forward-only + sampling-with-grammar-mask) that constrained requests
    # use ahead of time (else on the first constrained request).
    aot_structured_variants: bool = True
    compilation_cache_dir: str | None = None  # None: $DGJAX_CACHE_DIR or ~/.cache/dgjax/xla
    tensor_parallel: int = 1
    # MoE: split the routed experts over the tensor-parallel devices (whole experts per device) instead
    # of splitting every expert's hidden dimension.
    expert_parallel: bool = False
    seed: int = 0

    def resolved_max_model_len(self, model: ModelConfig) -> int:
        if self.max_model_len is not None:
            return self.max_model_len
        return min(model.max_position_embeddings, 8192)

    def used_decode_buckets(self) -> tuple[int, ...]:
        """Decode widths up to and including the first bucket that holds max_concurrency.

        Widths under MIN_DECODE_WIDTH ($DGJAX_MIN_DECODE_WIDTH if set) are raised to it (padding rows), even
        with a single slot.
        """
        floor = min_decode_width()
        out = []
        for b in sorted({max(b, floor) for b in self.decode_buckets}):
            out.append(b)
            if b >= self.max_concurrency:
                break
        if out[-1] < self.max_concurrency:
            out.append(self.max_concurrency)
        return tuple(out)


def min_decode_width() -> int:
    """The narrowest decode executable: MIN_DECODE_WIDTH, or $DGJAX_MIN_DECODE_WIDTH (an integer >= 1)."""
    return env_count(MIN_DECODE_WIDTH_ENV, MIN_DECODE_WIDTH, "a decode width", minimum=1)
