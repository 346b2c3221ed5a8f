"""One description per weight (`ParamSpec`), from which everything else about parameters derives.

A model's `param_specs(cfg)` returns its parameter pytree (flax `struct.dataclass`es) with a
`ParamSpec` at every leaf. From it: shardings, random init placed straight into those shardings,
`ShapeDtypeStruct`s for AOT lowering, and the checkpoint loader's targets.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
from jax.sharding import Mesh, NamedSharding

from dgjax.sharding import ShardingRules, logical_to_sharding

Initializer = Callable[[jax.Array, tuple[int, ...], Any], jax.Array]


_DTYPE_ALIASES = {"bf16": "bfloat16", "fp16": "float16", "half": "float16", "fp32": "float32", "float": "float32"}


def resolve_dtype(torch_dtype: str, dtype: Any = "auto") -> jnp.dtype:
    """"auto"/None -> the checkpoint's `torch_dtype`; otherwise the named or given dtype."""
    name = torch_dtype if dtype is None or (isinstance(dtype, str) and dtype == "auto") else dtype
    if isinstance(name, str):
        name = _DTYPE_ALIASES.get(name, name.removeprefix("torch."))
    return jnp.dtype(name)


def normal_init(std: float = 0.02) -> Initializer:
    return _NormalInit(std)


@dataclasses.dataclass(frozen=True)
class _NormalInit:
    std: float

    def __call__(self, key: jax.Array, shape: tuple[int, ...], dtype: Any) -> jax.Array:
        return (self.std * jax.random.normal(key, shape, jnp.float32)).astype(dtype)


def zeros_init(key: jax.Array, shape: tuple[int, ...], dtype: Any) -> jax.Array:
    del key
    return jnp.zeros(shape, dtype)


def ones_init(key: jax.Array, shape: tuple[int, ...], dtype: Any) -> jax.Array:
    del key
    return jnp.ones(shape, dtype)


@dataclasses.dataclass(frozen=True)
class ParamSpec:
    """Shape, dtype, logical axis names (one per dim, None: never sharded) and initializer of a weight."""

    shape: tuple[int, ...]
    dtype: Any
    axes: tuple[str | None, ...]
    init: Initializer = normal_init()

    def __post_init__(self) -> None:
        if len(self.shape) != len(self.axes):
            raise ValueError(f"ParamSpec shape {self.shape} and axes {self.axes} differ in rank")

    @property
    def nbytes(self) -> int:
        return math.prod(self.shape) * jnp.dtype(self.dtype).itemsize


def is_spec(x: Any) -> bool:
    return isinstance(x, ParamSpec)


def map_specs(fn: Callable[[ParamSpec], Any], specs: Any) -> Any:
    """tree_map over the ParamSpec leaves of a spec pytree."""
    return jax.tree_util.tree_map(fn, specs, is_leaf=is_spec)


def param_shardings(specs: Any, mesh: Mesh, rules: ShardingRules) -> Any:
    """The NamedSharding of every parameter, same pytree structure as `specs`."""
    return map_specs(lambda s: logical_to_sharding(mesh, rules, s.shape, s.axes), specs)


def abstract_params(specs: Any, mesh: Mesh, rules: ShardingRules) -> Any:
    """`jax.ShapeDtypeStruct`s (with shardings) for AOT lowering and as checkpoint targets."""
    return map_specs(
        lambda s: jax.ShapeDtypeStruct(
            s.shape, jnp.dtype(s.dtype), sharding=logical_to_sharding(mesh, rules, s.shape, s.axes)
        ),
        specs,
    )


@functools.lru_cache(maxsize=256)
def _leaf_init_fn(init: Initializer, shape: tuple[int, ...], dtype: Any, sharding: NamedSharding):
    return jax.jit(lambda k: init(k, shape, dtype), out_shardings=sharding)


def init_params(specs: Any, key: jax.Array, mesh: Mesh, rules: ShardingRules,
                transform: Callable[[int, jax.Array], Any] | None = None) -> Any:
    """Random parameters created directly in their target shardings (no full host copy).

    One small jitted initializer per distinct (init, shape, dtype, sharding), reused across layers:
    a single jit over every leaf takes far longer to compile. `transform(i, array)` (e.g. load-time
    quantization) replaces each leaf as soon as it is made, before the next one is.
    """
    leaves, treedef = jax.tree_util.tree_flatten(specs, is_leaf=is_spec)
    keys = jax.random.split(key, max(len(leaves), 1))
    arrays = []
    for i, s in enumerate(leaves):
        x = _leaf_init_fn(s.init, s.shape, jnp.dtype(s.dtype), sharding_of(s, mesh, rules))(keys[i])
        arrays.append(x if transform is None else transform(i, x))
    return jax.tree_util.tree_unflatten(treedef, arrays)


def total_bytes(specs: Any) -> int:
    return sum(s.nbytes for s in jax.tree_util.tree_leaves(specs, is_leaf=is_spec))


def sharding_of(spec: ParamSpec, mesh: Mesh, rules: ShardingRules) -> NamedSharding:
    return logical_to_sharding(mesh, rules, spec.shape, spec.axes)
