"""Tile sweep of the Pallas skinny-GEMV kernel against XLA's dot at llama-3.1-8b / qwen3-30b-a3b projection shapes.

Weights rotate over enough copies to exceed L2, calls are timed async with one sync (ceilings.time_async),
and the HBM read ceiling is measured in the same run. Prints the best configs per shape; the full
sweep goes to `<out>/gemv-sweep.json`.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import time

import jax
import jax.numpy as jnp
from jax import lax

from benchmarks.ceilings import measure_read_ceiling, time_async
from dgjax.pallas.gemv.kernel import gemv

SHAPES = {  # name: (K, N): llama-3.1-8b, then qwen3-30b-a3b's attention and router
    "qkv": (4096, 6144),
    "o": (4096, 4096),
    "gate": (4096, 14336),
    "gate_up": (4096, 28672),
    "down": (14336, 4096),
    "moe_qkv": (2048, 5120),
    "moe_o": (4096, 2048),
    "router": (2048, 128),
}


def _weights(k: int, n: int, min_bytes: int) -> list[jax.Array]:
    copies = max(2, -(-min_bytes // (k * n * 2)))
    make = jax.jit(lambda key: jax.random.normal(key, (k, n), jnp.bfloat16))
    return [make(jax.random.key(i)) for i in range(copies)]


def _timed(fn, xs, ws, calls: int) -> float:
    """Seconds per product: one executable runs fn over every (x, w) pair back to back.

    A single jitted call per product would time Python dispatch (~30 us), not the kernel; distinct
    x arrays keep XLA from merging the dots that share an operand.
    """
    many = jax.jit(lambda xs, ws: tuple(fn(x, w) for x, w in zip(xs, ws)))
    return time_async(lambda: many(xs, ws), calls=max(2, calls // len(ws)), repeats=5).median_s / len(ws)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--rows", type=int, nargs="+", default=[2])
    p.add_argument("--shapes", nargs="+", default=list(SHAPES))
    p.add_argument("--block-n", type=int, nargs="+", default=[32, 64, 128])
    p.add_argument("--block-k", type=int, nargs="+", default=[128, 256])
    p.add_argument("--splits", type=int, nargs="+", default=[1, 2, 4])
    p.add_argument("--stages", type=int, nargs="+", default=[3, 4])
    p.add_argument("--warps", type=int, nargs="+", default=[4])
    p.add_argument("--budget-s", type=float, default=240.0, help="stop sweeping after this long")
    p.add_argument("--out", default=os.environ.get("OUT", "."))
    a = p.parse_args()
    t_start = time.monotonic()
    ceiling = measure_read_ceiling(2 << 30)
    print(f"device {jax.devices()[0].device_kind}; read ceiling {ceiling.bytes_per_s / 1e12:.3f} TB/s", flush=True)
    xla = jax.jit(lambda x, w: lax.dot_general(x, w, (((1,), (0,)), ((), ())),
                                               preferred_element_type=jnp.float32).astype(x.dtype))
    rows_out = []
    for shape_name in a.shapes:
        k, n = SHAPES[shape_name]
        ws = _weights(k, n, 400 << 20)
        nbytes = k * n * 2
        for m in a.rows:
            xs = [jax.random.normal(jax.random.key(99 + i), (m, k), jnp.bfloat16) for i in range(len(ws))]
            x = xs[0]
            ref = xla(x, ws[0]).astype(jnp.float32)
            t = _timed(xla, xs, ws, 100)
            rows_out.append(dict(shape=shape_name, k=k, n=n, m=m, impl="xla", us=t * 1e6, tbs=nbytes / t / 1e12))
            print(f"{shape_name:8s} M={m:2d} xla {t * 1e6:7.1f} us {nbytes / t / 1e12:5.2f} TB/s", flush=True)
            for bn, bk, s, st, wp in itertools.product(a.block_n, a.block_k, a.splits, a.stages, a.warps):
                if time.monotonic() - t_start > a.budget_s:
                    break
                if k % (s * bk) or n % bn:
                    continue
                fn = lambda x, w, bn=bn, bk=bk, s=s, st=st, wp=wp: gemv(  # noqa: E731
                    x, w, block_n=bn, block_k=bk, splits=s, num_stages=st, num_warps=wp)
                try:
                    err = float(jnp.max(jnp.abs(jax.jit(fn)(x, ws[0]).astype(jnp.float32) - ref)) / jnp.max(jnp.abs(ref)))
                    t = _timed(fn, xs, ws, 100)
                except Exception as e:  # a config the compiler rejects (e.g. shared memory) is skipped
                    print(f"  bn{bn} bk{bk} s{s} st{st} w{wp}: {type(e).__name__}: {str(e)[:120]}", flush=True)
                    continue
                rows_out.append(dict(shape=shape_name, k=k, n=n, m=m, impl="pallas", block_n=bn, block_k=bk,
                                     splits=s, stages=st, warps=wp, us=t * 1e6, tbs=nbytes / t / 1e12,
                                     max_abs_err=err))
        del ws
    with open(os.path.join(a.out, "gemv-sweep.json"), "w") as f:
        json.dump(dict(ceiling_tbs=ceiling.bytes_per_s / 1e12, rows=rows_out), f, indent=1)
    print(f"\nread ceiling {ceiling.bytes_per_s / 1e12:.3f} TB/s")
    print("shape     M  impl    config                       us     TB/s  of ceiling  max rel err")
    for shape_name in a.shapes:
        for m in a.rows:
            sel = [r for r in rows_out if r["shape"] == shape_name and r["m"] == m]
            best = sorted((r for r in sel if r["impl"] == "pallas"), key=lambda r: r["us"])[:3]
            for r in [r for r in sel if r["impl"] == "xla"] + best:
                cfg = "" if r["impl"] == "xla" else f"bn{r['block_n']} bk{r['block_k']} s{r['splits']} st{r['stages']} w{r['warps']}"
                err = f"{r['max_abs_err']:.3g}" if "max_abs_err" in r else ""
                print(f"{shape_name:8s} {m:2d}  {r['impl']:6s}  {cfg:26s} {r['us']:7.1f}  {r['tbs']:5.2f}  "
                      f"{r['tbs'] * 1e12 / ceiling.bytes_per_s:6.1%}  {err}")


if __name__ == "__main__":
    main()
