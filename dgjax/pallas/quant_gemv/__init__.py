"""Quantized dense GEMV for decode (1-16 rows) reading packed weights once; import the api, never a backend."""

from dgjax.pallas.quant_gemv.api import ENV_VAR, MAX_ROWS, quant_matmul, resolve_impl, use_kernel

__all__ = ["ENV_VAR", "MAX_ROWS", "quant_matmul", "resolve_impl", "use_kernel"]
