"""HF `architectures` -> the model family that implements it (functions plus checkpoint name map)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from dgjax.config import ModelConfig
from dgjax.models import llama


@dataclasses.dataclass(frozen=True)
class ModelFamily:
    name: str
    param_specs: Callable[..., Any]  # (cfg, dtype="auto") -> params pytree of ParamSpec
    forward: Callable[..., Any]  # (params, kv, batch, cfg) -> (hidden, kv)
    logits: Callable[..., Any]  # (params, hidden, cfg) -> float32 logits
    names: Any  # dgjax.checkpoint.hf_names.NameMap


def _dense() -> ModelFamily:
    from dgjax.checkpoint.hf_names import DENSE_NAMES

    return ModelFamily("dense", llama.param_specs, llama.forward, llama.logits, DENSE_NAMES)


def _qwen3_moe() -> ModelFamily:
    from dgjax.checkpoint.moe_names import MOE_NAMES
    from dgjax.models import qwen3_moe

    return ModelFamily("qwen3_moe", qwen3_moe.param_specs, qwen3_moe.forward, qwen3_moe.logits, MOE_NAMES)


def _glm4_moe() -> ModelFamily:
    from dgjax.checkpoint.moe_names import MOE_NAMES
    from dgjax.models import glm4_moe

    return ModelFamily("glm4_moe", glm4_moe.param_specs, glm4_moe.forward, glm4_moe.logits, MOE_NAMES)


_FAMILIES: dict[str, Callable[[], ModelFamily]] = {
    "LlamaForCausalLM": _dense,
    "Qwen2ForCausalLM": _dense,
    "Qwen3ForCausalLM": _dense,
    "MistralForCausalLM": _dense,
    "Qwen3MoeForCausalLM": _qwen3_moe,
    "Glm4MoeForCausalLM": _glm4_moe,
}


def supported_architectures() -> tuple[str, ...]:
    return tuple(sorted(_FAMILIES))


def get_family(cfg: ModelConfig) -> ModelFamily:
    if cfg.architecture not in _FAMILIES:
        raise ValueError(f"no model family for architecture {cfg.architecture!r}; supported: {supported_architectures()}")
    return _FAMILIES[cfg.architecture]()
