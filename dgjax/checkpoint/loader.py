"""Load an HF safetensors checkpoint into a model's parameter pytree, each tensor straight into its sharding.

Tensors are read one at a time from memory maps, converted to dgjax layout, cast on the host and
placed with `jax.make_array_from_callback`, so each device (and, multi-host, each process) only
receives its own shards and no full copy of the model is ever held on one device.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

import jax
import ml_dtypes
import numpy as np
from jax.sharding import Mesh

from dgjax.checkpoint.hf_names import HFSource, hf_sources, is_ignored, is_source
from dgjax.checkpoint.safetensors_io import SafetensorsFolder
from dgjax.config import ModelConfig
from dgjax.models.params import ParamSpec, is_spec, resolve_dtype, sharding_of
from dgjax.models.registry import get_family
from dgjax.sharding import ShardingRules

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


def _place(host: np.ndarray, spec: ParamSpec, mesh: Mesh, rules: ShardingRules) -> jax.Array:
    sharding = sharding_of(spec, mesh, rules)
    return jax.make_array_from_callback(host.shape, sharding, lambda idx: host[idx])


def load_params(
    model_dir: str,
    cfg: ModelConfig,
    dtype: Any,
    mesh: Mesh,
    rules: ShardingRules,
    progress: Progress | None = None,
) -> Any:
    """The model's parameter pytree from `model_dir`, cast to `dtype` and sharded per `rules` on `mesh`."""
    start = time.monotonic()
    family = get_family(cfg)
    target = np.dtype(resolve_dtype(cfg.torch_dtype, dtype))
    specs = family.param_specs(cfg, target)
    sources = hf_sources(cfg)
    folder = SafetensorsFolder(model_dir)

    src_leaves, treedef = jax.tree_util.tree_flatten(sources, is_leaf=is_source)
    spec_leaves = jax.tree_util.tree_leaves(specs, is_leaf=is_spec)
    if len(src_leaves) != len(spec_leaves):
        raise RuntimeError(f"{family.name}: name map has {len(src_leaves)} leaves, params {len(spec_leaves)}")
    check_names(cfg, set(folder), {s.name for s in src_leaves})

    log.info("loading %d tensors from %s as %s", len(src_leaves), model_dir, target.name)
    out = []
    nbytes = 0
    for i, (src, spec) in enumerate(zip(src_leaves, spec_leaves)):
        host = _host_tensor(folder, src, spec, target)
        out.append(_place(host, spec, mesh, rules))
        nbytes += host.nbytes
        if progress is not None:
            progress(i + 1, len(src_leaves), src.name)
        log.debug("loaded %s %s -> %s", src.name, folder.shape(src.name), spec.shape)
    log.info("loaded %.1f MB of parameters in %.2f s", nbytes / 1e6, time.monotonic() - start)
    return jax.tree_util.tree_unflatten(treedef, out)


def _host_tensor(folder: SafetensorsFolder, src: HFSource, spec: ParamSpec, target: np.dtype) -> np.ndarray:
    """The checkpoint tensor in dgjax layout and `target` dtype, as a contiguous host array."""
    raw = folder[src.name]
    if raw.dtype.kind not in "fV" and raw.dtype != np.dtype(ml_dtypes.bfloat16):
        raise ValueError(f"tensor {src.name} has non-float dtype {raw.dtype}; quantized formats need a converter")
    return np.ascontiguousarray(src.convert(raw, spec.shape).astype(target))
