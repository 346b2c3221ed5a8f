"""bf16 rows carried as f16 into the fp8 kernels (dgjax/pallas/carrier.py) in a decoding bf16 model.

A tiny bf16 Qwen3 whose q/k/v, o, gate/up and down are fp8 nodes decodes through the fused decode attention and
the quantized GEMV kernels (interpreted). With the carry on (the default) the q/k/v, o and down kernels receive
float16 rows, and the logits are those of the same model with the carry off (bf16 rows rescaled in every K step)
up to float32 accumulation order: the carried values are the bf16 values themselves.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from dense_cases import PROMPT, TINY
from paged_runner import PagedRunner
from test_fused_projections import _quant_node

from dgjax import sharding
from dgjax.models import blocks
from dgjax.models.fused import fuse_projections


def _fp8_model(tmp_path):
    import torch
    import transformers

    from dgjax.checkpoint.loader import load_params
    from dgjax.config import ModelConfig

    torch.manual_seed(0)
    hf_cfg = transformers.Qwen3Config(**{**TINY, "num_attention_heads": 4, "hidden_size": 64, "head_dim": 32})
    transformers.AutoModelForCausalLM.from_config(hf_cfg, dtype=torch.float32).save_pretrained(tmp_path)
    cfg = ModelConfig.from_dir(str(tmp_path))
    mesh = sharding.make_mesh(1)
    dense = load_params(str(tmp_path), cfg, "bfloat16", mesh, sharding.DEFAULT_RULES)

    def to_fp8(node):
        as_np = lambda a: np.asarray(jnp.asarray(a, jnp.float32))  # noqa: E731
        if isinstance(node, blocks.AttentionParams):
            return node.replace(o=_quant_node("fp8", as_np(node.o), in_dims=2),
                                **{n: _quant_node("fp8", as_np(getattr(node, n))) for n in ("q", "k", "v")})
        if isinstance(node, blocks.MLPParams):
            return node.replace(**{n: _quant_node("fp8", as_np(getattr(node, n))) for n in ("gate", "up", "down")})
        return node

    fp8 = jax.tree_util.tree_map(to_fp8, dense, is_leaf=lambda n: isinstance(
        n, (blocks.AttentionParams, blocks.MLPParams)))
    return cfg, fuse_projections(fp8, mesh, sharding.DEFAULT_RULES), mesh


def _decode(cfg, params, mesh, monkeypatch, carry: str):
    monkeypatch.setenv("DGJAX_F16_CARRY", carry)
    import paged_runner

    step = paged_runner.step_logits.__wrapped__  # a fresh function: jit caches traces per function, env at trace
    monkeypatch.setattr(paged_runner, "step_logits", jax.jit(lambda p, kv, b, cfg: step(p, kv, b, cfg),
                                                             static_argnames=("cfg",)))
    runner = PagedRunner(cfg, params, mesh, seed=3)
    runner.prefill("s", PROMPT)
    token, logits = [PROMPT[-1]], []
    for _ in range(3):
        out = np.asarray(runner.step([("s", token)], 1)[0], np.float32)
        logits.append(out)
        token = [int(np.argmax(out[-1]))]
    return np.stack(logits)


def test_fp8_kernels_take_carried_f16_rows_and_decode_as_without(tmp_path, monkeypatch):
    cfg, params, mesh = _fp8_model(tmp_path)
    monkeypatch.setenv("DGJAX_ATTENTION", "kernel")
    monkeypatch.setenv("DGJAX_QUANT_GEMV", "kernel")
    from dgjax.pallas.quant_gemv import api as gemv_api

    seen: list = []  # (x dtype, out dtype) of every quantized GEMV kernel call traced at decode width
    real = gemv_api.kernel.quant_gemv
    monkeypatch.setattr(gemv_api.kernel, "quant_gemv", lambda x, w, *a, **k: seen.append(
        (jnp.dtype(x.dtype), jnp.dtype(k.get("out_dtype") or x.dtype))) or real(x, w, *a, **k))
    on = _decode(cfg, params, mesh, monkeypatch, "on")
    carried, seen[:] = list(seen), []
    off = _decode(cfg, params, mesh, monkeypatch, "off")
    layers = cfg.num_hidden_layers
    # q/k/v, o and down of every layer took f16 rows (gate/up's norm output has another reader in MoE models,
    # so the dense gate/up keeps bf16 here too) and gave bf16 results
    assert sum(x == jnp.float16 for x, _ in carried) >= 3 * layers, carried
    assert all(out == jnp.bfloat16 for _, out in carried), carried
    assert all(x == jnp.bfloat16 for x, _ in seen), seen  # off: every kernel took bf16 rows
    assert np.isfinite(on).all()
    scale = np.max(np.abs(off))
    np.testing.assert_allclose(on, off, atol=2e-2 * scale, rtol=0)
    assert (on.argmax(-1) == off.argmax(-1)).all()


def test_fp8_moe_down_stage_takes_carried_h_and_decodes_as_without(tmp_path, monkeypatch):
    """A bf16 Qwen3-MoE (one dense layer) converted to fp8 at load: its experts' decode kernel (interpreted) hands
    the down stage h as carried f16, and the model decodes as with the carry off. (Its gate/up stage keeps bf16
    rows: carried, the router's GEMM and the gate/up kernel each got slower on the H200, s22c-e.)"""
    from moe_cases import build_case

    from dgjax.checkpoint.convert import convert_params, parse_quantize
    from dgjax.checkpoint.hf_names import hf_sources
    from dgjax.checkpoint.loader import load_params
    from dgjax.models.registry import get_family
    from dgjax.pallas.moe_decode import kernel as moe_kernel

    case = build_case("qwen3_moe_dense_layer0_renorm", tmp_path)
    cfg, mesh = case.cfg, case.mesh
    bf16 = load_params(str(tmp_path), cfg, "bfloat16", mesh, sharding.DEFAULT_RULES)
    specs = get_family(cfg).param_specs(cfg, "bfloat16")
    params = convert_params(bf16, hf_sources(cfg), specs, parse_quantize("fp8"), mesh, sharding.DEFAULT_RULES)
    for name, value in (("DGJAX_ATTENTION", "kernel"), ("DGJAX_QUANT_GEMV", "kernel"), ("DGJAX_MOE_KERNEL", "kernel")):
        monkeypatch.setenv(name, value)
    seen: list = []  # h's dtype at every MoE decode kernel traced
    real = moe_kernel.down_stage
    monkeypatch.setattr(moe_kernel, "down_stage", lambda h, *a, **k: seen.append(jnp.dtype(h.dtype)) or real(h, *a, **k))
    on = _decode(cfg, params, mesh, monkeypatch, "on")
    carried, seen[:] = list(seen), []
    off = _decode(cfg, params, mesh, monkeypatch, "off")
    assert carried and all(h == jnp.float16 for h in carried), carried
    assert seen and all(h == jnp.bfloat16 for h in seen), seen
    assert np.isfinite(on).all()
    np.testing.assert_allclose(on, off, atol=2e-2 * np.max(np.abs(off)), rtol=0)
    assert (on.argmax(-1) == off.argmax(-1)).all()
