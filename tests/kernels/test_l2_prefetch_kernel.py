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


def test_after_operands_are_not_read_and_lower(verified_triton_lowering):
    """`after` operands only order the kernel (a CUDA graph built from buffer dependencies): the result is the
    same, and the module still lowers for CUDA with them."""
    a = jax.random.normal(jax.random.key(2), (64, 1024), jnp.float32).astype(jnp.float8_e4m3fn)
    dep = jnp.arange(6, dtype=jnp.bfloat16).reshape(2, 3)
    got = kernel.l2_prefetch(a, programs=4, after=(dep,), interpret=True)
    np.testing.assert_array_equal(np.asarray(got), np.asarray(ref.l2_prefetch(a, programs=4)))
    text = jax.jit(lambda w, d: kernel.l2_prefetch(w, programs=132, after=(d,))).trace(
        jax.ShapeDtypeStruct((5120, 2048), jnp.float8_e4m3fn), jax.ShapeDtypeStruct((2, 1, 2048), jnp.bfloat16)
    ).lower(lowering_platforms=("cuda",)).as_text()
    assert verified_triton_lowering and all(verified_triton_lowering)
    assert "l2_prefetch_p132" in text
