"""A split-K product's float32 partial sums, handed to the kernel that consumes the product unsummed.

Why: the quantized GEMV splits K for projections with few column blocks (qwen3-30b-a3b's qkv: 4 splits) and
writes float32 partials; summing them is an XLA reduction launch of its own before the fused decode
attention (one per layer per tick). A consumer kernel that knows `SplitSums` adds the partials as it loads
the rows (they are few and sit in L2) and rounds to `dtype`, exactly what `value()` computes. A bias (qkv
bias of Qwen2 / GLM) rides along and is added after that rounding, as the unsplit projection adds it.
"""

from __future__ import annotations

from typing import Any

import flax
import jax
import jax.numpy as jnp


@flax.struct.dataclass
class SplitSums:
    parts: jax.Array  # float32 [splits, *shape]
    dtype: Any = flax.struct.field(pytree_node=False)
    bias: jax.Array | None = None  # [*shape[1:]] (broadcast over the leading rows), added in `dtype`

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.parts.shape[1:])

    def value(self) -> jax.Array:
        y = jnp.sum(self.parts, axis=0).astype(self.dtype)
        return y if self.bias is None else y + self.bias.astype(self.dtype)


def add_bias(x, bias):
    """x + bias in x's dtype; for a SplitSums the bias rides along (added after the partials' sum is rounded,
    which is where the unsplit projection adds it)."""
    if bias is None:
        return x
    return x.replace(bias=bias) if isinstance(x, SplitSums) else x + bias.astype(x.dtype)


def value(x):
    """The product itself: a SplitSums summed and rounded, anything else unchanged."""
    return x.value() if isinstance(x, SplitSums) else x
