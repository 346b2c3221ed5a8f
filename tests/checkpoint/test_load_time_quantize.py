"""Load-time conversion (--quantize): bit-exact on-device quantization, parity with the fake-quantized float32
model, and the accuracy cost against the float32 model it came from."""

from __future__ import annotations

import argparse
import os
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch
from quant_checkpoints import TOKENS, hf_logprobs, quant_refs, tiny_hf_model

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "models"))
from paged_runner import PagedRunner  # noqa: E402

from dgjax.checkpoint.convert import QUANTIZE_MODES, convert_leaf, convert_params, parse_quantize  # noqa: E402
from dgjax.checkpoint.hf_names import HFSource, HFStackedSource, hf_sources  # noqa: E402
from dgjax.checkpoint.loader import load_params  # noqa: E402
from dgjax.config import ModelConfig  # noqa: E402
from dgjax.engine_args import add_engine_args, engine_config_from_args  # noqa: E402
from dgjax.models.params import ParamSpec, init_params  # noqa: E402
from dgjax.models.registry import get_family  # noqa: E402
from dgjax.quant import Bf12Weight, Fp8BlockWeight, Nvfp4Weight, bf12, fp8_block, nvfp4  # noqa: E402
from dgjax.sharding import DEFAULT_RULES, make_mesh  # noqa: E402

LINEAR_LEAVES = {"attn": ("q", "k", "v", "o"), "mlp": ("gate", "up", "down")}
HF_NAMES = {"q": "self_attn.q_proj", "k": "self_attn.k_proj", "v": "self_attn.v_proj", "o": "self_attn.o_proj",
            "gate": "mlp.gate_proj", "up": "mlp.up_proj", "down": "mlp.down_proj"}


@pytest.fixture(scope="module")
def dense(tmp_path_factory):
    path = tmp_path_factory.mktemp("dense")
    model = tiny_hf_model(seed=1)
    model.save_pretrained(path)
    return path, model, ModelConfig.from_dir(str(path))


def _fake_quantized(model, mode: str):
    """The transformers model with each linear weight replaced by its quantize -> independent-decode image."""
    fq = tiny_hf_model(seed=1)
    with torch.no_grad():
        for name, p in fq.named_parameters():
            if p.ndim == 2 and any(name.endswith(f"{v}.weight") for v in HF_NAMES.values()):
                w = p.detach().numpy()
                if mode == "bf16":
                    ref = p.detach().to(torch.bfloat16).float().numpy()
                elif mode == "fp8":
                    ref = quant_refs.fp8_block_dequantize_transformers(*fp8_block.quantize_np(w))
                else:
                    ref = quant_refs.nvfp4_dequantize_torch(*nvfp4.quantize_np(w))
                p.copy_(torch.from_numpy(ref))
    return fq


def _check_converted_leaves(params, state, cls, mode):
    for i, layer in enumerate(params.layers):
        for block, leaves in LINEAR_LEAVES.items():
            for leaf in leaves:
                node = getattr(getattr(layer, block), leaf)
                assert isinstance(node, cls), (i, leaf, type(node))
                w = state[f"model.layers.{i}.{HF_NAMES[leaf]}.weight"]  # [N, K]: the node's own orientation
                if mode == "fp8":
                    v, s = fp8_block.quantize_np(w)
                    np.testing.assert_array_equal(np.asarray(node.weight).view(np.uint8), v.view(np.uint8))
                    np.testing.assert_array_equal(np.asarray(node.scale), s)
                else:
                    p, b, g = nvfp4.quantize_np(w)
                    np.testing.assert_array_equal(np.asarray(node.packed), p)
                    np.testing.assert_array_equal(np.asarray(node.block_scale).view(np.uint8), b.view(np.uint8))
                    assert np.asarray(node.global_scale) == g
    assert isinstance(params.lm_head, jax.Array) and isinstance(params.embed, jax.Array)


