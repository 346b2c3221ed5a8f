"""The L2 prefetch kernel (dgjax/pallas/l2_prefetch, probe grade) against its ref.py, interpreted on the CPU."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from dgjax.pallas.l2_prefetch import kernel, ref


@pytest.mark.parametrize("shape,dtype,programs", [
    ((64, 1024), jnp.float8_e4m3fn, 3),  # fp8 weight bytes, 4 to a word
    ((300, 256), jnp.bfloat16, 8),  # 75 KB rows: the last programs run masked past the end
    ((33, 512), jnp.float32, 1),
])
def test_each_program_reads_its_rows(shape, dtype, programs):
    a = jax.random.normal(jax.random.key(1), shape, jnp.float32).astype(dtype)
    got = kernel.l2_prefetch(a, programs=programs, interpret=True)
    np.testing.assert_array_equal(np.asarray(got), np.asarray(ref.l2_prefetch(a, programs=programs)))
    words = np.asarray(kernel.as_words(a))
    assert words.nbytes == a.nbytes and np.asarray(got).max() == words.max()  # every byte was read


def test_bad_inputs_are_rejected():
    with pytest.raises(ValueError, match="whole KB rows"):
        kernel.l2_prefetch(jnp.zeros((3, 5), jnp.bfloat16), interpret=True)
    with pytest.raises(ValueError, match="eviction_policy"):
        kernel.l2_prefetch(jnp.zeros((512,), jnp.bfloat16), eviction_policy="keep", interpret=True)
