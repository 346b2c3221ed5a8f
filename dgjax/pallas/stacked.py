"""A row of a per-layer parameter stacked over layers, handed to a kernel without slicing it out.

Why: the step executables take small per-layer vectors stacked over layers (dgjax/runtime/param_packing.py:
one argument instead of one per layer). XLA fuses a slice of a stack into its own consumers, but a slice
handed to a Pallas call becomes a copy kernel; kernels that know `StackedRow` read row `index` in place.
"""

from __future__ import annotations

import flax
import jax


@flax.struct.dataclass
class StackedRow:
    stack: jax.Array  # [layers, ...]
    index: int = flax.struct.field(pytree_node=False)

    def value(self) -> jax.Array:
        return self.stack[self.index]


def value(x):
    """The array itself: a StackedRow's row (sliced, for XLA consumers), anything else unchanged."""
    return x.value() if isinstance(x, StackedRow) else x


def as_stack(x) -> tuple[jax.Array, int]:
    """(stack [rows, ...], row) for a kernel: a StackedRow as it is, a plain array as a one-row stack."""
    if isinstance(x, StackedRow):
        return x.stack, x.index
    return x[None], 0
