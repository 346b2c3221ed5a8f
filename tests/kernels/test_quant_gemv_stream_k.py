"""The stream-K launch of the quantized GEMV (quant_gemv/stream_k.py): its work split, the kernel interpreted on
CPU against ref.py (formats, uneven ranges, the slots no program fills), and the CUDA lowering at llama shapes."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from dgjax.pallas.quant_gemv import kernel, ref, stream_k
from dgjax.pallas.split_sums import SplitSums

from test_quant_gemv_kernel import K, N, _abstract_node, _check, _encode, _rows

L = kernel.Launch


@pytest.mark.parametrize("blocks,k_steps,programs", [(4, 8, 3), (4, 8, 5), (4, 8, 32), (4, 8, 1), (224, 16, 132),
                                                     (224, 16, 264), (32, 96, 264), (1002, 16, 264), (3, 5, 7)])
def test_programs_partition_the_steps_and_slots_cover_every_block(blocks, k_steps, programs):
    """Brute force: program p's range [p W / P, (p + 1) W / P) partitions the W steps, each program gets
    floor or ceil of W / P, and within a block the touching programs are consecutive from `first_program`,
    never more than `slots_needed`."""
    work = blocks * k_steps
    owner = np.empty(work, np.int64)
    sizes = []
    for p in range(programs):
        lo, hi = p * work // programs, (p + 1) * work // programs
        owner[lo:hi] = p
        sizes.append(hi - lo)
    assert sum(sizes) == work and max(sizes) - min(sizes) <= 1 and min(sizes) >= 1
    slots = stream_k.slots_needed(blocks, k_steps, programs)
    widest = 0
    for j in range(blocks):
        touching = sorted(set(owner[j * k_steps:(j + 1) * k_steps]))
        assert touching == list(range(touching[0], touching[-1] + 1))
        assert touching[0] == stream_k.first_program(j * k_steps, work, programs)
        widest = max(widest, len(touching))
    assert slots == widest


CASES = [
    # rows, x dtype, format, launch: N = 64, K = 256
    (1, jnp.float32, "fp8", L(16, 32, programs=5)),  # 4 blocks x 8 steps over 5 programs: ranges cross blocks
    (3, jnp.bfloat16, "fp8", L(32, 64, programs=3)),  # 2 blocks x 4 steps: a block shared by 2 programs
    (16, jnp.float32, "fp8", L(64, 32, programs=8)),  # one block, one step each: 8 slots
    (2, jnp.float32, "nvfp4", L(16, 32, programs=7)),
    (3, jnp.bfloat16, "int4", L(32, 64, programs=2)),
    (1, jnp.float32, "int8-zero", L(16, 64, programs=16)),  # every program exactly one step
    (2, jnp.bfloat16, "fp8", L(16, 32, programs=6, unroll=2)),  # unrolled loops over uneven ranges
    # bf12: escapes once per block (its first program), row scales on every partial
    (1, jnp.bfloat16, "bf12", L(16, 32, programs=5)),
    (3, jnp.float32, "bf12", L(32, 64, programs=3)),
    (16, jnp.bfloat16, "bf12", L(16, 64, programs=1)),  # one program walks all four blocks
]


@pytest.mark.parametrize("rows,dtype,fmt,launch", CASES)
def test_stream_k_matches_the_reference(rows, dtype, fmt, launch):
    rng = np.random.default_rng(rows * 11 + len(fmt) + launch.programs)
    node, _ = _encode(fmt, _rows(rng))
    x = jnp.asarray(rng.standard_normal((rows, K)), dtype)
    want = ref.quant_gemv(x, node)
    got = kernel.quant_gemv(x, node, launch=launch, interpret=True)
    assert got.dtype == dtype and got.shape == (rows, N)
    _check(got, want, dtype)
    kept = kernel.quant_gemv(x, node, launch=launch, keep_splits=True, interpret=True)
    assert isinstance(kept, SplitSums)
    assert kept.parts.shape == (stream_k.slots_needed(N // launch.block_n, K // launch.block_k, launch.programs),
                                rows, N)
    assert np.isfinite(np.asarray(kept.parts)).all()
    _check(kept.value(), want, dtype)


def test_slots_no_program_fills_are_zeroed_by_the_block_owner():
    """4 blocks of 8 steps over 6 programs (5-6 steps each): some blocks are touched by two programs, others by
    three, so a block's unused slot must read zero (the interpreter, like the GPU, starts the output
    uninitialized: without the zeroing this fails), and each used slot holds exactly its program's steps."""
    rng = np.random.default_rng(5)
    node, dense = _encode("fp8", _rows(rng))
    x = jnp.asarray(rng.standard_normal((1, K)), jnp.float32)
    launch = L(16, 32, programs=6)
    parts = np.asarray(kernel.quant_gemv(x, node, launch=launch, keep_splits=True, interpret=True).parts)
    blocks, k_steps = N // 16, K // 32
    work = blocks * k_steps
    xs = np.asarray(x, np.float64)[0]
    for j in range(blocks):
        first = stream_k.first_program(j * k_steps, work, 6)
        for slot in range(parts.shape[0]):
            p = first + slot
            lo = max(p * work // 6 - j * k_steps, 0)
            hi = min((p + 1) * work // 6 - j * k_steps, k_steps) if p < 6 else 0
            cols = slice(j * 16, (j + 1) * 16)
            if hi <= lo:  # this program does not reach block j
                assert (parts[slot, 0, cols] == 0).all(), (j, slot)
            else:
                span = slice(lo * 32, hi * 32)
                want = dense[cols, span].astype(np.float64) @ xs[span]
                np.testing.assert_allclose(parts[slot, 0, cols], want, atol=2e-5 * max(1, np.abs(want).max()))


def test_stream_k_refuses_what_it_cannot_do():
    node, _ = _encode("fp8", _rows(np.random.default_rng(0)))
    x = jnp.zeros((1, K), jnp.float32)
    with pytest.raises(ValueError, match="cannot stream"):
        kernel.quant_gemv(x, node, launch=L(16, 32, programs=33), interpret=True)  # 32 steps in all
    with pytest.raises(ValueError, match="no norm"):
        kernel.quant_gemv(x, node, jnp.ones((K,)), launch=L(16, 32, programs=4), interpret=True)
    assert L(16, 32, programs=4).tag().endswith("_p4")


@pytest.mark.parametrize("rows,fmt,k,n,programs", [(2, "fp8", 4096, 14336, 264), (2, "fp8", 12288, 4096, 264),
                                                   (1, "bf12", 4096, 28672, 132), (2, "bf12", 14336, 4096, 264)])
def test_stream_k_lowers_at_engine_shapes(rows, fmt, k, n, programs, verified_triton_lowering):
    if fmt == "bf12":
        from dgjax.quant import bf12
        spec = jax.ShapeDtypeStruct
        node = bf12.Bf12Weight(low=spec((n, k // 2), jnp.uint16), codes=spec((n, k // 2), jnp.uint8),
                               row_scale=spec((n,), jnp.float32), escape_cols=spec((n, 16), jnp.uint16),
                               escape_bits=spec((n, 16), jnp.uint16), shape=(k, n), in_dims=1, expert_dims=0)
        launch = L(128, 256, programs=programs, num_stages=2)
    else:
        node = _abstract_node(fmt, k, n)
        launch = L(128, 128, programs=programs)
    x = jax.ShapeDtypeStruct((rows, k), jnp.bfloat16)
    lowered = jax.jit(lambda a, w: kernel.quant_gemv(a, w, launch=launch, keep_splits=True).parts).trace(
        x, node).lower(lowering_platforms=("cuda",))
    assert verified_triton_lowering == [True] and f"quant_gemv_stream_{fmt}" in lowered.as_text()
