"""Paged decode attention on the GPU: the Pallas kernel against the plain-jnp reference at real shapes.

For each (batch, context) it builds a cache whose rows hold `context` tokens in shuffled pages behind a
`max_model_len`-wide block table (unused entries point at the trash page, as the engine leaves them),
checks the kernel's output against ref.py and times both paths through `api.paged_attention`. One timed
call runs `layers` attention layers over distinct caches (so the reads come from HBM, not L2, and the
~40 µs host dispatch of a call is shared), as many async calls followed by one sync, median of repeats.
Bandwidth is counted against the bytes decode must read: K and V of each row's real context.

    python3 -m benchmarks.kernel_check                 # llama-3.1-8b shapes, < 60 s on an H200
    python3 -m benchmarks.kernel_check --sweep         # + block/warps/stages/splits sweep (minutes)
    python -m benchmarks.kernel_check --smoke          # CPU: tiny shapes, kernel interpreted
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import math
import time

import jax
import jax.numpy as jnp
import numpy as np

from benchmarks.ceilings import measure_read_ceiling, time_async
from dgjax.pallas.paged_attention import api, kernel


@dataclasses.dataclass(frozen=True)
class Shape:
    q_heads: int
    kv_heads: int
    head_dim: int
    page_size: int
    max_model_len: int
    dtype: str


@dataclasses.dataclass
class Case:
    """One decode step's inputs for `layers` layers (distinct caches, shared tables and lengths)."""

    q: jax.Array
    k: list[jax.Array]
    v: list[jax.Array]
    tables: jax.Array
    ctx: jax.Array
    positions: jax.Array
    query_lens: jax.Array
    needed_bytes: int  # K+V of the real contexts, all layers


def _fp8_pages(pages: jax.Array) -> api.QuantizedPages:
    values, scales = jax.jit(api.quantize_fp8)(pages)
    return api.QuantizedPages(values=values, scales=scales)


def build_case(shape: Shape, batch: int, context: int, layers: int, seed: int, kv_dtype: str = "auto") -> Case:
    """kv_dtype "fp8_e4m3": the pages are quantized (per token and KV head scales), as the engine's fp8 cache."""
    ps, dtype = shape.page_size, jnp.dtype(shape.dtype)
    table_width = math.ceil(shape.max_model_len / ps)
    used = math.ceil(context / ps)
    num_pages = 1 + batch * used  # page 0 is the trash page
    rng = np.random.default_rng(seed)
    tables = np.zeros((batch, table_width), np.int32)
    tables[:, :used] = (1 + rng.permutation(batch * used)).reshape(batch, used)
    keys = jax.random.split(jax.random.key(seed), 2 * layers + 1)
    pool = jax.jit(
        lambda k: jax.random.normal(k, (num_pages, ps, shape.kv_heads, shape.head_dim), dtype),
    )
    q = jax.random.normal(keys[-1], (batch, 1, shape.q_heads, shape.head_dim), dtype)
    ctx = np.full((batch,), context, np.int32)
    needed = 2 * layers * batch * context * shape.kv_heads * shape.head_dim * dtype.itemsize
    make = pool
    if kv_dtype == "fp8_e4m3":
        make = lambda key: _fp8_pages(pool(key))  # noqa: E731
        needed = 2 * layers * batch * context * shape.kv_heads * (shape.head_dim + 4)  # e4m3 + f32 scale
    return Case(
        q, [make(keys[i]) for i in range(layers)], [make(keys[layers + i]) for i in range(layers)],
        jnp.asarray(tables), jnp.asarray(ctx), jnp.asarray(ctx - 1)[:, None],
        jnp.ones((batch,), jnp.int32), needed,
    )


def layered(attend):
    """jit of one step over every layer's cache; `attend(q, k, v, tables, ctx, pos, qlen)` per layer."""

    def step(q, ks, vs, tables, ctx, pos, qlen):
        return [attend(q, k, v, tables, ctx, pos, qlen) for k, v in zip(ks, vs)]

    return jax.jit(step)


