"""Does a TMA-fed warpgroup-MMA GEMV (Pallas Mosaic GPU, dgjax/pallas/tma_gemv) stream llama's weights faster than
the Pallas-Triton GEMV (~3.2-3.3 TB/s) and XLA's bf16 dot (~4.3 TB/s), in bf16 and in bf12?

For each shape: the kernel's launches (column block, K step, splits, stages) timed alone on `copies` distinct
weights inside one executable (reads come from HBM), against XLA's bf16 dot and the Triton quant_gemv on the
same bf12 weights; each result checked against the float32 product (bf12: its row scales and escapes applied
in jnp). A case that fails to compile or run is reported, not fatal. Summary table last.

    python3 -m benchmarks.tma_gemv_probe --out $OUT       # GPU
"""

from __future__ import annotations

import argparse
import traceback

import jax
import jax.numpy as jnp
from jax import lax

from benchmarks.ceilings import measure_read_ceiling, time_async
from dgjax.pallas.quant_gemv import kernel as triton_gemv
from dgjax.pallas.tma_gemv import kernel as K
from dgjax.quant import bf12

SHAPES = {"qkv": (4096, 6144), "o": (4096, 4096), "gate_up": (4096, 28672), "down": (14336, 4096)}  # (K, N)
BF16_LAUNCHES = [K.Launch(128, 64, 1, 4), K.Launch(128, 64, 1, 8), K.Launch(64, 64, 1, 8), K.Launch(128, 64, 2, 6),
                 K.Launch(128, 128, 1, 4), K.Launch(64, 128, 2, 4), K.Launch(128, 64, 4, 6), K.Launch(256, 64, 1, 4)]
BF12_LAUNCHES = [K.Launch(128, 64, 1, 4), K.Launch(128, 64, 1, 8), K.Launch(64, 64, 1, 8), K.Launch(128, 64, 2, 6),
                 K.Launch(64, 64, 2, 6)]
ROWS = 2


def _timed(fn, args_list, calls=20, repeats=5) -> float:
    many = jax.jit(lambda al: tuple(fn(*a) for a in al))
    return time_async(lambda: many(args_list), calls=calls, repeats=repeats).median_s / len(args_list)


def _escapes(node, x):
    """x [T, K] . the escapes of node's rows -> [T, N] float32."""
    cols = node.escape_cols.astype(jnp.int32)
    value = lax.bitcast_convert_type(node.escape_bits.astype(jnp.uint32) << 16, jnp.float32)
    return jnp.einsum("tne,ne->tn", x.astype(jnp.float32)[:, cols], value)


