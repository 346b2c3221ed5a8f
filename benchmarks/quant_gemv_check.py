"""The quantized dense GEMV kernel on the GPU: llama-3.1-8b projections in fp8 / nvfp4 / mxfp4 / bf12 at 1-16 rows,
against the reference (`reference_matmul`, dequantize the whole weight then dot) and a bf16 XLA dot.

One run measures the HBM read ceiling, then for each shape, format and row count: checks the kernel against
the reference (max |error| / max |reference|) and times kernel, reference and the bf16 dot. One timed call
runs the product over `copies` distinct weights inside one executable (so reads come from HBM, not L2, and
host dispatch is shared; benchmarks/gemv_kernel_sweep.py `_timed`), as many async calls then one sync,
median of repeats. Bandwidth counts the packed bytes the product must read (values + scales; bf16: 2 B per
weight). `--sweep` also times a few launch knobs around the default per case. A case that fails to compile
or run is reported, not fatal. The summary table comes last.

    python3 -m benchmarks.quant_gemv_check                         # 4 shapes x fp8/nvfp4/mxfp4 x rows 1/4/16
    python3 -m benchmarks.quant_gemv_check --rows 1 --sweep        # launch-knob sweep at batch 1
    python -m benchmarks.quant_gemv_check --smoke                  # CPU: tiny shapes, kernel interpreted
"""

from __future__ import annotations

import argparse
import dataclasses
import time

import jax
import jax.numpy as jnp
from jax import lax

from benchmarks.ceilings import measure_read_ceiling, time_async
from dgjax.pallas.quant_gemv import kernel
from dgjax.quant import Fp8BlockWeight, Mxfp4Weight, Nvfp4Weight, bf12, fp8_block, mxfp4, nvfp4, reference_matmul

SHAPES = {"qkv": (4096, 6144), "o": (4096, 4096), "gate_up": (4096, 28672), "down": (14336, 4096)}  # (K, N)
SMOKE_SHAPES = {"smoke": (256, 128)}
FORMATS = ("fp8", "nvfp4", "mxfp4", "bf12")
BYTES_PER_WEIGHT = {"fp8": 1.0, "bf12": 1.5}  # else ~0.55 (fp4 + scales)
SWEEP = [(64, None), (128, None), (32, None), (64, "half"), (64, "double"), (128, "half"), (128, "double")]
# (block_n, splits vs default), each at 3 / 4 / 2 stages and 4 / 8 warps


@dataclasses.dataclass
class Row:
    shape: str
    fmt: str
    rows: int
    mb: float  # packed bytes of one weight, MB
    us: dict[str, float]  # impl -> µs per product (kernel, ref, bf16)
    rel: float  # max |kernel - ref| / max |ref|
    launch: str
    note: str = ""


def _node(fmt: str, k: int, n: int, seed: int):
    """A random [K] -> [N] weight quantized on the device (jnp quantizers), in the checkpoint orientation."""
    rows = jax.jit(lambda key: 0.02 * jax.random.normal(key, (n, k), jnp.float32))(jax.random.key(seed))
    geo = dict(shape=(k, n), in_dims=1, expert_dims=0)
    if fmt == "bf12":  # a bf16 weight re-encoded losslessly
        return bf12.node_from(rows.astype(jnp.bfloat16), **geo)
    if fmt == "fp8":
        v, s = jax.jit(fp8_block.quantize)(rows)
        return Fp8BlockWeight(weight=v, scale=s, **geo)
    if fmt == "nvfp4":
        p, bs, gs = jax.jit(nvfp4.quantize)(rows)
        return Nvfp4Weight(packed=p, block_scale=bs, global_scale=gs, **geo)
    p, s = jax.jit(mxfp4.quantize)(rows)
    return Mxfp4Weight(packed=p, scale=s, **geo)


