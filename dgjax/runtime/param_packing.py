"""The parameters as the step executables take them: every layer's norm vectors packed into one array per kind.

Why: each array passed to an executable costs the host ~1.4 µs per call on the H200
(benchmarks/results/2026-12-01-s6d-host-cost.md), and a decode tick is one call. The per-layer RMSNorm weights
(`input_norm`, `post_attention_norm`: 2 per layer, 96 arrays for a 48-layer model) only feed XLA's own norm
fusions, where slicing layer i out of a stacked [layers, hidden] array fuses into the norm for free. Qwen3's
q/k head norms (`attn.q_norm`, `attn.k_norm`) are stacked too and reach the model as `StackedRow`s: the fused
decode attention kernel reads its row in place, XLA code slices it. Weights that other Pallas kernels read
(projections, experts) stay separate: XLA would copy a slice handed to a custom call.
"""

from __future__ import annotations

from typing import Any

import flax
import jax
import jax.numpy as jnp
from jax.sharding import NamedSharding, PartitionSpec

from dgjax.pallas.stacked import StackedRow

PACKED_FIELDS = ("input_norm", "post_attention_norm")  # layer fields, unpacked as slices
PACKED_ATTN_FIELDS = ("q_norm", "k_norm")  # layer.attn fields, unpacked as StackedRows


@flax.struct.dataclass
class PackedParams:
    params: Any  # the model's parameters, the packed fields of every layer set to None
    stacks: dict[str, jax.Array]  # field -> [layers, ...], layer i's vector at index i


def _stacked_sharding(leaf: jax.Array):
    sh = leaf.sharding
    if isinstance(sh, NamedSharding):
        return NamedSharding(sh.mesh, PartitionSpec(None, *sh.spec))
    return sh


def _stack(leaves: list) -> jax.Array | None:
    """[layers, ...] of per-layer arrays of one shape, dtype and sharding (None if they are not all that)."""
    if not all(isinstance(x, jax.Array) for x in leaves):
        return None
    if len({(x.shape, x.dtype, x.sharding) for x in leaves}) != 1:
        return None
    return jax.jit(lambda *xs: jnp.stack(xs), out_shardings=_stacked_sharding(leaves[0]))(*leaves)


def pack(params: Any) -> PackedParams:
    """Stack each PACKED_FIELDS / PACKED_ATTN_FIELDS vector over the layers when every layer has one of the
    same shape, dtype and sharding; other parameters pass through unchanged."""
    layers = getattr(params, "layers", None)
    if not layers:
        return PackedParams(params, {})
    stacks = {}
    for name in PACKED_FIELDS:
        stack = _stack([getattr(layer, name, None) for layer in layers])
        if stack is not None:
            stacks[name] = stack
    for name in PACKED_ATTN_FIELDS:
        stack = _stack([getattr(getattr(layer, "attn", None), name, None) for layer in layers])
        if stack is not None:
            stacks["attn." + name] = stack
    if not stacks:
        return PackedParams(params, {})
    return PackedParams(params.replace(layers=tuple(_with_fields(layer, {n: None for n in stacks})
                                                    for layer in layers)), stacks)


def _with_fields(layer: Any, values: dict[str, Any]) -> Any:
    """`layer` with its fields (and "attn."-prefixed fields of layer.attn) set to `values`."""
    own = {n: v for n, v in values.items() if not n.startswith("attn.")}
    attn = {n[len("attn."):]: v for n, v in values.items() if n.startswith("attn.")}
    if attn:
        own["attn"] = layer.attn.replace(**attn)
    return layer.replace(**own)


def unpack(packed: PackedParams) -> Any:
    """The model's parameters again (inside a traced step: layer vectors become slices of the stacks, attn
    vectors StackedRows of theirs)."""
    if not packed.stacks:
        return packed.params
    layers = tuple(
        _with_fields(layer, {n: StackedRow(s, i) if n.startswith("attn.") else s[i] for n, s in packed.stacks.items()})
        for i, layer in enumerate(packed.params.layers))
    return packed.params.replace(layers=layers)


def taking_packed(step):
    """`step(params, ...)` as a function of the packed parameters (named like `step`, so compiled modules,
    traces and HLO dumps keep names such as jit_decode_tick)."""
    def call(packed: PackedParams, *args, **kwargs):
        return step(unpack(packed), *args, **kwargs)

    call.__name__ = call.__qualname__ = getattr(step, "__name__", None) or getattr(step, "func").__name__
    return call