def bf12_product(node, x, launch):
    t, k = x.shape
    xs = jnp.zeros((K.COLS, k), jnp.bfloat16).at[:t].set(x) * jnp.bfloat16(2.0 ** bf12.X_SHIFT)
    parts = K.gemv_bf12(node.low, node.codes, xs[:, 0::2], xs[:, 1::2], launch)
    return parts.sum(0)[:, :t].T * node.row_scale[None, :] + _escapes(node, x)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=None)
    ap.add_argument("--shapes", nargs="*", default=list(SHAPES))
    ap.add_argument("--total-mb", type=int, default=600)
    args = ap.parse_args(argv)
    ceiling = measure_read_ceiling(8 << 30).bytes_per_s
    print(f"device {jax.devices()[0].device_kind}, jax {jax.__version__}; read ceiling {ceiling / 1e12:.3f} TB/s")
    table = []
    for shape in args.shapes:
        k, n = SHAPES[shape]
        bf16_mb = 2 * n * k / 1e6
        copies = max(2, int(args.total_mb // bf16_mb))
        keys = jax.random.split(jax.random.key(0), copies)
        make = jax.jit(lambda key: (0.02 * jax.random.normal(key, (n, k), jnp.float32)).astype(jnp.bfloat16))
        ws = [make(key) for key in keys]
        x = jax.random.normal(jax.random.key(7), (ROWS, k), jnp.bfloat16)
        x16 = jnp.zeros((K.COLS, k), jnp.bfloat16).at[:ROWS].set(x)
        want = jnp.dot(x.astype(jnp.float32), ws[0].astype(jnp.float32).T, precision="highest")
        rel = lambda got: float(jnp.max(jnp.abs(got - want)) / jnp.max(jnp.abs(want)))  # noqa: E731

        def row(impl, fmt, us, err, mb):
            table.append((shape, impl, fmt, us, mb / us * 1e12 / ceiling, mb / us, err))
            print(f"  {shape} {impl:<28} {fmt:<5} {us:8.1f} µs  {mb / us:6.3f} TB/s  err {err:.1e}", flush=True)

        xla = lambda w, x: lax.dot_general(x, w, (((1,), (1,)), ((), ())), preferred_element_type=jnp.float32)  # noqa: E731
        row("xla dot", "bf16", _timed(xla, [(w, x) for w in ws]) * 1e6, rel(jax.jit(xla)(ws[0], x)), bf16_mb)
        for launch in BF16_LAUNCHES:
            try:
                fn = lambda w, x, launch=launch: K.gemv_bf16(w, x, launch)  # noqa: E731
                got = jax.jit(fn)(ws[0], x16).sum(0)[:, :ROWS].T
                row("tma " + launch.tag(), "bf16", _timed(fn, [(w, x16) for w in ws]) * 1e6, rel(got), bf16_mb)
            except Exception as e:  # noqa: BLE001
                print(f"  {shape} tma bf16 {launch.tag()} failed: {type(e).__name__}: {str(e)[:300]}")
                traceback.print_exc(limit=2)
        nodes = [bf12.node_from(w, shape=(k, n), in_dims=1) for w in ws]
        for w in ws:
            w.delete()
        bf12_mb = 1.5 * n * k / 1e6
        tri = lambda node, x: triton_gemv.quant_gemv(x, node)  # noqa: E731
        try:
            row("triton quant_gemv", "bf12", _timed(tri, [(nd, x) for nd in nodes]) * 1e6,
                rel(jax.jit(tri)(nodes[0], x).astype(jnp.float32)), bf12_mb)
        except Exception as e:  # noqa: BLE001
            print(f"  {shape} triton bf12 failed: {type(e).__name__}: {str(e)[:300]}")
        for launch in BF12_LAUNCHES:
            try:
                fn = lambda nd, xe, xo, launch=launch: K.gemv_bf12(nd.low, nd.codes, xe, xo, launch)  # noqa: E731
                xs = x16 * jnp.bfloat16(2.0 ** bf12.X_SHIFT)
                xe, xo = xs[:, 0::2], xs[:, 1::2]
                err = rel(jax.jit(lambda nd, x, launch=launch: bf12_product(nd, x, launch))(nodes[0], x))
                row("tma " + launch.tag(), "bf12", _timed(fn, [(nd, xe, xo) for nd in nodes]) * 1e6, err, bf12_mb)
            except Exception as e:  # noqa: BLE001
                print(f"  {shape} tma bf12 {launch.tag()} failed: {type(e).__name__}: {str(e)[:300]}")
                traceback.print_exc(limit=2)
        del nodes
    lines = [f"read ceiling {ceiling / 1e12:.3f} TB/s (this run); {ROWS} x rows; µs a product over distinct weights",
             "", "| shape | impl | format | µs | TB/s | of ceiling | rel err |", "| --- | --- | --- | --- | --- | --- | --- |"]
    lines += [f"| {s} | {i} | {f} | {us:.1f} | {tb:.3f} | {frac:.1%} | {e:.1e} |" for s, i, f, us, frac, tb, e in table]
    print("\n".join(lines))
    if args.out:
        import os
        os.makedirs(args.out, exist_ok=True)
        with open(os.path.join(args.out, "tma_gemv_probe.md"), "w") as f:
            f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
