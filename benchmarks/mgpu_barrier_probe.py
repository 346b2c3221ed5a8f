"""What a grid-wide barrier costs inside one Pallas Mosaic-GPU kernel, against a kernel boundary in a CUDA graph.

Why: the decode targets need far fewer kernels a layer (session 24's limits model: ~1 µs a dependent kernel
boundary at best, ~13-18 kernels a layer). Session 11 found a Pallas-Triton atomic grid barrier costs what a
launch does (benchmarks/grid_barrier_probe.py), and Triton's GEMVs stream ~1 TB/s below XLA's; Mosaic-GPU GEMVs
tie XLA (session 27), and Mosaic GPU has global semaphores (`pl.get_global(plgpu.SemaphoreType.REGULAR)`), so a
persistent multi-phase kernel there hinges on what its barrier costs. This probe measures only that:
- `barrier`: one kernel, grid (P,) (one block an SM), ROUNDS rounds; in round r every block adds 1 to a global
  semaphore and waits until it reads (r + 1) * P (no decrement), then the next round;
- `launches`: ROUNDS chained one-block-an-SM kernels, each reading the previous one's [P, 128] output;
- `barrier_spread`: as `barrier`, with each block's round also copying a 64 KB tile through shared memory (TMA in,
  TMA out), so the barrier waits on blocks that did some work.
Device trace, µs a round (kernel durations over rounds, and the wall span of the calls); each output is checked.
Timed on a donated x fed back, so every call's buffers stay put and XLA replays the CUDA graph it recorded: with
moving outputs it re-records the graph on every call (s28k's first runs: ~8.6 µs a Mosaic-GPU command).

    python3 -m benchmarks.mgpu_barrier_probe --out $OUT      # GPU
    python -m benchmarks.mgpu_barrier_probe --smoke          # CPU: each case lowered for CUDA, nothing run
"""

from __future__ import annotations

import argparse

import jax
import jax.numpy as jnp
from jax import lax
from jax.experimental import pallas as pl

from benchmarks.device_trace import trace_events
from benchmarks.report import write_lines

COLS = 128
TILE_ROWS = 256  # the spread case's tile: 256 x 128 bf16 = 64 KB a block a round


def _plgpu():
    from jax.experimental.pallas import mosaic_gpu as plgpu
    return plgpu


def barrier_kernel(blocks: int, rounds: int, spread: bool):
    """x [blocks, COLS] f32 (and, spread, w [blocks * TILE_ROWS, COLS] bf16) -> (x + rounds, w copy)."""
    plgpu = _plgpu()

    def body(x_ref, w_ref, o_ref, wo_ref, x_smem, w_smem, bars):
        i = lax.axis_index("b")
        sem = pl.get_global(plgpu.SemaphoreType.REGULAR)
        plgpu.copy_gmem_to_smem(x_ref.at[pl.ds(i, 1)], x_smem, bars.at[0])
        plgpu.barrier_wait(bars.at[0])

        def one_round(r, carry):
            if spread:
                plgpu.copy_gmem_to_smem(w_ref.at[pl.ds(i * TILE_ROWS, TILE_ROWS)], w_smem, bars.at[1])
                plgpu.barrier_wait(bars.at[1])
                plgpu.commit_smem()
                plgpu.copy_smem_to_gmem(w_smem, wo_ref.at[pl.ds(i * TILE_ROWS, TILE_ROWS)])
                plgpu.wait_smem_to_gmem(0)
            pl.semaphore_signal(sem, 1)
            plgpu.semaphore_wait(sem, (r + 1) * blocks, decrement=False, memory_scope="gpu")
            return carry

        lax.fori_loop(0, rounds, one_round, 0)
        x_smem[...] = x_smem[...] + float(rounds)
        plgpu.commit_smem()
        plgpu.copy_smem_to_gmem(x_smem, o_ref.at[pl.ds(i, 1)])
        plgpu.wait_smem_to_gmem(0)

    def call(x, w):
        return plgpu.kernel(
            body, grid=(blocks,), grid_names=("b",),
            out_type=(jax.ShapeDtypeStruct(x.shape, x.dtype), jax.ShapeDtypeStruct(w.shape, w.dtype)),
            scratch_types=[plgpu.SMEM((1, COLS), jnp.float32), plgpu.SMEM((TILE_ROWS, COLS), jnp.bfloat16),
                           plgpu.Barrier(num_arrivals=1, num_barriers=2)],
        )(x, w)

    return call


