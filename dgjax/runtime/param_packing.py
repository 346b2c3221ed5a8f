"""The parameters as the decode executables take them: every layer's norm vectors packed into one array per kind.

Why: each array passed to an executable costs the host ~1.4 µs per call on the H200
(benchmarks/results/2026-12-01-s6d-host-cost.md), and a decode tick is one call. The per-layer RMSNorm weights
(`input_norm`, `post_attention_norm`: 2 per layer, 96 arrays for a 48-layer model; Qwen3's q/k head norms
`attn.q_norm`, `attn.k_norm`: 2 more) are stacked into [layers, ...] arrays.
They reach the model as `StackedRow`s: the Pallas kernels that apply them (the quantized GEMV's fused input
norm, the fused decode attention's q/k norms, the residual add + norm after attention) read their row in
place, with the row as a kernel argument so all layers share one compiled kernel; XLA code slices them, which
fuses for free. A slice handed to a Pallas call would be a copy kernel
(benchmarks/results/2026-12-01-session7-summary.md).
Weights that Pallas kernels stream (projections, experts) stay separate. Prefill executables take the
unpacked parameters: per-layer slices make each layer's fusions distinct, which XLA compiles one by one.
"""

from __future__ import annotations

from typing import Any

import flax
import jax
import jax.numpy as jnp
from jax.sharding import NamedSharding, PartitionSpec

from dgjax.pallas.stacked import StackedRow

# Layer fields ("attn." for fields of layer.attn) packed into one stack each, unpacked as StackedRows.
ROW_FIELDS = ("input_norm", "post_attention_norm", "attn.q_norm", "attn.k_norm")


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
    """Stack each ROW_FIELDS vector over the layers when every layer has one of the same shape,
    dtype and sharding; other parameters pass through unchanged."""
    layers = getattr(params, "layers", None)
    if not layers:
        return PackedParams(params, {})
    stacks = {}
    for name in ROW_FIELDS:
        stack = _stack([_field(layer, name) for layer in layers])
        if stack is not None:
            stacks[name] = stack
    if not stacks:
        return PackedParams(params, {})
    return PackedParams(params.replace(layers=tuple(_with_fields(layer, {n: None for n in stacks})
                                                    for layer in layers)), stacks)


def _field(layer: Any, name: str) -> Any:
    """layer.<name>, "attn." names reading layer.attn (None where missing)."""
    if name.startswith("attn."):
        layer, name = getattr(layer, "attn", None), name[len("attn."):]
    return getattr(layer, name, None)


def _with_fields(layer: Any, values: dict[str, Any]) -> Any:
    """`layer` with its fields (and "attn."-prefixed fields of layer.attn) set to `values`."""
    own = {n: v for n, v in values.items() if not n.startswith("attn.")}
    attn = {n[len("attn."):]: v for n, v in values.items() if n.startswith("attn.")}
    if attn:
        own["attn"] = layer.attn.replace(**attn)
    return layer.replace(**own)


def unpack(packed: PackedParams) -> Any:
    """The model's parameters again (inside a traced step), each packed vector a StackedRow of its stack."""
    if not packed.stacks:
        return packed.params
    layers = tuple(
        _with_fields(layer, {n: StackedRow(s, i) for n, s in packed.stacks.items()})
        for i, layer in enumerate(packed.params.layers))
    return packed.params.replace(layers=layers)


def taking_packed(step):
    """`step(params, ...)` as a function of the packed parameters (named like `step`, so compiled modules,
    traces and HLO dumps keep names such as jit_decode_tick)."""
    def call(packed: PackedParams, *args, **kwargs):
        return step(unpack(packed), *args, **kwargs)

    call.__name__ = call.__qualname__ = getattr(step, "__name__", None) or getattr(step, "func").__name__
    return call
