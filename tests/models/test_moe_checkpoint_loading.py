"""Loading MoE checkpoints: per-expert tensors stacked, GLM's MTP layer kept, router dtypes, clear errors."""

from __future__ import annotations

import shutil

import jax
import numpy as np
import pytest
from moe_cases import build_case

from dgjax.checkpoint.hf_names import param_path_by_hf_name
from dgjax.checkpoint.loader import load_params
from dgjax.checkpoint.safetensors_io import SafetensorsFolder, write_safetensors
from dgjax.config import ModelConfig
from dgjax.models.params import is_spec
from dgjax.models.registry import get_family
from dgjax.sharding import DEFAULT_RULES, make_mesh


@pytest.fixture(scope="module")
def glm(tmp_path_factory):
    return build_case("glm4_moe_grouped_shared_mtp", tmp_path_factory.mktemp("glm"))


def _copy_without(src, dst, drop):
    shutil.copy(src / "config.json", dst / "config.json")
    folder = SafetensorsFolder(str(src))
    write_safetensors(str(dst / "model.safetensors"), {k: np.array(folder[k]) for k in folder if k not in drop})
    return dst


def test_experts_are_stacked_input_major_in_expert_order(glm):
    folder = SafetensorsFolder(str(glm.path))
    experts = glm.params.layers[1].ffn.experts
    for e in range(glm.cfg.num_experts):
        pre = f"model.layers.1.mlp.experts.{e}"
        np.testing.assert_array_equal(np.asarray(experts.gate[e]), folder[f"{pre}.gate_proj.weight"].T)
        np.testing.assert_array_equal(np.asarray(experts.up[e]), folder[f"{pre}.up_proj.weight"].T)
        np.testing.assert_array_equal(np.asarray(experts.down[e]), folder[f"{pre}.down_proj.weight"].T)
    paths = param_path_by_hf_name(glm.cfg)
    assert paths["model.layers.1.mlp.experts.5.up_proj.weight"].endswith(".ffn.experts.up[5]")


def test_mtp_layer_is_loaded_into_params_and_not_confused_with_decoder_layers(glm):
    n = glm.cfg.num_hidden_layers
    mtp, t = glm.params.mtp, glm.mtp_tensors
    assert len(glm.params.layers) == n and len(mtp) == 1
    pre = f"model.layers.{n}"
    np.testing.assert_array_equal(np.asarray(mtp[0].eh_proj), t[f"{pre}.eh_proj.weight"].T)
    np.testing.assert_array_equal(np.asarray(mtp[0].enorm), t[f"{pre}.enorm.weight"])
    np.testing.assert_array_equal(np.asarray(mtp[0].hnorm), t[f"{pre}.hnorm.weight"])
    np.testing.assert_array_equal(np.asarray(mtp[0].head_norm), t[f"{pre}.shared_head.norm.weight"])
    block = mtp[0].block
    np.testing.assert_array_equal(np.asarray(block.ffn.experts.down[3]), t[f"{pre}.mlp.experts.3.down_proj.weight"].T)
    np.testing.assert_array_equal(np.asarray(block.ffn.router.score_bias), t[f"{pre}.mlp.gate.e_score_correction_bias"])
    np.testing.assert_array_equal(np.asarray(block.attn.q_bias).reshape(-1), t[f"{pre}.self_attn.q_proj.bias"])


def test_glm46_style_checkpoint_without_mtp_embedding_and_head_copies_loads(glm, tmp_path):
    n = glm.cfg.num_hidden_layers
    drop = {f"model.layers.{n}.embed_tokens.weight", f"model.layers.{n}.shared_head.head.weight"}
    path = _copy_without(glm.path, tmp_path, drop)
    params = load_params(str(path), glm.cfg, "float32", make_mesh(1), DEFAULT_RULES)
    np.testing.assert_array_equal(np.asarray(params.mtp[0].eh_proj), np.asarray(glm.params.mtp[0].eh_proj))


def test_missing_expert_tensor_is_named(glm, tmp_path):
    path = _copy_without(glm.path, tmp_path, {"model.layers.2.mlp.experts.6.up_proj.weight"})
    with pytest.raises(ValueError, match=r"missing tensors: \['model.layers.2.mlp.experts.6.up_proj.weight'\]"):
        load_params(str(path), glm.cfg, "float32", make_mesh(1), DEFAULT_RULES)


def test_bfloat16_load_keeps_the_sigmoid_router_float32_and_matches_the_specs(glm):
    cfg = ModelConfig.from_dir(str(glm.path))
    params = load_params(str(glm.path), cfg, "bfloat16", make_mesh(1), DEFAULT_RULES)
    router = params.layers[1].ffn.router
    assert router.weight.dtype == np.float32 and router.score_bias.dtype == np.float32
    np.testing.assert_array_equal(np.asarray(router.weight), np.asarray(glm.params.layers[1].ffn.router.weight))
    assert params.layers[1].ffn.experts.gate.dtype == jax.numpy.bfloat16
    specs = get_family(cfg).param_specs(cfg, "bfloat16")
    got = [(a.shape, a.dtype) for a in jax.tree_util.tree_leaves(params)]
    want = [(s.shape, np.dtype(s.dtype)) for s in jax.tree_util.tree_leaves(specs, is_leaf=is_spec)]
    assert got == want
