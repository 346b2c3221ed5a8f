"""What a launch boundary costs against a grid-wide barrier inside one kernel, on two chained decode GEMVs.

Why: Nsight Compute (session 10, 2026-12-02-s10f-*) shows every decode kernel latency-bound (6-15% achieved
occupancy, warps waiting on memory): a qwen3-30b-a3b fp8 layer is ~16 launches of 2-13 µs, and a standalone
GEMV of 8-10 MB does not get much under ~5 µs. Fewer, longer kernels are what remains, which for a decode
layer means phases that depend on all of the previous phase's output: a grid-wide barrier between them. Pallas
on Triton has no grid sync, but with every program resident (one per SM) an atomic counter works: each program
stores its part, passes a CTA barrier, and one thread adds 1 with release semantics (Triton's atomics are
acq_rel at GPU scope); then every program spins until the count reaches the grid size, passes a CTA barrier
and reads the other programs' results with volatile loads (not cached in L1). A spin limit keeps a grid that
is not all resident from hanging the GPU (the probe then reports the limit was hit).

Cases, each a chain of `--chain` pairs y = (x . W1) . W2 with distinct weights per pair (reads from HBM):
- `split`: two pallas_calls a pair (phase 1, phase 2), the tiles and loops of `fused`;
- `fused`: one pallas_call a pair, the two phases around the barrier (polling with atomics, or with volatile
  loads and one atomic at the end); the chain threads one counter buffer, zeroed once per call of the chain;
- `xla`: XLA's own dots, for scale.
W1 [2048 -> 4096], W2 [4096 -> 2048] bf16 (16.8 MB each), x 2 rows (padded to 16 for the dots). Timed by wall
clock over the whole chain in one executable (one CUDA graph: the engine's launch cost, gaps included) and
by the device trace (kernel time only). Each output is checked against the float32 product.

    python3 -m benchmarks.grid_barrier_probe --out $OUT     # GPU
    python -m benchmarks.grid_barrier_probe --smoke         # CPU: the split variant interpreted; fused lowered
"""

from __future__ import annotations

import argparse
import functools
import time

import jax
import jax.numpy as jnp
from jax import lax
from jax.experimental import pallas as pl
from jax.experimental.pallas import triton as plgpu

from benchmarks.device_trace import trace_events
from benchmarks.launch_sweep import rel_error
from benchmarks.report import write_lines
from dgjax.pallas.launch import whole

ROWS, PAD = 2, 16
SPIN_LIMIT = 1 << 18  # ~0.1-0.3 s of spinning at most, then the program goes on (flagged, not timed)


