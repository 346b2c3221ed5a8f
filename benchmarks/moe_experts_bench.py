"""Routed-expert compute at real MoE shapes: the `lax.ragged_dot` baseline against gathered experts.

For each preset and token count, random tokens are routed uniformly to top_k of the experts, and one
timed call runs `dgjax.models.moe.moe_experts` over `layers` distinct expert weight sets (so reads come
from HBM, not L2, and the host dispatch is shared), as many async calls followed by one sync, median of
repeats. Bandwidth is counted against the bytes decode must read: the weights of the experts the tokens
actually touch. The two paths' outputs are checked against each other first.

    python3 -m benchmarks.moe_experts_bench                       # qwen3-30b-a3b + glm-4.5-air, H200
    python -m benchmarks.moe_experts_bench --smoke                # CPU: tiny shapes
"""

from __future__ import annotations

import argparse
import functools

import jax
import jax.numpy as jnp
import numpy as np

from benchmarks.ceilings import measure_read_ceiling, time_async
from benchmarks.presets import PRESETS
from dgjax.config import ModelConfig
from dgjax.models import moe

SMOKE = {"architectures": ["Qwen3MoeForCausalLM"], "model_type": "qwen3_moe", "vocab_size": 64,
         "hidden_size": 64, "intermediate_size": 128, "moe_intermediate_size": 32, "num_hidden_layers": 1,
         "num_attention_heads": 2, "num_key_value_heads": 1, "num_experts": 16, "num_experts_per_tok": 4}


def _experts(cfg: ModelConfig, layers: int, dtype, seed: int) -> list[moe.ExpertParams]:
    e, n, f = cfg.hidden_size, cfg.num_experts, cfg.moe_intermediate_size
    make = jax.jit(lambda k, shape: (0.02 * jax.random.normal(k, shape, jnp.float32)).astype(dtype),
                   static_argnums=1)
    keys = jax.random.split(jax.random.key(seed), 3 * layers)
    return [moe.ExpertParams(gate=make(keys[3 * i], (n, e, f)), up=make(keys[3 * i + 1], (n, e, f)),
                             down=make(keys[3 * i + 2], (n, f, e))) for i in range(layers)]


def _routing(cfg: ModelConfig, tokens: int, rng: np.random.Generator):
    scores = rng.random((tokens, cfg.num_experts))
    ids = np.argsort(-scores, axis=1)[:, : cfg.num_experts_per_tok].astype(np.int32)
    weights = rng.random(ids.shape).astype(np.float32)
    return jnp.asarray(ids), jnp.asarray(weights / weights.sum(1, keepdims=True))


@functools.partial(jax.jit, static_argnames=("impl", "act"))
def _all_layers(x, ids, weights, experts, impl, act):
    return [moe.moe_experts(x, ids, weights, p, act, impl=impl) for p in experts]


def run(preset: str, cfg: ModelConfig, tokens_list, layers: int, dtype, ceiling: float, calls: int, repeats: int):
    experts = _experts(cfg, layers, dtype, 0)
    per_expert = 3 * cfg.hidden_size * cfg.moe_intermediate_size * jnp.dtype(dtype).itemsize
    rng = np.random.default_rng(0)
    print(f"\n{preset}: {cfg.num_experts} experts x {cfg.hidden_size}x{cfg.moe_intermediate_size}, top-"
          f"{cfg.num_experts_per_tok}, {layers} layers per call, {jnp.dtype(dtype).name}")
    print(f"{'tokens':>6} {'touched':>7} {'MB/layer':>9} {'ragged us':>10} {'TB/s':>6} {'gather us':>10} "
          f"{'TB/s':>6} {'roofline us':>11} {'auto':>7}")
    for tokens in tokens_list:
        x = jnp.asarray(rng.normal(size=(tokens, cfg.hidden_size)), dtype)
        ids, weights = _routing(cfg, tokens, rng)
        # The gathered path copies tokens * top_k expert weights: past a few per expert it only runs out of memory.
        impls = ("ragged", "gather") if tokens * cfg.num_experts_per_tok <= 2 * cfg.num_experts else ("ragged",)
        outs = {impl: _all_layers(x, ids, weights, experts, impl, cfg.hidden_act) for impl in impls}
        if "gather" in outs:
            np.testing.assert_allclose(np.asarray(outs["ragged"][0], np.float32),
                                       np.asarray(outs["gather"][0], np.float32), atol=2e-2, rtol=2e-2)
        touched = len(np.unique(np.asarray(ids)))
        needed = touched * per_expert
        us = {impl: 1e6 * time_async(lambda i=impl: _all_layers(x, ids, weights, experts, i, cfg.hidden_act),
                                     calls, repeats).median_s / layers for impl in impls}
        auto = moe.resolve_impl("auto", tokens * cfg.num_experts_per_tok, cfg.num_experts)
        cols = [f"{us[i]:>10.1f} {needed / us[i] / 1e6:>6.2f}" if i in us else f"{'-':>10} {'-':>6}"
                for i in ("ragged", "gather")]
        print(f"{tokens:>6} {touched:>7} {needed / 1e6:>9.1f} {cols[0]} {cols[1]} {1e6 * needed / ceiling:>11.1f} "
              f"{auto:>7}")


def main(argv=None) -> None:
    p = argparse.ArgumentParser(prog="python -m benchmarks.moe_experts_bench", description=__doc__.split("\n\n")[0])
    moe_presets = sorted(k for k, v in PRESETS.items() if "moe" in v["model_type"])
    p.add_argument("--preset", action="append", choices=moe_presets)
    p.add_argument("--tokens", default="1,2,4,8,16,32,64,256")
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--dtype", default="bfloat16")
    p.add_argument("--smoke", action="store_true", help="tiny CPU shapes")
    args = p.parse_args(argv)
    tokens = [int(t) for t in args.tokens.split(",")]
    if args.smoke:
        ceiling = measure_read_ceiling(1 << 24, calls=2, repeats=2).bytes_per_s
        run("smoke", ModelConfig.from_hf_dict(SMOKE), tokens[:3], 2, jnp.dtype(args.dtype), ceiling, 2, 2)
        return
    ceiling = measure_read_ceiling(8 << 30).bytes_per_s
    print(f"read ceiling {ceiling / 1e12:.2f} TB/s on {jax.devices()[0].device_kind}")
    for preset in args.preset or ["qwen3-30b-a3b", "glm-4.5-air"]:
        cfg = ModelConfig.from_hf_dict(PRESETS[preset])
        run(preset, cfg, tokens, args.layers, jnp.dtype(args.dtype), ceiling, 20, 5)


if __name__ == "__main__":
    main()
