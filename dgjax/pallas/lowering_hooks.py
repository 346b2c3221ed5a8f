"""Wrapping a Pallas-Triton lowering rule, for the two places where dgjax changes what Pallas emits for the GPU
(fp8_mma.py: fp8 dots' accumulation attribute; pdl.py: early PDL triggers). Lowering-only hooks: interpreted
kernels never reach them."""

from __future__ import annotations

import functools
from collections.abc import Callable

_wrapped: set[str] = set()


def wrap_triton_rule(name: str, primitive_of: Callable[[], object], wrap: Callable[[Callable], Callable]) -> bool:
    """Replace the Triton lowering rule of `primitive_of()` with `wrap(rule)`, once per `name`. False where this
    JAX has no Pallas-Triton lowering table or no rule for the primitive (nothing changes then)."""
    if name in _wrapped:
        return True
    try:
        from jax._src.pallas.triton import lowering

        primitive = primitive_of()
    except (ImportError, AttributeError):
        return False
    rules = getattr(lowering, "triton_lowering_rules", None)
    if rules is None or primitive not in rules:
        return False
    rules[primitive] = functools.wraps(rules[primitive])(wrap(rules[primitive]))
    _wrapped.add(name)
    return True


def add_triton_rule(primitive: object, rule: Callable) -> bool:
    """Register `rule` as the Pallas-Triton lowering of dgjax's own `primitive`; False where this JAX has no
    Pallas-Triton lowering table."""
    try:
        from jax._src.pallas.triton import lowering
    except ImportError:
        return False
    rules = getattr(lowering, "triton_lowering_rules", None)
    if rules is None:
        return False
    rules[primitive] = rule
    return True
