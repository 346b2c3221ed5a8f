"""Weight-consuming ops that model code calls instead of raw `@`, so weight formats can dispatch here.

Weights are stored input-major: a weight of shape [*in_dims, *out_dims] contracts x's trailing
`len(in_dims)` dimensions. Quantized weight nodes will add their own branch in `matmul`.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax import lax


def matmul(x: jax.Array, w: jax.Array, *, contract: int = 1, out_dtype=None) -> jax.Array:
    """x [..., *in] . w [*in, *out] -> [..., *out], accumulating in float32.

    The result is in `out_dtype` (default: x's dtype); pass float32 for logits.
    """
    n = x.ndim
    dims = ((tuple(range(n - contract, n)), tuple(range(contract))), ((), ()))
    out = lax.dot_general(x, w.astype(x.dtype), dims, preferred_element_type=jnp.float32)
    return out.astype(out_dtype or x.dtype)


def embed_lookup(table: jax.Array, tokens: jax.Array) -> jax.Array:
    """Rows of an embedding table [vocab, embed] for int tokens."""
    return jnp.take(table, tokens, axis=0)
