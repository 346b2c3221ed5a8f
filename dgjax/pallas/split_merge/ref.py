"""Pure-jnp merge of split-K decode attention partials: the obviously-right version the kernel is checked
against, and the path ref-mode attention takes.

Each (row, kv head) split s left an unnormalised accumulator acc[s], the running max m[s] of its scores (log2
domain) and the running sum l[s] of exp2(score - m[s]); l[s] == 0 for a split that saw no key. Rescaled to a
common max, out = sum_s acc[s] w[s] / sum_s l[s] w[s] with w[s] = exp2(m[s] - max_s m); a row with no key at
all (every l == 0) comes out as zeros.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp


def merge_splits(acc: jax.Array, m: jax.Array, l: jax.Array, group: int, out_dtype) -> jax.Array:
    """acc float32 [B, KVH, S, GP, D], m, l float32 [B, KVH, S, GP] -> [B, KVH, group, D] in out_dtype.

    GP is the query group padded for the attention kernel's dot; only its first `group` rows are real.
    """
    m_all = jnp.max(m, axis=-2, keepdims=True)
    m_all = jnp.where(jnp.isfinite(m_all), m_all, 0.0)
    w = jnp.where(l > 0.0, jnp.exp2(m - m_all), 0.0)
    num = jnp.sum(acc * w[..., None], axis=-3)
    den = jnp.sum(l * w, axis=-2)
    out = num / jnp.where(den == 0.0, 1.0, den)[..., None]
    return out[:, :, :group].astype(out_dtype)
