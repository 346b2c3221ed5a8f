"""Paged prefill attention on the GPU: the Pallas prefill kernel against the plain-jnp reference.

For each chunk start it builds one row whose cache holds start + chunk tokens in shuffled pages behind a
`max_model_len`-wide block table (unused entries point at the trash page, as the engine leaves them), the
chunk's queries at positions start .. start + chunk - 1, checks the kernel against ref.py and times both.
One timed call runs `layers` attention layers over distinct caches (async calls, one sync, median of
repeats). TFLOP/s counts the causal attention work only: 4 * H * D * sum over queries of visible keys
(QK^T and PV), against a bf16 matmul ceiling measured on the same device.

    python3 -m benchmarks.prefill_kernel_check            # llama-3.1-8b shapes, < 60 s on an H200
    python3 -m benchmarks.prefill_kernel_check --sweep    # + block_m/block_k/warps/stages sweep (minutes)
    python -m benchmarks.prefill_kernel_check --smoke     # CPU: tiny shapes, kernel interpreted
"""

from __future__ import annotations

import argparse
import itertools
import math
import time

import jax
import jax.numpy as jnp
import numpy as np

from benchmarks.ceilings import measure_matmul_ceiling, time_async
from dgjax.pallas.paged_attention import ref
from dgjax.pallas.paged_prefill import api


def build_case(args, start: int, layers: int, seed: int) -> dict:
    """One row's chunk: q [1, T, H, D], `layers` distinct K/V page pools, table, lengths, positions."""
    ps, dtype, t = args.page_size, jnp.dtype(args.dtype), args.chunk
    table_width = math.ceil(args.max_model_len / ps)
    ctx = start + t
    used = math.ceil(ctx / ps)
    assert used <= table_width, f"start {start} + chunk {t} exceeds max_model_len {args.max_model_len}"
    rng = np.random.default_rng(seed)
    tables = np.zeros((1, table_width), np.int32)
    tables[0, :used] = 1 + rng.permutation(used)  # page 0 is the trash page
    keys = jax.random.split(jax.random.key(seed), 2 * layers + 1)
    pool = jax.jit(lambda k: jax.random.normal(k, (1 + used, ps, args.kv_heads, args.head_dim), dtype))
    q = jax.random.normal(keys[-1], (1, t, args.q_heads, args.head_dim), dtype)
    visible = sum(range(start + 1, ctx + 1))  # query at position p sees p + 1 keys
    return dict(
        args=(q, [pool(keys[i]) for i in range(layers)], [pool(keys[layers + i]) for i in range(layers)],
              jnp.asarray(tables), jnp.asarray([ctx], jnp.int32),
              jnp.arange(start, ctx, dtype=jnp.int32)[None], jnp.asarray([t], jnp.int32)),
        flops=4.0 * args.q_heads * args.head_dim * visible,
    )


def layered(attend):
    """jit of one chunk over every layer's cache; `attend(q, k, v, tables, ctx, pos, qlen)` per layer."""

    def step(q, ks, vs, tables, ctx, pos, qlen):
        return [attend(q, k, v, tables, ctx, pos, qlen) for k, v in zip(ks, vs)]

    return jax.jit(step)


def via_ref(scale: float):
    return layered(lambda q, k, v, t, c, p, n: ref.paged_attention(q, k, v, t, c, p, n, scale=scale))


def via_kernel(scale: float, **knobs):
    interpret = jax.default_backend() != "gpu"
    return layered(lambda q, k, v, t, c, p, n: api.paged_prefill_attention(
        q, k, v, t, c, p, n, scale=scale, interpret=interpret, **knobs))


def timed(fn, case: dict, calls: int, repeats: int) -> tuple[float, list]:
    out = fn(*case["args"])
    jax.block_until_ready(out)
    return time_async(lambda: fn(*case["args"]), calls, repeats).median_s, out


def max_error(out, want: np.ndarray) -> tuple[float, bool]:
    got = np.asarray(out[0].astype(jnp.float32))
    assert got.shape == want.shape, (got.shape, want.shape)
    return float(np.max(np.abs(got - want))), not np.isfinite(got).all()


