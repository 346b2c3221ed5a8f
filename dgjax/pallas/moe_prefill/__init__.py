"""Routed experts of a prefill chunk as a grouped GEMM; import the api, never a backend directly."""

from dgjax.pallas.moe_prefill.api import MIN_TOKENS, grouped_mlp, moe_prefill, resolve_impl, use_kernel

__all__ = ["MIN_TOKENS", "grouped_mlp", "moe_prefill", "resolve_impl", "use_kernel"]
