"""One engine-shaped call of each decode kernel, for Nsight Compute (ncu) and for a trace-timed A/B.

Why: the trace gives a kernel's duration but not why it takes that long. qwen3-30b-a3b fp8's tiles run at
30-50% of the read ceiling and its attention takes ~7 µs a layer for ~1 MB of keys (session 9); hardware
counters (DRAM throughput, occupancy, registers, warp stall reasons) say whether a kernel waits on memory
latency, on its own serial chain or on too few warps. The lent H200 (Firecracker) runs ncu with
`--clock-control none` (the device notes). Each case is one jitted kernel at the engine's width for one
stream (2 rows, the second a padding row), with the engine's default launch:
- qwen3 q/k/v and o fp8 GEMVs (q/k/v kept as split partials, as the engine hands them to the attention);
- qwen3 fp8 experts, both stages (8 experts, both rows on them);
- the fused decode attention at 1056 keys of a 2064-token table: qwen3 (split partials in, q/k norm) and
  llama (bf16 q/k/v), each also with `skip_idle`;
- XLA's bf16 dot at llama's o shape, the reference of a GEMV near the ceiling.
The trace timings read one copy of each case's weights, which stay in the 50 MB L2 between calls: they are
L2-warm times, for A/B of one kernel's variants only (launch_sweep times HBM reads). ncu flushes the caches
before each profiled kernel. Run ncu with a small jax memory pool (XLA_PYTHON_CLIENT_MEM_FRACTION=0.06, 8 GB): ncu
saves and restores the whole pool for every replay pass, ~100 GB by default (s10d: two kernels in 170 s);
with the pool off (XLA_PYTHON_CLIENT_PREALLOCATE=false) the process crashed at its first compile (s10e).

    python3 -m benchmarks.ncu_probe --out $OUT               # trace-timed table (µs per call)
    ncu --clock-control none ... python3 -m benchmarks.ncu_probe --calls 3 --no-trace
    ncu --import probe.ncu-rep --csv --page raw > raw.csv && python3 -m benchmarks.ncu_probe --ncu-csv raw.csv
    python -m benchmarks.ncu_probe --smoke                   # CPU: tiny shapes, interpreted, one call each
"""

from __future__ import annotations

import argparse
import csv
import functools
import re
import time

import jax
import jax.numpy as jnp
import numpy as np

from benchmarks.launch_sweep import fp8_node, rel_error, timed_trace, moe_case, moe_weights
from benchmarks.report import write_lines
from dgjax.pallas.fused_decode_attention import kernel as attn_kernel
from dgjax.pallas.fused_decode_attention import ref as attn_ref
from dgjax.pallas.moe_decode import kernel as moe_kernel
from dgjax.pallas.moe_decode import ref as moe_ref
from dgjax.pallas.paged_attention import api as paged
from dgjax.pallas.quant_gemv import kernel as gemv_kernel
from dgjax.pallas.quant_gemv import ref as gemv_ref
from dgjax.pallas.split_sums import SplitSums

ROWS = 2


def _gemv_case(name, k, n, gpu, keep_splits=False):
    key = jax.random.key(k + n)
    node = fp8_node(0.05 * jax.random.normal(key, (k, n), jnp.float32), 0)
    x = jax.random.normal(jax.random.fold_in(key, 1), (ROWS, k), jnp.float32).astype(jnp.bfloat16)
    fn = jax.jit(lambda a, w: gemv_kernel.quant_gemv(a, w, keep_splits=keep_splits, interpret=not gpu))
    check = lambda out: rel_error(out.value() if keep_splits else out, gemv_ref.quant_gemv(x, node))  # noqa: E731
    return name, fn, (x, node), check


def _moe_case(name, gpu, e, h, f, top_k):
    """launch_sweep's expert case (both rows on experts 0..top_k-1), fp8 blocks, the default launch."""
    dense, _, ids, wts, x = moe_case(name, e, h, f, top_k, ROWS, gpu)
    ws, ids = moe_weights(dense, "fp8"), ids[0]
    fn = jax.jit(lambda a, i, r, w: moe_kernel.moe_decode(a, i, r, *w, interpret=not gpu))
    check = lambda out: rel_error(out, moe_ref.moe_decode(x, ids, wts, *ws))  # noqa: E731
    return name, fn, (x, ids, wts, ws), check