def sweep(case: dict, want: np.ndarray, scale: float, layers: int, calls: int, repeats: int) -> list:
    """Kernel ms per layer, TFLOP/s and max abs error over a small grid of launch knobs."""
    results = []
    for bm, bk, warps, stages in itertools.product((64, 128), (32, 64, 128), (4, 8), (2, 3)):
        knobs = dict(block_m=bm, block_k=bk, num_warps=warps, num_stages=stages)
        try:
            sec, out = timed(via_kernel(scale, **knobs), case, calls, repeats)
        except Exception as err:  # a config Triton cannot compile is reported, not fatal
            print(f"    {knobs}: failed ({type(err).__name__}: {str(err)[:120]})")
            continue
        err, _ = max_error(out, want)
        results.append((knobs, sec / layers, err))
        print(f"    {knobs}: {sec / layers * 1e3:7.3f} ms/layer, {case['flops'] / (sec / layers) / 1e12:6.1f} "
              f"TFLOP/s, err {err:.1e}", flush=True)
    return sorted(results, key=lambda r: r[1])


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--starts", default="0,6144,30720")
    ap.add_argument("--chunk", type=int, default=2048)
    ap.add_argument("--q-heads", type=int, default=32)
    ap.add_argument("--kv-heads", type=int, default=8)
    ap.add_argument("--head-dim", type=int, default=128)
    ap.add_argument("--page-size", type=int, default=16)
    ap.add_argument("--max-model-len", type=int, default=32768)
    ap.add_argument("--dtype", default="bfloat16")
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--calls", type=int, default=3)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--matmul-size", type=int, default=8192)
    ap.add_argument("--sweep", action="store_true", help="also sweep launch knobs (24 configs) at the last start")
    ap.add_argument("--smoke", action="store_true", help="tiny CPU shapes (kernel interpreted)")
    if ap.parse_known_args(argv)[0].smoke:
        ap.set_defaults(starts="0,40,91", chunk=32, q_heads=8, kv_heads=2, head_dim=64, page_size=8,
                        max_model_len=128, dtype="float32", layers=2, calls=1, repeats=1, matmul_size=256)
    args = ap.parse_args(argv)

    t_start = time.perf_counter()
    if not api.supports(args.q_heads, args.kv_heads, args.head_dim, args.dtype):
        raise SystemExit("the prefill kernel does not support this shape: nothing to compare")
    print(f"device: {jax.devices()[0].device_kind} ({jax.default_backend()}), jax {jax.__version__}; "
          f"heads {args.q_heads}/{args.kv_heads} x {args.head_dim} {args.dtype}, page {args.page_size}, "
          f"chunk {args.chunk}, table {args.max_model_len} tokens")
    ceiling = measure_matmul_ceiling(args.matmul_size)
    print(f"bf16 matmul ceiling: {ceiling.flops_per_s / 1e12:.0f} TFLOP/s ({args.matmul_size}^3)")

    scale = args.head_dim**-0.5
    ref_fn, ker_fn = via_ref(scale), via_kernel(scale)
    starts = list(map(int, args.starts.split(",")))
    rows = []
    for start in starts:
        case = build_case(args, start, args.layers, seed=start + 1)
        t_ref, out_ref = timed(ref_fn, case, args.calls, args.repeats)
        t_ker, out_ker = timed(ker_fn, case, args.calls, args.repeats)
        want = np.asarray(out_ref[0].astype(jnp.float32))
        err, nan = max_error(out_ker, want)
        rel = err / max(float(np.max(np.abs(want))), 1e-30)
        row = dict(start=start, err=err, rel=rel, nan=nan, ref_ms=t_ref / args.layers * 1e3,
                   ker_ms=t_ker / args.layers * 1e3, flops=case["flops"])
        rows.append(row)
        print(f"  start={start}: kernel {row['ker_ms']:.3f} ms/layer, ref {row['ref_ms']:.3f}, err {err:.2e} "
              f"[{time.perf_counter() - t_start:.0f} s]", flush=True)
        if args.sweep and start == starts[-1]:
            best = sweep(case, want, scale, args.layers, args.calls, args.repeats)
            if best:
                print(f"  best: {best[0][0]} {best[0][1] * 1e3:.3f} ms/layer (default {row['ker_ms']:.3f})")
        del case, out_ref, out_ker

    ceil = ceiling.flops_per_s / 1e12
    print()
    print("| start | context | causal GFLOP/layer | max abs err | rel err | ref ms | kernel ms | speedup "
          "| kernel TFLOP/s | % of matmul | ref TFLOP/s |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in rows:
        ker_tf = r["flops"] / (r["ker_ms"] / 1e3) / 1e12
        ref_tf = r["flops"] / (r["ref_ms"] / 1e3) / 1e12
        print(f"| {r['start']} | {r['start'] + args.chunk} | {r['flops'] / 1e9:.1f} | {r['err']:.2e}"
              f"{' NaN!' if r['nan'] else ''} | {r['rel']:.1e} | {r['ref_ms']:.3f} | {r['ker_ms']:.3f} "
              f"| {r['ref_ms'] / r['ker_ms']:.1f}x | {ker_tf:.1f} | {100 * ker_tf / ceil:.0f}% | {ref_tf:.1f} |")
    print(f"\nms per layer (one call = {args.layers} layers over distinct caches); "
          f"total {time.perf_counter() - t_start:.0f} s")


if __name__ == "__main__":
    main()
