"""Paged causal flash attention for prefill chunks; import the api module, never the kernel directly."""

from dgjax.pallas.paged_prefill.api import paged_prefill_attention, supports

__all__ = ["paged_prefill_attention", "supports"]
