"""The skinny GEMV kernel (interpreted on CPU) against ref.py, with and without the fused RMSNorm; its launch
choice and dispatch; its CUDA lowering at the real decode shapes; and ops.matmul's norm= path."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from dgjax.models import blocks, ops
from dgjax.pallas.gemv import api, kernel, ref
from dgjax.pallas.launch import Launch


def _inputs(rows: int, k: int, n: int, dtype, seed: int = 0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((rows, k)).astype(np.float32) * 3.0
    x[0, : k // 4] = 0.0  # a partly zero row
    w = rng.standard_normal((k, n)).astype(np.float32) / np.sqrt(k)
    norm = 1.0 + 0.5 * rng.standard_normal(k).astype(np.float32)
    return jnp.asarray(x, dtype), jnp.asarray(w, dtype), jnp.asarray(norm, dtype)


@pytest.mark.parametrize("rows", [1, 2, 5, 16])
@pytest.mark.parametrize("k,n,launch", [
    (256, 128, Launch(block_n=64, block_k=64, splits=1)),
    (512, 384, Launch(block_n=128, block_k=64, splits=4)),
    (512, 96, Launch(block_n=32, block_k=128, splits=2)),
])
@pytest.mark.parametrize("normed", [False, True])
def test_kernel_matches_ref_in_float32(rows, k, n, launch, normed):
    x, w, norm = _inputs(rows, k, n, jnp.float32, seed=rows + k)
    got = jnp.sum(kernel.gemv(x, w, norm if normed else None, launch=launch, eps=1e-5, interpret=True), axis=0)
    want = ref.gemv(x, w, norm if normed else None, eps=1e-5)
    assert got.shape == (rows, n) and got.dtype == jnp.float32
    err = float(jnp.max(jnp.abs(got - want)))
    assert err <= 1e-5 * max(1.0, float(jnp.max(jnp.abs(want)))), err


@pytest.mark.parametrize("normed", [False, True])
def test_kernel_matches_ref_in_bf16(normed):
    """bf16: x normalized and rounded to bf16 inside the kernel as ref.rms_norm rounds it; only the order of
    the float32 sums differs, so outputs agree to float32 accumulation noise, not bf16 rounding."""
    x, w, norm = _inputs(2, 1024, 256, jnp.bfloat16)
    launch = Launch(block_n=128, block_k=256, splits=2)
    got = jnp.sum(kernel.gemv(x, w, norm if normed else None, launch=launch, interpret=True), axis=0)
    want = ref.gemv(x, w, norm if normed else None)
    scale = float(jnp.max(jnp.abs(want)))
    rel = float(jnp.max(jnp.abs(got - want))) / scale
    assert rel < 2e-3, rel


def test_ref_norm_is_the_models_rms_norm():
    x, _, norm = _inputs(3, 128, 16, jnp.bfloat16)
    np.testing.assert_array_equal(np.asarray(ref.rms_norm(x, norm, 1e-6), np.float32),
                                  np.asarray(blocks.rms_norm(x, norm, 1e-6), np.float32))


def test_kernel_rejects_what_it_cannot_tile():
    x, w, _ = _inputs(2, 256, 128, jnp.float32)
    with pytest.raises(ValueError, match="cannot run"):
        kernel.gemv(x, w, launch=Launch(block_n=128, block_k=256, splits=2), interpret=True)
    with pytest.raises(ValueError, match="cannot run"):
        kernel.gemv(jnp.zeros((17, 256)), w, launch=Launch(block_n=128, block_k=128), interpret=True)


@pytest.mark.parametrize("k,n", [(2048, 5120), (4096, 2048), (4096, 4096), (4096, 6144), (64, 256), (96, 48)])
def test_launch_fills_the_device_and_tiles_the_shape(k, n):
    launch = api.launch_for(k, n)
    assert launch is not None and kernel.supports(1, k, n, launch)
    programs = (n // launch.block_n) * launch.splits
    assert programs >= api.TARGET_PROGRAMS or launch.splits == 8 or k % (2 * launch.splits * 128), launch


def test_dispatch_runs_the_kernel_only_when_asked(monkeypatch):
    """auto keeps XLA's dot (the kernel lost to it in the engine on the H200); kernel opts in for decode rows."""
    w = jnp.zeros((4096, 2048), jnp.bfloat16)
    monkeypatch.delenv(api.ENV_VAR, raising=False)
    assert not api.use_kernel(2, jnp.bfloat16, w)
    assert api.use_kernel(2, jnp.bfloat16, w, impl="kernel")
    assert not api.use_kernel(17, jnp.bfloat16, w, impl="kernel")  # a prefill chunk
    assert not api.use_kernel(2, jnp.float32, w, impl="kernel")  # dtype mismatch
    assert not api.use_kernel(2, jnp.bfloat16, jnp.zeros((4096, 100), jnp.bfloat16), impl="kernel")  # no tiling
    monkeypatch.setenv(api.ENV_VAR, "kernel")
    assert api.use_kernel(2, jnp.bfloat16, w)
    monkeypatch.setenv(api.ENV_VAR, "ref")
    assert not api.use_kernel(2, jnp.bfloat16, w)
    monkeypatch.setenv(api.ENV_VAR, "fast")
    with pytest.raises(ValueError, match="DGJAX_GEMV"):
        api.use_kernel(2, jnp.bfloat16, w)


@pytest.mark.parametrize("contract", [1, 2])
def test_matmul_with_the_kernel_forced_matches_the_xla_path(contract, monkeypatch):
    """ops.matmul (what model code calls) gives the same product, norm fused or not, through either path."""
    rng = np.random.default_rng(7)
    x = jnp.asarray(rng.standard_normal((2, 1, 4, 32)), jnp.float32)
    w = jnp.asarray(rng.standard_normal((4, 32, 3, 64)) / 12, jnp.float32)
    if contract == 1:
        x, w = x.reshape(2, 1, 128), w.reshape(128, 3, 64)
    norm = jnp.asarray(1 + rng.standard_normal(128), jnp.float32) if contract == 1 else None
    monkeypatch.setenv(api.ENV_VAR, "ref")
    want = ops.matmul(x, w, contract=contract, norm=norm, eps=1e-5)
    monkeypatch.setenv(api.ENV_VAR, "kernel")
    got = ops.matmul(x, w, contract=contract, norm=norm, eps=1e-5)
    assert got.shape == want.shape == (2, 1, 3, 64)
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=0, atol=2e-5)
    if norm is not None:  # and the norm really ran: without it the product differs
        plain = ops.matmul(x, w, contract=contract)
        assert float(jnp.max(jnp.abs(plain - want))) > 1e-2


@pytest.mark.parametrize("rows,k,n,normed", [(2, 2048, 5120, True), (1, 4096, 2048, False), (16, 4096, 6144, True)])
def test_kernel_lowers_to_valid_triton_modules_at_decode_shapes(rows, k, n, normed, verified_triton_lowering):
    """qwen3-30b-a3b's qkv and o, llama-3.1-8b's qkv: lowered for CUDA without a GPU, module verified."""
    launch = api.launch_for(k, n)
    x = jax.ShapeDtypeStruct((rows, k), jnp.bfloat16)
    w = jax.ShapeDtypeStruct((k, n), jnp.bfloat16)
    norm = jax.ShapeDtypeStruct((k,), jnp.bfloat16) if normed else None
    fn = lambda a, b, c: kernel.gemv(a, b, c, launch=launch)  # noqa: E731
    lowered = jax.jit(fn).trace(x, w, norm).lower(lowering_platforms=("cuda",))
    assert verified_triton_lowering == [True] and "gemv" in lowered.as_text()
