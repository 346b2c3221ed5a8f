"""Does a Pallas Mosaic-GPU kernel start before its predecessor ends, and can it load weights before it waits?

Why: every Pallas-Triton kernel of a decode tick gets XLA's `griddepcontrol.wait` at its entry (sessions 10, 13,
18), so no kernel can start its weight stream while the kernel before it drains, and every decode kernel pays a
launch + one memory latency (~2.5-5 µs) that the weight bytes do not explain. Pallas' Mosaic-GPU backend has
its own `griddepcontrol_wait` / `griddepcontrol_launch_dependents`: if XLA launches its kernels with
programmatic dependent launch (PDL) inside the tick's CUDA graph and leaves the wait to the kernel, a kernel
could issue its weight loads (TMA) first and wait for its predecessor's output after. This probe answers
whether that holds on the installed jax, before anything is ported.

The chain, in one jitted executable (one CUDA graph): a predecessor XLA reduction (x = column sums of a 512 MB
bf16 array, ~120 µs) then a small Mosaic-GPU kernel copying a weight tile W [128, 128] bf16 out and 2 x [128]:
- `wait_first`: griddepcontrol_wait, then the W copy and the x copy;
- `load_first`: the W copy issued, then griddepcontrol_wait, then the x copy;
- `no_wait`: no wait at all (what the GPU orders by itself: if this kernel starts before the predecessor ends,
  its x read is racy; the result check says whether it saw the final x);
and the same with a Pallas-Triton kernel for the known behaviour (XLA's PDL launch, its wait at entry).
From the device trace: the gap from the predecessor's end to the kernel's start (negative: started early) and
the kernel's duration. Each result is checked against jnp.

    python3 -m benchmarks.mgpu_pdl_probe --out $OUT      # GPU
    python -m benchmarks.mgpu_pdl_probe --smoke          # CPU: each chain lowered for CUDA, nothing run
"""

from __future__ import annotations

import argparse
import statistics
import traceback

import dgjax  # noqa: F401  (its default XLA flags: every run of kernels in a CUDA graph)
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

from benchmarks.device_trace import trace_events
from benchmarks.report import write_lines

N = 128
BIG_ROWS = 1 << 21  # 2M rows x 128 bf16 = 512 MB


def _mgpu_kernel(mode: str):
    from jax.experimental.pallas import mosaic_gpu as plgpu

    def body(x_ref, w_ref, o_ref, xo_ref, x_smem, w_smem, xo_smem, bars):
        if mode == "wait_first":
            plgpu.griddepcontrol_wait()
        plgpu.copy_gmem_to_smem(w_ref, w_smem, bars.at[0])
        if mode == "load_first":
            plgpu.griddepcontrol_wait()
        plgpu.copy_gmem_to_smem(x_ref, x_smem, bars.at[1])
        plgpu.barrier_wait(bars.at[0])
        plgpu.barrier_wait(bars.at[1])
        xo_smem[...] = x_smem[...] * 2.0
        plgpu.commit_smem()
        plgpu.copy_smem_to_gmem(w_smem, o_ref)
        plgpu.copy_smem_to_gmem(xo_smem, xo_ref)
        plgpu.wait_smem_to_gmem(0)

    def call(x, w):
        return plgpu.kernel(
            body,
            out_type=(jax.ShapeDtypeStruct((N, N), jnp.bfloat16), jax.ShapeDtypeStruct((N,), jnp.float32)),
            scratch_types=[plgpu.SMEM((N,), jnp.float32), plgpu.SMEM((N, N), jnp.bfloat16),
                           plgpu.SMEM((N,), jnp.float32), plgpu.Barrier(num_arrivals=1, num_barriers=2)],
        )(x, w)

    return call


def _triton_call(x, w):
    def body(x_ref, w_ref, o_ref, xo_ref):
        o_ref[...] = w_ref[...].astype(jnp.float32)
        xo_ref[...] = x_ref[...] * 2.0

    from jax.experimental.pallas import triton as pltriton

    return pl.pallas_call(body, out_shape=(jax.ShapeDtypeStruct((N, N), jnp.float32),
                                           jax.ShapeDtypeStruct((N,), jnp.float32)),
                          compiler_params=pltriton.CompilerParams(), name="triton_ref")(x, w)


