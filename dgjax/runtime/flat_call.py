"""A compiled step called with its fixed first argument flattened once, straight into the runtime executable.

Why: a decode tick passes the same parameters (hundreds of arrays) to the same executable every time, and a
jax `Compiled` call flattens the whole argument pytree and checks every leaf on each call. On the 2-core dev
CPU a hand-timed call with 600 small arguments took 557 µs that way against 248 µs for the runtime
executable fed the flat buffer list (an indication, not a claim: benchmarks/campaign_s8a.sh times it in the
engine on the GPU; tests/runtime/test_flat_call.py says what is checked). `FlatCall` keeps the parameters'
leaves and forwards only the rest of the arguments each call.

This uses jax internals (`Compiled._executable.unsafe_call`: kept_var_idx, xla_executable, out_handler, as in
jax 0.10-0.11). `bind` returns the compiled executable itself where they are missing or the executable needs
more than a plain call (effects, mutable arguments, hoisted constants, NaN checking); a call whose arguments
are not the bound parameters plus device arrays of the compiled structure falls back to the ordinary call.
What it skips is the per-call check of each array's shape, dtype and sharding against the compiled ones: the
executor passes the state it got back from the previous call and arrays it built for the bucket's width.
DGJAX_FLAT_CALL=0 turns it off.
"""

from __future__ import annotations

import logging
import os
from typing import Any

import jax

log = logging.getLogger("dgjax.executor")
ENV_VAR = "DGJAX_FLAT_CALL"


class FlatCall:
    """`compiled(fixed, *rest)` with `fixed` pre-flattened; falls back to `compiled` for other arguments."""

    def __init__(self, compiled, fixed: Any, runtime, kept: list[int], handlers, in_tree, out_tree):
        self.compiled = compiled
        self._fixed = fixed
        fixed_leaves = jax.tree.leaves(fixed)
        n_fixed = len(fixed_leaves)
        kept_set = set(kept)
        self._fixed_kept = [x for i, x in enumerate(fixed_leaves) if i in kept_set]
        self._n_fixed = n_fixed
        self._kept = kept_set
        self._runtime = runtime
        self._handlers = handlers
        self._in_tree = in_tree
        self._out_tree = out_tree
        self._rest_tree = None  # the rest's treedef, set by the first call that matched the compiled structure
        self._rest_kept: list[int] | None = None
        self.fallbacks = 0
        self._verified = False

    def __call__(self, fixed, *rest):
        if fixed is not self._fixed:
            return self._fallback(fixed, rest)
        leaves, tree = jax.tree.flatten(rest)
        if (self._rest_tree is None or tree != self._rest_tree) and not self._learn(fixed, rest, tree, len(leaves)):
            return self._fallback(fixed, rest)
        if not all(isinstance(x, jax.Array) for x in leaves):
            return self._fallback(fixed, rest)
        kept = leaves if self._rest_kept is None else [leaves[i] for i in self._rest_kept]
        if self._verified:
            results = self._runtime.execute_sharded(self._fixed_kept + kept)
            return jax.tree.unflatten(self._out_tree, results.consume_with_handlers(self._handlers))
        try:  # the first call: internals that exist but take other arguments fail here, before running
            results = self._runtime.execute_sharded(self._fixed_kept + kept)
            out = jax.tree.unflatten(self._out_tree, results.consume_with_handlers(self._handlers))
        except (TypeError, AttributeError) as e:
            log.warning("flat call failed (%s); using the compiled call", e)
            self._fixed = object()  # nothing is `fixed` any more: every call falls back
            return self._fallback(fixed, rest)
        self._verified = True
        return out

    def _learn(self, fixed, rest, tree, n_rest: int) -> bool:
        """Accept `rest`'s structure if (fixed, *rest) is the compiled call's argument structure."""
        if jax.tree.structure(((fixed, *rest), {})) != self._in_tree:
            return False
        rest_kept = [i for i in range(n_rest) if self._n_fixed + i in self._kept]
        self._rest_kept = None if len(rest_kept) == n_rest else rest_kept
        self._rest_tree = tree
        return True

    def _fallback(self, fixed, rest):
        self.fallbacks += 1
        return self.compiled(fixed, *rest)


def enabled() -> bool:
    value = os.environ.get(ENV_VAR, "1")
    if value not in ("0", "1"):
        raise ValueError(f"{ENV_VAR} must be 0 or 1, got {value!r}")
    return value == "1"


def bind(compiled, fixed: Any):
    """A FlatCall of `compiled` for calls whose first argument is `fixed`, or `compiled` itself where the
    internals it needs are missing, the executable is more than a plain call, or DGJAX_FLAT_CALL=0."""
    if not enabled():
        return compiled
    try:
        params = compiled._params
        unsafe = compiled._executable.unsafe_call
        plain = (type(unsafe).__name__ == "ExecuteReplicated" and not params.const_args and not params.is_high
                 and not unsafe.mut and not unsafe.ordered_effects and not unsafe.has_unordered_effects
                 and not unsafe.has_host_callbacks and not jax.config.jax_debug_nans
                 and not jax.config.jax_debug_infs)
        if not plain:
            return compiled
        return FlatCall(compiled, fixed, unsafe.xla_executable, sorted(unsafe.kept_var_idx),
                        unsafe.out_handler.handlers, params.in_tree, params.out_tree)
    except AttributeError as e:  # a jax whose internals differ: the ordinary call still works
        log.info("flat calls unavailable (%s); using the compiled call", e)
        return compiled