def _attention_case(name, gpu, kvh, g, d, parts, qk_norm, context, table_tokens, page=16, skip_idle=False,
                    rot=None):
    """One decoding row of `context` keys plus a padding row; q/k/v as `parts` float32 split partials (0:
    plain bf16 rows)."""
    rng = np.random.default_rng(kvh * 100 + g)
    width = table_tokens // page
    pages = 2 * width + 1
    k_pages = jnp.asarray(rng.standard_normal((pages, page, kvh, d)), jnp.bfloat16)
    v_pages = jnp.asarray(rng.standard_normal((pages, page, kvh, d)), jnp.bfloat16)
    tables = jnp.asarray((1 + rng.permutation(pages - 1)[: ROWS * width]).reshape(ROWS, width), jnp.int32)
    ctx = jnp.asarray([context, 0], jnp.int32)
    qlen = (ctx > 0).astype(jnp.int32)
    pos = jnp.maximum(ctx - 1, 0)[:, None]
    slots = paged.kv_slots(pos, qlen, tables, page)
    rot = rot or d  # rotary dims (glm: half the head)
    angles = pos.astype(jnp.float32) * (1.0 / 10000 ** (jnp.arange(0, rot, 2) / rot))[None, :]
    cos, sin = jnp.cos(jnp.concatenate([angles] * 2, -1)), jnp.sin(jnp.concatenate([angles] * 2, -1))
    shape = (ROWS, kvh, g + 2, d)
    if parts:
        qkv = SplitSums(jnp.asarray(rng.standard_normal((parts, *shape)) / parts, jnp.float32), jnp.bfloat16)
    else:
        qkv = jnp.asarray(rng.standard_normal(shape), jnp.bfloat16)
    norms = [jnp.asarray(1 + 0.1 * rng.standard_normal(d), jnp.bfloat16) for _ in range(2)] if qk_norm else [None] * 2
    start, end = paged.decode_window(ctx, pos, qlen, table_tokens, None)
    fn = jax.jit(lambda q, kp, vp: attn_kernel.fused_decode_attention(
        q, cos, sin, kp, vp, tables, start, end, slots[:, 0], *norms, scale=d**-0.5, skip_idle=skip_idle,
        interpret=not gpu))
    value = qkv.value() if parts else qkv

    def check(out):
        want = attn_ref.fused_decode_attention(value, cos, sin, k_pages, v_pages, tables, ctx, pos, qlen, slots,
                                               scale=d**-0.5, eps=1e-6, q_norm=norms[0], k_norm=norms[1])[0]
        return rel_error(out[0][:1], want[:1])
    return f"{name}{' (idle splits skip)' if skip_idle else ''}", fn, (qkv, k_pages, v_pages), check


def _xla_case(k, n):
    key = jax.random.key(k)
    w = (0.05 * jax.random.normal(key, (k, n), jnp.float32)).astype(jnp.bfloat16)
    x = jax.random.normal(jax.random.fold_in(key, 1), (ROWS, k), jnp.float32).astype(jnp.bfloat16)
    fn = jax.jit(lambda a, b: a @ b)
    want = x.astype(jnp.float32) @ w.astype(jnp.float32)
    return f"xla bf16 dot {k}x{n}", fn, (x, w), lambda out: rel_error(out, want)


