"""The fused decode attention kernel on the GPU against its reference at real shapes (llama-3.1-8b /
qwen3-8b heads): output and written K/V error, and time per layer of kernel vs reference.

One timed call runs `layers` layers over distinct caches (reads from HBM, not L2). On the GPU the times
are device time from a profiler trace: per layer, the kernels whose names say attention or split merge
(the fused path) and every kernel of the call (the reference path). Wall-clock per call, which the first
version used, is dominated by ~30 µs of dispatch per call and did not rank split counts (s7a). On the CPU
(smoke) they are wall clock.

    python3 -m benchmarks.fused_decode_check            # H200, < 1 min
    python -m benchmarks.fused_decode_check --smoke     # CPU, interpreted, tiny shapes

`--padding-row` adds the idle row the engine's one-stream bucket (width 2) carries: the default split count
then counts it, as it does in the engine (session 10: llama-3.1-8b at 8K keys took 22 µs a layer there, 17
splits of 8 blocks each). `--stages` / `--block-tokens` sweep the kernel's pipeline depth and keys per step.
"""

from __future__ import annotations

import argparse
import functools
import math

import jax
import jax.numpy as jnp
import numpy as np

from benchmarks.ceilings import measure_read_ceiling, time_async
from benchmarks.device_trace import trace_events
from dgjax.pallas.fused_decode_attention import api as fused_api
from dgjax.pallas.fused_decode_attention import kernel as fused_kernel
from dgjax.pallas.paged_attention import api as paged


def build(batch, context, kvh, g, d, rot, page, max_len, layers, qk_norm, seed, padding_row=False):
    rng = np.random.default_rng(seed)
    width = math.ceil(max_len / page)
    used = math.ceil((context + 1) / page)
    num_pages = 1 + batch * used
    rows = batch + padding_row
    tables = np.zeros((rows, width), np.int32)
    tables[:batch, :used] = (1 + rng.permutation(batch * used)).reshape(batch, used)
    ctx = np.full(rows, context + 1, np.int32)  # context keys + this token
    ctx[batch:] = 0  # the padding row: no keys, no query (its K/V go to page 0's slot 0, as the engine's)
    pos = np.maximum(ctx - 1, 0)[:, None]
    qlen = (ctx > 0).astype(np.int32)
    slots = paged.kv_slots(jnp.asarray(pos), jnp.asarray(qlen), jnp.asarray(tables), page)
    angles = pos.astype(np.float32) * (1.0 / 500000 ** (np.arange(0, rot, 2) / rot))[None, :]
    emb = np.concatenate([angles, angles], axis=-1)
    pool = jax.jit(lambda k: jax.random.normal(k, (num_pages, page, kvh, d), jnp.bfloat16))
    keys = jax.random.split(jax.random.key(seed), 2 * layers + 1)
    norms = (jnp.ones((d,), jnp.bfloat16) * 1.1, jnp.ones((d,), jnp.bfloat16) * 0.9) if qk_norm else (None, None)
    return dict(
        qkv=jax.random.normal(keys[-1], (rows, kvh, g + 2, d), jnp.bfloat16),
        cos=jnp.asarray(np.cos(emb)), sin=jnp.asarray(np.sin(emb)),
        k=[pool(keys[i]) for i in range(layers)], v=[pool(keys[layers + i]) for i in range(layers)],
        block_tables=jnp.asarray(tables), context_lens=jnp.asarray(ctx), positions=jnp.asarray(pos),
        query_lens=jnp.asarray(qlen), slots=slots, q_norm=norms[0], k_norm=norms[1],
    )


def step(impl: str, scale: float, splits: int | None = None, stages: int | None = None,
         block_tokens: int | None = None, warps: int | None = None):
    """One call over every layer's cache: through the api, or (a pipeline depth, block size or warp count
    asked) the kernel itself with the api's key window."""
    def one(c, k, v):
        if stages is None and block_tokens is None and warps is None:
            return fused_api.decode_attention(
                c["qkv"], c["cos"], c["sin"], k, v, c["block_tables"], c["context_lens"], c["positions"],
                c["query_lens"], c["slots"], scale=scale, eps=1e-6, q_norm=c["q_norm"], k_norm=c["k_norm"],
                impl=impl, num_splits=splits)
        start, end = paged.decode_window(c["context_lens"], c["positions"], c["query_lens"],
                                         c["block_tables"].shape[1] * k.shape[1], None)
        return fused_kernel.fused_decode_attention(
            c["qkv"], c["cos"], c["sin"], k, v, c["block_tables"], start, end, c["slots"][:, 0], c["q_norm"],
            c["k_norm"], scale=scale, eps=1e-6, num_splits=splits, num_stages=stages or 2,
            block_tokens=block_tokens, num_warps=warps or 4, interpret=jax.default_backend() != "gpu")

    return jax.jit(lambda c, ks, vs: [one(c, k, v) for k, v in zip(ks, vs)])


