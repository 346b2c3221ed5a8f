"""The split-K merge entry point, `merge_for_attention`: what the decode attention kernels call once they
run (so their dispatch, DGJAX_ATTENTION, and their interpret flag decide): the kernel for batches of up to
MAX_KERNEL_ROWS rows, the jnp merge (ref.py) above.
  Why the limit: on the H200 (2026-12-01, benchmarks/results/2026-12-01-s4-*) the kernel took 1.9 µs per
  layer where XLA's merge took three kernels (4.4 µs) in qwen3-30b-a3b single-stream decode (width 2):
  313.8 vs 304.6 tok/s; but with it on, 4- and 16-stream decode ran 2-6% slower (qwen3-30b-a3b C4 674.4 vs
  691.2 tok/s; llama-3.1-8b C4 870.8 / C16 3184.2 vs 925.4 / 3290.0 on an earlier day), untraced.
  That comparison crossed days and code versions, and session 8 found that one launch fewer per layer can
  shorten the tick by more than it saves in device time (SplitSums: 2.82 vs 3.16 ms at 2.89 vs 2.93 ms of
  device time). So DGJAX_SPLIT_MERGE_ROWS (default 2) moves the limit for an A/B (benchmarks/campaign_s9b.sh).
"""

from __future__ import annotations

import jax

from dgjax.pallas.carrier import f16_carrier
from dgjax.env import env_count
from dgjax.pallas.split_merge import kernel, ref

MAX_KERNEL_ROWS = 2
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
