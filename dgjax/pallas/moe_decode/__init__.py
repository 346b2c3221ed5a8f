"""Routed experts of a decode step, reading only the routed experts; import the api, never a backend directly."""

from dgjax.pallas.moe_decode.api import MAX_TOKENS, moe_decode, resolve_impl, use_kernel

__all__ = ["MAX_TOKENS", "moe_decode", "resolve_impl", "use_kernel"]