def test_load_time_conversion_is_exact_and_reports_its_accuracy_cost(dense, capsys):
    path, model, cfg = dense
    state = {k: v.detach().numpy() for k, v in model.state_dict().items()}
    exact = hf_logprobs(model, TOKENS)
    rows, picked = np.arange(len(TOKENS) - 1), np.asarray(TOKENS[1:])
    drift = {}
    for mode, cls in (("fp8", Fp8BlockWeight), ("nvfp4", Nvfp4Weight)):
        params = load_params(str(path), cfg, "float32", make_mesh(1), DEFAULT_RULES, quantize=mode)
        _check_converted_leaves(params, state, cls, mode)
        runner = PagedRunner(cfg, params, make_mesh(1))
        logprobs = np.asarray(jax.nn.log_softmax(runner.prefill("seq", TOKENS), axis=-1))
        np.testing.assert_allclose(logprobs, hf_logprobs(_fake_quantized(model, mode), TOKENS), atol=1e-3, rtol=0)
        drift[mode] = np.abs(logprobs[rows, picked] - exact[rows, picked])
    # Context: the same weights merely rounded to bfloat16.
    drift["bf16 rounding"] = np.abs(hf_logprobs(_fake_quantized(model, "bf16"), TOKENS)[rows, picked] - exact[rows, picked])
    with capsys.disabled():
        for mode, d in drift.items():
            print(f"\n[{mode}] next-token teacher-forced logprob vs float32 (tiny random Llama): "
                  f"mean |diff| {d.mean():.4f} nats, max {d.max():.4f}")
    assert drift["bf16 rounding"].mean() < drift["fp8"].mean() < drift["nvfp4"].mean() < 1.0


def test_expert_stacks_convert_to_nvfp4_from_dense_and_from_fp8_blocks():
    rng = np.random.default_rng(0)
    rows = rng.standard_normal((4, 96, 64)).astype(np.float32)  # per expert [N=ffw, K=embed]
    spec = ParamSpec((4, 64, 96), jnp.float32, ("experts", "embed", "ffw"))
    src = HFStackedSource(tuple(f"model.layers.0.mlp.experts.{e}.up_proj.weight" for e in range(4)), True)
    mesh, opts = make_mesh(1), parse_quantize("fp8+nvfp4-experts")
    dense_leaf = jnp.asarray(np.transpose(rows, (0, 2, 1)))  # dgjax's [E, embed, ffw]
    node = convert_leaf(dense_leaf, src, spec, opts, mesh, DEFAULT_RULES, rows=96)
    p, b, g = nvfp4.quantize_np(rows)
    assert isinstance(node, Nvfp4Weight) and node.expert_dims == 1 and node.global_scale.shape == (4,)
    np.testing.assert_array_equal(np.asarray(node.packed), p)
    np.testing.assert_array_equal(np.asarray(node.global_scale), g)
    # An FP8-block checkpoint's experts: dequantized on device, requantized to NVFP4.
    v, s = fp8_block.quantize_np(rows)
    fp8_node = Fp8BlockWeight(weight=jnp.asarray(v), scale=jnp.asarray(s), shape=(4, 64, 96), in_dims=1, expert_dims=1)
    node = convert_leaf(fp8_node, src, spec, opts, mesh, DEFAULT_RULES)
    p, b, g = nvfp4.quantize_np(fp8_block.dequantize_np(v, s))
    np.testing.assert_array_equal(np.asarray(node.packed), p)
    np.testing.assert_array_equal(np.asarray(node.block_scale).view(np.uint8), b.view(np.uint8))
    # Routers and lm_head are never converted.
    router = ParamSpec((64, 4), jnp.float32, ("embed", "experts"))
    leaf = jnp.ones((64, 4))
    router_src = HFSource("model.layers.0.mlp.gate.weight", True)
    assert convert_leaf(leaf, router_src, router, opts, mesh, DEFAULT_RULES) is leaf
    head = ParamSpec((64, 128), jnp.float32, ("embed", "vocab"))
    leaf = jnp.ones((64, 128))
    assert convert_leaf(leaf, HFSource("lm_head.weight", True), head, opts, mesh, DEFAULT_RULES) is leaf


