"""Fused q/k/v and gate/up weights (dgjax.models.fused) against transformers, and the fused layout."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from dense_cases import NEW_TOKENS, PROMPT
from paged_runner import PagedRunner

from dgjax import sharding
from dgjax.models import blocks
from dgjax.models.fused import fuse_projections


def _count_fused(params) -> tuple[int, int]:
    nodes = jax.tree_util.tree_leaves(
        params, is_leaf=lambda n: isinstance(n, (blocks.AttentionParams, blocks.MLPParams)))
    qkv = sum(isinstance(n, blocks.AttentionParams) and n.qkv is not None and n.q is None for n in nodes)
    gate_up = sum(isinstance(n, blocks.MLPParams) and n.gate_up is not None and n.gate is None for n in nodes)
    return qkv, gate_up


def test_fused_model_matches_transformers(dense_case):
    fused = fuse_projections(dense_case.params, dense_case.mesh, sharding.DEFAULT_RULES)
    layers = dense_case.cfg.num_hidden_layers
    assert _count_fused(fused) == (layers, layers)
    runner = PagedRunner(dense_case.cfg, fused, dense_case.mesh)
    logprobs = np.asarray(jax.nn.log_softmax(runner.prefill("seq", dense_case.hf_tokens), axis=-1))
    np.testing.assert_allclose(logprobs, dense_case.hf_logprobs, atol=1e-4, rtol=0)
    greedy = PagedRunner(dense_case.cfg, fused, dense_case.mesh, seed=1)
    assert PROMPT + greedy.greedy("seq", PROMPT, NEW_TOKENS) == dense_case.hf_tokens


def test_qkv_layout_groups_q_heads_with_their_kv_head():
    """Entry i of KV head j is q head j*group + i: the pairing transformers' repeat_kv uses."""
    e, h, kvh, d = 3, 6, 2, 4
    rng = np.random.default_rng(0)
    q, k, v = (jnp.asarray(rng.standard_normal(s), jnp.float32) for s in ((e, h, d), (e, kvh, d), (e, kvh, d)))
    p = blocks.AttentionParams(q=q, k=k, v=v, o=jnp.zeros((h, d, e)))
    qkv = np.asarray(fuse_projections(p, sharding.make_mesh(1), sharding.DEFAULT_RULES).qkv)
    assert qkv.shape == (e, kvh, h // kvh + 2, d)
    for head in range(h):
        np.testing.assert_array_equal(qkv[:, head // 3, head % 3], np.asarray(q)[:, head])
    np.testing.assert_array_equal(qkv[:, :, 3], np.asarray(k))
    np.testing.assert_array_equal(qkv[:, :, 4], np.asarray(v))


@pytest.mark.parametrize("hf_config,gemv,switch", [("qwen3_head_dim_32", "ref", None),
                                                   ("llama_head_dim_32", "ref", None),
                                                   ("qwen3_head_dim_32", "kernel", None),
                                                   ("llama_head_dim_32", "ref", "DGJAX_PREFETCH_O"),
                                                   ("qwen3_head_dim_32", "ref", "DGJAX_ATTENTION_SKIP_IDLE")])
def test_fused_decode_kernel_path_matches_transformers(hf_config, gemv, switch, tmp_path, monkeypatch):
    """Decode through the fused decode attention kernel (interpreted on the CPU) keeps greedy parity with
    transformers (head_dim 32: the kernel's rope segments need >= 16 columns); with gemv "kernel" the
    decode projections also run the skinny GEMV kernel, the input norm fused into the qkv one; `switch`: an
    opt-in attention switch turned on (the o-weight prefetch programs; idle splits skipping their loads)."""
    import torch
    import transformers

    from dense_cases import TINY
    from dgjax.checkpoint.loader import load_params
    from dgjax.config import ModelConfig

    cls = transformers.Qwen3Config if hf_config.startswith("qwen3") else transformers.LlamaConfig
    torch.manual_seed(0)
    hf_cfg = cls(**{**TINY, "hidden_size": 64, "num_attention_heads": 4, "head_dim": 32})
    model = transformers.AutoModelForCausalLM.from_config(hf_cfg, attn_implementation="eager", dtype=torch.float32)
    model.eval().save_pretrained(tmp_path)
    with torch.no_grad():
        want = model.generate(torch.tensor([PROMPT]), max_new_tokens=NEW_TOKENS, do_sample=False)[0].tolist()
    cfg = ModelConfig.from_dir(str(tmp_path))
    mesh = sharding.make_mesh(1)
    params = fuse_projections(load_params(str(tmp_path), cfg, "float32", mesh, sharding.DEFAULT_RULES),
                              mesh, sharding.DEFAULT_RULES)
    monkeypatch.setenv("DGJAX_ATTENTION", "kernel")
    monkeypatch.setenv("DGJAX_GEMV", gemv)
    if switch:
        monkeypatch.setenv(switch, "on")
    runner = PagedRunner(cfg, params, mesh, seed=3)
    assert PROMPT + runner.greedy("seq", PROMPT, NEW_TOKENS) == want


# ---- quantized siblings (dgjax.quant.rows): joined from their packed rows, bit for bit

def _quant_node(fmt: str, w: np.ndarray, in_dims: int = 1):
    """Dense [*in, *out] float32 (`in_dims` input dims) -> a node over its [N, K] rows (numpy encoders; fp8
    with 16-row blocks)."""
    from dgjax.quant import Fp8BlockWeight, IntWeight, Mxfp4Weight, Nvfp4Weight, fp8_block, int_group, mxfp4, nvfp4

    e = int(np.prod(w.shape[:in_dims]))
    rows = w.reshape(e, -1).T
    geo = dict(shape=w.shape, in_dims=in_dims, expert_dims=0)
    if fmt == "fp8":
        values, scale = fp8_block.quantize_np(rows, (16, 16))
        return Fp8BlockWeight(weight=jnp.asarray(values), scale=jnp.asarray(scale), block=(16, 16), **geo)
    if fmt == "mxfp4":
        packed, scale = mxfp4.quantize_np(rows)
        return Mxfp4Weight(packed=jnp.asarray(packed), scale=jnp.asarray(scale), **geo)
    if fmt == "int8":
        values, scale, _ = int_group.quantize_np(rows, 8, 32)
        return IntWeight(values=jnp.asarray(values), scale=jnp.asarray(scale), bits=8, group_size=32, **geo)
    packed, block_scale, global_scale = nvfp4.quantize_np(rows)
    return Nvfp4Weight(packed=jnp.asarray(packed), block_scale=jnp.asarray(block_scale),
                       global_scale=jnp.asarray(global_scale), **geo)


@pytest.mark.parametrize("fmt", ["fp8", "mxfp4", "int8"])
def test_quantized_qkv_and_gate_up_join_bit_for_bit_and_project_alike(fmt):
    from dgjax.models.ops import matmul

    e, h, kvh, d, f = 64, 6, 2, 16, 48
    rng = np.random.default_rng(1)
    dense = {n: rng.standard_normal(s).astype(np.float32) * 0.2
             for n, s in dict(q=(e, h, d), k=(e, kvh, d), v=(e, kvh, d), gate=(e, f), up=(e, f)).items()}
    nodes = {n: _quant_node(fmt, w) for n, w in dense.items()}
    mesh = sharding.make_mesh(1)
    attn = fuse_projections(blocks.AttentionParams(q=nodes["q"], k=nodes["k"], v=nodes["v"], o=jnp.zeros((h, d, e))),
                            mesh, sharding.DEFAULT_RULES)
    mlp = fuse_projections(blocks.MLPParams(gate=nodes["gate"], up=nodes["up"], down=jnp.zeros((f, e))),
                           mesh, sharding.DEFAULT_RULES)
    assert attn.q is None and type(attn.qkv) is type(nodes["q"]) and attn.qkv.shape == (e, kvh, h // kvh + 2, d)
    assert mlp.gate is None and type(mlp.gate_up) is type(nodes["gate"]) and mlp.gate_up.shape == (e, 2, f)
    # the fused node's dequantized rows are the separate nodes' rows, exactly, in the fused layout
    qkv_rows = np.asarray(attn.qkv.rows()).reshape(kvh, h // kvh + 2, d, e)
    q_rows = np.asarray(nodes["q"].rows()).reshape(kvh, h // kvh, d, e)
    np.testing.assert_array_equal(qkv_rows[:, :-2], q_rows)
    np.testing.assert_array_equal(qkv_rows[:, -2], np.asarray(nodes["k"].rows()).reshape(kvh, d, e))
    np.testing.assert_array_equal(qkv_rows[:, -1], np.asarray(nodes["v"].rows()).reshape(kvh, d, e))
    gu_rows = np.asarray(mlp.gate_up.rows()).reshape(2, f, e)
    np.testing.assert_array_equal(gu_rows[0], np.asarray(nodes["gate"].rows()))
    np.testing.assert_array_equal(gu_rows[1], np.asarray(nodes["up"].rows()))
    x = jnp.asarray(rng.standard_normal((3, e)), jnp.float32)
    fused = np.asarray(matmul(x, attn.qkv))
    np.testing.assert_allclose(fused[:, :, -2], np.asarray(matmul(x, nodes["k"])), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(fused[:, :, :-2].reshape(3, h, d), np.asarray(matmul(x, nodes["q"])),
                               rtol=1e-5, atol=1e-5)


def test_quantized_siblings_stay_separate_where_they_cannot_be_joined():
    e, h, kvh, f = 64, 4, 2, 48
    rng = np.random.default_rng(2)
    mesh, rules = sharding.make_mesh(1), sharding.DEFAULT_RULES
    # NVFP4: each tensor has its own global scale
    nv = [_quant_node("nvfp4", rng.standard_normal(s).astype(np.float32)) for s in ((e, f), (e, f))]
    assert fuse_projections(blocks.MLPParams(gate=nv[0], up=nv[1], down=jnp.zeros((f, e))), mesh, rules).gate_up is None
    # fp8 with 16-row scale blocks and 8-wide heads: a head does not start on the row grid
    small = {n: _quant_node("fp8", rng.standard_normal(s).astype(np.float32))
             for n, s in dict(q=(e, h, 8), k=(e, kvh, 8), v=(e, kvh, 8)).items()}
    p = fuse_projections(blocks.AttentionParams(o=jnp.zeros((h, 8, e)), **small), mesh, rules)
    assert p.qkv is None and p.q is small["q"]
    # mixed formats
    mixed = blocks.MLPParams(gate=_quant_node("fp8", rng.standard_normal((e, f)).astype(np.float32)),
                             up=_quant_node("mxfp4", rng.standard_normal((e, f)).astype(np.float32)),
                             down=jnp.zeros((f, e)))
    assert fuse_projections(mixed, mesh, rules).gate_up is None


@pytest.mark.parametrize("arch,gemv", [("Qwen3", "ref"), ("Qwen3", "kernel"), ("Qwen2", "kernel"),
                                       ("Qwen3", "kernel-late")])
def test_fp8_model_decodes_alike_with_joined_projections_through_the_fused_decode_kernel(arch, gemv, tmp_path,
                                                                                         monkeypatch):
    """A tiny Qwen3 (q/k norms) or Qwen2 (qkv bias) whose q/k/v/gate/up are fp8 nodes (16-row blocks, head_dim
    32): joined, decode goes through the fused decode attention kernel (interpreted) and gives the logits of
    the separate nodes. With the quantized GEMV kernel (interpreted), the joined qkv applies the input norm
    in its prologue and, split 4 ways over K, hands its partial sums (SplitSums, with the bias) to the
    attention kernel unsummed, and the fp8 o projection hands its split-K partials to the residual add + norm
    kernel."""
    import torch
    import transformers

    from dense_cases import TINY
    from dgjax.checkpoint.loader import load_params
    from dgjax.config import ModelConfig

    torch.manual_seed(0)
    config_class = getattr(transformers, f"{arch}Config")
    # head_dim 32 (the fused kernel's rope halves need >= 16 columns); Qwen2 derives it from the hidden size
    extra = {"hidden_size": 64, "head_dim": 32} if arch == "Qwen3" else {"hidden_size": 128}
    hf_cfg = config_class(**{**TINY, "num_attention_heads": 4, **extra})
    transformers.AutoModelForCausalLM.from_config(hf_cfg, dtype=torch.float32).save_pretrained(tmp_path)
    cfg = ModelConfig.from_dir(str(tmp_path))
    mesh = sharding.make_mesh(1)
    dense = load_params(str(tmp_path), cfg, "float32", mesh, sharding.DEFAULT_RULES)

    def to_fp8(node):
        if isinstance(node, blocks.AttentionParams):
            return node.replace(o=_quant_node("fp8", np.asarray(node.o), in_dims=2),
                                **{n: _quant_node("fp8", np.asarray(getattr(node, n))) for n in ("q", "k", "v")})
        if isinstance(node, blocks.MLPParams):
            return node.replace(**{n: _quant_node("fp8", np.asarray(getattr(node, n))) for n in ("gate", "up")})
        return node

    separate = jax.tree_util.tree_map(to_fp8, dense, is_leaf=lambda n: isinstance(
        n, (blocks.AttentionParams, blocks.MLPParams)))
    joined = fuse_projections(separate, mesh, sharding.DEFAULT_RULES)
    assert _count_fused(joined) == (cfg.num_hidden_layers, cfg.num_hidden_layers)
    monkeypatch.setenv("DGJAX_ATTENTION", "kernel")
    gemv, _, norm_mode = gemv.partition("-")  # kernel-late: the fused norm's scale applied after the dot
    monkeypatch.setenv("DGJAX_QUANT_GEMV", gemv)  # read at trace time: trace afresh, not from jit's cache
    monkeypatch.setenv("DGJAX_QUANT_GEMV_NORM", norm_mode or "prologue")
    monkeypatch.setenv("DGJAX_QUANT_GEMV_FUSE", "all")  # the fused norm is opt-in: covered here
    monkeypatch.setenv("DGJAX_ADD_NORM", gemv)
    import paged_runner

    step = paged_runner.step_logits.__wrapped__  # a fresh function: jit caches traces per function
    monkeypatch.setattr(paged_runner, "step_logits", jax.jit(lambda p, kv, b, cfg: step(p, kv, b, cfg),
                                                             static_argnames=("cfg",)))
    from dgjax.models import blocks as blocks_module
    from dgjax.pallas.split_sums import SplitSums

    traced = []  # the fused decode call is traced for the joined model only
    real = blocks_module.fused_decode.decode_attention
    monkeypatch.setattr(blocks_module.fused_decode, "decode_attention",
                        lambda qkv, *a, **k: traced.append((type(qkv), getattr(qkv, "bias", None) is not None))
                        or real(qkv, *a, **k))
    added = []  # what reaches the residual add + norm (decode ticks of both models, and prefill)
    real_add = blocks_module.add_norm.add_rms_norm
    monkeypatch.setattr(blocks_module.add_norm, "add_rms_norm",
                        lambda x, delta, *a, **k: added.append((x.shape[1], type(delta))) or real_add(x, delta, *a, **k))
    want = PagedRunner(cfg, separate, mesh, seed=3)
    got = PagedRunner(cfg, joined, mesh, seed=3)
    np.testing.assert_allclose(got.prefill("s", PROMPT), want.prefill("s", PROMPT), atol=2e-5, rtol=0)
    token = [PROMPT[-1]]
    for _ in range(4):
        a, b = got.step([("s", token)], 1)[0], want.step([("s", token)], 1)[0]
        np.testing.assert_allclose(a, b, atol=2e-5, rtol=0)
        token = [int(np.argmax(a[-1]))]
    assert len(traced) >= cfg.num_hidden_layers  # every layer's decode went through the fused kernel
    assert all((t is SplitSums) == (gemv == "kernel") for t, _ in traced), traced
    assert all(biased == (gemv == "kernel" and arch == "Qwen2") for _, biased in traced), traced
    decode_deltas = {t for width, t in added if width == 1}
    assert (SplitSums in decode_deltas) == (gemv == "kernel"), added  # the o projection's partials, unsummed
