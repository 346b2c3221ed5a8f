"""Early programmatic-dependent-launch triggers in every Pallas-Triton kernel (DGJAX_PDL_TRIGGER=on, Hopper+).

Why: XLA launches the decode tick's kernels with programmatic dependent launch (PDL) inside its CUDA graphs and
puts `griddepcontrol.wait` at each kernel's entry, Pallas kernels included. Nothing in a deviceless compile of
the qwen3-30b-a3b fp8 tick (jax 0.10.2) triggers its dependents early (newer XLA can add triggers after the
last dot of its own Triton GEMMs), so the kernel after one is admitted only once every program of it has
exited: a launch gap on every edge, 6 of qwen3-30b-a3b fp8's ~16 kernels a layer being Pallas kernels. With
the switch on, every read of a Pallas kernel's program id runs `griddepcontrol.launch_dependents` first (after
XLA's entry wait, before any load: benchmarks/results/2026-12-02-s12-pdl-trigger-deviceless.md), so the next
kernel's programs may be scheduled while this one works; they still wait (at their entry) for this kernel to
finish and its writes to be visible, so results do not change. Whether it pays is for the GPU to say: early programs hold SM resources while they wait.
Traces of fast and slow runs of the same executables differ by exactly such overlap (benchmarks/results/
2026-12-02-session12-summary.md, section 5).

`install()` wraps the Pallas-Triton lowering of `program_id` once (at import of dgjax.pallas); the switch is
read when a kernel is lowered, so interpreted kernels (no Triton lowering) are never affected. The PTX
instruction needs sm_90 or newer: leave the switch off on older GPUs.
"""

from __future__ import annotations

from dgjax.pallas.launch import choose_impl
from dgjax.pallas.lowering_hooks import wrap_triton_rule

ENV_VAR = "DGJAX_PDL_TRIGGER"
TRIGGER_ASM = "griddepcontrol.launch_dependents;\n\tmov.u32 $0, $1;"  # the id passes through unchanged


def trigger_enabled() -> bool:
    """$DGJAX_PDL_TRIGGER: "off" (default) or "on"."""
    return choose_impl(None, ENV_VAR, ("off", "on"), "pdl trigger", default="off") == "on"


def _trigger_first(inner):
    from jax._src.lib.triton import dialect as tt_dialect

    def rule(ctx, **params):
        pid = inner(ctx, **params)
        if not trigger_enabled():
            return pid
        return tt_dialect.elementwise_inline_asm([pid.type], TRIGGER_ASM, constraints="=r,r", pure=True,
                                                 packed_element=1, args=[pid])

    return rule


def _program_id_primitive():
    from jax._src.pallas import primitives

    return primitives.program_id_p


def install() -> bool:
    """Wrap Pallas-Triton's program_id lowering so that, with the switch on, the id comes out of the trigger's
    inline asm (a data dependency the compiler keeps). Idempotent; False where this JAX has no such rule."""
    return wrap_triton_rule("pdl_trigger", _program_id_primitive, _trigger_first)