def test_random_weights_convert_too_and_the_flag_reaches_engine_config(dense):
    _, _, cfg = dense
    family = get_family(cfg)
    specs = family.param_specs(cfg, jnp.float32)
    mesh = make_mesh(1)
    params = init_params(specs, jax.random.key(0), mesh, DEFAULT_RULES)
    converted = convert_params(params, hf_sources(cfg), specs, parse_quantize("fp8"), mesh, DEFAULT_RULES)
    o = converted.layers[1].attn.o
    assert isinstance(o, Fp8BlockWeight) and o.in_dims == 2 and o.weight.shape == (192, 192)
    np.testing.assert_allclose(np.asarray(o.dequantize()), np.asarray(params.layers[1].attn.o), rtol=2**-4, atol=1e-3)
    untouched = convert_params(params, hf_sources(cfg), specs, parse_quantize("nvfp4-experts"), mesh, DEFAULT_RULES)
    assert all(a is b for a, b in zip(jax.tree_util.tree_leaves(untouched), jax.tree_util.tree_leaves(params)))
    p = argparse.ArgumentParser()
    add_engine_args(p)
    assert engine_config_from_args(p.parse_args([])).quantize == "none"
    assert engine_config_from_args(p.parse_args(["--quantize", "fp8+nvfp4-experts"])).quantize == "fp8+nvfp4-experts"
    assert set(QUANTIZE_MODES) == {"none", "fp8", "nvfp4", "nvfp4-experts", "fp8+nvfp4-experts", "bf12"}
    with pytest.raises(ValueError, match="unknown quantize mode"):
        parse_quantize("int3")


def test_bf12_holds_every_projection_and_lm_head_bit_for_bit_and_decodes_the_same(dense, monkeypatch):
    """--quantize bf12 on a bf16 checkpoint: each projection and lm_head becomes a Bf12Weight holding exactly the
    bf16 bits (checked against the numpy encoder too); prefill logprobs equal the bf16 model's, through the
    reference (decode, then dot) and through the interpreted GEMV kernel (decode-sized calls)."""
    path, model, cfg = dense
    mesh = make_mesh(1)
    plain = load_params(str(path), cfg, "bfloat16", mesh, DEFAULT_RULES)
    params = load_params(str(path), cfg, "bfloat16", mesh, DEFAULT_RULES, quantize="bf12")
    for i, layer in enumerate(params.layers):
        for block, leaves in LINEAR_LEAVES.items():
            for leaf in leaves:
                node, dense_leaf = getattr(getattr(layer, block), leaf), getattr(getattr(plain.layers[i], block), leaf)
                assert isinstance(node, Bf12Weight), (i, leaf, type(node))
                np.testing.assert_array_equal(np.asarray(node.dequantize(jnp.bfloat16)).view(np.uint16),
                                              np.asarray(dense_leaf).view(np.uint16))
    head = params.lm_head
    assert isinstance(head, Bf12Weight) and isinstance(params.embed, jax.Array)
    want = bf12.encode_np(np.asarray(plain.lm_head).T.copy())
    for name, array in want.items():
        np.testing.assert_array_equal(np.asarray(getattr(head, name)), array)
    base = np.asarray(jax.nn.log_softmax(PagedRunner(cfg, plain, mesh).prefill("seq", TOKENS), axis=-1))
    one = np.asarray(jax.nn.log_softmax(PagedRunner(cfg, plain, mesh).prefill("seq", TOKENS[:1]), axis=-1))
    for impl in ("ref", "kernel"):
        monkeypatch.setenv("DGJAX_QUANT_GEMV", impl)
        jax.clear_caches()
        runner = PagedRunner(cfg, params, mesh)
        logprobs = np.asarray(jax.nn.log_softmax(runner.prefill("one", TOKENS[:1]), axis=-1))  # one row: the GEMV
        if impl == "ref":  # the same bf16 weights through the same dots: the same logprobs
            np.testing.assert_array_equal(logprobs, one)
            np.testing.assert_array_equal(np.asarray(jax.nn.log_softmax(runner.prefill("all", TOKENS), axis=-1)), base)
        else:  # the kernel sums in another order (float32 results within ~1e-7); bf16 activations amplify that
            np.testing.assert_allclose(logprobs, one, atol=0.1, rtol=0)
            assert logprobs.argmax(-1).tolist() == one.argmax(-1).tolist()
    jax.clear_caches()