def cases(gpu: bool, smoke: bool, preset: str = "qwen3", keep: str | None = None):
    """The preset's cases as built (name, fn, args, check); `keep` (comma-separated): only cases whose name
    contains one of them, the others not even built (their weights would crowd ncu's small pool)."""
    P = functools.partial
    if smoke:  # tiny shapes that keep every kernel's structure
        todo = [P(_gemv_case, "smoke qkv", 256, 640, gpu, keep_splits=True), P(_gemv_case, "smoke o", 512, 256, gpu),
                P(_attention_case, "smoke attention", gpu, 2, 4, 64, 2, True, 40, 96),
                P(_attention_case, "smoke attention", gpu, 2, 4, 64, 2, True, 40, 96, skip_idle=True),
                P(_attention_case, "smoke partial rotary", gpu, 2, 4, 64, 2, False, 40, 96, rot=32)]
    elif preset == "glm":  # glm-4.5-air fp8: q/k/v split in 4 (kept as partials), experts 4096 -> 1408, rope on half
        todo = [P(_gemv_case, "glm qkv", 4096, 14336, gpu, keep_splits=True), P(_gemv_case, "glm o", 12288, 4096, gpu),
                P(_gemv_case, "glm shared gate_up", 4096, 2816, gpu), P(_gemv_case, "glm shared down", 1408, 4096, gpu),
                # 16 experts, not 128: the kernel reads only the 8 routed ones, and 128 float32 masters would not
                # fit the 8 GB pool the ncu run keeps (campaign_s10f.sh)
                P(_moe_case, "glm experts", gpu, 16, 4096, 1408, 8),
                P(_attention_case, "glm attention", gpu, 8, 12, 128, 4, False, 1056, 2064, rot=64)]
    elif preset == "long":  # the decode attention alone at 1K / 8K / 32K keys (one stream's bucket, engine tables)
        todo = [P(_attention_case, f"llama attention {keys}", gpu, 8, 4, 128, 0, False, keys, table)
                for keys, table in ((1056, 2064), (8288, 8416), (32800, 33024))]
        todo.append(P(_attention_case, "qwen3 attention 8288", gpu, 4, 8, 128, 16, True, 8288, 8416))
    else:
        todo = [P(_gemv_case, "qwen3 qkv", 2048, 5120, gpu, keep_splits=True), P(_gemv_case, "qwen3 o", 4096, 2048, gpu),
                P(_moe_case, "qwen3 experts", gpu, 128, 2048, 768, 8)]
        for skip in (False, True):
            todo.append(P(_attention_case, "qwen3 attention", gpu, 4, 8, 128, 16, True, 1056, 2064, skip_idle=skip))
            todo.append(P(_attention_case, "llama attention", gpu, 8, 4, 128, 0, False, 1056, 2064, skip_idle=skip))
        if gpu:
            todo.append(P(_xla_case, 4096, 4096))
    wanted = [w.strip() for w in keep.split(",") if w.strip()] if keep else []
    return [build() for build in todo if not wanted or any(w in _case_name(build) for w in wanted)]


def _case_name(build) -> str:
    """A case's name before it is built (the attention cases add their idle-split suffix)."""
    if build.func is _xla_case:
        return "xla bf16 dot {}x{}".format(*build.args)
    name = build.args[0]
    return f"{name} (idle splits skip)" if build.keywords.get("skip_idle") else name


NCU_COLUMNS = {  # raw metric -> short heading
    "gpu__time_duration.sum": "µs",
    "dram__bytes_read.sum": "DRAM MB read",
    "dram__throughput.avg.pct_of_peak_sustained_elapsed": "DRAM % of peak",
    "lts__t_bytes.sum": "L2 MB",
    "sm__warps_active.avg.pct_of_peak_sustained_active": "achieved occupancy %",
    "launch__grid_size": "grid",
    "launch__block_size": "block",
    "launch__registers_per_thread": "regs",
    "launch__occupancy_limit_registers": "blocks/SM (regs)",
    "launch__occupancy_limit_shared_mem": "blocks/SM (smem)",
    "smsp__average_warp_latency_per_inst_issued.ratio": "cycles per issue",
}
_STALL = re.compile(r"smsp__average_warps_issue_stalled_(\w+?)_per_issue_active\.ratio$")
_SCALE = {"ns": 1e-3, "usecond": 1.0, "us": 1.0, "msecond": 1e3, "ms": 1e3, "nsecond": 1e-3,
          "byte": 1e-6, "Kbyte": 1e-3, "Mbyte": 1.0, "Gbyte": 1e3, "KB": 1e-3, "MB": 1.0, "GB": 1e3}


