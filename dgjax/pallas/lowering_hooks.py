"""Wrapping or adding Pallas-Triton lowering rules, for the places where dgjax changes what Pallas emits for the
GPU (fp8_mma.py: fp8 dots' accumulation attribute; pdl.py: PDL triggers and its `trigger_after` primitive). Lowering-only hooks: interpreted
kernels never reach them."""

from __future__ import annotations

import functools
from collections.abc import Callable

_wrapped: set[str] = set()


def _triton_rules() -> dict | None:
    """Pallas-Triton's lowering table, or None where this JAX has none."""
    try:
        from jax._src.pallas.triton import lowering
    except ImportError:
        return None
    return getattr(lowering, "triton_lowering_rules", None)


def wrap_triton_rule(name: str, primitive_of: Callable[[], object], wrap: Callable[[Callable], Callable]) -> bool:
    """Replace the Triton lowering rule of `primitive_of()` with `wrap(rule)`, once per `name`. False where this
    JAX has no Pallas-Triton lowering table or no rule for the primitive (nothing changes then)."""
    if name in _wrapped:
        return True
    rules = _triton_rules()
    try:
        primitive = primitive_of()
    except (ImportError, AttributeError):
        return False
    if rules is None or primitive not in rules:
        return False
    rules[primitive] = functools.wraps(rules[primitive])(wrap(rules[primitive]))
    _wrapped.add(name)
    return True


def add_triton_rule(primitive: object, rule: Callable) -> bool:
    """Register `rule` as the Pallas-Triton lowering of dgjax's own `primitive`; False where this JAX has no
    Pallas-Triton lowering table."""
    rules = _triton_rules()
    if rules is None:
        return False
    rules[primitive] = rule
    return True
