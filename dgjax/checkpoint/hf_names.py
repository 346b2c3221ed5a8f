"""HF tensor names <-> dgjax parameter leaves, per family.

`hf_sources(cfg)` returns the model's parameter pytree with an `HFSource` at every leaf: which
checkpoint tensor fills it and how. transformers' Linear weights are [out, in]; dgjax stores them
input-major ([*in, *out], e.g. q as [embed, heads, head_dim]); `HFSource.layout` says how to get there.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any

import jax
import numpy as np

from dgjax.config import ModelConfig
from dgjax.models import blocks, llama


@dataclasses.dataclass(frozen=True)
class HFSource:
    """Checkpoint tensor `name`; `transpose`: a [out, in] Linear weight to turn input-major."""

    name: str
    transpose: bool = False

    def layout(self, hf_shape: tuple[int, ...], shape: tuple[int, ...]) -> tuple[tuple[int, ...], tuple[int, ...]]:
        """(shape to view the checkpoint tensor as, axis permutation from that view to dgjax's `shape`).

        A transposed weight [out, in] is viewed as [*out_dims, *in_dims] (a free reshape) and permuted
        to [*in_dims, *out_dims], so the transpose itself can run on the device.
        """
        size = int(np.prod(hf_shape))
        if size != int(np.prod(shape)):
            raise ValueError(f"checkpoint tensor {self.name} has shape {hf_shape}, expected {shape} worth")
        if not self.transpose:
            return shape, tuple(range(len(shape)))
        if len(hf_shape) != 2:
            raise ValueError(f"checkpoint tensor {self.name} should be a 2-D Linear weight, has shape {hf_shape}")
        n_in = next((k for k in range(1, len(shape)) if int(np.prod(shape[:k])) == hf_shape[1]), None)
        if n_in is None:
            raise ValueError(f"checkpoint tensor {self.name} {hf_shape} does not split into {shape}")
        view = shape[n_in:] + shape[:n_in]
        n_out = len(shape) - n_in
        return view, tuple(range(n_out, len(shape))) + tuple(range(n_out))


@dataclasses.dataclass(frozen=True)
class HFStackedSource:
    """Per-expert checkpoint tensors `names` (expert e's is names[e]) stacked on a new leading axis.

    Each is laid out like an `HFSource` with the same `transpose` (e.g. `mlp.experts.{e}.gate_proj.weight`
    [ffw, embed] -> [embed, ffw]), giving dgjax's [experts, ...] weight.
    """

    names: tuple[str, ...]
    transpose: bool = False

    def element(self, expert: int) -> HFSource:
        return HFSource(self.names[expert], self.transpose)


def source_names(src: "HFSource | HFStackedSource") -> tuple[str, ...]:
    """The checkpoint tensors a source leaf reads."""
    return src.names if isinstance(src, HFStackedSource) else (src.name,)


def is_source(x: Any) -> bool:
    return isinstance(x, (HFSource, HFStackedSource))


# Tensors some checkpoints carry that no model reads (non-persistent buffers saved by old versions).
IGNORED_PATTERNS = (re.compile(r".*rotary_emb\.inv_freq$"),)


def _linear(prefix: str, has_bias: bool) -> tuple[HFSource, HFSource | None]:
    return HFSource(f"{prefix}.weight", transpose=True), HFSource(f"{prefix}.bias") if has_bias else None


def _dense_sources(cfg: ModelConfig) -> llama.DenseParams:
    layers = []
    for i in range(cfg.num_hidden_layers):
        pre = f"model.layers.{i}"
        q, qb = _linear(f"{pre}.self_attn.q_proj", cfg.attention_bias)
        k, kb = _linear(f"{pre}.self_attn.k_proj", cfg.attention_bias)
        v, vb = _linear(f"{pre}.self_attn.v_proj", cfg.attention_bias)
        o, ob = _linear(f"{pre}.self_attn.o_proj", cfg.o_proj_bias)
        gate, gb = _linear(f"{pre}.mlp.gate_proj", cfg.mlp_bias)
        up, ub = _linear(f"{pre}.mlp.up_proj", cfg.mlp_bias)
        down, db = _linear(f"{pre}.mlp.down_proj", cfg.mlp_bias)
        qk_norm = cfg.qk_norm
        layers.append(
            llama.DecoderLayerParams(
                input_norm=HFSource(f"{pre}.input_layernorm.weight"),
                attn=blocks.AttentionParams(
                    q=q, k=k, v=v, o=o, q_bias=qb, k_bias=kb, v_bias=vb, o_bias=ob,
                    q_norm=HFSource(f"{pre}.self_attn.q_norm.weight") if qk_norm else None,
                    k_norm=HFSource(f"{pre}.self_attn.k_norm.weight") if qk_norm else None,
                ),
                post_attention_norm=HFSource(f"{pre}.post_attention_layernorm.weight"),
                mlp=blocks.MLPParams(gate=gate, up=up, down=down, gate_bias=gb, up_bias=ub, down_bias=db),
            )
        )
    return llama.DenseParams(
        embed=HFSource("model.embed_tokens.weight"),
        layers=tuple(layers),
        final_norm=HFSource("model.norm.weight"),
        lm_head=None if cfg.tie_word_embeddings else HFSource("lm_head.weight", transpose=True),
    )


def _dense_ignored(cfg: ModelConfig) -> tuple[str, ...]:
    # Tied checkpoints sometimes still store the (identical) lm_head.
    return ("lm_head.weight",) if cfg.tie_word_embeddings else ()


@dataclasses.dataclass(frozen=True)
class NameMap:
    """A family's checkpoint layout: the source tree and names that may appear but are not read."""

    sources: Any  # ModelConfig -> params pytree of HFSource
    ignored: Any  # ModelConfig -> tuple of tensor names


DENSE_NAMES = NameMap(sources=_dense_sources, ignored=_dense_ignored)


def hf_sources(cfg: ModelConfig) -> Any:
    from dgjax.models.registry import get_family

    return get_family(cfg).names.sources(cfg)


def param_path_by_hf_name(cfg: ModelConfig) -> dict[str, str]:
    """HF tensor name -> dgjax parameter path (as `jax.tree_util.keystr` writes it; `[e]` appended for
    expert e of a stacked weight)."""
    leaves = jax.tree_util.tree_flatten_with_path(hf_sources(cfg), is_leaf=is_source)[0]
    out = {}
    for path, src in leaves:
        key = jax.tree_util.keystr(path)
        if isinstance(src, HFStackedSource):
            out.update({name: f"{key}[{e}]" for e, name in enumerate(src.names)})
        else:
            out[src.name] = key
    return out


def is_ignored(cfg: ModelConfig, name: str) -> bool:
    from dgjax.models.registry import get_family

    return name in get_family(cfg).names.ignored(cfg) or any(p.match(name) for p in IGNORED_PATTERNS)
