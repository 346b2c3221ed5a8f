"""Quantized HF checkpoints (FP8 blocks, ModelOpt NVFP4, gpt-oss MXFP4, compressed-tensors int4/int8/mxfp4)
load packed and reproduce the float32 model built from an independent decoding of their tensors."""

from __future__ import annotations

import json
import os
import shutil
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from quant_checkpoints import CASES, TOKENS, hf_logprobs, quant_refs, write_case

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "models"))
from paged_runner import PagedRunner  # noqa: E402

from dgjax.checkpoint.hf_names import HFStackedSource  # noqa: E402
from dgjax.checkpoint.loader import load_params  # noqa: E402
from dgjax.checkpoint.quant_config import read_quant_config  # noqa: E402
from dgjax.checkpoint.quantized import QuantizedCheckpoint  # noqa: E402
from dgjax.checkpoint.safetensors_io import SafetensorsFolder, write_safetensors  # noqa: E402
from dgjax.config import ModelConfig  # noqa: E402
from dgjax.models.params import ParamSpec  # noqa: E402
from dgjax.quant import Fp8BlockWeight, IntWeight, Mxfp4Weight, Nvfp4Weight, fp8_block, nvfp4  # noqa: E402
from dgjax.sharding import DEFAULT_RULES, make_mesh  # noqa: E402


@pytest.fixture(scope="module", params=sorted(CASES))
def case(request, tmp_path_factory):
    path = tmp_path_factory.mktemp(request.param)
    reference = write_case(request.param, path)
    cfg = ModelConfig.from_dir(str(path))
    params = load_params(str(path), cfg, "float32", make_mesh(1), DEFAULT_RULES)
    return request.param, path, cfg, params, reference


def test_teacher_forced_logprobs_match_the_dequantized_float32_reference(case):
    name, _, cfg, params, reference = case
    runner = PagedRunner(cfg, params, make_mesh(1))
    logprobs = np.asarray(jax.nn.log_softmax(runner.prefill("seq", TOKENS), axis=-1))
    np.testing.assert_allclose(logprobs, hf_logprobs(reference, TOKENS), atol=1e-3, rtol=0)


EXPECTED_NODES = {  # case -> {(layer, leaf): (node type, {array: (dtype, shape)})}; None = dense
    "fp8_block": {(0, "attn.q"): (Fp8BlockWeight, {"weight": (jnp.float8_e4m3fn, (192, 192)),
                                                   "scale": (jnp.float32, (2, 2))}),
                  (1, "mlp.down"): (Fp8BlockWeight, {"weight": (jnp.float8_e4m3fn, (192, 320)),
                                                     "scale": (jnp.float32, (2, 3))})},
    "nvfp4_modelopt": {(0, "attn.k"): (Nvfp4Weight, {"packed": (jnp.uint8, (96, 96)),
                                                     "block_scale": (jnp.float8_e4m3fn, (96, 12)),
                                                     "global_scale": (jnp.float32, ()),
                                                     "input_scale": (jnp.float32, ())}),
                       (1, "attn.k"): None},
    "mxfp4_gpt_oss": {(0, "mlp.up"): (Mxfp4Weight, {"packed": (jnp.uint8, (320, 96)), "scale": (jnp.uint8, (320, 6))}),
                      (0, "attn.o"): None},
    "compressed_tensors_mixed": {
        (0, "attn.v"): (IntWeight, {"values": (jnp.uint8, (96, 96)), "scale": (jnp.bfloat16, (96, 3)),
                                    "zero_point": (jnp.int8, (96, 3))}),
        (0, "attn.o"): (IntWeight, {"values": (jnp.int8, (192, 192)), "scale": (jnp.bfloat16, (192, 1))}),
        (1, "attn.o"): (IntWeight, {"values": (jnp.int8, (192, 192)), "scale": (jnp.bfloat16, (192, 3)),
                                    "zero_point": (jnp.int8, (192, 3))}),
        (1, "mlp.gate"): (IntWeight, {"values": (jnp.uint8, (320, 96)), "scale": (jnp.bfloat16, (320, 6))}),
        (0, "mlp.down"): (Mxfp4Weight, {"packed": (jnp.uint8, (192, 160)), "scale": (jnp.uint8, (192, 10))}),
        (1, "mlp.down"): None},
}


def test_weights_stay_packed_on_device_in_the_documented_layout(case):
    name, _, _, params, _ = case
    assert not isinstance(params.lm_head, (Fp8BlockWeight, Nvfp4Weight, Mxfp4Weight, IntWeight))
    for (layer, leaf), want in EXPECTED_NODES[name].items():
        block, field = leaf.split(".")
        got = getattr(getattr(params.layers[layer], block), field)
        if want is None:
            assert isinstance(got, jax.Array) and got.dtype == jnp.float32
            continue
        cls, arrays = want
        assert isinstance(got, cls), (leaf, type(got))
        for arr_name, (dtype, shape) in arrays.items():
            arr = getattr(got, arr_name)
            assert isinstance(arr, jax.Array) and arr.dtype == dtype and arr.shape == shape, (leaf, arr_name, arr)