def _timed(fn, xs, ws, calls: int, repeats: int) -> float:
    """Seconds per product: one executable runs fn over every (x, w) pair back to back."""
    many = jax.jit(lambda xs, ws: tuple(fn(x, w) for x, w in zip(xs, ws)))
    return time_async(lambda: many(xs, ws), calls=max(2, calls // len(ws)), repeats=repeats).median_s / len(ws)


def _bf16_dot(x, w):
    return lax.dot_general(x, w, (((1,), (0,)), ((), ())), preferred_element_type=jnp.float32).astype(x.dtype)


def sweep_launches(op: kernel.Operand, limit: int | None = None, block_ks: tuple[int, ...] = ()) -> list[kernel.Launch]:
    """Column blocks, splits, pipeline stages and warps around the default launch (valid tilings only); with
    `block_ks`, those K steps at 2-4 stages instead of the stage/warp variants."""
    base = kernel.default_launch(op)
    out = []
    for bn, splits in SWEEP:
        s = {None: base.splits, "half": max(1, base.splits // 2), "double": 2 * base.splits}[splits]
        launch = dataclasses.replace(base, block_n=bn, splits=s)
        variants = [launch, dataclasses.replace(launch, num_stages=4), dataclasses.replace(launch, num_warps=8),
                    dataclasses.replace(launch, num_warps=8, num_stages=2), dataclasses.replace(launch, num_stages=2)]
        if block_ks:
            variants = [dataclasses.replace(launch, block_k=bk, num_stages=st) for bk in block_ks for st in (2, 3, 4)]
        for cand in variants:
            try:
                kernel.check_launch(op, cand)
            except ValueError:
                continue
            if cand not in out and cand != base:
                out.append(cand)
    return out[:limit]


def _fmt_launch(launch: kernel.Launch) -> str:
    return f"bn{launch.block_n} bk{launch.block_k} s{launch.splits} st{launch.num_stages} w{launch.num_warps}"


def run_case(shape: str, k: int, n: int, fmt: str, row_counts: list[int], copies: int, calls: int, repeats: int,
             sweep: bool, interpret: bool, block_ks: tuple[int, ...] = ()) -> list[Row]:
    ws = [_node(fmt, k, n, seed=i) for i in range(copies)]
    dense = [jax.jit(lambda key: jax.random.normal(key, (k, n), jnp.bfloat16))(jax.random.key(100 + i))
             for i in range(copies)]
    mb = ws[0].nbytes / 1e6
    op = kernel.describe(ws[0])
    out = []
    for m in row_counts:
        xs = [jax.random.normal(jax.random.key(7 + i), (m, k), jnp.bfloat16) for i in range(copies)]
        ref = lambda x, w: reference_matmul(x, w)  # noqa: E731
        run = lambda x, w, launch=None: kernel.quant_gemv(x, w, launch=launch, interpret=interpret)  # noqa: E731
        row = Row(shape, fmt, m, mb, {}, float("nan"), _fmt_launch(kernel.default_launch(op)))
        try:
            want = jax.jit(ref)(xs[0], ws[0]).astype(jnp.float32)
            got = jax.jit(run)(xs[0], ws[0]).astype(jnp.float32)
            row.rel = float(jnp.max(jnp.abs(got - want)) / jnp.max(jnp.abs(want)))
            row.us["kernel"] = _timed(run, xs, ws, calls, repeats) * 1e6
        except Exception as e:  # report and go on: one failing case must not cost the whole run
            row.note = f"kernel failed: {type(e).__name__}: {str(e)[:200]}"
        row.us["ref"] = _timed(ref, xs, ws, calls, repeats) * 1e6
        row.us["bf16"] = _timed(_bf16_dot, xs, dense, calls, repeats) * 1e6
        times = "  ".join(f"{impl} {us:8.1f} us" for impl, us in row.us.items())
        print(f"{shape:8s} {fmt:6s} M={m:2d} {mb:7.1f} MB  {times}"
              f"  rel err {row.rel:.2e}  [{row.launch}] {row.note}", flush=True)
        if sweep and "kernel" in row.us:
            for launch in sweep_launches(op, 1 if interpret else None, block_ks):
                try:
                    us = _timed(lambda x, w, launch=launch: run(x, w, launch), xs, ws, calls, repeats) * 1e6
                except Exception as e:
                    print(f"    {_fmt_launch(launch)}: failed {type(e).__name__}: {str(e)[:120]}", flush=True)
                    continue
                print(f"    {_fmt_launch(launch)}: {us:8.1f} us", flush=True)
                if us < row.us["kernel"]:
                    row.us["kernel"], row.launch = us, _fmt_launch(launch) + " (sweep)"
        out.append(row)
    for a in ws + dense:
        for leaf in jax.tree_util.tree_leaves(a):
            leaf.delete()
    return out


def print_table(rows: list[Row], ceiling_bps: float) -> None:
    print(f"\nread ceiling {ceiling_bps / 1e12:.3f} TB/s; TB/s of the packed bytes (bf16: of 2 B per weight)")
    print("| shape | fmt | rows | MB | kernel µs | TB/s | % ceiling | ref µs | bf16 µs | bf16 TB/s | rel err "
          "| launch |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in rows:
        k, n = {**SHAPES, **SMOKE_SHAPES}[r.shape]
        kus = r.us.get("kernel", float("nan"))
        tbs = r.mb * 1e6 / (kus * 1e-6) / 1e12
        btbs = k * n * 2 / (r.us["bf16"] * 1e-6) / 1e12
        pct = tbs * 1e12 / ceiling_bps
        print(f"| {r.shape} | {r.fmt} | {r.rows} | {r.mb:.1f} | {kus:.1f} | {tbs:.2f} | {pct:.0%} | "
              f"{r.us['ref']:.1f} | {r.us['bf16']:.1f} | {btbs:.2f} | {r.rel:.1e} | {r.launch} |")


def main(argv: list[str] | None = None) -> list[Row]:
    p = argparse.ArgumentParser()
    p.add_argument("--shapes", nargs="+", default=list(SHAPES))
    p.add_argument("--formats", nargs="+", default=list(FORMATS), choices=FORMATS)
    p.add_argument("--rows", type=int, nargs="+", default=[1, 4, 16])
    p.add_argument("--min-mb", type=float, default=400.0, help="distinct weights per executable add up to this")
    p.add_argument("--calls", type=int, default=200, help="products per timed repeat")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--sweep", action="store_true")
    p.add_argument("--sweep-block-k", type=int, nargs="*", default=[],
                   help="sweep these K steps (at 2-4 stages) instead of the stage / warp variants")
    p.add_argument("--budget-s", type=float, default=420.0, help="skip remaining cases after this long")
    p.add_argument("--smoke", action="store_true", help="CPU: one tiny shape, kernel interpreted")
    a = p.parse_args(argv)
    interpret = jax.default_backend() != "gpu"
    shapes = SHAPES
    if a.smoke:
        shapes, a.shapes, a.min_mb, a.calls, a.repeats = SMOKE_SHAPES, ["smoke"], 0.0, 4, 2
    t0 = time.monotonic()
    ceiling = measure_read_ceiling(64 << 20 if a.smoke else 2 << 30)
    print(f"device {jax.devices()[0].device_kind}; read ceiling {ceiling.bytes_per_s / 1e12:.3f} TB/s", flush=True)
    rows: list[Row] = []
    for shape in a.shapes:
        k, n = shapes[shape]
        for fmt in a.formats:
            if time.monotonic() - t0 > a.budget_s:
                print(f"budget spent: skipping {shape} {fmt}", flush=True)
                continue
            approx_mb = k * n * BYTES_PER_WEIGHT.get(fmt, 0.55) / 1e6
            copies = max(2, int(-(-a.min_mb // approx_mb)))
            rows += run_case(shape, k, n, fmt, a.rows, copies, a.calls, a.repeats, a.sweep, interpret,
                             tuple(a.sweep_block_k))
    print_table(rows, ceiling.bytes_per_s)
    return rows


if __name__ == "__main__":
    main()
