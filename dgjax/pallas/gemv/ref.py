"""Reference for the skinny GEMV kernel: RMSNorm (float32, as dgjax.models.blocks computes it) then a float32 dot."""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax import lax


def rms_norm(x: jax.Array, weight: jax.Array, eps: float) -> jax.Array:
    xf = x.astype(jnp.float32)
    normed = xf * lax.rsqrt(jnp.mean(xf * xf, axis=-1, keepdims=True) + eps)
    return (normed * weight.astype(jnp.float32)).astype(x.dtype)


def gemv(x: jax.Array, w: jax.Array, norm: jax.Array | None = None, eps: float = 1e-6) -> jax.Array:
    """float32 [M, N] = (rms_norm(x, norm) if norm is given else x) . w, x [M, K], w [K, N]."""
    if norm is not None:
        x = rms_norm(x, norm, eps)
    return lax.dot_general(x, w.astype(x.dtype), (((1,), (0,)), ((), ())), preferred_element_type=jnp.float32)
