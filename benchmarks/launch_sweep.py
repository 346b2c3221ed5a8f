"""Launch sweep of the skinny quantized kernels at the decode widths, timed from the device trace.

Why a trace: a many-product executable timed by wall clock charges each small product ~8 µs of launch
cost that the engine's command buffers do not pay (session 4: a 0.5 MB product "took" 10 µs). Here each
timed executable runs one kernel over `copies` distinct weights (or distinct experts), so reads come
from HBM, not L2; the profiler records every kernel, and a product's time is the summed duration of the
kernels it ran (the Pallas kernel plus, for split launches, the partial-sum fusion), per copy.

Cases (2 rows: a one-stream engine decodes at width 2, its padding row routed like the real row):
- dense fp8 (dgjax/pallas/quant_gemv) at qwen3-30b-a3b and glm-4.5-air projection shapes, with XLA's
  bf16 dot on the same shape as a reference (2 B per weight);
- the MoE decode kernel (dgjax/pallas/moe_decode) on fp8 and bf16 experts, both rows on the same 8 experts.
Every launch is checked against ref.py (max |error| / max |ref|) before it is timed. The read ceiling is
measured in the same run; the summary (best launch per case and stage against the default) comes last.

    python3 -m benchmarks.launch_sweep --out $OUT          # GPU
    python -m benchmarks.launch_sweep --smoke              # CPU: tiny shapes, kernels interpreted, no timing

`--default-only` times each case's default launch alone; `--x-dtype float16` feeds every case float16 rows, which
the default f16 dot takes as they are (since session 22; under DGJAX_FP8_DOT=x too): against bfloat16 rows, the
price of the x work every program repeats in every K step (session 21), and for the experts the gate/up stage on
f16 rows in isolation (the engine's down stage gets carried f16 h on bf16 rows too: dgjax/pallas/carrier.py).
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import os
import re
import time

import jax
import jax.numpy as jnp
import numpy as np

from benchmarks import gpu_state
from benchmarks.ceilings import measure_read_ceiling
from benchmarks.device_trace import trace_events
from dgjax.pallas.launch import Launch, split_steps
from dgjax.pallas.moe_decode import kernel as moe_kernel
from dgjax.pallas.moe_decode import ref as moe_ref
from dgjax.pallas.quant_gemv import kernel as gemv_kernel
from dgjax.pallas.quant_gemv import ref as gemv_ref
from dgjax.quant import Fp8BlockWeight, fp8_block

DENSE = {  # name: (K, N), largest reads first (a run out of budget skips the rest)
    "glm qkv": (4096, 14336), "glm o": (12288, 4096), "qwen3 qkv": (2048, 5120), "qwen3 o": (4096, 2048),
    "glm shared gate_up": (4096, 2816), "glm shared down": (1408, 4096),
}
MOE = {"glm experts": (128, 4096, 1408, 8), "qwen3 experts": (128, 2048, 768, 8)}  # E, embed, ffw, top_k
SMOKE_DENSE = {"smoke": (256, 128)}
SMOKE_MOE = {"smoke experts": (8, 256, 128, 2)}
L2_BYTES = 256 << 20  # copies read at least this much per call: several times the H200's L2


@dataclasses.dataclass
class Row:
    case: str
    fmt: str
    stage: str
    launch: str
    us: float | None  # per product (per MoE layer stage)
    mb: float
    rel_err: float | None
    default: bool = False
    note: str = ""


def _dense_launches(k: int, n: int) -> list[Launch]:
    out = []
    for bn in (32, 64, 128):
        for unroll in (1, 2, 4):
            for splits in (1, 4):
                if n % bn == 0 and k % (128 * splits) == 0 and (n // bn) * splits <= 1024:
                    out.append(Launch(bn, 128, splits, unroll=unroll))
    return out


def _deep_launches(k: int, n: int) -> list[Launch]:
    """Deeper K unrolling (more bytes in flight per program), with and without Triton's software pipelining."""
    out = []
    for bn in (32, 64, 128):
        for unroll in (4, 8):
            for stages in (1, 3):
                for splits in (1, 2):
                    if n % bn == 0 and k % (128 * splits) == 0:
                        out.append(Launch(bn, 128, splits, num_stages=stages, unroll=unroll))
    return out


