"""SplitSums: a split-K product's partials and the bias that rides along with them."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from dgjax.pallas import split_sums
from dgjax.pallas.split_sums import SplitSums


def test_add_bias_gives_the_same_value_split_or_summed():
    rng = np.random.default_rng(2)
    parts = jnp.asarray(rng.standard_normal((4, 3, 8)), jnp.float32)
    bias = jnp.asarray(rng.standard_normal(8), jnp.bfloat16)
    summed = SplitSums(parts, jnp.dtype(jnp.bfloat16)).value()
    split = split_sums.add_bias(SplitSums(parts, jnp.dtype(jnp.bfloat16)), bias)
    assert isinstance(split, SplitSums) and split.bias is bias  # still unsummed, for the consumer kernel
    want = split_sums.add_bias(summed, bias)
    assert want.dtype == jnp.bfloat16
    np.testing.assert_array_equal(np.asarray(split.value(), np.float32), np.asarray(want, np.float32))
    np.testing.assert_array_equal(np.asarray(want, np.float32),
                                  np.asarray((summed.astype(jnp.float32) + bias.astype(jnp.float32)).astype(jnp.bfloat16),
                                             np.float32))
    assert split_sums.add_bias(summed, None) is summed
