"""The split-K merge entry points.

- `merge_splits`: the kernel on a GPU (or with `kernel` forced, interpreted off GPU), ref.py otherwise;
  follows DGJAX_ATTENTION like dgjax/pallas/paged_attention/api.py.
- `merge_for_attention`: what the decode attention kernels call once they run (so their own choice and
  interpret flag decide): the kernel for batches of up to MAX_KERNEL_ROWS rows, the jnp merge above.
  Why the limit: on the H200 (2026-12-01, benchmarks/results/2026-12-01-s4-*) the kernel took 1.9 µs per
  layer where XLA's merge took three kernels (4.4 µs) in qwen3-30b-a3b single-stream decode (width 2):
  313.8 vs 304.6 tok/s; but with it on, 4- and 16-stream decode ran 2-6% slower (qwen3-30b-a3b C4 674.4 vs
  691.2 tok/s; llama-3.1-8b C4 870.8 / C16 3184.2 vs 925.4 / 3290.0 on an earlier day), untraced.
"""

from __future__ import annotations

import jax

from dgjax.pallas.split_merge import kernel, ref

MAX_KERNEL_ROWS = 2


def merge_splits(acc: jax.Array, m: jax.Array, l: jax.Array, group: int, out_dtype, impl: str | None = None):
    """acc float32 [B, KVH, S, GP, D], m, l float32 [B, KVH, S, GP] -> [B, KVH, group, D] in out_dtype."""
    # imported here: paged_attention's kernel imports this package, so a module-level import would be circular
    from dgjax.pallas.paged_attention.api import resolve_impl

    chosen = resolve_impl(impl)
    on_gpu = jax.default_backend() == "gpu"
    if (chosen == "kernel" or (chosen == "auto" and on_gpu)) and kernel.supports(acc.shape[-1]):
        return kernel.merge_splits(acc, m, l, group=group, out_dtype=out_dtype, interpret=not on_gpu)
    return ref.merge_splits(acc, m, l, group, out_dtype)


def merge_for_attention(acc: jax.Array, m: jax.Array, l: jax.Array, *, group: int, out_dtype,
                        interpret: bool) -> jax.Array:
    """As merge_splits, for a decode attention kernel that has run: the kernel while B <= MAX_KERNEL_ROWS."""
    if acc.shape[0] <= MAX_KERNEL_ROWS and kernel.supports(acc.shape[-1]):
        return kernel.merge_splits(acc, m, l, group=group, out_dtype=out_dtype, interpret=interpret)
    return ref.merge_splits(acc, m, l, group, out_dtype)
