"""The L2 prefetch api: its switch, and which weights it picks (tests/models/test_l2_prefetch_model.py runs it in a
model)."""

from __future__ import annotations

import jax.numpy as jnp
import pytest

from dgjax.models.blocks import AttentionParams
from dgjax.pallas.l2_prefetch import api as prefetch_api
from dgjax.quant import Fp8BlockWeight


def test_mode_is_validated(monkeypatch):
    monkeypatch.setenv(prefetch_api.ENV_VAR, "everything")
    with pytest.raises(ValueError, match="DGJAX_L2_PREFETCH"):
        prefetch_api.mode()
    monkeypatch.delenv(prefetch_api.ENV_VAR)
    assert prefetch_api.mode() == "off"


def _fp8(n: int, k: int) -> Fp8BlockWeight:
    return Fp8BlockWeight(weight=jnp.zeros((n, k), jnp.float8_e4m3fn), scale=jnp.ones((n // 128, k // 128)),
                          shape=(k, n), in_dims=1, expert_dims=0)


def test_picks_quantized_fused_attention_weights_that_fit(monkeypatch):
    monkeypatch.setenv(prefetch_api.ENV_VAR, "attention")
    attn = AttentionParams(None, None, None, qkv=_fp8(5120, 2048), o=_fp8(2048, 4096))  # qwen3-30b-a3b: 10.5 + 8.4 MB
    assert prefetch_api.attention_weights(attn) == ()  # the CPU: the GEMV kernel is not what reads them here
    monkeypatch.setattr(prefetch_api, "_on_gpu", lambda: True)
    assert [a.shape for a in prefetch_api.attention_weights(attn)] == [(5120, 2048), (2048, 4096)]
    big = AttentionParams(None, None, None, qkv=_fp8(14336, 4096), o=_fp8(4096, 12288))  # glm-4.5-air: 109 MB, past the L2 budget
    assert prefetch_api.attention_weights(big) == ()
    plain = AttentionParams(None, None, None, qkv=jnp.zeros((2048, 5120), jnp.bfloat16), o=_fp8(2048, 4096))
    assert prefetch_api.attention_weights(plain) == ()
    monkeypatch.setenv(prefetch_api.ENV_VAR, "off")
    assert prefetch_api.attention_weights(attn) == ()
