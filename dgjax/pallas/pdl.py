"""Early programmatic-dependent-launch triggers in Pallas-Triton kernels (on for dense unquantized models, sm_90+).

Why: XLA launches the decode tick's kernels with programmatic dependent launch (PDL) inside its CUDA graphs and
puts `griddepcontrol.wait` at each kernel's entry, Pallas kernels included. Nothing in a deviceless compile of
the qwen3-30b-a3b fp8 tick (jax 0.10.2) triggers its dependents early (newer XLA can add triggers after the
last dot of its own Triton GEMMs), so the kernel after one is admitted only once every program of it has
exited: a launch gap on every edge, 6 of qwen3-30b-a3b fp8's ~16 kernels a layer being Pallas kernels. With
the switch on, every read of a Pallas kernel's program id runs `griddepcontrol.launch_dependents` first (after
XLA's entry wait, before any load: benchmarks/results/2026-12-02-s12-pdl-trigger-deviceless.md), so the next
kernel's programs may be scheduled while this one works; they still wait (at their entry) for this kernel to
finish and its writes to be visible, so results do not change. Measured on the H200 (benchmarks/results/
2026-12-02-s13-pdl-trigger.md, interleaved pairs): llama-3.1-8b (bf16, dense) gains, C1 232.0 / 232.0 tok/s
against 231.0 / 230.8 without, C16 3255.3 / 3259.2 against 3098.1 / 2938.4; glm-4.5-air fp8 C1 loses 1.5-2%
(166.6, 164.2, 164.2 against 169.1, 167.7, 167.6) and qwen3-30b-a3b fp8 C1 is no better, even with only the
attention triggering. So the default follows the model (`model_default`, set by the executor while it lowers
the steps): "auto" for dense models with unquantized weights, "off" for models with routed experts or
quantized weights. $DGJAX_PDL_TRIGGER overrides it: "auto" (where the GPU can), "on", "off", or
"kernels:<prefixes>" (only in the named kernels, for A/B of which kernels should trigger).

Where: $DGJAX_PDL_TRIGGER_AT "start" (default) triggers at the program-id reads, so the next kernel's programs
may take SM slots for the whole of this kernel; "end" triggers where a kernel hands its result to the store
(`trigger_after`, called by the quantized GEMV, the MoE decode stages, the decode attention and its merge),
after the weight stream: the next kernel's launch then overlaps only this kernel's tail (its last programs'
epilogues and exits). Kernels without such a call do not trigger at "end". Measured (s14b,
benchmarks/results/2026-12-02-s14-routing-split-k-end-trigger.md): glm-4.5-air fp8 C1 161.9 / 162.0 tok/s
against 169.3 / 169.2 off; llama-3.1-8b C1 240.0 against 239.6 at "start"; so "start" stays the default.

`install()` wraps the Pallas-Triton lowering of `program_id` once (at import of dgjax.pallas); the switch is
read when a kernel is lowered, so interpreted kernels (no Triton lowering) are never affected. The PTX
instruction needs sm_90 or newer, so "auto" triggers only where the lowering targets CUDA at compute
capability >= 9.0 (Pallas assumes 9.0 when it lowers for CUDA without a GPU); "on" forces it; "off" leaves
kernels as Pallas lowers them. Outside `model_default` (kernel checks, sweeps) the default is "off".
"""

from __future__ import annotations

import contextlib
import os
from contextvars import ContextVar
from typing import Any, Iterator

from dgjax.pallas.launch import choose_impl
from dgjax.pallas.lowering_hooks import add_triton_rule, wrap_triton_rule

ENV_VAR = "DGJAX_PDL_TRIGGER"
MIN_COMPUTE_CAPABILITY = 90  # griddepcontrol is PTX for sm_90+
MODES = ("auto", "on", "off")
KERNELS = "kernels:"  # DGJAX_PDL_TRIGGER=kernels:fused_decode_attention,split_merge
_DEFAULT: ContextVar[str] = ContextVar("dgjax_pdl_default", default="off")


def mode_for_model(num_experts: int, params: Any) -> str:
    """The measured default: "auto" for a dense model whose weights are all plain arrays, else "off"."""
    import jax

    from dgjax.quant import is_quantized

    quantized = any(is_quantized(x) for x in jax.tree.leaves(params, is_leaf=is_quantized))
    return "off" if num_experts > 0 or quantized else "auto"


@contextlib.contextmanager
def model_default(mode: str) -> Iterator[None]:
    """Within: kernels lowered without $DGJAX_PDL_TRIGGER set take `mode` ("auto" | "on" | "off")."""
    if mode not in MODES:
        raise ValueError(f"pdl default must be one of {MODES}, got {mode!r}")
    token = _DEFAULT.set(mode)
    try:
        yield
    finally:
        _DEFAULT.reset(token)


