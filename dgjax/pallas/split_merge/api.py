"""The split-K merge entry point: the kernel on a GPU (or with `kernel` forced, interpreted off GPU), ref.py
otherwise. Follows DGJAX_ATTENTION like dgjax/pallas/paged_attention/api.py. The attention kernels call
kernel.py directly, with their own interpret flag."""

from __future__ import annotations

import jax

from dgjax.pallas.split_merge import kernel, ref


def merge_splits(acc: jax.Array, m: jax.Array, l: jax.Array, group: int, out_dtype, impl: str | None = None):
    """acc float32 [B, KVH, S, GP, D], m, l float32 [B, KVH, S, GP] -> [B, KVH, group, D] in out_dtype."""
    # imported here: paged_attention's kernel imports this package, so a module-level import would be circular
    from dgjax.pallas.paged_attention.api import resolve_impl

    chosen = resolve_impl(impl)
    on_gpu = jax.default_backend() == "gpu"
    if (chosen == "kernel" or (chosen == "auto" and on_gpu)) and kernel.supports(acc.shape[-1]):
        return kernel.merge_splits(acc, m, l, group=group, out_dtype=out_dtype, interpret=not on_gpu)
    return ref.merge_splits(acc, m, l, group, out_dtype)
