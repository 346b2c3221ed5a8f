"""Load an HF safetensors checkpoint into a model's parameter pytree, each tensor straight into its sharding.

Tensors are read one at a time from memory maps, cast on the host and placed with
`jax.make_array_from_callback` (each device, and multi-host each process, receives only its own
shards); Linear weights are then transposed to dgjax's input-major layout on the device.
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding

from dgjax.checkpoint.convert import convert_leaf, parse_quantize
from dgjax.checkpoint.hf_names import HFSource, HFStackedSource, hf_sources, is_ignored, is_source, source_names
from dgjax.checkpoint.quantized import QuantizedCheckpoint
from dgjax.checkpoint.safetensors_io import SafetensorsFolder
from dgjax.config import ModelConfig
from dgjax.models.params import ParamSpec, is_spec, resolve_dtype, sharding_of
from dgjax.models.registry import get_family
from dgjax.sharding import ShardingRules, logical_to_sharding

log = logging.getLogger("dgjax.checkpoint")

Progress = Callable[[int, int, str], None]  # (tensors done, tensors total, name just loaded)


def check_names(cfg: ModelConfig, available: set[str], wanted: set[str]) -> None:
    """Raise with the full list if the checkpoint misses tensors or carries ones no parameter reads."""
    missing = sorted(wanted - available)
    unexpected = sorted(n for n in available - wanted if not is_ignored(cfg, n))
    if missing or unexpected:
        parts = []
        if missing:
            parts.append(f"{len(missing)} missing tensors: {missing[:20]}")
        if unexpected:
            parts.append(f"{len(unexpected)} unexpected tensors: {unexpected[:20]}")
        raise ValueError(f"checkpoint does not match {cfg.architecture}: " + "; ".join(parts))


@functools.lru_cache(maxsize=64)
def _permute_fn(perm: tuple[int, ...], sharding: NamedSharding):
    return jax.jit(lambda x: jnp.transpose(x, perm), out_shardings=sharding)


def _place(raw: np.ndarray, src: HFSource, spec: ParamSpec, target: np.dtype, mesh: Mesh, rules: ShardingRules):
    """Cast on the host, place in the checkpoint's own layout, permute to dgjax's layout on the device.

    Transposing on the host runs at ~0.3 GB/s; on the device it is nearly free.
    """
    view_shape, perm = src.layout(raw.shape, spec.shape)
    host = np.ascontiguousarray(raw.astype(target, copy=False)).reshape(view_shape)
    sharding = sharding_of(spec, mesh, rules)
    if perm == tuple(range(len(perm))):
        return jax.make_array_from_callback(host.shape, sharding, lambda idx: host[idx])
    view_axes: list[str | None] = [None] * len(perm)
    for i, p in enumerate(perm):
        view_axes[p] = spec.axes[i]
    view_sharding = logical_to_sharding(mesh, rules, view_shape, view_axes)
    placed = jax.make_array_from_callback(host.shape, view_sharding, lambda idx: host[idx])
    return _permute_fn(perm, sharding)(placed)


def _float_tensor(folder: SafetensorsFolder, name: str) -> np.ndarray:
    raw = folder[name]
    if raw.dtype.kind not in "fV":
        raise ValueError(f"tensor {name} has non-float dtype {raw.dtype}; quantized formats need a converter")
    return raw


def _place_stacked(folder: SafetensorsFolder, src: HFStackedSource, spec: ParamSpec, mesh: Mesh, rules: ShardingRules):
    """Per-expert tensors stacked on a new leading axis, like `_place` for each expert.

    Each device shard stacks only its own experts (expert parallelism never reads the others) in the
    checkpoint's layout; the permute to dgjax's layout runs on the device.
    """
    target, inner = np.dtype(spec.dtype), spec.shape[1:]
    view_shape, perm = src.element(0).layout(folder.shape(src.names[0]), inner)

    def expert(e: int) -> np.ndarray:
        raw = _float_tensor(folder, src.names[e])
        if src.element(e).layout(raw.shape, inner)[0] != view_shape:
            raise ValueError(f"checkpoint tensor {src.names[e]} has shape {raw.shape}, unlike expert 0's")
        return np.ascontiguousarray(raw.astype(target, copy=False)).reshape(view_shape)

    full_perm = (0,) + tuple(p + 1 for p in perm)
    view_axes: list[str | None] = [spec.axes[0]] + [None] * len(perm)
    for i, p in enumerate(perm):
        view_axes[p + 1] = spec.axes[i + 1]
    stacked_shape = (len(src.names),) + tuple(view_shape)
    view_sharding = logical_to_sharding(mesh, rules, stacked_shape, view_axes)
    placed = jax.make_array_from_callback(
        stacked_shape, view_sharding,
        lambda idx: np.stack([expert(e)[idx[1:]] for e in range(len(src.names))[idx[0]]]),
    )
    if full_perm == tuple(range(len(full_perm))):
        return placed
    return _permute_fn(full_perm, sharding_of(spec, mesh, rules))(placed)


def load_params(
    model_dir: str,
    cfg: ModelConfig,
    dtype: Any,
    mesh: Mesh,
    rules: ShardingRules,
    progress: Progress | None = None,
    quantize: str = "none",
) -> Any:
    """The model's parameter pytree from `model_dir`, cast to `dtype` and sharded per `rules` on `mesh`.

    Linear weights the checkpoint stores quantized become `dgjax.quant` nodes (kept packed); `quantize`
    converts the others at load (see `dgjax.checkpoint.convert`).
    """
    start = time.monotonic()
    family = get_family(cfg)
    target = np.dtype(resolve_dtype(cfg.torch_dtype, dtype))
    specs = family.param_specs(cfg, target)
    sources = hf_sources(cfg)
    folder = SafetensorsFolder(model_dir)

    src_leaves, treedef = jax.tree_util.tree_flatten(sources, is_leaf=is_source)
    spec_leaves, spec_treedef = jax.tree_util.tree_flatten(specs, is_leaf=is_spec)
    if treedef != spec_treedef:
        raise RuntimeError(f"{family.name}: checkpoint name map and parameter specs differ in structure")
    quantized = QuantizedCheckpoint.open(model_dir, folder)
    plans = [quantized.plan(s) for s in src_leaves]
    dense_names = {n for s in src_leaves for n in source_names(s)}
    check_names(cfg, set(folder), quantized.wanted_names(dense_names, [p for p in plans if p is not None]))
    opts = parse_quantize(quantize)

    log.info("loading %d tensors from %s as %s", len(src_leaves), model_dir, target.name)
    out = []
    nbytes = 0
    for i, (src, spec) in enumerate(zip(src_leaves, spec_leaves)):
        if plans[i] is not None:
            leaf = quantized.load(plans[i], spec, mesh, rules)
        elif isinstance(src, HFStackedSource):
            leaf = _place_stacked(folder, src, spec, mesh, rules)
        else:
            # spec.dtype, not `target`: a few weights keep their own dtype (float32 MoE routers)
            leaf = _place(_float_tensor(folder, src.name), src, spec, np.dtype(spec.dtype), mesh, rules)
        rows = None if plans[i] is not None else (folder.shape(source_names(src)[0]) or (None,))[0]
        out.append(convert_leaf(leaf, src, spec, opts, mesh, rules, rows=rows))
        nbytes += out[-1].nbytes
        name = source_names(src)[-1]
        if progress is not None:
            progress(i + 1, len(src_leaves), name)
        log.debug("loaded %s -> %s", name, spec.shape)
    log.info("loaded %.1f MB of parameters in %.2f s", nbytes / 1e6, time.monotonic() - start)
    return jax.tree_util.tree_unflatten(treedef, out)
