"""What every quantized weight node shares: the geometry tying a packed matrix to the dense weight it stands for.

A node stands for a dense dgjax weight of logical shape `shape` = [*experts, *in_dims, *out_dims] (the layout
`ParamSpec` describes, e.g. q = [embed, heads, head_dim]). On device it keeps the checkpoint's matrix
orientation instead: [*experts, N, K_packed] with N = prod(out_dims) rows (row-major flattening of the out
dims) and K = prod(in_dims) input features contiguous within a row, which is what a GEMV reads. Nothing is
dequantized at load; `dequantize()` / `rows()` exist for reference paths and tests.

Each format lists its arrays in `array_layout(n, k)` (shape over the [N, K] matrix and how many matrix rows /
columns one array element covers); shardings and checkpoint shape checks derive from that one table.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, ClassVar

import jax
import jax.numpy as jnp
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from dgjax.sharding import ShardingRules, logical_to_spec


@dataclasses.dataclass(frozen=True)
class ArrayLayout:
    """One array of a node over the [N, K] matrix (leading expert dims not included).

    `shape`: its trailing shape; `row_block` / `col_block`: matrix rows / columns one element covers along its
    N / K axis (None: the array has no such axis, e.g. a per-tensor scale).
    """

    shape: tuple[int, ...]
    dtype: Any
    row_block: int | None
    col_block: int | None


class QuantizedWeight:
    """Mixin of the quantized weight nodes (flax struct.dataclasses with static `shape`, `in_dims`, `expert_dims`)."""

    format_name: ClassVar[str] = ""
    shape: tuple[int, ...]
    in_dims: int
    expert_dims: int

    # ------------------------------------------------------------------ geometry
    @property
    def lead_shape(self) -> tuple[int, ...]:
        return tuple(self.shape[: self.expert_dims])

    @property
    def in_shape(self) -> tuple[int, ...]:
        return tuple(self.shape[self.expert_dims : self.expert_dims + self.in_dims])

    @property
    def out_shape(self) -> tuple[int, ...]:
        return tuple(self.shape[self.expert_dims + self.in_dims :])

    @property
    def n(self) -> int:
        return math.prod(self.out_shape)

    @property
    def k(self) -> int:
        return math.prod(self.in_shape)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def nbytes(self) -> int:
        return sum(x.nbytes for x in jax.tree_util.tree_leaves(self))

    @classmethod
    def array_layout(cls, n: int, k: int, **static: Any) -> dict[str, ArrayLayout]:
        raise NotImplementedError

    def static_args(self) -> dict[str, Any]:
        """Format parameters beyond the geometry (block / group sizes ...), as `array_layout` takes them."""
        return {}

    # ------------------------------------------------------------------ values
    def rows(self) -> jax.Array:
        """The dequantized matrix, float32 [*experts, N, K] (reference path; kernels never build it)."""
        raise NotImplementedError

    def dequantize(self, dtype: Any = jnp.float32) -> jax.Array:
        """The dense weight in dgjax's layout [*experts, *in, *out], computed in float32, cast to `dtype`."""
        r = self.rows().reshape(self.lead_shape + self.out_shape + self.in_shape)
        e, o, i = self.expert_dims, len(self.out_shape), self.in_dims
        perm = tuple(range(e)) + tuple(range(e + o, e + o + i)) + tuple(range(e, e + o))
        return jnp.transpose(r, perm).astype(dtype)

    def take_experts(self, ids: jax.Array) -> "QuantizedWeight":
        """The node restricted to experts `ids` (int [M]): every array gathered along its expert axis."""
        if self.expert_dims != 1:
            raise ValueError(f"take_experts needs one leading expert axis; this {self.format_name} weight has "
                             f"{self.expert_dims}")
        arrays = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)
                  if f.metadata.get("pytree_node", True)}
        taken = {name: None if a is None else jnp.take(a, ids, axis=0) for name, a in arrays.items()}
        return dataclasses.replace(self, shape=(int(ids.shape[0]),) + tuple(self.shape[1:]), **taken)


def is_quantized(x: Any) -> bool:
    return isinstance(x, QuantizedWeight)


def split_shape(shape: tuple[int, ...], n: int, expert_dims: int) -> int:
    """How many leading dims (after the expert dims) of a dense dgjax `shape` are inputs, given N output rows."""
    body = shape[expert_dims:]
    for in_dims in range(1, len(body)):
        if math.prod(body[in_dims:]) == n:
            return in_dims
    raise ValueError(f"a weight of {n} output rows does not fit the dense shape {shape}")


def _matrix_axis(dense_spec: PartitionSpec, dims: range) -> Any:
    """Mesh axes for a flattened group of dense dims: those of its first dim, if no later dim is sharded."""
    entries = [dense_spec[d] if d < len(dense_spec) else None for d in dims]
    if not entries or any(e is not None for e in entries[1:]):
        return None
    return entries[0]


def _axis_size(mesh: Mesh, axes: Any) -> int:
    if axes is None:
        return 1
    return math.prod(mesh.shape[a] for a in ((axes,) if isinstance(axes, str) else axes))


def array_specs(
    cls: type[QuantizedWeight], shape: tuple[int, ...], axes: tuple[str | None, ...], in_dims: int,
    expert_dims: int, mesh: Mesh, rules: ShardingRules, **static: Any,
) -> dict[str, PartitionSpec]:
    """PartitionSpecs of a node's arrays, derived from the dense weight's logical axes.

    N (K) is split over the mesh axes of the first out (in) dim, only when every array of the node splits
    evenly along it in whole blocks (so each device holds the scales of exactly its own rows / columns);
    otherwise that axis is replicated for all of the node's arrays.
    """
    dense = logical_to_spec(dict(mesh.shape), rules, shape, axes)
    e = expert_dims
    n = math.prod(shape[e + in_dims :])
    k = math.prod(shape[e : e + in_dims])
    layout = cls.array_layout(n, k, **static)
    lead = tuple(dense[d] if d < len(dense) else None for d in range(e))
    n_axes = _matrix_axis(dense, range(e + in_dims, len(shape)))
    k_axes = _matrix_axis(dense, range(e, e + in_dims))

    def fits(mesh_axes: Any, total: int, block_of) -> bool:
        s = _axis_size(mesh, mesh_axes)
        blocks = [block_of(lay) for lay in layout.values() if block_of(lay) is not None]
        return s > 1 and total % s == 0 and all((total // s) % b == 0 for b in blocks)

    if n_axes is not None and not fits(n_axes, n, lambda lay: lay.row_block):
        n_axes = None
    if k_axes is not None and not fits(k_axes, k, lambda lay: lay.col_block):
        k_axes = None
    out = {}
    for name, lay in layout.items():
        spec = list(lead)
        if lay.row_block is not None:
            spec.append(n_axes)
        if lay.col_block is not None:
            spec.append(k_axes)
        spec += [None] * (len(lay.shape) - (lay.row_block is not None) - (lay.col_block is not None))
        out[name] = PartitionSpec(*spec)
    return out


def array_shardings(cls: type[QuantizedWeight], shape, axes, in_dims, expert_dims, mesh, rules,
                    **static) -> dict[str, NamedSharding]:
    specs = array_specs(cls, shape, axes, in_dims, expert_dims, mesh, rules, **static)
    return {name: NamedSharding(mesh, spec) for name, spec in specs.items()}
