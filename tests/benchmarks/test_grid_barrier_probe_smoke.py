"""benchmarks/grid_barrier_probe.py on the CPU: the two-launch pair (interpreted) matches the float32 chain,
and the one-launch pair with its grid barrier lowers to a valid Triton module for CUDA."""

from __future__ import annotations

from benchmarks import grid_barrier_probe


def test_split_pair_matches_and_fused_pair_lowers(verified_triton_lowering):
    lines = grid_barrier_probe.main(["--smoke"])
    rows = {r.split("|")[1].strip(): r.split("|") for r in lines if r.startswith("| ") and "---" not in r}
    assert float(rows["split"][4]) < 2e-2 and float(rows["xla"][4]) < 2e-2
    assert float(rows["split, prefetch 8 tiles"][4]) < 2e-2  # the next phase's tiles read, the result unchanged
    assert lines[-1] == "fused: lowered for CUDA (not run)"
    assert len(verified_triton_lowering) >= 4 and all(verified_triton_lowering)  # both polls, a prefetch, held w2


def test_held_phase_computes_the_second_gemv_from_tiles_loaded_earlier():
    """The held-w2 case's arithmetic (tiles loaded first, CUDA-core multiply-adds later), interpreted in a plain
    launch, against the float32 product: the GPU run checks the fused kernel as a whole."""
    import functools

    import jax
    import jax.numpy as jnp
    import numpy as np
    from jax.experimental import pallas as pl

    from dgjax.pallas.launch import whole

    programs, bk, n, k = 4, 128, 32, 256
    rng = np.random.default_rng(0)
    x = jnp.asarray(rng.standard_normal((grid_barrier_probe.ROWS, k)), jnp.bfloat16)
    w = jnp.asarray(rng.standard_normal((n, k)), jnp.bfloat16)

    def kern(x_ref, w_ref, y_ref):
        p = pl.program_id(0)
        held = grid_barrier_probe._row_tiles(w_ref, p, n // programs, bk)
        grid_barrier_probe._held_phase(x_ref, held, y_ref, p, n // programs, bk)

    y = pl.pallas_call(functools.partial(kern), grid=(programs,), in_specs=[whole(x.shape), whole(w.shape)],
                       out_specs=whole((x.shape[0], n)), out_shape=jax.ShapeDtypeStruct((x.shape[0], n), jnp.float32),
                       interpret=True)(x, w)
    want = np.asarray(x, np.float32) @ np.asarray(w, np.float32).T
    np.testing.assert_allclose(np.asarray(y), want, rtol=1e-5, atol=1e-4)
