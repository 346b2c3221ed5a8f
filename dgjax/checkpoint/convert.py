"""Load-time weight conversion (explicit, off by default): bf16/f32 linear weights to FP8 block-128, NVFP4 or
the lossless bf12.

Modes (`EngineConfig.quantize`, `--quantize`):
  none               keep the checkpoint's formats
  fp8                every linear weight -> FP8 128x128 blocks (expert stacks included)
  nvfp4              every linear weight -> NVFP4
  nvfp4-experts      MoE expert weights -> NVFP4 (from bf16/f32, or from the checkpoint's FP8 blocks)
  fp8+nvfp4-experts  experts -> NVFP4, every other linear weight -> FP8
  bf12               every bf16 linear weight, expert stacks and lm_head included (routers stay) -> bf12
                     (dgjax/quant/bf12.py: the same bf16 values in 12 bits a weight); single-device meshes only
                     (a weight's escape table indexes its whole input row); a weight bf12 cannot hold stays
                     bf16, logged
Never converted to fp8 / nvfp4: embeddings, lm_head, MoE routers (as in the public FP8/NVFP4 releases), weights
already stored quantized in another format, and NVFP4 targets whose input dim is not a multiple of 16.
Conversion runs on the device, one jitted quantizer per (shape, sharding), straight into the node's shardings.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import math
import re
from typing import Any

import jax
import jax.numpy as jnp
from jax.sharding import Mesh

from dgjax.checkpoint.quantized import linear_prefixes
from dgjax.models.params import ParamSpec, is_spec
from dgjax.quant import Fp8BlockWeight, Nvfp4Weight, QuantizedWeight, array_shardings, bf12, fp8_block, nvfp4
from dgjax.quant.base import split_shape
from dgjax.sharding import ShardingRules

log = logging.getLogger("dgjax.checkpoint")

QUANTIZE_MODES = ("none", "fp8", "nvfp4", "nvfp4-experts", "fp8+nvfp4-experts", "bf12")
_NEVER = re.compile(r"(^|\.)lm_head$|\.mlp\.gate$|shared_expert_gate|router")


@dataclasses.dataclass(frozen=True)
class QuantizeOptions:
    linear: str | None = None  # target for non-expert linear weights: fp8 | nvfp4 | None
    experts: str | None = None  # target for expert stacks

    @property
    def active(self) -> bool:
        return self.linear is not None or self.experts is not None


def parse_quantize(mode: str | None) -> QuantizeOptions:
    mode = (mode or "none").strip().lower()
    if mode not in QUANTIZE_MODES:
        raise ValueError(f"unknown quantize mode {mode!r}; choose one of {QUANTIZE_MODES}")
    return {
        "none": QuantizeOptions(),
        "fp8": QuantizeOptions("fp8", "fp8"),
        "nvfp4": QuantizeOptions("nvfp4", "nvfp4"),
        "nvfp4-experts": QuantizeOptions(None, "nvfp4"),
        "fp8+nvfp4-experts": QuantizeOptions("fp8", "nvfp4"),
        "bf12": QuantizeOptions("bf12", None),
    }[mode]


def _target(src: Any, spec: ParamSpec, opts: QuantizeOptions) -> tuple[str | None, int]:
    """(format to convert this leaf to or None, expert dims)."""
    linear = linear_prefixes(src)
    if linear is None:
        return None, 0
    modules, expert_dims = linear
    if opts.linear == "bf12":  # lossless: lm_head and experts too; routers are tiny and stay
        router = "experts" in spec.axes[expert_dims:] or re.search(r"gate$|router", modules[0])
        return (None if router else "bf12"), expert_dims
    if "vocab" in spec.axes or _NEVER.search(modules[0]) or "experts" in spec.axes[expert_dims:]:
        return None, 0
    return (opts.experts if expert_dims else opts.linear), expert_dims


@functools.lru_cache(maxsize=256)
def _converter(kind: str, from_node: bool, shape: tuple[int, ...], in_dims: int, e: int, shardings: tuple):
    def run(leaf):
        if from_node:
            rows = leaf.rows()
        else:
            rows = _dense_rows(leaf.astype(jnp.float32), shape, in_dims, e)
        return fp8_block.quantize(rows) if kind == "fp8" else nvfp4.quantize(rows)

    return jax.jit(run, out_shardings=shardings)


_HEAD_AXES = ("heads", "kv_heads")


def dense_in_dims(spec: ParamSpec, expert_dims: int, rows: int | None = None) -> int:
    """How many leading (non-expert) dims of a dense linear weight are inputs.

    With the checkpoint's row count (`rows` = N of the [N, K] tensor) this is exact; without one (random
    weights) it follows dgjax's layouts: a weight whose first dim is a head axis maps all dims but the last
    (o_proj [heads, head_dim, embed]), every other weight maps its first dim (q [embed, heads, head_dim]).
    """
    shape = tuple(spec.shape)
    if rows is not None:
        return split_shape(shape, rows, expert_dims)
    if spec.axes[expert_dims] in _HEAD_AXES:
        return len(shape) - expert_dims - 1
    return 1


def convert_leaf(leaf: Any, src: Any, spec: ParamSpec, opts: QuantizeOptions, mesh: Mesh, rules: ShardingRules,
                 rows: int | None = None) -> Any:
    """`leaf` converted per `opts` (dense array, or an FP8-block expert stack bound for NVFP4); else unchanged.

    `rows`: N of the checkpoint's [N, K] tensor for a dense leaf (see `dense_in_dims`).
    """
    if not opts.active:
        return leaf
    kind, e = _target(src, spec, opts)
    if kind is None:
        return leaf
    shape = tuple(spec.shape)
    from_node = isinstance(leaf, QuantizedWeight)
    if from_node and not (kind == "nvfp4" and isinstance(leaf, Fp8BlockWeight)):
        return leaf
    in_dims = leaf.in_dims if from_node else dense_in_dims(spec, e, rows)
    k = math.prod(shape[e : e + in_dims])
    if kind == "nvfp4" and k % nvfp4.BLOCK:
        log.info("%s: input dim %d is not a multiple of %d; not converted to nvfp4",
                 linear_prefixes(src)[0][0], k, nvfp4.BLOCK)
        return leaf
    if kind == "bf12":
        return _to_bf12(leaf, src, shape, in_dims, e, mesh)
    cls = Fp8BlockWeight if kind == "fp8" else Nvfp4Weight
    sh = array_shardings(cls, shape, tuple(spec.axes), in_dims, e, mesh, rules)
    names = ("weight", "scale") if kind == "fp8" else ("packed", "block_scale", "global_scale")
    arrays = _converter(kind, from_node, shape, in_dims, e, tuple(sh[n] for n in names))(leaf)
    return cls(**dict(zip(names, arrays)), shape=shape, in_dims=in_dims, expert_dims=e)


def _dense_rows(w: jax.Array, shape: tuple[int, ...], in_dims: int, e: int) -> jax.Array:
    """dense [*E, *in, *out] -> [*E, N, K]: the checkpoint's orientation, what the quantizers and bf12 encode
    row by row."""
    perm = tuple(range(e)) + tuple(range(e + in_dims, len(shape))) + tuple(range(e, e + in_dims))
    return jnp.transpose(w, perm).reshape(shape[:e] + (math.prod(shape[e + in_dims:]), -1))


@functools.lru_cache(maxsize=64)
def _matrix(shape: tuple[int, ...], in_dims: int, e: int = 0):
    """dense bf16 [*E, *in, *out] -> [*E, N, K], jitted per shape."""
    return jax.jit(lambda w: _dense_rows(w.astype(jnp.bfloat16), shape, in_dims, e))


def _to_bf12(leaf: Any, src: Any, shape: tuple[int, ...], in_dims: int, e: int, mesh: Mesh) -> Any:
    name = linear_prefixes(src)[0][0]
    if mesh.size > 1:
        log.info("%s: bf12 runs on one device only; kept in %s", name, leaf.dtype)
        return leaf
    if leaf.dtype != jnp.bfloat16:
        log.info("%s: bf12 re-encodes bf16 weights; a %s weight is kept", name, leaf.dtype)
        return leaf
    try:
        return bf12.node_from(_matrix(shape, in_dims, e)(leaf), shape, in_dims, e)
    except bf12.Bf12Unencodable as e:
        log.info("%s: kept in bf16: %s", name, e)
        return leaf


def convert_params(params: Any, sources: Any, specs: Any, opts: QuantizeOptions, mesh: Mesh,
                   rules: ShardingRules) -> Any:
    """Convert a whole parameter tree (e.g. random weights); `sources` / `specs` name and describe its leaves."""
    if not opts.active:
        return params
    convert = leaf_converter(specs, sources, opts, mesh, rules)
    treedef = jax.tree_util.tree_structure(specs, is_leaf=is_spec)
    leaves = treedef.flatten_up_to(params)
    return jax.tree_util.tree_unflatten(treedef, [convert(i, x) for i, x in enumerate(leaves)])


def leaf_converter(specs: Any, sources: Any, opts: QuantizeOptions, mesh: Mesh, rules: ShardingRules):
    """`convert(i, leaf)` for the i-th leaf of `specs` (flattened order): lets a caller convert each
    leaf as soon as it exists, so a model that fits only quantized never holds all its bf16 weights."""
    spec_leaves, treedef = jax.tree_util.tree_flatten(specs, is_leaf=is_spec)
    src_leaves = treedef.flatten_up_to(sources)
    return lambda i, leaf: convert_leaf(leaf, src_leaves[i], spec_leaves[i], opts, mesh, rules)
