"""Logical axis names -> mesh axes: the one table every sharding in dgjax is derived from.

Model code names tensor dimensions logically (`heads`, `ffw`, `vocab` ...); `ShardingRules` says which
mesh axis (if any) each one is split over. A dimension the mesh axis does not divide, or a mesh axis
already used by an earlier dimension of the same tensor, falls back to replication, so e.g. 2 KV heads
on a 4-way tensor-parallel mesh are simply replicated.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

TP = "tp"  # the tensor-parallel mesh axis

MeshAxes = str | tuple[str, ...] | None


@dataclasses.dataclass(frozen=True)
class ShardingRules:
    """Ordered (logical axis, mesh axes) pairs; logical axes not listed are replicated."""

    rules: tuple[tuple[str, MeshAxes], ...]

    def mesh_axes(self, logical: str | None) -> tuple[str, ...]:
        """The mesh axes a logical axis maps to (empty: replicated)."""
        if logical is None:
            return ()
        for name, axes in self.rules:
            if name == logical:
                if axes is None:
                    return ()
                return (axes,) if isinstance(axes, str) else tuple(axes)
        return ()

    def replace(self, **overrides: MeshAxes) -> "ShardingRules":
        """A copy with some logical axes remapped (new names are appended)."""
        out = [(k, overrides.pop(k)) if k in overrides else (k, v) for k, v in self.rules]
        return ShardingRules(tuple(out) + tuple(overrides.items()))


# Megatron-style tensor parallelism: attention heads, MLP hidden units and the vocabulary are split.
DEFAULT_RULES = ShardingRules(
    (
        ("batch", None),
        ("seq", None),
        ("embed", None),
        ("heads", TP),
        ("kv_heads", TP),
        ("head_dim", None),
        ("ffw", TP),
        ("vocab", TP),
        ("layers", None),
        ("pages", None),  # KV pools stack layers along pages: sharding it would split layers, not pages
        ("page_slots", None),
        ("experts", None),
        ("moe_ffw", TP),  # each routed expert's hidden units (tensor-parallel experts)
    )
)

# Expert parallelism: whole experts are split over the devices (each holds E / n of them); where the
# device count does not divide the expert count, the rules fall back to splitting `moe_ffw`.
EXPERT_PARALLEL_RULES = DEFAULT_RULES.replace(experts=TP)


def make_mesh(tensor_parallel: int, devices: Sequence[Any] | None = None) -> Mesh:
    """A 1-D ("tp",) mesh over the first `tensor_parallel` devices (global devices when multi-host).

    Axes are typed Auto where the jax version has axis types: jax 0.10 defaults to Explicit, under
    which sharded `ragged_dot` and friends fail to lower.
    """
    devs = list(jax.devices() if devices is None else devices)
    if tensor_parallel < 1 or tensor_parallel > len(devs):
        raise ValueError(f"tensor_parallel={tensor_parallel} needs 1..{len(devs)} devices")
    devs = devs[:tensor_parallel]
    axis_type = getattr(jax.sharding, "AxisType", None)
    if axis_type is not None:
        return jax.make_mesh((tensor_parallel,), (TP,), axis_types=(axis_type.Auto,), devices=devs)
    return Mesh(np.asarray(devs), (TP,))


def logical_to_spec(
    mesh_shape: Mapping[str, int], rules: ShardingRules, shape: Sequence[int], axes: Sequence[str | None]
) -> PartitionSpec:
    """PartitionSpec for a tensor of `shape` whose dimensions carry the logical names `axes`."""
    if len(shape) != len(axes):
        raise ValueError(f"shape {tuple(shape)} and logical axes {tuple(axes)} differ in rank")
    used: set[str] = set()
    spec: list[MeshAxes] = []
    for dim, logical in zip(shape, axes):
        kept: list[str] = []
        split = 1
        for ax in rules.mesh_axes(logical):
            size = mesh_shape.get(ax)
            if size is None or ax in used or dim % (split * size) != 0:
                continue
            kept.append(ax)
            split *= size
        used.update(kept)
        spec.append(None if not kept else kept[0] if len(kept) == 1 else tuple(kept))
    return PartitionSpec(*spec)


def logical_to_sharding(
    mesh: Mesh, rules: ShardingRules, shape: Sequence[int], axes: Sequence[str | None]
) -> NamedSharding:
    """NamedSharding on `mesh` for a tensor described by logical `axes` (see `logical_to_spec`)."""
    return NamedSharding(mesh, logical_to_spec(dict(mesh.shape), rules, shape, axes))


def replicated(mesh: Mesh) -> NamedSharding:
    return NamedSharding(mesh, PartitionSpec())