def test_bf12_conversion_keeps_what_it_cannot_hold(caplog):
    """A bf16 weight with a row of too many escapes, a float32 weight and a router stay as they are (logged);
    an ordinary bf16 weight converts; the flag reaches the engine config."""
    mesh, opts = make_mesh(1), parse_quantize("bf12")
    spec = ParamSpec((128, 32), jnp.bfloat16, ("embed", "ffw"))
    src = HFSource("model.layers.0.mlp.up_proj.weight", True)
    good = jnp.asarray(np.random.default_rng(0).standard_normal((128, 32)), jnp.bfloat16)
    node = convert_leaf(good, src, spec, opts, mesh, DEFAULT_RULES)
    assert isinstance(node, Bf12Weight) and node.shape == (128, 32)
    bad = good.at[0, 3].set(jnp.asarray(2.0**30, jnp.bfloat16))  # output 3's window moves above its other 127
    with caplog.at_level("INFO", logger="dgjax.checkpoint"):
        assert convert_leaf(bad, src, spec, opts, mesh, DEFAULT_RULES) is bad
        f32 = good.astype(jnp.float32)
        assert convert_leaf(f32, src, spec, opts, mesh, DEFAULT_RULES) is f32
    assert "escapes" in caplog.text and "float32 weight is kept" in caplog.text
    router = ParamSpec((128, 4), jnp.bfloat16, ("embed", "experts"))
    leaf = good[:, :4]
    assert convert_leaf(leaf, HFSource("model.layers.0.mlp.gate.weight", True), router, opts, mesh,
                        DEFAULT_RULES) is leaf
    p = argparse.ArgumentParser()
    add_engine_args(p)
    assert engine_config_from_args(p.parse_args(["--quantize", "bf12"])).quantize == "bf12"


def test_bf12_converts_expert_stacks_bit_for_bit():
    """bf12 mode takes MoE expert stacks too ([E, in, out] -> a Bf12Weight over the [E, N, K] rows), equal to the
    numpy encoder's arrays; the router next to them stays."""
    rng = np.random.default_rng(4)
    rows = rng.standard_normal((4, 96, 64)).astype(np.float32)  # per expert [N=ffw, K=embed]
    rows[:, 5, 7] = 1e-30  # an escape
    bits = jnp.asarray(rows, jnp.bfloat16)
    spec = ParamSpec((4, 64, 96), jnp.bfloat16, ("experts", "embed", "ffw"))
    src = HFStackedSource(tuple(f"model.layers.0.mlp.experts.{e}.up_proj.weight" for e in range(4)), True)
    mesh, opts = make_mesh(1), parse_quantize("bf12")
    node = convert_leaf(jnp.swapaxes(bits, 1, 2), src, spec, opts, mesh, DEFAULT_RULES, rows=96)
    assert isinstance(node, Bf12Weight) and node.expert_dims == 1 and node.shape == (4, 64, 96)
    want = bf12.encode_np(np.asarray(bits))
    for name, array in want.items():
        np.testing.assert_array_equal(np.asarray(getattr(node, name)), array)
    router = ParamSpec((64, 4), jnp.bfloat16, ("embed", "experts"))
    leaf = bits[0, :4].T
    assert convert_leaf(leaf, HFSource("model.layers.0.mlp.gate.weight", True), router, opts, mesh,
                        DEFAULT_RULES) is leaf