def _phase(x_ref, w_ref, y_ref, p, cols: int, bk: int, volatile_x: bool):
    """y[:, p*cols:(p+1)*cols] = x . w[p*cols:(p+1)*cols, :].T (w is [N, K]), float32 accumulation.
    `volatile_x`: x was written by other programs of this launch (after the barrier): bypass L1."""
    n, k = w_ref.shape
    r = lax.broadcasted_iota(jnp.int32, (PAD, bk), 0)
    c = lax.broadcasted_iota(jnp.int32, (PAD, bk), 1)
    wr = p * cols + lax.broadcasted_iota(jnp.int32, (cols, bk), 0)
    wc = lax.broadcasted_iota(jnp.int32, (cols, bk), 1)

    def step(i, acc):
        x = plgpu.load(x_ref.at[jnp.minimum(r, ROWS - 1), i * bk + c], mask=r < ROWS, other=0,
                       volatile=volatile_x)
        w = plgpu.load(w_ref.at[wr, i * bk + wc])
        return acc + plgpu.dot(x, w, trans_b=True)

    acc = lax.fori_loop(0, k // bk, step, jnp.zeros((PAD, cols), jnp.float32))
    yr = lax.broadcasted_iota(jnp.int32, (PAD, cols), 0)
    yc = p * cols + lax.broadcasted_iota(jnp.int32, (PAD, cols), 1)
    # padding rows masked, not clamped (tiles.store_rows: the interpreter's masked store reads and writes back)
    plgpu.store(y_ref.at[yr, yc], acc.astype(y_ref.dtype), mask=yr < ROWS)


def _row_tiles(w_ref, p, cols: int, bk: int, count: int | None = None, **load_kw) -> list:
    """The first `count` (default: all) [cols, bk] tiles of this program's rows of w, every load issued before
    any is used."""
    count = w_ref.shape[1] // bk if count is None else min(count, w_ref.shape[1] // bk)
    wr = p * cols + lax.broadcasted_iota(jnp.int32, (cols, bk), 0)
    wc = lax.broadcasted_iota(jnp.int32, (cols, bk), 1)
    return [plgpu.load(w_ref.at[wr, i * bk + wc], **load_kw) for i in range(count)]


def _prefetch(w_ref, sink_ref, p, cols: int, bk: int, tiles: int):
    """Read the first `tiles` tiles of this program's rows of the next phase's w, so they sit in L2 when that
    phase starts; their sum goes to sink[p] (kept live)."""
    loaded = _row_tiles(w_ref, p, cols, bk, tiles, eviction_policy="evict_last")
    total = sum(jnp.sum(t.astype(jnp.float32)) for t in loaded)
    plgpu.store(sink_ref.at[jnp.zeros((1,), jnp.int32) + p], jnp.zeros((1,), jnp.float32) + total)


def _grid_barrier(sync_ref, slot: int, programs: int, poll: str):
    """Every program's stores before it are visible to every program after it (see the module doc).
    sync_ref[slot]: int32 [2], zeros on entry: the arrival count, and 1 once a program gave up spinning.
    poll "atomic": spin on atomic reads (each an acq_rel read-modify-write at L2, all programs on one word);
    "volatile": spin on volatile loads, then one atomic read for its acquire ordering."""
    plgpu.debug_barrier()
    plgpu.atomic_add(sync_ref, (slot, 0), 1)

    def waiting(carry):
        seen, spins = carry
        return (seen < programs) & (spins < SPIN_LIMIT)

    def spin(carry):
        _, spins = carry
        seen = (plgpu.atomic_add(sync_ref, (slot, 0), 0) if poll == "atomic"
                else plgpu.load(sync_ref.at[slot, 0], volatile=True))
        return seen, spins + 1

    seen, _ = lax.while_loop(waiting, spin, (jnp.int32(0), jnp.int32(0)))
    if poll == "volatile":
        seen = jnp.minimum(seen, plgpu.atomic_add(sync_ref, (slot, 0), 0))  # acquire after the cheap polls
    plgpu.atomic_max(sync_ref, (slot, 1), jnp.clip(programs - seen, 0, 1))  # 1: the limit was hit
    plgpu.debug_barrier()


def _held_phase(x_ref, tiles: list, y_ref, p, cols: int, bk: int):
    """y[:, p*cols:(p+1)*cols] from weight tiles already in registers; x (written by other programs of this
    launch) read past L1. CUDA-core multiply-adds: at 256 programs the tiles have 8 columns, too few for a dot."""
    r = lax.broadcasted_iota(jnp.int32, (ROWS, bk), 0)
    c = lax.broadcasted_iota(jnp.int32, (ROWS, bk), 1)
    acc = jnp.zeros((ROWS, cols), jnp.float32)
    for i, w in enumerate(tiles):
        x = plgpu.load(x_ref.at[r, i * bk + c], volatile=True).astype(jnp.float32)
        acc += jnp.sum(x[:, None, :] * w.astype(jnp.float32)[None, :, :], axis=2)
    yr = lax.broadcasted_iota(jnp.int32, (ROWS, cols), 0)
    yc = p * cols + lax.broadcasted_iota(jnp.int32, (ROWS, cols), 1)
    plgpu.store(y_ref.at[yr, yc], acc.astype(y_ref.dtype))


def _fused_kernel(x_ref, w1_ref, w2_ref, _sync_in, y1_ref, y2_ref, sync_ref, *sink, programs: int, bk: int,
                  poll: str, slot: int, prefetch: int = 0, hold: bool = False):
    """`hold`: the program's whole slice of w2 is loaded before phase 1 and kept in registers across the
    barrier (the megakernel premise: weights depend on nothing, so only the activations wait)."""
    p = pl.program_id(0)
    cols2 = w2_ref.shape[0] // programs
    held = _row_tiles(w2_ref, p, cols2, bk) if hold else None  # registers, used after the barrier
    _phase(x_ref, w1_ref, y1_ref, p, w1_ref.shape[0] // programs, bk, volatile_x=False)
    if prefetch:
        _prefetch(w2_ref, sink[0], p, cols2, bk, prefetch)
    _grid_barrier(sync_ref, slot, programs, poll)
    if hold:
        _held_phase(y1_ref, held, y2_ref, p, cols2, bk)
    else:
        _phase(y1_ref, w2_ref, y2_ref, p, cols2, bk, volatile_x=True)


def _phase_kernel(x_ref, w_ref, *refs, programs: int, bk: int, prefetch: int = 0):
    """One phase; with `prefetch` (refs: next w, y, sink) then the first tiles of the next phase's rows."""
    y_ref = refs[1] if prefetch else refs[0]
    _phase(x_ref, w_ref, y_ref, pl.program_id(0), w_ref.shape[0] // programs, bk, volatile_x=False)
    if prefetch:
        _prefetch(refs[0], refs[2], pl.program_id(0), refs[0].shape[0] // programs, bk, prefetch)


def _params(warps):
    return plgpu.CompilerParams(num_warps=warps, num_stages=3)


def split_pair(x, w1, w2, *, programs: int, bk: int = 128, warps: int = 4, prefetch: int = 0,
               interpret: bool = False):
    """(x . w1.T) . w2.T as two launches (w: [N, K] bf16). `prefetch`: the first launch's programs end by
    reading that many [cols, bk] tiles of w2 each (the rows the second launch's program of that id reads)."""
    def phase(a, w, name, nxt=None):
        out = jax.ShapeDtypeStruct((ROWS, w.shape[0]), a.dtype)
        args, in_specs, out_shape = [a, w], [whole(a.shape), whole(w.shape)], [out]
        if nxt is not None:
            args.append(nxt)
            in_specs.append(whole(nxt.shape))
            out_shape.append(jax.ShapeDtypeStruct((programs,), jnp.float32))
        outs = pl.pallas_call(
            functools.partial(_phase_kernel, programs=programs, bk=bk, prefetch=prefetch if nxt is not None else 0),
            grid=(programs,), in_specs=in_specs, out_specs=[whole(o.shape) for o in out_shape],
            out_shape=out_shape, compiler_params=_params(warps), interpret=interpret, name=name)(*args)
        return outs[0]
    y1 = phase(x, w1, "barrier_probe_phase1", w2 if prefetch else None)
    return phase(y1, w2, "barrier_probe_phase2")


def fused_pair(x, w1, w2, sync=None, slot: int = 0, *, programs: int, bk: int = 128, warps: int = 4,
               poll: str = "atomic", prefetch: int = 0, hold: bool = False):
    """The same two phases in one launch around a grid barrier; returns (y2, sync). GPU only: programs run
    concurrently and must all be resident (programs <= SMs).
    sync: int32 [n, 2] zeros (row `slot` is this call's: arrival count, spin limit hit), aliased in and out so a
    chain of calls threads one buffer zeroed once; without it, a fresh [1, 2] (a memset of its own)."""
    sync = jnp.zeros((1, 2), jnp.int32) if sync is None else sync
    out_shape = [jax.ShapeDtypeStruct((ROWS, w1.shape[0]), x.dtype), jax.ShapeDtypeStruct((ROWS, w2.shape[0]), x.dtype),
                 jax.ShapeDtypeStruct(sync.shape, jnp.int32)]
    out_shape += [jax.ShapeDtypeStruct((programs,), jnp.float32)] if prefetch else []
    outs = pl.pallas_call(
        functools.partial(_fused_kernel, programs=programs, bk=bk, poll=poll, slot=slot, prefetch=prefetch,
                          hold=hold),
        grid=(programs,), in_specs=[whole(x.shape), whole(w1.shape), whole(w2.shape), whole(sync.shape)],
        out_specs=[whole(o.shape) for o in out_shape], out_shape=out_shape,
        input_output_aliases={3: 2}, compiler_params=_params(warps), name="barrier_probe_fused")(x, w1, w2, sync)
    return outs[1], outs[2]


def chain(pair, x, w1s, w2s, barrier: bool = False):
    """Pairs one after another; a barrier pair gets its own row of one sync buffer. Returns (x, whether any
    barrier hit its spin limit, or None)."""
    sync = jnp.zeros((len(w1s), 2), jnp.int32) if barrier else None
    for i, (w1, w2) in enumerate(zip(w1s, w2s)):
        x, sync = pair(x, w1, w2, sync, i) if barrier else (pair(x, w1, w2), None)
    return x, (None if sync is None else jnp.max(sync[:, 1]))


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--chain", type=int, default=16, help="pairs per timed executable (distinct weights)")
    p.add_argument("--programs", type=int, default=128, help="grid size (<= SMs for the fused kernel)")
    p.add_argument("--reps", type=int, default=20)
    p.add_argument("--hold", action="store_true",
                   help="also the case holding each program's w2 slice in registers across the barrier "
                        "(with 256 programs: 8 rows, 64 KB a program)")
    p.add_argument("--hold-warps", type=int, default=8)
    p.add_argument("--prefetch", type=lambda v: [int(t) for t in v.split(",") if t], default=[8, 16],
                   help="cases that read the first N [cols, 128] tiles of the next phase's rows before it starts")
    p.add_argument("--smoke", action="store_true")
    p.add_argument("--out")
    a = p.parse_args(argv)
    gpu = jax.default_backend() == "gpu" and not a.smoke
    k1, n1 = (2048, 4096) if not a.smoke else (256, 512)
    chain_len, programs = (a.chain, a.programs) if gpu else (2, 8)
    key = jax.random.key(0)
    make = jax.jit(lambda k, s: (0.03 * jax.random.normal(k, s, jnp.float32)).astype(jnp.bfloat16),
                   static_argnums=1)
    w1s = [make(jax.random.fold_in(key, 2 * i), (n1, k1)) for i in range(chain_len)]
    w2s = [make(jax.random.fold_in(key, 2 * i + 1), (k1, n1)) for i in range(chain_len)]
    x = make(jax.random.fold_in(key, 999), (ROWS, k1))
    want = x.astype(jnp.float32)
    for w1, w2 in zip(w1s, w2s):
        want = ((want @ w1.astype(jnp.float32).T).astype(jnp.bfloat16).astype(jnp.float32)
                @ w2.astype(jnp.float32).T).astype(jnp.bfloat16).astype(jnp.float32)
    cases = {"split": functools.partial(split_pair, programs=programs, interpret=not gpu),
             "xla": lambda x_, w1, w2: (x_ @ w1.T) @ w2.T}
    for t in a.prefetch:
        cases[f"split, prefetch {t} tiles"] = functools.partial(split_pair, programs=programs, prefetch=t,
                                                                interpret=not gpu)
    if gpu:
        cases["fused"] = functools.partial(fused_pair, programs=programs)
        cases["fused, volatile polls"] = functools.partial(fused_pair, programs=programs, poll="volatile")
        for t in a.prefetch:
            cases[f"fused, prefetch {t} tiles"] = functools.partial(fused_pair, programs=programs, prefetch=t)
        if a.hold:
            cases["fused, w2 held in registers"] = functools.partial(fused_pair, programs=programs, hold=True,
                                                                     warps=a.hold_warps)
    lines = [f"{chain_len} chained pairs of [{ROWS}, {k1}] . [{k1} -> {n1}] . [{n1} -> {k1}] bf16, "
             f"{programs} programs, {2 * n1 * k1 * 2 * chain_len / 1e6:.0f} MB of weights a call",
             "", "| case | wall µs a pair | kernel µs a pair (trace) | rel. error | spin limit hit |",
             "| --- | --- | --- | --- | --- |"]
    for name, pair in cases.items():
        fn = jax.jit(lambda x_, a1, a2, pair=pair, b=name.startswith("fused"): chain(pair, x_, a1, a2, b))
        out, flag = jax.block_until_ready(fn(x, w1s, w2s))
        hit = flag is not None and int(flag) > 0
        err = rel_error(out, want)
        wall = trace = float("nan")
        if gpu and not hit:  # a hit means the grid was not all resident: its times would be the spin limit's
            t0 = time.perf_counter()
            for _ in range(a.reps):
                res = fn(x, w1s, w2s)
            jax.block_until_ready(res)
            wall = (time.perf_counter() - t0) / a.reps / chain_len * 1e6

            def run():
                jax.block_until_ready(fn(x, w1s, w2s))
            trace = sum(e["dur"] for e in trace_events(run)) / chain_len
        lines.append(f"| {name} | {wall:.1f} | {trace:.1f} | {err:.1e} | {hit} |")
        print(lines[-1], flush=True)
    if not gpu:  # the fused kernel needs concurrent programs: on the CPU only its Triton modules are checked
        spec = jax.ShapeDtypeStruct
        for poll, pf, hold in (("atomic", 0, False), ("volatile", 0, False), ("atomic", 8, False),
                               ("atomic", 0, True)):
            jax.jit(lambda a, b, c, poll=poll, pf=pf, hold=hold: fused_pair(
                a, b, c, programs=programs, poll=poll, prefetch=pf, hold=hold)).trace(
                spec((ROWS, k1), jnp.bfloat16), spec((n1, k1), jnp.bfloat16), spec((k1, n1), jnp.bfloat16),
            ).lower(lowering_platforms=("cuda",))
        lines.append("fused: lowered for CUDA (not run)")
        print(lines[-1])
    write_lines(a.out, "grid_barrier_probe.md", lines)
    return lines


if __name__ == "__main__":
    main()
