"""Weight formats as pytree nodes, with exact numpy reference encoders/decoders and jnp twins.

Device layouts and dtypes of every array are documented in README.md beside this file.
"""

from dgjax.quant.bf12 import Bf12Weight
from dgjax.quant.base import ArrayLayout, QuantizedWeight, array_shardings, array_specs, is_quantized
from dgjax.quant.fp8_block import Fp8BlockWeight
from dgjax.quant.int_group import IntWeight
from dgjax.quant.mxfp4 import Mxfp4Weight
from dgjax.quant.nvfp4 import Nvfp4Weight
from dgjax.quant.reference import reference_expert_matmul, reference_matmul

__all__ = [
    "ArrayLayout", "QuantizedWeight", "array_shardings", "array_specs", "is_quantized",
    "Bf12Weight", "Fp8BlockWeight", "IntWeight", "Mxfp4Weight", "Nvfp4Weight", "reference_expert_matmul", "reference_matmul",
]