def chain(kernel):
    @jax.jit
    def run(big, w):
        x = jnp.sum(big, axis=0, dtype=jnp.float32)  # [N]: the predecessor's output
        return kernel(x, w)

    return run


def measure(name: str, run, big, w, reps: int) -> dict:
    want_x = 2.0 * jnp.sum(big, axis=0, dtype=jnp.float32)
    got_w, got_x = run(big, w)
    err = max(float(jnp.max(jnp.abs(got_w - w.astype(jnp.float32)))),
              float(jnp.max(jnp.abs(got_x - want_x)) / (jnp.max(jnp.abs(want_x)) + 1e-30)))
    for _ in range(3):
        jax.block_until_ready(run(big, w))
    events = trace_events(lambda: jax.block_until_ready([run(big, w) for _ in range(reps)][-1]))
    events = sorted(events, key=lambda e: e["ts"])
    gaps, durs, names = [], [], set()
    for prev, ev in zip(events, events[1:]):
        names.add(ev["name"])
        if "reduce" in prev["name"] and "reduce" not in ev["name"]:
            gaps.append(ev["ts"] - (prev["ts"] + prev["dur"]))
            durs.append(ev["dur"])
    return dict(case=name, rel_err=err, pairs=len(gaps),
                gap_us=statistics.median(gaps) if gaps else float("nan"),
                dur_us=statistics.median(durs) if durs else float("nan"),
                kernels=sorted(names)[:8])


CASES = ("wait_first", "load_first", "no_wait")


def smoke() -> list[str]:
    """Each chain lowered for CUDA without a GPU: (case, backend custom call, griddepcontrol mentions)."""
    big, w = jax.ShapeDtypeStruct((1024, N), jnp.bfloat16), jax.ShapeDtypeStruct((N, N), jnp.bfloat16)
    lines = []
    for name, kernel in [("triton", _triton_call)] + [(m, _mgpu_kernel(m)) for m in CASES]:
        text = chain(kernel).trace(big, w).lower(lowering_platforms=("cuda",)).as_text()
        target = "mosaic_gpu_v2" if "mosaic_gpu_v2" in text else "triton" if "triton" in text else "?"
        lines.append(f"{name}: {target}, griddepcontrol x{text.count('griddepcontrol')}")
    print("\n".join(lines))
    return lines


def main(argv=None) -> int | list[str]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--out", default=None)
    ap.add_argument("--smoke", action="store_true", help="CPU: lower each chain for CUDA, run nothing")
    args = ap.parse_args(argv)
    if args.smoke:
        return smoke()
    key = jax.random.key(0)
    big = jax.random.normal(key, (BIG_ROWS, N), jnp.bfloat16)
    w = jax.random.normal(jax.random.key(1), (N, N), jnp.bfloat16)
    rows = []
    cases = [("triton", _triton_call)] + [(m, _mgpu_kernel(m)) for m in CASES]
    for name, kernel in cases:
        try:
            rows.append(measure(name, chain(kernel), big, w, args.reps))
        except Exception as e:  # noqa: BLE001 - a probe reports what failed and goes on
            traceback.print_exc()
            rows.append(dict(case=name, error=f"{type(e).__name__}: {str(e)[:300]}"))
        print(rows[-1], flush=True)
    lines = ["| case | rel err | pairs | gap µs (pred end -> start) | kernel µs |", "| --- | --- | --- | --- | --- |"]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['case']} | {r['error']} | | | |")
        else:
            lines.append(f"| {r['case']} | {r['rel_err']:.1e} | {r['pairs']} | {r['gap_us']:.2f} | {r['dur_us']:.2f} |")
    print("\n".join(lines))
    if args.out:
        write_lines(args.out, "mgpu_pdl_probe.md", lines + ["", "kernels: " + repr([r.get("kernels") for r in rows])])
    return 0


if __name__ == "__main__":
    raise SystemExit(0 if isinstance(result := main(), list) else result)
