"""Read an array once so its bytes sit in the GPU's L2 cache (evict-last) when the kernel that needs them runs.

Why: a decode layer alternates weight streams (HBM-bound) with latency-bound kernels (attention at short
context, routing, norms), during which HBM idles. A weight whose reader is known in advance (the next
projection's) can be read into L2 during those kernels by this kernel, placed beside them in the CUDA graph,
so the projection then reads L2 instead of HBM. The H200's L2 holds 50 MB; evict-last keeps the lines past the
streaming reads in between.

The kernel reads the array's bytes as uint32 words [M, 256] (1 KB rows, `as_words`), each program a
contiguous range of rows in 16 KB steps, and writes each program's word-wise max (`ref.py` computes the same
value). XLA still removes the kernel where nothing reads that result (benchmarks/l2_probe.py's first H200 run,
2026-12-03: no prefetch kernel in its traces), so a caller must consume it: the engine's opt-in use (api.py,
DGJAX_L2_PREFETCH) hands it to the next q/k/v GEMV as an unread operand. That run found the fp8 readers only
~25% faster from L2 (benchmarks/results/2026-12-03-s17a-*); in the engine the prefetch beside the feed-forward
lost (benchmarks/results/2026-12-04-s24-limits-add-norm-l2-prefetch.md).
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from jax import lax
from jax.experimental import pallas as pl
from jax.experimental.pallas import triton as plgpu

from dgjax.pallas.launch import whole

WORDS = 256  # uint32 words a row of the view: 1 KB
ROWS_PER_STEP = 16  # rows a load: 16 KB
EVICTION_POLICIES = ("evict_last", "evict_normal", "evict_first")


def as_words(a: jax.Array) -> jax.Array:
    """`a`'s bytes as uint32 [M, WORDS] (a bitcast view; the byte count must be a multiple of 1 KB)."""
    itemsize = jnp.dtype(a.dtype).itemsize
    if (a.size * itemsize) % (4 * WORDS):
        raise ValueError(f"l2 prefetch reads whole KB rows: {a.shape} {a.dtype} is {a.size * itemsize} bytes")
    flat = a.reshape(-1)
    if itemsize < 4:
        flat = lax.bitcast_convert_type(flat.reshape(-1, 4 // itemsize), jnp.uint32)
    elif itemsize == 4:
        flat = lax.bitcast_convert_type(flat, jnp.uint32)
    else:
        raise ValueError(f"l2 prefetch reads 1-4 byte elements, got {a.dtype}")
    return flat.reshape(-1, WORDS)


def program_steps(rows: int, programs: int) -> int:
    """16-row steps each program runs (the last programs may run past `rows`: masked)."""
    return -(-rows // (programs * ROWS_PER_STEP))


def _kernel(w_ref, *refs, rows: int, steps: int, eviction_policy: str):
    o_ref = refs[-1]  # refs[:-1]: the `after` operands, never read
    r0 = pl.program_id(0) * (steps * ROWS_PER_STEP)

    def body(i, acc):
        start = r0 + i * ROWS_PER_STEP
        valid = (start + lax.broadcasted_iota(jnp.int32, (ROWS_PER_STEP, WORDS), 0)) < rows
        tile = plgpu.load(w_ref.at[pl.ds(start, ROWS_PER_STEP), :], mask=valid, other=0,
                          eviction_policy=eviction_policy)
        return jnp.maximum(acc, tile)

    acc = lax.fori_loop(0, steps, body, jnp.zeros((ROWS_PER_STEP, WORDS), jnp.uint32))
    o_ref[...] = jnp.max(acc, axis=0, keepdims=True)


@functools.partial(jax.jit, static_argnames=("programs", "eviction_policy", "num_stages", "interpret"))
def l2_prefetch(a: jax.Array, *, programs: int = 32, eviction_policy: str = "evict_last", num_stages: int = 3,
                after: tuple = (), interpret: bool = False) -> jax.Array:
    """Read every byte of `a` (into L2) -> uint32 [programs, WORDS]: each program's word-wise max. `after`: arrays
    passed as operands the kernel never reads, so that in a CUDA graph built from buffer dependencies it starts
    only once their producers have run."""
    if eviction_policy not in EVICTION_POLICIES:
        raise ValueError(f"eviction_policy must be one of {EVICTION_POLICIES}, got {eviction_policy!r}")
    words = as_words(a)
    rows = words.shape[0]
    steps = program_steps(rows, programs)
    kernel = functools.partial(_kernel, rows=rows, steps=steps, eviction_policy=eviction_policy)
    return pl.pallas_call(
        kernel,
        grid=(programs,),
        in_specs=[whole(words.shape)] + [whole(b.shape) for b in after],
        out_specs=pl.BlockSpec((1, WORDS), lambda i: (i, 0)),
        out_shape=jax.ShapeDtypeStruct((programs, WORDS), jnp.uint32),
        compiler_params=plgpu.CompilerParams(num_warps=4, num_stages=num_stages),
        interpret=interpret,
        name=f"l2_prefetch_p{programs}",
    )(words, *after)
