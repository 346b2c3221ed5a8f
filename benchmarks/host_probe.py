"""What one call of a jitted executable costs the host, split by cause: arguments, Pallas kernels, XLA kernels.

The MoE decode tick costs the host 2.2-3.7 ms per executable call (benchmarks/host_overhead.py) for ~900
parameter leaves and ~850 kernels, while a CPU-backend call with 1000 arguments costs 0.2-0.4 ms. This probe
times three synthetic executables whose device work is negligible, so the per-call time is the host's:
- `args N`: one fusion over N small arrays (per-argument cost: buffer handling, usage events);
- `pallas M`: M tiny Pallas kernels in a chain (per-kernel cost if the kernels sit outside CUDA graphs);
- `xla M`: M tiny XLA dots in a chain (per-kernel cost of XLA's own kernels, normally inside graphs).
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


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--calls", type=int, default=300)
    p.add_argument("--label", default=os.environ.get("XLA_FLAGS", "") or "default flags")
    a = p.parse_args()
    import jax

    interpret = jax.default_backend() == "cpu"
    probes = [(f"args {n}", *args_probe(n)) for n in (10, 300, 1000)]
    probes += [(f"pallas {m}", *pallas_probe(m, interpret)) for m in (1, 100, 400)]
    probes += [(f"xla {m}", *xla_probe(m)) for m in (1, 100, 400)]
    for name, fn, args in probes:
        us = per_call_us(fn, args, a.calls)
        print(f"{name:12s} {us:9.1f} us/call  [{a.label}]", flush=True)


if __name__ == "__main__":
    main()
