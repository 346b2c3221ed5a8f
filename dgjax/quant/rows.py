"""Build one quantized node from row segments of others (same format): fusing q/k/v or gate/up after loading.

Every array of a node maps its first axis to the matrix's N rows, `row_block` rows per element (fp8: 128
rows per scale row, the fp4 and int formats: 1). A segment that starts and ends on those boundaries in
every array can be cut from the packed data as it is: no dequantization, the result holds the same bits.
Formats with an array that has no row axis (NVFP4's per-tensor global scale) cannot be joined this way.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import jax.numpy as jnp

from dgjax.quant.base import QuantizedWeight

Segment = tuple[int, int, int]  # (node index, first row, rows)


def _layouts(node: QuantizedWeight) -> dict:
    return type(node).array_layout(node.n, node.k, **node.static_args())


def concat_row_segments(nodes: Sequence[QuantizedWeight], segments: Sequence[Segment],
                        shape: tuple[int, ...]) -> QuantizedWeight | None:
    """A node of dense `shape` (same input dims as the nodes) whose N rows are `segments` in order, or None
    when the nodes differ in format / inputs / format parameters, carry expert dims, or a segment is not
    on every array's row grid."""
    align = getattr(type(nodes[0]), "align_for_concat", None)
    if align is not None and all(type(n) is type(nodes[0]) for n in nodes):
        nodes = align(nodes)  # e.g. bf12's escape tables to one width
    first = nodes[0]
    same = all(type(n) is type(first) and n.static_args() == first.static_args() and n.in_shape == first.in_shape
               and n.in_dims == first.in_dims and n.expert_dims == 0 for n in nodes)
    if not same:
        return None
    layouts = [_layouts(n) for n in nodes]
    arrays = {}
    for name, layout in layouts[0].items():
        block = layout.row_block
        if getattr(first, name, None) is None:
            continue
        if block is None or any(start % block or rows % block for _, start, rows in segments):
            return None
        arrays[name] = jnp.concatenate(
            [getattr(nodes[i], name)[start // block:(start + rows) // block] for i, start, rows in segments], axis=0)
    return dataclasses.replace(first, shape=tuple(shape), **arrays)
