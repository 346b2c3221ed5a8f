"""Tiny Llama checkpoints written in each quantized format's real on-disk layout, and their float32 references.

Each case quantizes the Linear weights of one random transformers model into the tensors and config files a
public release of that format carries; the reference model is the same transformers model with those
weights replaced by an independent float32 decoding of the written tensors (tests/quant/quant_refs.py).
"""

from __future__ import annotations

import json
import os
import sys

import numpy as np
import torch
import transformers

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "quant"))
import quant_refs  # noqa: E402

from dgjax.checkpoint.safetensors_io import write_safetensors  # noqa: E402
from dgjax.quant import fp8_block, int_group, mxfp4, nvfp4  # noqa: E402

# hidden 192 and ffn 320: partial 128-blocks, and K divisible by every group size used (16, 32, 64).
TINY = dict(vocab_size=128, hidden_size=192, intermediate_size=320, num_hidden_layers=2, num_attention_heads=4,
            num_key_value_heads=2, head_dim=48, max_position_embeddings=64, initializer_range=0.1,
            tie_word_embeddings=False, bos_token_id=None, eos_token_id=None, pad_token_id=None)
TOKENS = [5, 17, 99, 3, 64, 23, 8, 77, 41, 120, 2, 56, 90]
LINEARS = ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
           "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj")

CT_MIXED_GROUPS = {  # compressed-tensors groups with per-group formats (the newer layout)
    "group_0": {"targets": [r"re:.*self_attn\.(q|k|v)_proj$"], "format": "pack-quantized",
                "weights": {"num_bits": 4, "type": "int", "symmetric": False, "strategy": "group", "group_size": 64}},
    "group_1": {"targets": [r"re:model\.layers\.0\.self_attn\.o_proj$"], "format": "int-quantized",
                "weights": {"num_bits": 8, "type": "int", "symmetric": True, "strategy": "channel"}},
    "group_4": {"targets": [r"re:model\.layers\.1\.self_attn\.o_proj$"], "format": "pack-quantized",
                "weights": {"num_bits": 8, "type": "int", "symmetric": False, "strategy": "group", "group_size": 64}},
    "group_2": {"targets": [r"re:.*mlp\.(gate|up)_proj$"], "format": "pack-quantized",
                "weights": {"num_bits": 4, "type": "int", "symmetric": True, "strategy": "group", "group_size": 32}},
    "group_3": {"targets": [r"re:.*down_proj$"], "format": "mxfp4-pack-quantized",
                "weights": {"num_bits": 4, "type": "float", "strategy": "group", "group_size": 32}},
}

# case -> (config.json quantization_config or None, hf_quant_config.json or None)
CASES = {
    "fp8_block": ({"quant_method": "fp8", "fmt": "e4m3", "activation_scheme": "dynamic",
                   "weight_block_size": [128, 128]}, None),
    "nvfp4_modelopt": (None, {"producer": {"name": "modelopt", "version": "0.29.0"},
                              "quantization": {"quant_algo": "NVFP4", "kv_cache_quant_algo": None, "group_size": 16,
                                               "exclude_modules": ["lm_head", "model.layers.1.self_attn*"]}}),
    "mxfp4_gpt_oss": ({"quant_method": "mxfp4",
                       "modules_to_not_convert": ["model.layers.*.self_attn", "model.embed_tokens", "lm_head"]}, None),
    "compressed_tensors_mixed": ({"quant_method": "compressed-tensors", "quantization_status": "compressed",
                                  "config_groups": CT_MIXED_GROUPS,
                                  "ignore": ["lm_head", r"re:model\.layers\.1\.mlp\.down_proj$"]}, None),
}


def _fmt_for(case: str, module: str):
    """(kind, params) a case stores `module` in, or None for a dense module."""
    layer, name = int(module.split(".")[2]), module.split(".", 3)[3]
    if case == "fp8_block":
        return ("fp8", {})
    if case == "nvfp4_modelopt":
        return None if layer == 1 and name.startswith("self_attn") else ("nvfp4", {})
    if case == "mxfp4_gpt_oss":
        return None if name.startswith("self_attn") else ("mxfp4_blocks", {})
    if name.endswith(("q_proj", "k_proj", "v_proj")):
        return ("packed", dict(bits=4, group=64, symmetric=False))
    if name.endswith("o_proj"):
        return ("int8", {}) if layer == 0 else ("packed", dict(bits=8, group=64, symmetric=False))
    if name.endswith(("gate_proj", "up_proj")):
        return ("packed", dict(bits=4, group=32, symmetric=True))
    return None if layer == 1 else ("mxfp4_packed", {})


