"""--quantize bf12 on a MoE model: expert stacks become bf12 too (bit for bit), and the model decodes as the bf16
model does, through the reference (the same bf16 values; float32 rounding order) and through the interpreted MoE decode
and prefill kernels (their bf12 tiles and escape epilogues; float32 sums in another order)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from moe_cases import build_case
from paged_runner import PagedRunner
from test_f16_carry import _decode

from dgjax import sharding
from dgjax.checkpoint.convert import convert_params, parse_quantize
from dgjax.checkpoint.hf_names import hf_sources
from dgjax.checkpoint.loader import load_params
from dgjax.models.registry import get_family
from dgjax.pallas.moe_decode import kernel as moe_kernel
from dgjax.pallas.moe_prefill import kernel as prefill_kernel
from dgjax.quant import Bf12Weight


def test_bf12_experts_hold_the_bf16_bits_and_decode_like_the_bf16_model(tmp_path, monkeypatch):
    case = build_case("qwen3_moe_dense_layer0_renorm", tmp_path)
    cfg, mesh = case.cfg, case.mesh
    bf16 = load_params(str(tmp_path), cfg, "bfloat16", mesh, sharding.DEFAULT_RULES)
    specs = get_family(cfg).param_specs(cfg, "bfloat16")
    params = convert_params(bf16, hf_sources(cfg), specs, parse_quantize("bf12"), mesh, sharding.DEFAULT_RULES)
    layer = cfg.num_hidden_layers - 1  # a MoE layer (layer 0 is dense)
    experts, plain = params.layers[layer].ffn.experts, bf16.layers[layer].ffn.experts
    for name in ("gate", "up", "down"):
        node, dense = getattr(experts, name), getattr(plain, name)
        assert isinstance(node, Bf12Weight) and node.expert_dims == 1 and node.shape == dense.shape
        np.testing.assert_array_equal(np.asarray(node.dequantize(jnp.bfloat16)).view(np.uint16),
                                      np.asarray(dense).view(np.uint16))
    router = params.layers[layer].ffn.router
    assert all(isinstance(leaf, jax.Array) for leaf in jax.tree_util.tree_leaves(router))  # routers stay

    monkeypatch.setenv("DGJAX_MOE_KERNEL", "ref")
    want = _decode(cfg, bf16, mesh, monkeypatch, "on")
    same = _decode(cfg, params, mesh, monkeypatch, "on")
    # the reference decodes each bf12 stack to the same bf16 values; its expert product contracts the
    # [M, out, in] rows where the plain path contracts [M, in, out] (float32 rounding order only)
    np.testing.assert_allclose(same, want, atol=1e-5 * np.max(np.abs(want)), rtol=0)
    assert (same.argmax(-1) == want.argmax(-1)).all()

    monkeypatch.setenv("DGJAX_MOE_KERNEL", "kernel")
    monkeypatch.setenv("DGJAX_MOE_PREFILL", "kernel")
    traced, prefilled = [], []
    real, real_grouped = moe_kernel.down_stage, prefill_kernel.grouped_stage
    monkeypatch.setattr(moe_kernel, "down_stage", lambda h, ids, wts, down, *a, **k: traced.append(
        type(down).__name__) or real(h, ids, wts, down, *a, **k))
    monkeypatch.setattr(prefill_kernel, "grouped_stage", lambda x, sizes, ws, *a, **k: prefilled.append(
        type(ws[0]).__name__) or real_grouped(x, sizes, ws, *a, **k))
    got = _decode(cfg, params, mesh, monkeypatch, "on")
    assert traced and set(traced) == {"Bf12Weight"}
    # a prompt longer than the decode kernel's 16 tokens: its chunk goes through the grouped GEMM
    prompt = [int(t) for t in np.random.default_rng(0).integers(0, cfg.vocab_size, 28)]
    jax.clear_caches()
    long_got = np.asarray(PagedRunner(cfg, params, mesh, max_pages=8).prefill("p", prompt, width=32), np.float32)
    assert prefilled and set(prefilled) == {"Bf12Weight"}
    monkeypatch.setenv("DGJAX_MOE_PREFILL", "ref")
    jax.clear_caches()
    long_want = np.asarray(PagedRunner(cfg, bf16, mesh, max_pages=8).prefill("p", prompt, width=32), np.float32)
    np.testing.assert_allclose(long_got, long_want, atol=2e-2 * np.max(np.abs(long_want)), rtol=0)
    assert (long_got.argmax(-1) == long_want.argmax(-1)).mean() > 0.9
    assert np.isfinite(got).all()
    np.testing.assert_allclose(got, want, atol=2e-2 * np.max(np.abs(want)), rtol=0)
    assert (got.argmax(-1) == want.argmax(-1)).all()
