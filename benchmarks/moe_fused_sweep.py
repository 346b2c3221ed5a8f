"""The one-kernel MoE decode path (dgjax/pallas/moe_decode/fused.py) against the two-stage kernel, trace-timed.

Why: fused.py trades the two-stage kernel's four launches per layer (gate/up, its split finish, down, the
final sum) for two, at the price of fewer programs (one per routed expert and ffw block) that each stream
gate, up and down. Whether that pays is a GPU question. Per case and weight format this times:
- the two-stage default (`kernel.default_config`);
- the fused kernel at 32, 64 and 128 ffw columns a program, 4 and 8 warps.
Each runs over `copies` distinct expert sets, so reads come from HBM. µs per layer = the summed kernel
durations of a run (the Pallas kernels plus the XLA fusions between and after them) per copy. Every variant
is checked against ref.py first. Same table as benchmarks/launch_sweep.py; stage "both" = the whole layer.

    python3 -m benchmarks.moe_fused_sweep --out $OUT          # GPU
    python -m benchmarks.moe_fused_sweep --smoke             # CPU: tiny shapes, interpreted, no timing
"""

from __future__ import annotations

import argparse
import time

import jax
import jax.numpy as jnp

from benchmarks import gpu_state
from benchmarks.ceilings import measure_read_ceiling
from benchmarks.launch_sweep import MOE, SMOKE_MOE, Row, rel_error, table, timed_trace, moe_case, moe_weights
from dgjax.pallas.moe_decode import fused
from dgjax.pallas.moe_decode import kernel as moe_kernel
from dgjax.pallas.moe_decode import ref as moe_ref

VARIANTS = [(bf, w) for bf in (32, 64, 128) for w in (4, 8)]  # (ffw columns a program, warps)


def sweep(shapes: dict, fmts: tuple[str, ...], rows: int, gpu: bool, calls: int, budget_s: float) -> list[Row]:
    out, t0 = [], time.perf_counter()
    for case, (e, h, f, top_k) in shapes.items():
        dense, copies, ids, wts, x = moe_case(case, e, h, f, top_k, rows, gpu)
        for fmt in fmts:
            ws = moe_weights(dense, fmt)
            mb = sum(a.nbytes for a in jax.tree_util.tree_leaves(ws)) / e * top_k / 1e6
            want = moe_ref.moe_decode(x, ids[0], wts, *ws).astype(jnp.float32)
            g_op, d_op = moe_kernel.describe(ws[0]), moe_kernel.describe(ws[2])
            default = moe_kernel.default_config(ws[0], ws[2], rows, top_k)
            candidates = [("two-stage " + f"{default.gate_up.tag()} / {default.down.tag()}",
                           (f"gate_up_{fmt}_t{rows}_{default.gate_up.tag()}",),
                           lambda a, w, ii, r: tuple(moe_kernel.moe_decode(a, i, r, *w, interpret=not gpu) for i in ii))]
            for bf, warps in VARIANTS if gpu else VARIANTS[2:3]:
                got = fused.launch_for(g_op, d_op, bf)
                if got is None or got[0] != bf:
                    continue
                tag = f"moe_fused_{fmt}_t{rows}_{moe_kernel.Launch(bf, got[2], 1, warps).tag()}_dn{got[1]}"
                candidates.append((f"fused bf{bf} w{warps}", (tag[len('moe_'):],),
                                   lambda a, w, ii, r, bf=bf, warps=warps: tuple(
                                       fused.moe_decode(a, i, r, *w, block_f=bf, num_warps=warps, interpret=not gpu)
                                       for i in ii)))
            runs, found = [], {}
            for label, markers, body in candidates:
                if time.perf_counter() - t0 > budget_s:
                    found[label] = (None, "budget")
                    continue
                try:
                    fn = jax.jit(body)
                    found[label] = (rel_error(fn(x, ws, ids, wts)[0], want), "")
                    runs.append((markers, fn, (x, ws, ids, wts), label))
                except Exception as ex:  # a variant that fails to compile is a finding, not the end of the run
                    found[label] = (None, f"{type(ex).__name__}: {str(ex).splitlines()[0][:80]}")
            times = {}
            if gpu and runs:
                traced = timed_trace([r[:3] for r in runs], calls)
                times = {r[3]: sum(t.values()) / (calls * copies) for r, t in zip(runs, traced)}
            for label, (err, note) in found.items():
                out.append(Row(case, fmt, "both", label, times.get(label), mb, err, label.startswith("two-stage"),
                               note))
            print(f"{case} {fmt}: {len(runs)} variants timed", flush=True)
            del ws
    return out


def main(argv=None) -> list[Row]:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--smoke", action="store_true")
    p.add_argument("--rows", type=int, default=2)
    p.add_argument("--calls", type=int, default=3)
    p.add_argument("--budget-s", type=float, default=200.0)
    p.add_argument("--fmts", default="fp8,bf16")
    p.add_argument("--cases", help="comma-separated case names to keep (default: all)")
    p.add_argument("--out")
    args = p.parse_args(argv)
    gpu = jax.default_backend() == "gpu" and not args.smoke
    gpu_state.spin(1.0 if gpu else 0)
    ceiling = measure_read_ceiling(int(8.59e9)).bytes_per_s if gpu else None
    shapes = SMOKE_MOE if args.smoke else MOE
    if args.cases:
        shapes = {c: v for c, v in shapes.items() if c in args.cases.split(",")}
    rows = sweep(shapes, tuple(args.fmts.split(",")), args.rows, gpu, args.calls, args.budget_s)
    head = f"read ceiling {ceiling / 1e12:.3f} TB/s" if ceiling else "no GPU: checked against ref.py, not timed"
    lines = [head, ""] + table(rows, ceiling)
    if args.out:
        with open(f"{args.out}/moe_fused_sweep.md", "w") as fh:
            fh.write("\n".join(lines) + "\n")
    print("\n".join([""] + lines))
    return rows


if __name__ == "__main__":
    main()
