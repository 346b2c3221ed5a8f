"""The expert-selection kernel (dgjax/pallas/moe_routing) on the GPU against ref.py: same experts, weights
within float32 rounding, and time per MoE layer.

Each timed call selects experts for `--layers` layers' worth of distinct logits inside one jit (as a decode
step does), so the per-layer time includes the launches a step really pays: one kernel against the five to
six small XLA kernels of the jnp selection. No bandwidth ceiling applies (a few KB per layer); the figure
that matters is µs per layer next to the ~26 µs the routed experts take.

    python3 -m benchmarks.moe_routing_check            # on the GPU
    python3 -m benchmarks.moe_routing_check --smoke    # CPU, kernel interpreted
"""

from __future__ import annotations

import argparse
import dataclasses

import jax
import jax.numpy as jnp
import numpy as np

from benchmarks.ceilings import add_timing_args, time_async
from benchmarks.report import markdown_table
from dgjax.pallas.moe_routing import kernel, ref
from dgjax.pallas.moe_routing.ref import RoutingRule

RULES = {  # preset -> (experts, rule)
    "qwen3-30b-a3b": (128, RoutingRule("softmax", 8, norm_topk_prob=True)),
    "glm-4.5-air": (128, RoutingRule("sigmoid", 8, norm_topk_prob=True, routed_scaling_factor=1.0)),
    "qwen3-next-80b-a3b": (512, RoutingRule("softmax", 10, norm_topk_prob=True)),
    "kimi-linear": (256, RoutingRule("sigmoid", 8, norm_topk_prob=True, routed_scaling_factor=2.446)),
}


@dataclasses.dataclass
class Row:
    preset: str
    tokens: int
    warps: int
    kernel_us: float
    ref_us: float
    ids_equal: bool
    max_weight_err: float


def _layers(select, logits, valid, bias):
    return [select(logits[i], valid, bias) for i in range(logits.shape[0])]


def run_case(preset: str, tokens: int, layers: int, calls: int, repeats: int, interpret: bool,
             warps: int = kernel.DEFAULT_WARPS) -> Row:
    experts, rule = RULES[preset]
    rng = np.random.default_rng(tokens)
    logits = jnp.asarray(rng.normal(size=(layers, tokens, experts)) * 2.0, jnp.float32)
    bias = jnp.asarray(rng.normal(size=(experts,)) * 0.1, jnp.float32)
    valid = jnp.asarray(np.arange(tokens) < max(1, tokens - 1))  # one padding row, as a width-2 bucket has
    by_kernel = jax.jit(lambda lg, v, b: _layers(
        lambda x, vv, bb: kernel.select_experts(x, vv, bb, rule=rule, num_warps=warps, interpret=interpret),
        lg, v, b))
    by_ref = jax.jit(lambda lg, v, b: _layers(lambda x, vv, bb: ref.select_experts(x, rule, bb, vv), lg, v, b))
    got, want = by_kernel(logits, valid, bias), by_ref(logits, valid, bias)
    ids_equal = all(bool((g[0] == w[0]).all()) for g, w in zip(got, want))
    err = max(float(jnp.max(jnp.abs(g[1] - w[1]))) for g, w in zip(got, want))
    t_kernel = time_async(lambda: by_kernel(logits, valid, bias), calls, repeats).median_s
    t_ref = time_async(lambda: by_ref(logits, valid, bias), calls, repeats).median_s
    return Row(preset, tokens, warps, 1e6 * t_kernel / layers, 1e6 * t_ref / layers, ids_equal, err)


def main(argv: list[str] | None = None) -> list[Row]:
    p = argparse.ArgumentParser()
    p.add_argument("--preset", action="append", choices=sorted(RULES))
    p.add_argument("--tokens", default="1,2,4,16")
    p.add_argument("--warps", default=str(kernel.DEFAULT_WARPS), help="comma list: the kernel's warps a program")
    add_timing_args(p, layers=48)
    a = p.parse_args(argv)
    interpret = jax.default_backend() != "gpu"
    layers, calls, repeats = (2, 2, 1) if a.smoke else (a.layers, a.calls, a.repeats)
    print(f"device: {jax.devices()[0].device_kind} ({jax.default_backend()}), jax {jax.__version__}", flush=True)
    rows = []
    for preset in a.preset or list(RULES):
        for tokens, warps in [(int(t), int(w)) for t in a.tokens.split(",") for w in a.warps.split(",")]:
            rows.append(run_case(preset, tokens, layers, calls, repeats, interpret, warps))
            r = rows[-1]
            print(f"{preset} T={tokens} warps={warps}: kernel {r.kernel_us:.2f} µs/layer, ref {r.ref_us:.2f} µs/layer, "
                  f"ids equal {r.ids_equal}, max weight err {r.max_weight_err:.1e}", flush=True)
    header = ["preset", "tokens", "warps", "kernel µs/layer", "ref.py µs/layer", "same experts", "max weight err"]
    print("\n" + "\n".join(markdown_table(header, [
        [r.preset, r.tokens, r.warps, f"{r.kernel_us:.2f}", f"{r.ref_us:.2f}", r.ids_equal, f"{r.max_weight_err:.1e}"]
        for r in rows])))
    return rows


if __name__ == "__main__":
    main()
