"""The split-K merge entry point, `merge_for_attention`: what the decode attention kernels call once they
run (so their dispatch, DGJAX_ATTENTION, and their interpret flag decide): the kernel for batches of up to
MAX_KERNEL_ROWS rows, the jnp merge (ref.py) above.
  Why the limit: 16 rows is the widest default decode bucket. On the H200 (benchmarks/results/2026-12-04-s26-*), interleaved
  in one device call each, the kernel against XLA's merge (ref.py): llama-3.1-8b C4 887.9 / 887.2 / 895.1 vs
  875.6 / 876.2 tok/s, C16 3180.5 / 3206.0 vs 3155.3 / 3169.6; qwen3-30b-a3b fp8 C4 device busy 4.07 / 3.95 vs
  4.09 / 4.09 ms a tick. (Session 4 had set the limit at 2 rows from an untraced comparison across days.)
  Above 16 rows nothing was measured, so XLA's merge stays there. DGJAX_SPLIT_MERGE_ROWS moves the limit.
"""

from __future__ import annotations

import jax

from dgjax.pallas.carrier import f16_carrier
from dgjax.env import env_count
from dgjax.pallas.split_merge import kernel, ref

MAX_KERNEL_ROWS = 16
ROWS_ENV_VAR = "DGJAX_SPLIT_MERGE_ROWS"


def max_kernel_rows() -> int:
    """The batch up to which the kernel merges: $DGJAX_SPLIT_MERGE_ROWS (read at trace time), else MAX_KERNEL_ROWS."""
    return env_count(ROWS_ENV_VAR, MAX_KERNEL_ROWS, "a row count")


def merge_for_attention(acc: jax.Array, m: jax.Array, l: jax.Array, *, group: int, out_dtype,
                        interpret: bool, carry_f16: bool = False) -> jax.Array:
    """acc float32 [B, KVH, S, GP, D], m, l float32 [B, KVH, S, GP] -> [B, KVH, group, D] in out_dtype: the
    kernel while B <= max_kernel_rows(), ref.py above. `carry_f16`: the out_dtype values carried as float16
    (dgjax/pallas/carrier.py), written by the kernel (or XLA's merge fusion) itself."""
    if acc.shape[0] <= max_kernel_rows() and kernel.supports(acc.shape[-1]):
        return kernel.merge_splits(acc, m, l, group=group, out_dtype=out_dtype, carry_f16=carry_f16,
                                   interpret=interpret)
    out = ref.merge_splits(acc, m, l, group, out_dtype)
    return f16_carrier(out) if carry_f16 else out
