"""quantization_config / hf_quant_config.json parsing, as the public releases write them."""

from __future__ import annotations

import pytest

from dgjax.checkpoint.quant_config import FP8_BLOCK, INT, MXFP4, NVFP4, parse_quant_config

DEEPSEEK_V3 = {"quantization_config": {"activation_scheme": "dynamic", "fmt": "e4m3", "quant_method": "fp8",
                                       "weight_block_size": [128, 128]}}
QWEN3_FP8 = {"quantization_config": {"activation_scheme": "dynamic", "fmt": "e4m3", "quant_method": "fp8",
                                     "weight_block_size": [128, 128],
                                     "modules_to_not_convert": ["lm_head", "mlp.gate"]}}
MODELOPT_HF_QUANT = {"producer": {"name": "modelopt", "version": "0.29.0"},
                     "quantization": {"quant_algo": "NVFP4", "kv_cache_quant_algo": None, "group_size": 16,
                                      "exclude_modules": ["lm_head", "model.layers.0.self_attn*"]}}
MODELOPT_CONFIG = {"quantization_config": {
    "config_groups": {"group_0": {"input_activations": {"dynamic": False, "num_bits": 4, "type": "float",
                                                        "group_size": 16},
                                  "weights": {"dynamic": False, "num_bits": 4, "type": "float", "group_size": 16},
                                  "targets": ["Linear"]}},
    "ignore": ["lm_head", "model.layers.*.mlp.gate"], "quant_algo": "NVFP4", "quant_method": "modelopt"}}
GPT_OSS = {"quantization_config": {"quant_method": "mxfp4", "modules_to_not_convert": [
    "model.layers.*.self_attn", "model.layers.*.mlp.router", "model.embed_tokens", "lm_head"]}}
W4A16 = {"quantization_config": {
    "quant_method": "compressed-tensors", "format": "pack-quantized", "quantization_status": "compressed",
    "ignore": ["lm_head", "re:.*mlp.down_proj$"], "kv_cache_scheme": None,
    "config_groups": {"group_0": {"targets": ["Linear"], "input_activations": None, "output_activations": None,
                                  "weights": {"num_bits": 4, "type": "int", "symmetric": False, "strategy": "group",
                                              "group_size": 128, "dynamic": False, "actorder": None}}}}}
W8A16_CHANNEL = {"quantization_config": {
    "quant_method": "compressed-tensors", "format": "int-quantized", "ignore": ["lm_head"],
    "config_groups": {"group_0": {"targets": ["Linear"], "weights": {"num_bits": 8, "type": "int", "symmetric": True,
                                                                     "strategy": "channel", "group_size": None}}}}}


def test_fp8_block_configs_and_transformers_style_not_convert_matching():
    ds = parse_quant_config(DEEPSEEK_V3)
    fmt = ds.format_for("model.layers.3.mlp.experts.7.down_proj")
    assert fmt.kind == FP8_BLOCK and fmt.block == (128, 128)
    qw = parse_quant_config(QWEN3_FP8)
    assert qw.format_for("lm_head") is None
    assert qw.format_for("model.layers.0.mlp.gate") is None  # suffix match at a module boundary
    assert qw.format_for("model.layers.0.mlp.gate_proj").kind == FP8_BLOCK  # ... but not a prefix of a name


def test_modelopt_nvfp4_from_hf_quant_config_and_from_config_json():
    old = parse_quant_config({}, MODELOPT_HF_QUANT)
    assert old.format_for("model.layers.1.self_attn.q_proj").kind == NVFP4
    assert old.format_for("model.layers.0.self_attn.q_proj") is None and old.format_for("lm_head") is None
    new = parse_quant_config(MODELOPT_CONFIG, MODELOPT_HF_QUANT)
    assert new.format_for("model.layers.5.mlp.gate") is None
    assert new.format_for("model.layers.5.mlp.experts.3.up_proj").kind == NVFP4
    with pytest.raises(NotImplementedError, match="FP8_PB_WO"):
        parse_quant_config({}, {"quantization": {"quant_algo": "FP8_PB_WO"}})


def test_gpt_oss_mxfp4_and_compressed_tensors_groups():
    oss = parse_quant_config(GPT_OSS)
    assert oss.format_for("model.layers.11.self_attn.q_proj") is None
    assert oss.format_for("model.layers.11.mlp.experts.gate_up_proj").kind == MXFP4
    w4 = parse_quant_config(W4A16)
    fmt = w4.format_for("model.layers.2.self_attn.o_proj")
    assert (fmt.kind, fmt.bits, fmt.group_size, fmt.symmetric, fmt.packed) == (INT, 4, 128, False, True)
    assert w4.format_for("model.layers.2.mlp.down_proj") is None and w4.format_for("lm_head") is None
    w8 = parse_quant_config(W8A16_CHANNEL).format_for("model.layers.0.mlp.up_proj")
    assert (w8.bits, w8.group_size, w8.packed) == (8, None, False)


def test_unquantized_and_unsupported_configs():
    assert parse_quant_config({"architectures": ["LlamaForCausalLM"]}) is None
    with pytest.raises(NotImplementedError, match="per-tensor"):
        parse_quant_config({"quantization_config": {"quant_method": "fp8"}})
    with pytest.raises(NotImplementedError, match="gptq"):
        parse_quant_config({"quantization_config": {"quant_method": "gptq"}})
    act_order = {"quantization_config": {**W4A16["quantization_config"], "config_groups": {"g": {
        "targets": ["Linear"], "weights": {"num_bits": 4, "type": "int", "strategy": "group", "group_size": 128,
                                           "actorder": "group"}}}}}
    with pytest.raises(NotImplementedError, match="g_idx"):
        parse_quant_config(act_order)
