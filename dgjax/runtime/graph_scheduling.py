"""How XLA may order the kernels inside a decode step's CUDA graph ($DGJAX_GRAPH_SCHEDULING).

Why: a decode step runs as one CUDA graph (XLA command buffers) of several hundred latency-bound kernels
(benchmarks/results/2026-12-02-s10f-ncu-decode-kernels-nvidia-h200.md: 6-15% occupancy each). XLA's default
scheduling (LHS, the latency-hiding scheduler's stream order) chains them on one stream. With CONCURRENT,
XLA builds the graph from the buffers each kernel reads and writes, so kernels that do not depend on each
other may run side by side: GLM-4.5's shared expert beside its routed experts, the routing fusions beside
the attention. Measured on the H200 (s14e, benchmarks/results/2026-12-02-s14e-graph-scheduling.md),
glm-4.5-air fp8 C1: 170.7 and 170.7 tok/s against 167.9 and 159.9 by default, 0.92 ms a tick of kernels
overlapping, busy 5.65 against 6.00-6.16 ms; qwen3-30b-a3b fp8 C1 334.7 against 363.6 (one pair). s15a
(benchmarks/results/2026-12-02-s15-graph-scheduling-and-updates.md), through this compile option: glm 178.2 /
178.4 against 167.4 / 167.5 with the same greedy tokens both ways; qwen3 and llama undecided or even, so
"auto" (the default) turns it on only where it was measured to gain.

Modes: "auto" (default: concurrent for models with a shared expert, else "xla"), "xla" (whatever XLA_FLAGS /
XLA choose: one kernel after another), "concurrent", "serialize".
The mode is a compile option of the decode executables only (prefill chunks are a few large kernels), so it
changes no process-wide flag and one process can compile a step both ways.
"""

from __future__ import annotations

from dgjax.config import ModelConfig
from dgjax.pallas.launch import choose_impl

ENV_VAR = "DGJAX_GRAPH_SCHEDULING"
OPTION = "xla_gpu_command_buffer_scheduling_mode"
MODES = {"xla": None, "auto": None, "concurrent": "CONCURRENT", "serialize": "SERIALIZE"}
DEFAULT = "auto"


def resolve(mode: str | None = None) -> str:
    """The requested mode: the argument, else $DGJAX_GRAPH_SCHEDULING, else DEFAULT."""
    return choose_impl(mode, ENV_VAR, tuple(MODES), "graph scheduling", default=DEFAULT)


def for_model(cfg: ModelConfig, mode: str | None = None) -> str:
    """The mode a model's decode executables get: "auto" resolved by the model (a shared expert: concurrent)."""
    chosen = resolve(mode)
    if chosen != "auto":
        return chosen
    return "concurrent" if cfg.shared_expert_intermediate_size else "xla"


def compile_options(mode: str | None = None) -> dict[str, str]:
    """XLA compile options for a decode executable under `mode` (empty for "xla"; resolve "auto" first)."""
    chosen = resolve(mode)
    if chosen == "auto":
        raise ValueError('graph scheduling "auto" depends on the model: pass for_model(cfg) instead')
    xla_value = MODES[chosen]
    return {} if xla_value is None else {OPTION: xla_value}
