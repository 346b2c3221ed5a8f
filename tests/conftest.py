"""Suite-wide setup: one fresh JAX compilation cache per test session, shared by every engine."""

from __future__ import annotations

import os
import tempfile

import pytest

_CACHE = tempfile.mkdtemp(prefix="dgjax-test-xla-")
os.environ.setdefault("DGJAX_CACHE_DIR", _CACHE)
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TINY_CHAT = os.path.join(REPO, "checkpoints", "tiny-chat")


@pytest.fixture(scope="session")
def tiny_chat_dir() -> str:
    return TINY_CHAT


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
