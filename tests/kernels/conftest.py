"""Shared fixtures for the kernel tests."""

from __future__ import annotations

import pytest


@pytest.fixture
def verified_triton_lowering(monkeypatch) -> list[bool]:
    """Verify every Triton module pallas_call lowers while the fixture is active; returns the list of
    verification results (one per module). Lowering for CUDA needs no GPU, so CPU tests catch invalid
    modules (e.g. mistyped loop bounds) that would otherwise only fail inside XLA's GPU compile."""
    from jax._src.pallas.triton import lowering as triton_lowering  # the Triton lowering pallas_call uses

    lower = triton_lowering.lower_jaxpr_to_triton_module
    verified: list[bool] = []

    def lower_and_verify(*args, **kwargs):
        result = lower(*args, **kwargs)
        verified.append(result.module.operation.verify())  # raises MLIRError when invalid
        return result

    monkeypatch.setattr(triton_lowering, "lower_jaxpr_to_triton_module", lower_and_verify)
    return verified


@pytest.fixture
def set_fp8_dot(monkeypatch, request):
    """Set DGJAX_FP8_DOT for one test. The mode is read at trace time, so jit caches are cleared on the way
    in and out: no trace of the other mode is reused, and none of this one leaks into later tests."""
    import jax

    def set_mode(mode: str) -> None:
        monkeypatch.setenv("DGJAX_FP8_DOT", mode)
        jax.clear_caches()

    request.addfinalizer(jax.clear_caches)
    return set_mode
