"""The MoE decode kernel selecting its own experts (DGJAX_MOE_ROUTING=fused, moe_decode/routed.py) on the GPU:
same experts, weights and output as the selection followed by the MoE decode kernel, and µs per layer of both.

Each timed call runs `--layers` layers over distinct experts and logits in one jit, as a decode step does, so
a layer's time includes its launches: the routed kernel's two stages against the selection (XLA's fusions
for softmax routers, moe_routing's kernel for sigmoid ones) plus the same two stages.

    python3 -m benchmarks.moe_routed_check                 # on the GPU: qwen3-30b-a3b and glm-4.5-air, fp8
    python3 -m benchmarks.moe_routed_check --smoke         # CPU, kernels interpreted, a tiny config
"""

from __future__ import annotations

import argparse

import jax
import jax.numpy as jnp
import numpy as np

from benchmarks.ceilings import add_timing_args, time_async
from benchmarks.moe_experts_bench import SMOKE, _experts
from benchmarks.moe_kernel_check import _quantized
from benchmarks.presets import PRESETS
from benchmarks.report import markdown_table
from dgjax.config import ModelConfig
from dgjax.models import moe
from dgjax.pallas.moe_decode import kernel, routed
from dgjax.pallas.moe_routing import api as routing


def run_case(cfg: ModelConfig, rule, experts, tokens: int, calls: int, repeats: int, interpret: bool,
             dtype=jnp.bfloat16) -> dict:
    layers = len(experts)
    rng = np.random.default_rng(tokens)
    e = cfg.num_experts
    logits = jnp.asarray(rng.normal(size=(layers, tokens, e)) * 2.0, jnp.float32)
    bias = jnp.asarray(rng.normal(size=(e,)) * 0.1, jnp.float32)
    valid = jnp.asarray(np.arange(tokens) < max(1, tokens - 1))  # one padding row, as a width-2 bucket has
    x = jnp.asarray(rng.standard_normal((tokens, cfg.hidden_size)), dtype)
    act = cfg.hidden_act

    def fused(lg, v, b, ws):
        return [routed.moe_decode_routed(x, lg[i], v, b, p.gate, p.up, p.down, rule=rule, hidden_act=act,
                                         interpret=interpret) for i, p in enumerate(ws)]

    def separate(lg, v, b, ws):
        outs = []
        for i, p in enumerate(ws):
            ids, wts = routing.select_experts(lg[i], rule, b, v)
            outs.append((kernel.moe_decode(x, ids, wts, p.gate, p.up, p.down, hidden_act=act, interpret=interpret),
                         ids, wts))
        return outs

    f, s = jax.jit(fused), jax.jit(separate)
    got, want = f(logits, valid, bias, experts), s(logits, valid, bias, experts)
    same_ids = all(bool((g[1] == w[1]).all()) for g, w in zip(got, want))
    w_err = max(float(jnp.max(jnp.abs(g[2] - w[2]))) for g, w in zip(got, want))
    out_err = max(float(jnp.max(jnp.abs(g[0].astype(jnp.float32) - w[0].astype(jnp.float32))))
                  for g, w in zip(got, want))
    t_f = time_async(lambda: f(logits, valid, bias, experts), calls, repeats).median_s
    t_s = time_async(lambda: s(logits, valid, bias, experts), calls, repeats).median_s
    return dict(tokens=tokens, fused_us=1e6 * t_f / layers, separate_us=1e6 * t_s / layers, same_ids=same_ids,
                weight_err=w_err, out_err=out_err)


def main(argv: list[str] | None = None) -> list[dict]:
    p = argparse.ArgumentParser()
    p.add_argument("--preset", action="append", choices=["qwen3-30b-a3b", "glm-4.5-air"])
    p.add_argument("--tokens", default="1,2,4")
    add_timing_args(p, layers=4)
    a = p.parse_args(argv)
    interpret = jax.default_backend() != "gpu"
    print(f"device: {jax.devices()[0].device_kind} ({jax.default_backend()}), jax {jax.__version__}", flush=True)
    rows = []
    for preset in (["smoke"] if a.smoke else a.preset or ["qwen3-30b-a3b", "glm-4.5-air"]):
        cfg = ModelConfig.from_hf_dict(SMOKE if a.smoke else PRESETS[preset])
        rule = moe.routing_rule(cfg)
        layers, calls, repeats = (2, 2, 1) if a.smoke else (a.layers, a.calls, a.repeats)
        experts = _quantized(_experts(cfg, layers, jnp.bfloat16, 0), "fp8") if not a.smoke else _experts(
            cfg, layers, jnp.float32, 0)
        for tokens in [int(t) for t in a.tokens.split(",")]:
            r = dict(preset=preset, **run_case(cfg, rule, experts, tokens, calls, repeats, interpret,
                                               jnp.float32 if a.smoke else jnp.bfloat16))
            rows.append(r)
            print(f"{preset} T={tokens}: fused {r['fused_us']:.2f} µs/layer, selection + kernel "
                  f"{r['separate_us']:.2f}; same experts {r['same_ids']}, weight err {r['weight_err']:.1e}, "
                  f"output err {r['out_err']:.1e}", flush=True)
    header = ["preset", "tokens", "fused µs/layer", "selection + kernel µs/layer", "same experts", "max weight err",
              "max output diff"]
    print("\n" + "\n".join(markdown_table(header, [
        [r["preset"], r["tokens"], f"{r['fused_us']:.2f}", f"{r['separate_us']:.2f}", r["same_ids"],
         f"{r['weight_err']:.1e}", f"{r['out_err']:.1e}"] for r in rows])))
    return rows


if __name__ == "__main__":
    main()