def ncu_table(path: str) -> list[str]:
    """One markdown row per profiled kernel from `ncu --csv --page raw` (row 1 names, row 2 units): time,
    DRAM bytes and throughput, occupancy, launch shape and the three largest warp stall reasons (warps
    stalled per issued instruction: where a warp's time goes)."""
    with open(path, newline="") as f:
        rows = [r for r in csv.reader(f) if r]
    start = next((i for i, r in enumerate(rows) if "Kernel Name" in r), None)
    if start is None:
        raise SystemExit(f"{path}: no kernel rows (did ncu profile anything? see its log)")
    names, units, data = rows[start], rows[start + 1], rows[start + 2:]
    col = {n: i for i, n in enumerate(names)}
    present = [m for m in NCU_COLUMNS if m in col]
    out = ["| kernel | " + " | ".join(NCU_COLUMNS[m] for m in present) + " | top stalls (warps per issue) |",
           "| --- |" + " --- |" * (len(present) + 1)]
    for r in data:
        cells = []
        for m in present:
            v, unit = r[col[m]].replace(",", ""), units[col[m]]
            try:
                x = float(v) * _SCALE.get(unit, 1.0)
                cells.append(f"{x:.4g}")
            except ValueError:
                cells.append(v)
        stalls = []
        for n, i in col.items():
            hit = _STALL.search(n)
            if hit:
                try:
                    stalls.append((float(r[i].replace(",", "")), hit.group(1)))
                except ValueError:
                    pass
        top = ", ".join(f"{k} {v:.2f}" for v, k in sorted(stalls, reverse=True)[:3])
        out.append(f"| `{r[col['Kernel Name']]}` | " + " | ".join(cells) + f" | {top} |")
    return out


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--calls", type=int, default=50, help="calls of each case (timed: the trace's mean)")
    p.add_argument("--no-trace", action="store_true", help="just call (for ncu, which times kernels itself)")
    p.add_argument("--smoke", action="store_true", help="tiny shapes (CPU: interpreted, not timed)")
    p.add_argument("--preset", choices=("qwen3", "glm", "long"), default="qwen3",
                   help="qwen3: qwen3-30b-a3b fp8 kernels and llama's attention; glm: glm-4.5-air fp8; long: "
                   "the decode attention at 1K-32K keys")
    p.add_argument("--out", default=None)
    p.add_argument("--ncu-csv", default=None, help="summarize an `ncu --csv --page raw` export instead")
    p.add_argument("--cases", default=None, help="comma-separated parts of case names to keep (default: all)")
    a = p.parse_args(argv)
    if a.ncu_csv:
        lines = ncu_table(a.ncu_csv)
        print("\n".join(lines))
        return lines
    gpu = jax.default_backend() == "gpu"
    t0 = time.perf_counter()
    runs = cases(gpu, a.smoke, a.preset, a.cases)
    lines = ["| case | kernels (µs per call, trace mean) | rel. error vs ref.py |", "| --- | --- | --- |"]
    for name, fn, args, check in runs:
        err = check(fn(*args))
        us = ""
        if gpu and not a.no_trace:
            jax.block_until_ready(fn(*args))
            t = timed_trace([((), fn, args)], a.calls)[0]
            us = ", ".join(f"`{k}` {v / a.calls:.2f}" for k, v in sorted(t.items(), key=lambda kv: -kv[1]))
        elif gpu:  # (the check above was the first call)
            jax.block_until_ready([fn(*args) for _ in range(a.calls)])
        lines.append(f"| {name} | {us or 'not timed'} | {err:.1e} |")
        print(lines[-1], flush=True)
    print(f"{len(runs)} cases in {time.perf_counter() - t0:.1f} s")
    write_lines(a.out, "ncu_probe.md", lines)
    return lines


if __name__ == "__main__":
    main()