def via_api(impl: str, scale: float):
    return layered(lambda q, k, v, t, c, p, n: api.paged_attention(q, k, v, t, c, p, n, scale=scale, impl=impl))


def via_kernel(scale: float, ps: int, **knobs):
    def attend(q, k, v, tables, ctx, pos, qlen):
        start, end = api.decode_window(ctx, pos, qlen, tables.shape[1] * ps, None)
        out = kernel.paged_decode_attention(
            q[:, 0], k, v, tables, start, end, scale=scale, interpret=jax.default_backend() != "gpu", **knobs
        )
        return out[:, None]

    return layered(attend)


def timed(fn, case: Case, calls: int, repeats: int) -> tuple[float, list]:
    args = (case.q, case.k, case.v, case.tables, case.ctx, case.positions, case.query_lens)
    out = fn(*args)
    jax.block_until_ready(out)
    return time_async(lambda: fn(*args), calls, repeats).median_s, out


def layers_for(shape: Shape, batch: int, context: int, target_bytes: int, max_layers: int) -> int:
    per_layer = 2 * batch * context * shape.kv_heads * shape.head_dim * jnp.dtype(shape.dtype).itemsize
    return int(min(max_layers, max(2, math.ceil(target_bytes / per_layer))))


def sweep(shape: Shape, case: Case, want: np.ndarray, layers: int, calls: int, repeats: int) -> list:
    """Kernel µs per layer and max abs error for a small grid of launch knobs (default splits, then doubled)."""
    scale = shape.head_dim**-0.5
    b = case.q.shape[0]
    results = []
    for bk, warps, stages in itertools.product((32, 64, 128), (4, 8), (2, 3)):
        base = kernel.default_num_splits(b, shape.kv_heads, shape.max_model_len, bk)
        for splits in sorted({base, 2 * base}):
            knobs = dict(block_tokens=bk, num_warps=warps, num_stages=stages, num_splits=splits)
            try:
                sec, out = timed(via_kernel(scale, shape.page_size, **knobs), case, calls, repeats)
            except Exception as err:  # a config Triton cannot compile is reported, not fatal
                print(f"    {knobs}: failed ({type(err).__name__}: {str(err)[:120]})")
                continue
            got = np.asarray(out[0].astype(jnp.float32))
            assert got.shape == want.shape, (got.shape, want.shape)
            err = float(np.max(np.abs(got - want)))
            results.append((knobs, sec / layers, err))
            print(f"    {knobs}: {sec / layers * 1e6:8.1f} µs/layer, err {err:.1e}", flush=True)
    return sorted(results, key=lambda r: r[1])


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--batches", default="1,4,16")
    ap.add_argument("--contexts", default="1024,8192")
    ap.add_argument("--q-heads", type=int, default=32)
    ap.add_argument("--kv-heads", type=int, default=8)
    ap.add_argument("--head-dim", type=int, default=128)
    ap.add_argument("--page-size", type=int, default=16)
    ap.add_argument("--max-model-len", type=int, default=32768)
    ap.add_argument("--dtype", default="bfloat16")
    ap.add_argument("--kv-dtype", default="auto", choices=("auto", "fp8_e4m3"), help="page dtype (auto: --dtype)")
    ap.add_argument("--layer-bytes", type=float, default=2e8, help="real K/V bytes per timed call (beat L2)")
    ap.add_argument("--max-layers", type=int, default=8)
    ap.add_argument("--calls", type=int, default=10)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--sweep", action="store_true",
                    help="also sweep launch knobs (up to 24 configs) at the longest context: minutes")
    ap.add_argument("--smoke", action="store_true", help="tiny CPU shapes (kernel interpreted)")
    if ap.parse_known_args(argv)[0].smoke:
        ap.set_defaults(batches="1,2", contexts="40", q_heads=8, kv_heads=2, head_dim=64, page_size=8,
                        max_model_len=128, dtype="float32", max_layers=2, calls=2, repeats=2)
    args = ap.parse_args(argv)

    t_start = time.perf_counter()
    shape = Shape(args.q_heads, args.kv_heads, args.head_dim, args.page_size, args.max_model_len, args.dtype)
    if not kernel.supports(shape.q_heads, shape.kv_heads, shape.head_dim, shape.dtype):
        raise SystemExit(f"the decode kernel does not support {shape}: nothing to compare")
    dev = jax.devices()[0]
    print(f"device: {dev.device_kind} ({jax.default_backend()}), jax {jax.__version__}; shape {shape}; "
          f"pages {args.kv_dtype}")
    ceiling = measure_read_ceiling(int(4e9) if jax.default_backend() == "gpu" else int(3.2e7))
    print(f"read ceiling: {ceiling.bytes_per_s / 1e12:.2f} TB/s ({ceiling.bytes_read / 1e9:.1f} GB reduction)")

    scale = shape.head_dim**-0.5
    rows = []
    for batch, context in itertools.product(map(int, args.batches.split(",")), map(int, args.contexts.split(","))):
        layers = layers_for(shape, batch, context, int(args.layer_bytes), args.max_layers)
        case = build_case(shape, batch, context, layers, seed=batch * 7919 + context, kv_dtype=args.kv_dtype)
        t_ref, out_ref = timed(via_api("ref", scale), case, args.calls, args.repeats)
        t_ker, out_ker = timed(via_api("kernel", scale), case, args.calls, args.repeats)
        want = np.asarray(out_ref[0].astype(jnp.float32))
        got = np.asarray(out_ker[0].astype(jnp.float32))
        assert got.shape == want.shape, (got.shape, want.shape)
        err = float(np.max(np.abs(got - want)))
        rel = err / max(float(np.max(np.abs(want))), 1e-30)
        per_layer = case.needed_bytes / layers
        row = dict(batch=batch, context=context, layers=layers, err=err, rel=rel, nan=not np.isfinite(got).all(),
                   ref_us=t_ref / layers * 1e6, ker_us=t_ker / layers * 1e6,
                   ker_tbs=per_layer / (t_ker / layers) / 1e12, ref_tbs=per_layer / (t_ref / layers) / 1e12,
                   mb=per_layer / 1e6, in_l2=case.needed_bytes < 1e8)
        rows.append(row)
        print(f"  b={batch} ctx={context}: kernel {row['ker_us']:.1f} µs/layer, ref {row['ref_us']:.1f}, "
              f"err {err:.2e} [{time.perf_counter() - t_start:.0f} s]", flush=True)
        if args.sweep and context == max(map(int, args.contexts.split(","))):
            best = sweep(shape, case, want, layers, args.calls, args.repeats)
            if best:
                print(f"  best: {best[0][0]} {best[0][1] * 1e6:.1f} µs/layer (default {row['ker_us']:.1f})")
        del case

    ceil_tbs = ceiling.bytes_per_s / 1e12
    print()
    print("| batch | context | K+V MB/layer | max abs err | rel err | ref µs | kernel µs | speedup "
          "| kernel TB/s | % of ceiling | ref TB/s |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in rows:
        flag = " (L2)" if r["in_l2"] else ""
        nan = " NaN!" if r["nan"] else ""
        print(f"| {r['batch']} | {r['context']} | {r['mb']:.1f} | {r['err']:.2e}{nan} | {r['rel']:.1e} "
              f"| {r['ref_us']:.1f} | {r['ker_us']:.1f} | {r['ref_us'] / r['ker_us']:.1f}x "
              f"| {r['ker_tbs']:.2f}{flag} | {100 * r['ker_tbs'] / ceil_tbs:.0f}% | {r['ref_tbs']:.2f} |")
    print(f"\nmicroseconds per layer (one call = {args.max_layers} or fewer layers over distinct caches); "
          f"table width {shape.max_model_len} tokens; read ceiling {ceil_tbs:.2f} TB/s; "
          f"total {time.perf_counter() - t_start:.0f} s")


if __name__ == "__main__":
    main()