def _copy_with(src, dst, config_edit=None, drop=(), add=None):
    os.makedirs(dst)
    for f in os.listdir(src):
        if f != "model.safetensors":
            shutil.copy(os.path.join(src, f), os.path.join(dst, f))
    folder = SafetensorsFolder(str(src))
    tensors = {k: np.array(folder[k]) for k in folder if k not in drop}
    tensors.update(add or {})
    write_safetensors(os.path.join(dst, "model.safetensors"), tensors)
    if config_edit is not None:
        with open(os.path.join(dst, "config.json")) as f:
            config = json.load(f)
        config_edit(config)
        with open(os.path.join(dst, "config.json"), "w") as f:
            json.dump(config, f)
    return str(dst)


def test_inconsistent_checkpoints_are_rejected_by_name(tmp_path):
    path = tmp_path / "fp8"
    path.mkdir()
    write_case("fp8_block", path)
    cfg = ModelConfig.from_dir(str(path))
    mesh = make_mesh(1)
    ignored = _copy_with(path, tmp_path / "ignored", lambda c: c["quantization_config"].update(
        modules_to_not_convert=["model.layers.0.mlp.up_proj"]))
    with pytest.raises(ValueError, match=r"model\.layers\.0\.mlp\.up_proj.*ignore list"):
        load_params(ignored, cfg, "float32", mesh, DEFAULT_RULES)
    missing = _copy_with(path, tmp_path / "missing", drop=["model.layers.1.mlp.gate_proj.weight_scale_inv"])
    with pytest.raises(ValueError, match=r"gate_proj\.weight is stored as float8_e4m3fn without the scales"):
        load_params(missing, cfg, "float32", mesh, DEFAULT_RULES)
    unconfigured = _copy_with(path, tmp_path / "unconfigured", lambda c: c.pop("quantization_config"))
    with pytest.raises(ValueError, match="no quantization_config"):
        load_params(unconfigured, cfg, "float32", mesh, DEFAULT_RULES)
    extra = _copy_with(path, tmp_path / "extra", add={"model.layers.0.mlp.up_proj.bogus": np.zeros(2, np.float32)})
    with pytest.raises(ValueError, match="bogus"):
        load_params(extra, cfg, "float32", mesh, DEFAULT_RULES)


def test_per_expert_quantized_tensors_stack_on_a_leading_expert_axis(tmp_path):
    """Qwen3-MoE / DeepSeek-style `experts.{e}.gate_proj` FP8 and NVFP4 tensors become one [E, N, K] node."""
    rng = np.random.default_rng(0)
    experts = [rng.standard_normal((320, 192)).astype(np.float32) for _ in range(3)]  # gate_proj [ffw, embed]
    spec = ParamSpec((3, 192, 320), np.float32, ("experts", "embed", "ffw"))
    for kind, config in (("fp8", {"quant_method": "fp8", "weight_block_size": [128, 128]}),
                         ("nvfp4", {"quant_method": "modelopt", "quant_algo": "NVFP4"})):
        d = tmp_path / kind
        d.mkdir()
        tensors, refs = {}, []
        for e, w in enumerate(experts):
            pre = f"model.layers.0.mlp.experts.{e}.gate_proj"
            if kind == "fp8":
                v, s = fp8_block.quantize_np(w)
                tensors.update({f"{pre}.weight": v, f"{pre}.weight_scale_inv": s})
                refs.append(quant_refs.fp8_block_dequantize_transformers(v, s))
            else:
                p, b, g = nvfp4.quantize_np(w)
                tensors.update({f"{pre}.weight": p, f"{pre}.weight_scale": b, f"{pre}.weight_scale_2": g.reshape(1)})
                refs.append(quant_refs.nvfp4_dequantize_torch(p, b, g))
        write_safetensors(str(d / "model.safetensors"), tensors)
        (d / "config.json").write_text(json.dumps({"quantization_config": config}))
        ckpt = QuantizedCheckpoint(read_quant_config(str(d)), SafetensorsFolder(str(d)))
        src = HFStackedSource(tuple(f"model.layers.0.mlp.experts.{e}.gate_proj.weight" for e in range(3)), True)
        plan = ckpt.plan(src)
        assert plan.consumed == set(tensors)
        node = ckpt.load(plan, spec, make_mesh(1), DEFAULT_RULES)
        assert node.expert_dims == 1 and node.in_dims == 1 and node.shape == (3, 192, 320)
        if kind == "fp8":
            assert node.weight.shape == (3, 320, 192) and node.scale.shape == (3, 3, 2)
        else:
            assert node.packed.shape == (3, 320, 96) and node.global_scale.shape == (3,)
        dense = np.stack([r.T for r in refs])  # dgjax's [E, embed, ffw]
        np.testing.assert_array_equal(np.asarray(node.dequantize()), dense)
