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


_FAMILIES: dict[str, Callable[[], ModelFamily]] = {
    "LlamaForCausalLM": _dense,
    "Qwen2ForCausalLM": _dense,
    "Qwen3ForCausalLM": _dense,
    "MistralForCausalLM": _dense,
}


def supported_architectures() -> tuple[str, ...]:
    return tuple(sorted(_FAMILIES))


def get_family(cfg: ModelConfig) -> ModelFamily:
    if cfg.architecture not in _FAMILIES:
        raise ValueError(f"no model family for architecture {cfg.architecture!r}; supported: {supported_architectures()}")
    return _FAMILIES[cfg.architecture]()