def step_kernel(blocks: int):
    """One launch of the chain: x [blocks, COLS] -> x + 1 (each block its row)."""
    plgpu = _plgpu()

    def body(x_ref, o_ref, x_smem, bars):
        i = lax.axis_index("b")
        plgpu.copy_gmem_to_smem(x_ref.at[pl.ds(i, 1)], x_smem, bars.at[0])
        plgpu.barrier_wait(bars.at[0])
        x_smem[...] = x_smem[...] + 1.0
        plgpu.commit_smem()
        plgpu.copy_smem_to_gmem(x_smem, o_ref.at[pl.ds(i, 1)])
        plgpu.wait_smem_to_gmem(0)

    def call(x):
        return plgpu.kernel(
            body, grid=(blocks,), grid_names=("b",), out_type=jax.ShapeDtypeStruct(x.shape, x.dtype),
            scratch_types=[plgpu.SMEM((1, COLS), jnp.float32), plgpu.Barrier(num_arrivals=1, num_barriers=1)],
        )(x)

    return call


def cases(blocks: int, rounds: int):
    """name -> fn(x, w) -> (x + rounds, w or None), jitted."""
    step = step_kernel(blocks)

    def launches(x, w):
        for _ in range(rounds):
            x = step(x)
        return x, None

    plain = barrier_kernel(blocks, rounds, spread=False)
    return {
        "barrier": jax.jit(lambda x, w: (plain(x, w)[0], None)),  # its w output is never written
        "barrier_spread": jax.jit(barrier_kernel(blocks, rounds, spread=True)),
        "launches": jax.jit(launches),
    }


def smoke(blocks: int = 4, rounds: int = 3) -> list[str]:
    """Each case lowered for CUDA without a GPU: (case, custom call target)."""
    x = jax.ShapeDtypeStruct((blocks, COLS), jnp.float32)
    w = jax.ShapeDtypeStruct((blocks * TILE_ROWS, COLS), jnp.bfloat16)
    lines = []
    for name, fn in cases(blocks, rounds).items():
        text = fn.trace(x, w).lower(lowering_platforms=("cuda",)).as_text()
        lines.append(f"{name}: {'mosaic_gpu' if 'mosaic_gpu' in text else '?'}, {text.count('custom_call')} custom calls")
    print("\n".join(lines))
    return lines


def measure(name: str, fn, x, w, rounds: int, calls: int) -> dict:
    got, w_out = fn(x, w)
    err = float(jnp.max(jnp.abs(got - (x + rounds))))
    if w_out is not None:
        err = max(err, float(jnp.max(jnp.abs(w_out.astype(jnp.float32) - w.astype(jnp.float32)))))
    # Timed on a donated x fed back: every call's buffers stay where the last call's were, so XLA's CUDA graph is
    # replayed, not re-recorded (a chain whose outputs move re-records its graph every call, ~8.6 µs a Mosaic-GPU
    # command on the H200, s28k).
    timed = jax.jit(lambda a, b: fn(a, b)[0], donate_argnums=0)
    state = {"x": jnp.array(x)}

    def run():
        for _ in range(calls):
            state["x"] = timed(state["x"], w)
        jax.block_until_ready(state["x"])

    for _ in range(3):
        run()
    events = trace_events(run)
    kernels = [e for e in events if "mosaic" in e["name"] or "body" in e["name"] or "kernel" in e["name"]]
    others = sorted({e["name"] for e in events} - {e["name"] for e in kernels})
    total = sum(e["dur"] for e in kernels) / calls
    by_call = sorted(kernels, key=lambda e: e["ts"])
    span = (by_call[-1]["ts"] + by_call[-1]["dur"] - by_call[0]["ts"]) / calls if by_call else float("nan")
    return dict(case=name, err=err, kernels_per_call=len(kernels) / calls, kernel_us_per_round=total / rounds,
                span_us_per_round=span / rounds,
                names=sorted({e["name"] for e in kernels})[:3], others=others[:4])


def main(argv=None) -> list[str]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--blocks", type=int, default=132, help="grid size (all resident: one block an SM)")
    ap.add_argument("--rounds", type=int, default=64)
    ap.add_argument("--calls", type=int, default=10)
    ap.add_argument("--out", default=None)
    ap.add_argument("--smoke", action="store_true", help="CPU: lower each case for CUDA, run nothing")
    a = ap.parse_args(argv)
    if a.smoke:
        return smoke()
    x = jnp.zeros((a.blocks, COLS), jnp.float32)
    w = jax.random.normal(jax.random.key(0), (a.blocks * TILE_ROWS, COLS), jnp.bfloat16)
    rows = [measure(name, fn, x, w, a.rounds, a.calls) for name, fn in cases(a.blocks, a.rounds).items()]
    lines = [f"{a.blocks} blocks, {a.rounds} rounds a call, {a.calls} calls; device {jax.devices()[0].device_kind}",
             "", "| case | max abs err | kernels a call | kernel µs a round | span µs a round | kernels | other events |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    lines += [f"| {r['case']} | {r['err']:.1e} | {r['kernels_per_call']:.0f} | {r['kernel_us_per_round']:.2f} | "
              f"{r['span_us_per_round']:.2f} | {', '.join(r['names'])} | {', '.join(r['others'])} |" for r in rows]
    print("\n".join(lines), flush=True)
    if a.out:
        write_lines(a.out, "mgpu-barrier-probe.md", lines)
    return lines


if __name__ == "__main__":
    main()