def trigger_enabled(platform: str = "cuda", compute_capability: int | None = MIN_COMPUTE_CAPABILITY,
                    kernel: str = "") -> bool:
    """$DGJAX_PDL_TRIGGER for a kernel named `kernel`, lowered for `platform` at `compute_capability` (Pallas'
    int form, 90 for 9.0; None where unknown or ROCm): unset, the `model_default` ("off" outside one); "auto"
    (on for CUDA at sm_90+), "on", "off", or "kernels:" and comma-separated kernel-name prefixes (auto, but
    only in kernels whose name starts with one: for A/B of which kernels should trigger)."""
    raw = os.environ.get(ENV_VAR, "").strip()
    if raw.startswith(KERNELS):
        prefixes = tuple(p.strip() for p in raw[len(KERNELS):].split(",") if p.strip())
        if not prefixes:
            raise ValueError(f"{ENV_VAR}={raw!r} names no kernel-name prefix after {KERNELS!r}")
        return _capable(platform, compute_capability) and kernel.startswith(prefixes)
    mode = choose_impl(None, ENV_VAR, MODES, "pdl trigger", default=_DEFAULT.get())
    if mode == "auto":
        return _capable(platform, compute_capability)
    return mode == "on"


def _capable(platform: str, compute_capability: int | None) -> bool:
    return platform == "cuda" and (compute_capability or 0) >= MIN_COMPUTE_CAPABILITY


AT_ENV_VAR = "DGJAX_PDL_TRIGGER_AT"
POSITIONS = ("start", "end")
_ASM_REGISTERS = {"float32": ("f", "f32"), "int32": ("r", "b32"), "uint32": ("r", "b32"),  # (constraint, mov type)
                  "bfloat16": ("h", "b16"), "float16": ("h", "b16")}


def trigger_position() -> str:
    """$DGJAX_PDL_TRIGGER_AT: "start" (default; at the program-id reads, before any load) or "end" (where a
    kernel hands its result to the store, after its main loop: `trigger_after`)."""
    return choose_impl(None, AT_ENV_VAR, POSITIONS, "pdl trigger position", default="start")


def _enabled_at(ctx, position: str) -> bool:
    c = ctx.context
    return trigger_position() == position and trigger_enabled(c.platform, c.compute_capability, c.name)


def _asm_inline(value, dtype):
    from jax._src.lib.triton import dialect as tt_dialect

    constraint, mov = _ASM_REGISTERS[dtype.name]
    asm = f"griddepcontrol.launch_dependents;\n\tmov.{mov} $0, $1;"  # the value passes through unchanged
    return tt_dialect.elementwise_inline_asm([value.type], asm, constraints=f"={constraint},{constraint}",
                                             pure=True, packed_element=1, args=[value])


def _trigger_first(inner):
    def rule(ctx, **params):
        pid = inner(ctx, **params)
        return _asm_inline(pid, ctx.avals_out[0].dtype) if _enabled_at(ctx, "start") else pid

    return rule


def _program_id_primitive():
    from jax._src.pallas import primitives

    return primitives.program_id_p


def _make_trigger_after_primitive():
    """An identity primitive: the value as is everywhere but in a Pallas-Triton lowering with the trigger on
    at "end", where each element passes through the trigger's inline asm (so the trigger runs once the value
    exists: after the loop that computed it, before the store that uses it)."""
    from jax.extend.core import Primitive
    from jax.interpreters import mlir

    prim = Primitive("dgjax_pdl_trigger_after")
    prim.def_impl(lambda x: x)
    prim.def_abstract_eval(lambda aval: aval)
    mlir.register_lowering(prim, lambda ctx, x: [x])
    return prim


_trigger_after_p = _make_trigger_after_primitive()


def trigger_after(value):
    """`value` unchanged; with DGJAX_PDL_TRIGGER_AT=end (and the trigger on for this kernel) the kernel
    triggers its dependents once `value` is computed. Kernels call it on the result they are about to store.
    float32, (u)int32, bfloat16 and float16 elements."""
    if value.dtype.name not in _ASM_REGISTERS:
        raise TypeError(f"trigger_after takes {', '.join(_ASM_REGISTERS)} elements, got {value.dtype}")
    return _trigger_after_p.bind(value)


def _trigger_after_rule(ctx, value):
    return _asm_inline(value, ctx.avals_in[0].dtype) if _enabled_at(ctx, "end") else value


def install() -> bool:
    """Wrap Pallas-Triton's program_id lowering so that, with the trigger on at "start", the id comes out of
    the trigger's inline asm (a data dependency the compiler keeps), and give `trigger_after` its Triton rule.
    Idempotent; False where this JAX has no such rule."""
    return (wrap_triton_rule("pdl_trigger", _program_id_primitive, _trigger_first)
            and add_triton_rule(_trigger_after_p, _trigger_after_rule))
