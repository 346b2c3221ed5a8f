"""The split-K merge entry point, `merge_for_attention`: what the decode attention kernels call once they
run (so their dispatch, DGJAX_ATTENTION, and their interpret flag decide): the kernel for batches of up to
MAX_KERNEL_ROWS rows, the jnp merge (ref.py) above.
  Why the limit: on the H200 (2026-12-01, benchmarks/results/2026-12-01-s4-*) the kernel took 1.9 µs per
  layer where XLA's merge took three kernels (4.4 µs) in qwen3-30b-a3b single-stream decode (width 2):
  313.8 vs 304.6 tok/s; but with it on, 4- and 16-stream decode ran 2-6% slower (qwen3-30b-a3b C4 674.4 vs
  691.2 tok/s; llama-3.1-8b C4 870.8 / C16 3184.2 vs 925.4 / 3290.0 on an earlier day), untraced.
"""

from __future__ import annotations

import jax

from dgjax.pallas.split_merge import kernel, ref

MAX_KERNEL_ROWS = 2


def merge_for_attention(acc: jax.Array, m: jax.Array, l: jax.Array, *, group: int, out_dtype,
                        interpret: bool) -> jax.Array:
    """acc float32 [B, KVH, S, GP, D], m, l float32 [B, KVH, S, GP] -> [B, KVH, group, D] in out_dtype: the
    kernel while B <= MAX_KERNEL_ROWS, ref.py above."""
    if acc.shape[0] <= MAX_KERNEL_ROWS and kernel.supports(acc.shape[-1]):
        return kernel.merge_splits(acc, m, l, group=group, out_dtype=out_dtype, interpret=interpret)
    return ref.merge_splits(acc, m, l, group, out_dtype)
