"""The reference x @ W for quantized weight nodes: dequantize in float32, then one plain GEMM.

Kernels (GEMV reading the packed rows) plug in at `ops.matmul`'s dispatch later and must match this to a
stated tolerance; this path is the truth they are checked against.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
from jax import lax

from dgjax.quant.base import QuantizedWeight


def reference_matmul(x: jax.Array, w: QuantizedWeight, *, contract: int = 1, out_dtype=None) -> jax.Array:
    """x [..., *in] . w (dense [*in, *out]) -> [..., *out], accumulating in float32, like `ops.matmul`.

    The dequantized rows are cast to x's dtype before the dot, as the dense path casts its weight.
    """
    if w.expert_dims:
        raise ValueError("an expert-stacked weight needs an expert-aware op, not matmul")
    if contract != w.in_dims or tuple(x.shape[x.ndim - contract :]) != w.in_shape:
        raise ValueError(f"x {x.shape} does not contract with a {w.format_name} weight of shape {w.shape}")
    lead = x.shape[: x.ndim - contract]
    x2 = x.reshape((math.prod(lead), w.k))
    rows = w.rows().astype(x.dtype)  # [N, K]
    out = lax.dot_general(x2, rows, (((1,), (1,)), ((), ())), preferred_element_type=jnp.float32)
    return out.astype(out_dtype or x.dtype).reshape(lead + w.out_shape)


def reference_expert_matmul(x: jax.Array, w: QuantizedWeight, *, group_sizes: jax.Array | None = None,
                            expert_ids: jax.Array | None = None) -> jax.Array:
    """Row-wise x [M, in] . w[expert of the row] for an expert stack [E, in, out]; the quantized twin of
    `models.moe.expert_matmul` (same arguments: `group_sizes` for rows sorted by expert, or `expert_ids`).

    The gather form dequantizes only the routed experts (`take_experts`), the ragged form all of them.
    """
    if w.expert_dims != 1 or w.in_dims != 1 or len(w.out_shape) != 1:
        raise ValueError(f"expected an expert stack [E, in, out], got a {w.format_name} weight of shape {w.shape}")
    if (group_sizes is None) == (expert_ids is None):
        raise ValueError("reference_expert_matmul needs exactly one of group_sizes or expert_ids")
    if group_sizes is not None:
        out = lax.ragged_dot(x, w.dequantize(x.dtype), group_sizes, preferred_element_type=jnp.float32)
    else:
        rows = w.take_experts(expert_ids).rows().astype(x.dtype)  # [M, out, in]
        out = jnp.einsum("mi,moi->mo", x, rows, preferred_element_type=jnp.float32)
    return out.astype(x.dtype)
