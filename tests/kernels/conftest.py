"""Shared fixtures for the kernel tests."""

from __future__ import annotations

import pytest


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