def _encode(kind: str, w: np.ndarray, params: dict) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """(tensor suffix -> array as written, independent float32 decoding of what was written)."""
    if kind == "fp8":
        v, s = fp8_block.quantize_np(w)
        return {"weight": v, "weight_scale_inv": s}, quant_refs.fp8_block_dequantize_transformers(v, s)
    if kind == "nvfp4":
        p, b, g = nvfp4.quantize_np(w)
        amax_in = np.float32(0.5)  # an activation scale, as ModelOpt writes one (unused by weight-only math)
        out = {"weight": p, "weight_scale": b, "weight_scale_2": np.float32(g).reshape(()),
               "input_scale": (amax_in / np.float32(2688)).reshape(())}
        return out, quant_refs.nvfp4_dequantize_torch(p, b, g)
    if kind in ("mxfp4_blocks", "mxfp4_packed"):
        p, s = mxfp4.quantize_np(w)
        ref = quant_refs.mxfp4_dequantize_transformers(p, s)
        if kind == "mxfp4_blocks":
            return {"weight_blocks": p.reshape(p.shape[0], -1, 16), "weight_scales": s}, ref
        return {"weight_packed": p, "weight_scale": s}, ref
    if kind == "int8":
        q, s, _ = int_group.quantize_np(w, 8, w.shape[1], symmetric=True)
        return {"weight": q, "weight_scale": s}, quant_refs.ct_dequantize_torch(q, torch.from_numpy(
            s.astype(np.float32)).to(torch.bfloat16), None, w.shape[1])
    bits, group, sym = params["bits"], params["group"], params["symmetric"]
    q, s, z = int_group.quantize_np(w, bits, group, symmetric=sym)
    out = {"weight_packed": quant_refs.ct_pack_int32(q, bits), "weight_scale": s,
           "weight_shape": np.array(w.shape, np.int64)}
    zp = None
    if not sym:
        out["weight_zero_point"] = quant_refs.ct_pack_int32(z, bits, packed_dim=0)
        zp = quant_refs.ct_unpack_int32_torch(out["weight_zero_point"], bits, w.shape[0], packed_dim=0)
    q_read = quant_refs.ct_unpack_int32_torch(out["weight_packed"], bits, w.shape[1])
    s_t = torch.from_numpy(s.astype(np.float32)).to(torch.bfloat16)
    return out, quant_refs.ct_dequantize_torch(q_read, s_t, zp, group)


def tiny_hf_model(seed: int = 0, **overrides) -> torch.nn.Module:
    torch.manual_seed(seed)
    config = transformers.LlamaConfig(**{**TINY, **overrides})
    model = transformers.AutoModelForCausalLM.from_config(config, attn_implementation="eager", dtype=torch.float32)
    with torch.no_grad():  # norms perturbed away from 1 so a dropped norm weight shows
        for name, p in model.named_parameters():
            if p.ndim == 1:
                p.copy_(1.0 + 0.3 * torch.randn_like(p))
    return model.eval()


def write_case(case: str, path, **overrides) -> torch.nn.Module:
    """Write checkpoint `case` into `path`; return the float32 reference model (dequantized weights)."""
    model = tiny_hf_model(**overrides)
    model.save_pretrained(path)  # config.json (and a dense model.safetensors, replaced below)
    state = {k: v.detach().numpy().copy() for k, v in model.state_dict().items()}
    tensors, reference = {}, {}
    for name, value in state.items():
        module = name.removesuffix(".weight")
        fmt = _fmt_for(case, module) if any(module.endswith(lin) for lin in LINEARS) else None
        if fmt is None:
            tensors[name] = value
            continue
        written, ref = _encode(fmt[0], value, fmt[1])
        tensors.update({f"{module}.{k}": v for k, v in written.items()})
        reference[name] = torch.from_numpy(np.ascontiguousarray(ref))
    os.remove(os.path.join(path, "model.safetensors"))
    write_safetensors(os.path.join(path, "model.safetensors"), tensors)
    qc, hf_quant = CASES[case]
    with open(os.path.join(path, "config.json")) as f:
        config = json.load(f)
    if qc is not None:
        config["quantization_config"] = qc
    with open(os.path.join(path, "config.json"), "w") as f:
        json.dump(config, f)
    if hf_quant is not None:
        with open(os.path.join(path, "hf_quant_config.json"), "w") as f:
            json.dump(hf_quant, f)
    with torch.no_grad():
        sd = model.state_dict()
        for name, ref in reference.items():
            sd[name].copy_(ref)
    return model


def hf_logprobs(model: torch.nn.Module, tokens: list[int]) -> np.ndarray:
    with torch.no_grad():
        return torch.log_softmax(model(torch.tensor([tokens])).logits[0].float(), -1).numpy()
