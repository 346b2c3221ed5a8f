"""The parameters as the step executables take them: every layer's norm vectors packed into one array per kind.

Why: each array passed to an executable costs the host ~1.4 µs per call on the H200
(benchmarks/results/2026-12-01-s6d-host-cost.md), and a decode tick is one call. The per-layer RMSNorm weights
(`input_norm`, `post_attention_norm`: 2 per layer, 96 arrays for a 48-layer model) only feed XLA's own norm
fusions, where slicing layer i out of a stacked [layers, hidden] array fuses into the norm for free. Weights
that Pallas kernels read (projections, experts, q/k norms inside the fused attention kernel) stay separate:
XLA would copy a slice handed to a custom call.
"""

from __future__ import annotations

from typing import Any

import flax
import jax
import jax.numpy as jnp
from jax.sharding import NamedSharding, PartitionSpec

PACKED_FIELDS = ("input_norm", "post_attention_norm")


@flax.struct.dataclass
class PackedParams:
    params: Any  # the model's parameters, the packed fields of every layer set to None
    stacks: dict[str, jax.Array]  # field -> [layers, ...], layer i's vector at index i


def _stacked_sharding(leaf: jax.Array):
    sh = leaf.sharding
    if isinstance(sh, NamedSharding):
        return NamedSharding(sh.mesh, PartitionSpec(None, *sh.spec))
    return sh


def pack(params: Any) -> PackedParams:
    """Stack each PACKED_FIELDS vector over the layers when every layer has one of the same shape, dtype and
    sharding; other parameters pass through unchanged."""
    layers = getattr(params, "layers", None)
    if not layers:
        return PackedParams(params, {})
    stacks = {}
    for name in PACKED_FIELDS:
        leaves = [getattr(layer, name, None) for layer in layers]
        if not all(isinstance(x, jax.Array) for x in leaves):
            continue
        if len({(x.shape, x.dtype, x.sharding) for x in leaves}) != 1:
            continue
        stacks[name] = jax.jit(lambda *xs: jnp.stack(xs), out_shardings=_stacked_sharding(leaves[0]))(*leaves)
    if not stacks:
        return PackedParams(params, {})
    holes = {name: None for name in stacks}
    return PackedParams(params.replace(layers=tuple(layer.replace(**holes) for layer in layers)), stacks)


def unpack(packed: PackedParams) -> Any:
    """The model's parameters again (inside a traced step: the vectors become slices of the stacks)."""
    if not packed.stacks:
        return packed.params
    layers = tuple(layer.replace(**{name: stack[i] for name, stack in packed.stacks.items()})
                   for i, layer in enumerate(packed.params.layers))
    return packed.params.replace(layers=layers)


def taking_packed(step):
    """`step(params, ...)` as a function of the packed parameters (named like `step`, so compiled modules,
    traces and HLO dumps keep names such as jit_decode_tick)."""
    def call(packed: PackedParams, *args, **kwargs):
        return step(unpack(packed), *args, **kwargs)

    call.__name__ = call.__qualname__ = getattr(step, "__name__", None) or getattr(step, "func").__name__
    return call
