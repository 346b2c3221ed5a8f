"""What one call of a jitted executable costs the host, split by cause: arguments, Pallas kernels, XLA kernels.

The MoE decode tick costs the host 2.2-3.7 ms per executable call (benchmarks/host_overhead.py) for ~900
parameter leaves and ~850 kernels, while a CPU-backend call with 1000 arguments costs 0.2-0.4 ms. This probe
times three synthetic executables whose device work is negligible, so the per-call time is the host's:
- `args N`: one fusion over N small arrays (per-argument cost: buffer handling, usage events);
- `pallas M`: M tiny Pallas kernels in a chain (per-kernel cost if the kernels sit outside CUDA graphs);
- `xla M`: M tiny XLA dots in a chain (per-kernel cost of XLA's own kernels, normally inside graphs);
- `donated N`: N small arrays donated in and returned updated, like the per-layer KV caches of a tick;
- `stacked-pallas M` / `stacked-dot M`: the `pallas M` / `xla M` chains with their per-step operand taken as
  a static slice of one stacked [M, ...] argument: the per-layer leaves of a model packed into one argument
  per kind. Whether XLA passes the slices without copies shows in the kernels per call (device trace, GPU
  only; try --xla_gpu_enable_dynamic_slice_fusion=true).
Run it under different XLA_FLAGS to see what command-buffer settings change. Prints one line per probe:

    XLA_FLAGS=... python3 -m benchmarks.host_probe [--calls 300]
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np


def per_call_us(fn, args, calls: int) -> float:
    """Median over 3 rounds of (wall of `calls` async calls, then one sync) / calls, in µs."""
    import jax

    jax.block_until_ready(fn(*args))
    rounds = []
    for _ in range(3):
        t = time.perf_counter()
        for _ in range(calls):
            out = fn(*args)
        jax.block_until_ready(out)
        rounds.append((time.perf_counter() - t) / calls)
    return 1e6 * float(np.median(rounds))


def args_probe(n: int):
    import jax
    import jax.numpy as jnp

    xs = [jnp.full((8,), i, jnp.float32) for i in range(n)]
    return jax.jit(lambda *a: sum(x[0] for x in a)), xs


def pallas_probe(m: int, interpret: bool):
    import jax
    import jax.numpy as jnp
    from jax.experimental import pallas as pl

    def add_one(x_ref, o_ref):
        o_ref[...] = x_ref[...] + 1.0

    step = pl.pallas_call(add_one, out_shape=jax.ShapeDtypeStruct((16, 128), jnp.float32), interpret=interpret)

    def chain(x):
        for _ in range(m):
            x = step(x)
        return x

    return jax.jit(chain), [jnp.zeros((16, 128), jnp.float32)]


def xla_probe(m: int):
    import jax
    import jax.numpy as jnp

    def chain(x, w):
        for _ in range(m):
            x = jnp.tanh(x @ w)  # a dot per step: XLA cannot merge the steps into one kernel
        return x

    return jax.jit(chain), [jnp.ones((8, 128), jnp.bfloat16), jnp.full((128, 128), 0.01, jnp.bfloat16)]


def donated_probe(n: int):
    import jax
    import jax.numpy as jnp

    xs = tuple(jnp.zeros((16, 128), jnp.float32) for _ in range(n))
    fn = jax.jit(lambda state: tuple(x + 1.0 for x in state), donate_argnums=0)
    box = [xs]

    def call(_):
        box[0] = fn(box[0])
        return box[0][0]

    return call, [None]


def stacked_pallas_probe(m: int, interpret: bool):
    import jax
    import jax.numpy as jnp
    from jax.experimental import pallas as pl

    def add(x_ref, w_ref, o_ref):
        o_ref[...] = x_ref[...] + w_ref[...]

    step = pl.pallas_call(add, out_shape=jax.ShapeDtypeStruct((16, 128), jnp.float32), interpret=interpret)

    def chain(x, stacked):
        for i in range(m):
            x = step(x, stacked[i])
        return x

    return jax.jit(chain), [jnp.zeros((16, 128), jnp.float32), jnp.ones((m, 16, 128), jnp.float32)]


def stacked_dot_probe(m: int):
    import jax
    import jax.numpy as jnp

    def chain(x, stacked):
        for i in range(m):
            x = jnp.tanh(x @ stacked[i])
        return x

    return jax.jit(chain), [jnp.ones((8, 128), jnp.bfloat16), jnp.full((m, 128, 128), 0.01, jnp.bfloat16)]


def kernels_per_call(fn, args, calls: int = 5) -> float | None:
    """Device kernels per call from a profiler trace (None off the GPU, where the trace has no kernels)."""
    import jax

    from benchmarks.device_trace import trace_events

    jax.block_until_ready(fn(*args))
    def run():
        for _ in range(calls):
            out = fn(*args)
        jax.block_until_ready(out)

    events = trace_events(run)
    return len(events) / calls if events else None


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--calls", type=int, default=300)
    p.add_argument("--smoke", action="store_true", help="two of everything (CPU test of the script)")
    p.add_argument("--kernels", action="store_true", help="also count device kernels per call (GPU trace)")
    p.add_argument("--label", default=os.environ.get("XLA_FLAGS", "") or "default flags")
    a = p.parse_args()
    import jax

    interpret = jax.default_backend() == "cpu"
    big = (2,) if a.smoke else None
    probes = [(f"args {n}", *args_probe(n)) for n in big or (10, 300, 1000)]
    probes += [(f"pallas {m}", *pallas_probe(m, interpret)) for m in big or (1, 100, 400)]
    probes += [(f"xla {m}", *xla_probe(m)) for m in big or (1, 100, 400)]
    probes += [(f"donated {n}", *donated_probe(n)) for n in big or (10, 100, 300)]
    probes += [(f"stacked-pallas {m}", *stacked_pallas_probe(m, interpret)) for m in big or (100, 400)]
    probes += [(f"stacked-dot {m}", *stacked_dot_probe(m)) for m in big or (100, 400)]
    for name, fn, args in probes:
        us = per_call_us(fn, args, a.calls)
        k = kernels_per_call(fn, args) if a.kernels else None
        kernels = f"{k:7.1f} kernels/call" if k is not None else ""
        print(f"{name:18s} {us:9.1f} us/call {kernels} [{a.label}]", flush=True)


if __name__ == "__main__":
    main()