KERNEL_NAMES = ("fused_decode_attention", "split_merge")
SHAPES = [  # (name, KV heads, q heads a KV head, head dim, rotary dim, q/k norm)
    ("llama-3.1-8b", 8, 4, 128, 128, False), ("qwen3-8b", 8, 4, 128, 128, True),
    ("qwen3-30b-a3b", 4, 8, 128, 128, True), ("glm-4.5-air", 8, 12, 128, 64, False),
]


def device_us(fn, calls: int, names: tuple[str, ...] | None = None) -> float:
    """Device µs per call of `fn` from a profiler trace: kernels whose name contains one of `names` (all
    kernels when None). The first call runs before the trace (compile, warm caches)."""
    jax.block_until_ready(fn())

    def run():
        out = None
        for _ in range(calls):
            out = fn()
        jax.block_until_ready(out)

    events = trace_events(run)
    picked = [e for e in events if names is None or any(n in e["name"] for n in names)]
    return sum(e["dur"] for e in picked) / calls


def main(argv=None) -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--batches", default="1,4,16")
    ap.add_argument("--contexts", default="1024,8192")
    ap.add_argument("--splits", default="0", help="split counts to time (0: the kernel's default)")
    ap.add_argument("--max-len", type=int, default=32768, help="block table width in tokens (sets the default split)")
    ap.add_argument("--stages", default="0", help="pipeline depths to time (0: the api's launch)")
    ap.add_argument("--block-tokens", default="0", help="keys per loop step to time (0: the default)")
    ap.add_argument("--warps", default="0", help="warps per program to time (0: the api's launch, 4 warps)")
    ap.add_argument("--padding-row", action="store_true", help="one idle row more, as the engine's C1 bucket")
    ap.add_argument("--shapes", default="llama-3.1-8b,qwen3-8b", help=f"of {[sh[0] for sh in SHAPES]}")
    ap.add_argument("--smoke", action="store_true")
    a = ap.parse_args(argv)
    split_counts = [int(x) or None for x in a.splits.split(",")]
    launches = [(sp, int(st) or None, int(bt) or None, int(w) or None) for sp in split_counts
                for st in a.stages.split(",") for bt in a.block_tokens.split(",") for w in a.warps.split(",")]
    gpu = jax.default_backend() == "gpu"
    shapes = [sh for sh in SHAPES if sh[0] in a.shapes.split(",")]
    batches, contexts = list(map(int, a.batches.split(","))), list(map(int, a.contexts.split(",")))
    layers, max_len = 8, a.max_len
    if a.smoke:
        shapes, batches, contexts, layers, max_len = [("tiny", 2, 2, 32, 32, True)], [2], [20], 2, 64
    ceiling = measure_read_ceiling(int(4e9) if gpu else int(3.2e7))
    print(f"device {jax.devices()[0].device_kind}; read ceiling {ceiling.bytes_per_s / 1e12:.2f} TB/s", flush=True)
    rows = []
    for name, kvh, g, d, rot, qk_norm in shapes:
        for batch in batches:
            for context in contexts:
                c = build(batch, context, kvh, g, d, rot, 16 if not a.smoke else 4, max_len, layers, qk_norm,
                          batch * 31 + context, a.padding_row)
                ks, vs = c.pop("k"), c.pop("v")
                slow = step("ref", d**-0.5)
                want = slow(c, ks, vs)
                timed = lambda f, names: (device_us(f, 5, names) * 1e-6 if gpu  # noqa: E731
                                          else time_async(f, 10, 5).median_s)
                t_slow = timed(functools.partial(slow, c, ks, vs), None) / layers
                for splits, stages, block_tokens, warps in launches:
                    fast = step("kernel", d**-0.5, splits, stages, block_tokens, warps)
                    got = fast(c, ks, vs)
                    err = lambda i: float(jnp.max(jnp.abs(got[0][i].astype(jnp.float32)  # noqa: E731
                                                          - want[0][i].astype(jnp.float32))))
                    v_same = bool(jnp.array_equal(got[0][2], want[0][2]))
                    t_fast = timed(functools.partial(fast, c, ks, vs), KERNEL_NAMES) / layers
                    kv_bytes = 2 * batch * context * kvh * d * 2
                    launch = f"s{splits or 'default'} st{stages or 'default'} bk{block_tokens or 'default'}" + (
                        f" w{warps}" if warps else "")
                    rows.append((name, batch, context, launch, err(0), err(1), v_same, t_slow * 1e6,
                                 t_fast * 1e6, kv_bytes / t_fast / 1e12))
                    print(rows[-1], flush=True)
                del ks, vs
    print("\n| shape | batch | context | launch | max abs err out | max abs err new K | V rows equal | ref us "
          "| kernel us | speedup | K/V TB/s |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for n, b, ctx, sp, oe, ke, vs_, ts, tf, tbs in rows:
        print(f"| {n} | {b} | {ctx} | {sp} | {oe:.2e} | {ke:.2e} | {vs_} | {ts:.1f} | {tf:.1f} | {ts / tf:.1f}x "
              f"| {tbs:.2f} |")


if __name__ == "__main__":
    main()
