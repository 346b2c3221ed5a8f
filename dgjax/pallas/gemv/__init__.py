"""Skinny bf16 GEMV for decode projections, optionally with the RMSNorm before it fused; import the api."""

from dgjax.pallas.gemv.api import ENV_VAR, gemv, resolve_impl, use_kernel

__all__ = ["ENV_VAR", "gemv", "resolve_impl", "use_kernel"]
