"""How XLA streams a bf16 weight for skinny matmuls, by weight layout and row count.

Decode at batch 1 ran slower per step than batch 4 through the engine; this isolates the matmul:
x[M, K] . W for W stored input-major [K, N] (dgjax's layout) and output-major [N, K] (HF's).
Timed as many async calls + one sync over rotating weights (no L2 reuse), median of repeats.
"""

from __future__ import annotations

import argparse
import time

import jax
import jax.numpy as jnp
from jax import lax


def _time(fn, args_list, calls=60, repeats=5):
    for a in args_list[:2]:
        fn(*a).block_until_ready()
    best = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = None
        for i in range(calls):
            out = fn(*args_list[i % len(args_list)])
        out.block_until_ready()
        best.append((time.perf_counter() - t0) / calls)
    best.sort()
    return best[len(best) // 2]


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--k", type=int, default=4096)
    p.add_argument("--n", type=int, default=14336)
    p.add_argument("--copies", type=int, default=8)
    a = p.parse_args()
    key = jax.random.key(0)
    kn = [jax.random.normal(jax.random.fold_in(key, i), (a.k, a.n), jnp.bfloat16) for i in range(a.copies)]
    nk = [w.T.copy() for w in kn]
    nbytes = a.k * a.n * 2
    in_major = jax.jit(lambda x, w: lax.dot_general(x, w, (((1,), (0,)), ((), ())),
                                                    preferred_element_type=jnp.float32).astype(jnp.bfloat16))
    out_major = jax.jit(lambda x, w: lax.dot_general(x, w, (((1,), (1,)), ((), ())),
                                                     preferred_element_type=jnp.float32).astype(jnp.bfloat16))
    print(f"device {jax.devices()[0].device_kind}; W {a.k}x{a.n} bf16 = {nbytes / 1e6:.0f} MB")
    print("   M  layout        us    TB/s")
    for m in (1, 2, 4, 16):
        x = jax.random.normal(key, (m, a.k), jnp.bfloat16)
        for name, fn, ws in (("in-major [K,N]", in_major, kn), ("out-major [N,K]", out_major, nk)):
            t = _time(fn, [(x, w) for w in ws])
            print(f"{m:4d}  {name:15s} {t * 1e6:7.1f}  {nbytes / t / 1e12:5.2f}")


if __name__ == "__main__":
    main()
