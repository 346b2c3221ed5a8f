"""Routed experts of a decode step, reading only the routed experts; import the api, never a backend directly."""

from dgjax.pallas.moe_decode.api import MAX_TOKENS, moe_decode, moe_decode_routed, resolve_impl, use_kernel, use_routed

__all__ = ["MAX_TOKENS", "moe_decode", "moe_decode_routed", "resolve_impl", "use_kernel", "use_routed"]