def _wide_launches(k: int, n: int) -> list[Launch]:
    """Wider tiles (128-256 columns, 8 warps) and more K splits, no unroll: more bytes per K step. The fp8
    step is held to one 128-wide scale block, so a 64-column fp8 tile moves 8 KB a step, half a bf16 tile
    of the same shape, and unrolling never paid (s5b, s6a)."""
    out = []
    for bn in (64, 128, 256):
        for warps in ((4,) if bn == 64 else (4, 8)):
            for splits in (1, 2, 4, 8, 16):
                programs = (n // bn) * splits
                if n % bn == 0 and k % (128 * splits) == 0 and k // (128 * splits) >= 2 and 48 <= programs <= 1024:
                    out.append(Launch(bn, 128, splits, num_warps=warps))
    return out


def _balanced_launches(k: int, n: int) -> list[Launch]:
    """K splits of any count (uneven cuts allowed, every split >= 2 steps), 64 or 128 fp8 columns: grids that fill
    the SMs evenly. Why: under Nsight Compute (session 18) qwen3's fp8 kernels hold no program on an average SM for
    35-45% of their time; q/k/v's 320 programs (4 fit an SM) give 56 SMs three and 76 two, a tail of one program."""
    return [Launch(bn, 128, splits) for bn in (64, 128) for splits in range(1, 13)
            if n % bn == 0 and _moe_splits_fit(k, splits) and 96 <= (n // bn) * splits <= 800]


def _moe_splits_fit(k: int, splits: int) -> bool:
    """K in 128-wide steps cut in `splits`, the last split allowed fewer (glm's down: 11 steps), each >= 2."""
    per = split_steps(k // 128, splits) if k % 128 == 0 else None
    return per is not None and k // 128 - (splits - 1) * per >= 2


def _wide_moe_launches(k: int, n: int) -> list[Launch]:
    """`_wide_launches` for an expert stage: 64-128 columns, up to 4 K splits of at least 2 steps."""
    return [Launch(bn, 128, splits, num_warps=warps) for bn in (64, 128) for warps in ((4,) if bn == 64 else (4, 8))
            for splits in (1, 2, 4) if n % bn == 0 and _moe_splits_fit(k, splits)]


def _stages_moe_launches(k: int, n: int) -> list[Launch]:
    """128-column expert tiles at 2-4 pipeline stages. Why: under Nsight Compute (s10f) the wide fp8 gate/up
    stage (s4, 3 stages) holds 79 KB of shared memory a program, so 2 fit an SM and its 384-program grid ran
    1.45 waves, with 11% achieved occupancy and warps stalled on memory; 2 stages hold ~2/3 of that."""
    return [Launch(128, 128, splits, num_stages=st) for st in (2, 3, 4) for splits in (1, 2, 4, 8)
            if n % 128 == 0 and _moe_splits_fit(k, splits)]


def _moe_launches(k: int, n: int, fmt: str) -> list[Launch]:
    out = []
    bks = (128,) if fmt == "fp8" else (128, 256)
    for bn in (32, 64):
        for bk in bks:
            for unroll in (1, 2, 3):
                for splits in (1, 2):
                    if n % bn == 0 and k % (bk * splits) == 0:
                        out.append(Launch(bn, bk, splits, unroll=unroll))
    return out


def fp8_node(w: jax.Array, expert_dims: int) -> Fp8BlockWeight:
    """[.., K, N] float -> an fp8 node over its [.., N, K] rows."""
    v, s = jax.jit(fp8_block.quantize)(jnp.swapaxes(w, -1, -2))
    return Fp8BlockWeight(weight=v, scale=s, shape=tuple(w.shape), in_dims=1, expert_dims=expert_dims)


def rel_error(got, want) -> float:
    got, want = np.asarray(got, np.float32), np.asarray(want, np.float32)
    return float(np.abs(got - want).max() / max(1e-30, np.abs(want).max()))


def timed_trace(runs: list[tuple[tuple[str, ...], object, tuple]], calls: int) -> list[dict[str, float]]:
    """Run each (markers, compiled fn, args) `calls` times, one after another, in one profiler session.

    Kernel events are attributed by order: the runs' kernels come in run order, and the next run starts at
    the first kernel whose name ends with one of its markers (a Pallas kernel's name ends with its launch's
    `Launch.tag`) and with none of the current run's; every other kernel (XLA fusions such as split partial
    sums) belongs to the run in progress. Returns per run the summed µs of each kernel name over all calls.
    """
    def run():
        for _, fn, args in runs:
            for _ in range(calls):
                out = fn(*args)
            jax.block_until_ready(out)

    def ends(name: str, markers: tuple[str, ...]) -> bool:  # a tag, then the end (or an XLA numeric suffix)
        return any(re.search(rf"_{re.escape(m)}([^a-z0-9_]|_\d+$|$)", name) for m in markers)

    idx, per = 0, [{} for _ in runs]
    for e in trace_events(run):
        name = e["name"]
        if idx + 1 < len(runs) and ends(name, runs[idx + 1][0]) and not ends(name, runs[idx][0]):
            idx += 1
        per[idx][name] = per[idx].get(name, 0.0) + e["dur"]
    return per


def _stage_markers(config, fmt: str, rows: int) -> tuple[str, str]:
    """The ends of a config's two kernel names. With the stage in them, a gate/up launch and a down launch
    of the same tag tell apart: `timed_trace` starts the next run at a kernel that ends with one of its
    markers and none of the current run's, so bare tags lumped runs together when one config's down tag was
    the next config's gate/up tag (session 9's first --wide sweep)."""
    return (f"gate_up_{fmt}_t{rows}_{config.gate_up.tag()}", f"down_{fmt}_t{rows}_{config.down.tag()}")


def _fused_dequant_dot(x, node):
    """XLA's own fused path: the fp8 -> float32 * block scale -> x dtype chain as the dot's operand."""
    n, k = node.weight.shape
    sb_n, sb_k = node.block
    scale = jnp.broadcast_to(node.scale[:, None, :, None], (n // sb_n, sb_n, k // sb_k, sb_k)).reshape(n, k)
    w = (node.weight.astype(jnp.float32) * scale).astype(x.dtype)
    return jnp.einsum("rk,nk->rn", x, w)


def sweep_dense(shapes: dict, rows: int, gpu: bool, calls: int, budget_s: float, t0: float,
                launch_set: str = "basic", x_dtype=jnp.bfloat16) -> list[Row]:
    out = []
    for case, (k, n) in shapes.items():
        nbytes = k * n + (k // 128) * (n // 128) * 4
        copies = max(2, math.ceil(L2_BYTES / nbytes)) if gpu else 1
        key = jax.random.key(len(case) * 131 + k)
        dense = [0.05 * jax.random.normal(jax.random.fold_in(key, c), (k, n), jnp.float32) for c in range(copies)]
        nodes = [fp8_node(w, 0) for w in dense]
        bf16 = [w.astype(jnp.bfloat16) for w in dense] if gpu else []
        del dense
        x = jax.random.normal(jax.random.fold_in(key, 99), (rows, k), jnp.float32).astype(x_dtype)
        want = gemv_ref.quant_gemv(x, nodes[0])
        jax.block_until_ready((nodes, bf16, want))  # nothing of the setup may still run inside a trace
        op = gemv_kernel.describe(nodes[0])
        default = gemv_kernel.default_launch(op)
        pick = {"basic": _dense_launches, "deep": _deep_launches, "wide": _wide_launches,
                "stages": _wide_launches, "balanced": _balanced_launches, "default": lambda k, n: []}[launch_set]
        launches = [default] + [la for la in pick(k, n) if la != default]
        launches = launches if gpu else launches[::7]  # CPU smoke: a few launches of each kind, interpreted
        print(f"{case}: K={k} N={n} fp8 {nbytes / 1e6:.1f} MB, {copies} copies, {len(launches)} launches", flush=True)
        runs, found = [], {}
        if gpu:
            xla = jax.jit(lambda a, ws: tuple(a.astype(jnp.bfloat16) @ w for w in ws))
            jax.block_until_ready(xla(x, bf16))  # compiled (and autotuned) outside the trace
            runs.append(((), xla, (x, bf16)))
        for launch in launches:
            if time.perf_counter() - t0 > budget_s:
                found[launch] = (None, "budget")
                continue
            try:
                fn = jax.jit(lambda a, ws, la=launch: tuple(
                    gemv_kernel.quant_gemv(a, w, launch=la, interpret=not gpu) for w in ws))
                got = fn(x, nodes)[0]
                found[launch] = (rel_error(got, want.astype(jnp.float32)), "")
                runs.append(((launch.tag(),), fn, (x, nodes)))
            except Exception as e:  # a launch that fails to compile is a finding, not the end of the run
                found[launch] = (None, f"{type(e).__name__}: {str(e).splitlines()[0][:80]}")
        per, times = calls * copies, {}
        if gpu:
            traced = timed_trace(runs, calls)
            out.append(Row(case, "bf16", "xla dot", "xla", sum(traced[0].values()) / per, 2 * k * n / 1e6, 0.0))
            fused = jax.jit(lambda a, ws: tuple(_fused_dequant_dot(a, w) for w in ws))
            err = rel_error(fused(x, nodes)[0], want.astype(jnp.float32))
            t = timed_trace([((), fused, (x, nodes))], calls)[0]
            out.append(Row(case, "fp8", "xla dot", "xla fused dequant", sum(t.values()) / per, nbytes / 1e6, err))
            for s in (2, 4, 8):  # XLA with an explicit K split: batched [s, rows, K/s] x [s, K/s, N], summed
                split = jax.jit(lambda a, ws, s=s, k=k, n=n: tuple(
                    jnp.einsum("rsk,skn->srn", a.reshape(a.shape[0], s, k // s), w.reshape(s, k // s, n),
                               preferred_element_type=jnp.float32).sum(0).astype(a.dtype) for w in ws))
                err = rel_error(split(x, bf16)[0], (x @ bf16[0]).astype(jnp.float32))
                t = timed_trace([((), split, (x, bf16))], calls)[0]
                out.append(Row(case, "bf16", "xla dot", f"xla split-K {s}", sum(t.values()) / per, 2 * k * n / 1e6,
                               err))
            times = {markers[0]: t for (markers, _, _), t in zip(runs[1:], traced[1:])}
        for launch, (err, note) in found.items():
            t = times.get(launch.tag())
            out.append(Row(case, "fp8", "gemv", launch.tag(), sum(t.values()) / per if t else None, nbytes / 1e6,
                           err, launch == default, note))
        del nodes, bf16
    return out


def moe_case(case: str, e: int, h: int, f: int, top_k: int, rows: int, gpu: bool, x_dtype=jnp.bfloat16):
    """(dense float32 gate, up, down; copies; routing ids per copy; routing weights; x rows) of one expert
    case. Each copy routes every row to its own top_k experts (copy c: experts c*top_k .. c*top_k + top_k - 1),
    so a timed call over all copies reads its weights from HBM; the rows share their experts, as one stream's
    padding row does. x in `x_dtype`."""
    key = jax.random.key(len(case))
    dense = [0.05 * jax.random.normal(jax.random.fold_in(key, i), s, jnp.float32)
             for i, s in enumerate(((e, h, f), (e, h, f), (e, f, h)))]
    copies = e // top_k if gpu else 1
    ids = [jnp.tile(jnp.arange(c * top_k, (c + 1) * top_k, dtype=jnp.int32)[None], (rows, 1)) for c in range(copies)]
    wts = jax.nn.softmax(jax.random.normal(jax.random.fold_in(key, 7), (rows, top_k)), -1)
    x = jax.random.normal(jax.random.fold_in(key, 9), (rows, h), jnp.float32).astype(x_dtype)
    return dense, copies, ids, wts, x


def moe_weights(dense: list, fmt: str) -> tuple:
    """The case's expert weights in `fmt` ("fp8" blocks or "bf16"), on the device and ready."""
    ws = tuple(fp8_node(w, 1) for w in dense) if fmt == "fp8" else tuple(w.astype(jnp.bfloat16) for w in dense)
    return jax.block_until_ready(ws)


def sweep_moe(shapes: dict, fmts: tuple[str, ...], rows: int, gpu: bool, calls: int, budget_s: float,
              t0: float, launch_set: str = "basic", x_dtype=jnp.bfloat16) -> list[Row]:
    out = []
    for case, (e, h, f, top_k) in shapes.items():
        dense, copies, ids, wts, x = moe_case(case, e, h, f, top_k, rows, gpu, x_dtype)
        for fmt in fmts:
            ws = moe_weights(dense, fmt)
            per_expert = sum(a.nbytes for a in jax.tree_util.tree_leaves(ws)) / e
            mb = {"gate_up": per_expert * top_k * 2 / 3 / 1e6, "down": per_expert * top_k / 3 / 1e6}
            want = moe_ref.moe_decode(x, ids[0], wts, *ws).astype(jnp.float32)
            g_op, d_op = moe_kernel.describe(ws[0]), moe_kernel.describe(ws[2])
            default = moe_kernel.default_config(ws[0], ws[2], rows, top_k)
            configs = [default]
            if launch_set == "wide":
                launches = _wide_moe_launches
            elif launch_set == "stages":
                launches = _stages_moe_launches
            elif launch_set == "balanced":
                launches = lambda k_, n_: [la for la in _balanced_launches(k_, n_) if la.splits <= 8]  # noqa: E731
            elif launch_set == "deep":
                launches = lambda k_, n_: [la for la in _deep_launches(k_, n_)  # noqa: E731
                                           if la.splits == 1 and la.block_n <= 64]
            elif launch_set == "default":
                launches = lambda k_, n_: []  # noqa: E731
            else:
                launches = lambda k_, n_: _moe_launches(k_, n_, fmt)  # noqa: E731
            g_l = launches(g_op.k, g_op.n) or [default.gate_up]  # (smoke shapes may fit none of a set)
            d_l = launches(d_op.k, d_op.n) or [default.down]
            for i in range(max(len(g_l), len(d_l))):  # each timed config pairs the i-th launch of each stage
                configs.append(moe_kernel.Config(g_l[i % len(g_l)], d_l[i % len(d_l)]))
            configs = list(dict.fromkeys(configs if gpu else configs[::7]))
            print(f"{case} {fmt}: {rows} rows on {top_k} experts, {copies} copies, {len(configs)} configs", flush=True)
            runs, found = [], {}
            for config in configs:
                if time.perf_counter() - t0 > budget_s:
                    break
                try:
                    fn = jax.jit(lambda a, w, ii, r, cfg=config: tuple(
                        moe_kernel.moe_decode(a, i, r, *w, config=cfg, interpret=not gpu) for i in ii))
                    got = fn(x, ws, ids, wts)[0]
                    found[config] = (rel_error(got, want), "")
                    runs.append((_stage_markers(config, fmt, rows), fn, (x, ws, ids, wts)))
                except Exception as ex:
                    found[config] = (None, f"{type(ex).__name__}: {str(ex).splitlines()[0][:80]}")
            per = calls * copies
            traced = dict(zip([r[0] for r in runs], timed_trace(runs, calls))) if gpu and runs else {}
            for config, (err, note) in found.items():
                us = {"moe_gate_up": None, "moe_down": None}
                times = traced.get(_stage_markers(config, fmt, rows))
                if times:
                    us = {st: sum(v for name, v in times.items() if st in name) / per for st in us}
                    us["moe_down"] += sum(v for name, v in times.items() if "moe_" not in name) / per  # final sum
                out.append(Row(case, fmt, "gate_up", config.gate_up.tag(), us["moe_gate_up"], mb["gate_up"], err,
                               config == default, note))
                out.append(Row(case, fmt, "down", config.down.tag(), us["moe_down"], mb["down"], err,
                               config == default, note))
                total = None if us["moe_down"] is None else us["moe_gate_up"] + us["moe_down"]
                out.append(Row(case, fmt, "both", f"{config.gate_up.tag()} / {config.down.tag()}", total,
                               mb["gate_up"] + mb["down"], err, config == default, note))
            del ws
    return out


def table(rows: list[Row], ceiling: float | None) -> list[str]:
    lines = ["| case | fmt | stage | launch | µs | MB | TB/s | of ceiling | rel err | note |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        tbs = r.mb / r.us if r.us else None
        frac = f"{tbs * 1e12 / ceiling:.0%}" if tbs and ceiling else "n/a"
        lines.append(f"| {r.case} | {r.fmt} | {r.stage} | {r.launch}{' (default)' if r.default else ''} | "
                     f"{'n/a' if r.us is None else f'{r.us:.1f}'} | {r.mb:.1f} | "
                     f"{'n/a' if tbs is None else f'{tbs:.2f}'} | {frac} | "
                     f"{'n/a' if r.rel_err is None else f'{r.rel_err:.1e}'} | {r.note} |")
    return lines


def summary(rows: list[Row], ceiling: float | None) -> list[str]:
    """Per (case, fmt, stage): the default launch and the fastest one."""
    groups: dict = {}
    for r in rows:
        groups.setdefault((r.case, r.fmt, r.stage), []).append(r)
    best = []
    for rs in groups.values():
        timed = [r for r in rs if r.us is not None and r.rel_err is not None and r.rel_err < 2e-2]
        if not timed:
            continue
        best += [r for r in timed if r.default][:1] + [min(timed, key=lambda r: r.us)]
    return table(best, ceiling)


def main(argv=None) -> list[Row]:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--smoke", action="store_true")
    p.add_argument("--rows", type=int, default=2)
    p.add_argument("--calls", type=int, default=3)
    p.add_argument("--budget-s", type=float, default=200.0, help="per section (MoE, dense)")
    p.add_argument("--only", choices=("dense", "moe", "all"), default="all")
    p.add_argument("--out")
    p.add_argument("--deep", action="store_true", help="the deep-unroll launch set instead of the basic one")
    p.add_argument("--wide", action="store_true", help="the wide-tile launch set (`_wide_launches`) instead")
    p.add_argument("--stages", action="store_true", help="MoE: 128-column tiles at 2-4 pipeline stages")
    p.add_argument("--balanced", action="store_true", help="fp8: K splits of any count (`_balanced_launches`)")
    p.add_argument("--cases", help="comma-separated case names to keep (default: all)")
    p.add_argument("--fmts", default="fp8,bf16", help="MoE weight formats")
    p.add_argument("--default-only", action="store_true", help="each case's default launch, nothing else")
    p.add_argument("--x-dtype", choices=("bfloat16", "float16"), default="bfloat16", help="every case's rows")
    args = p.parse_args(argv)
    launch_set = ("default" if args.default_only else "balanced" if args.balanced else "stages" if args.stages
                  else "wide" if args.wide else "deep" if args.deep else "basic")
    gpu = jax.default_backend() == "gpu" and not args.smoke
    gpu_state.spin(1.0 if gpu else 0)  # clocks up first: s9 sweeps read 3.83-3.90 TB/s, the engine runs 4.44
    ceiling = measure_read_ceiling(int(8.59e9)).bytes_per_s if gpu else None
    if ceiling:
        print(f"read ceiling {ceiling / 1e12:.3f} TB/s", flush=True)
    keep = (lambda d: {c: v for c, v in d.items() if c in args.cases.split(",")}) if args.cases else dict
    rows = []
    if args.only in ("moe", "all"):
        rows += sweep_moe(keep(SMOKE_MOE if args.smoke else MOE), tuple(args.fmts.split(",")), args.rows, gpu,
                          args.calls, args.budget_s, time.perf_counter(), launch_set, jnp.dtype(args.x_dtype))
    if args.only in ("dense", "all"):
        rows += sweep_dense(keep(SMOKE_DENSE if args.smoke else DENSE), args.rows, gpu, args.calls, args.budget_s,
                            time.perf_counter(), launch_set, jnp.dtype(args.x_dtype))
    full = table(rows, ceiling)
    head = f"read ceiling {ceiling / 1e12:.3f} TB/s" if ceiling else "no GPU: checked against ref.py, not timed"
    print("\n".join(["", head, "all launches:" if not gpu else "best per case:"]
                     + (full if not gpu else summary(rows, ceiling))), flush=True)
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        with open(f"{args.out}/launch_sweep.md", "w") as fh:
            fh.write("\n".join([head, ""] + full) + "\n")
    return rows


if __name__ == "__main__":
    main()
