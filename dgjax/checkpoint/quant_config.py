"""Which quantized weight format an HF checkpoint uses, read from its config files.

Sources, as the producers write them:
- config.json `quantization_config.quant_method == "fp8"` with `weight_block_size` (DeepSeek-V3, Qwen3-FP8,
  GLM-FP8); unconverted modules in `modules_to_not_convert` / `ignored_layers` (transformers' matching).
- ModelOpt NVFP4: `hf_quant_config.json` {"quantization": {"quant_algo": "NVFP4", "group_size": 16,
  "exclude_modules": [...]}} and/or config.json `quant_method == "modelopt"` with `quant_algo` and `ignore`
  (fnmatch patterns, as vLLM reads them).
- gpt-oss MXFP4: `quant_method == "mxfp4"`, `modules_to_not_convert`.
- compressed-tensors: `quant_method == "compressed-tensors"`, `format` (global or per group), `config_groups`
  ({targets, weights: {num_bits, type, strategy, group_size, symmetric}}), `ignore` (exact names or "re:").

Which linear modules are actually quantized is read off the checkpoint (the scale tensors are there or not);
the config supplies the format parameters, and its ignore lists are checked against the tensors found.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import json
import os
import re
from typing import Any

FP8_BLOCK = "fp8_block"
NVFP4 = "nvfp4"
MXFP4 = "mxfp4"
INT = "int"


@dataclasses.dataclass(frozen=True)
class WeightFormat:
    """How one linear module's weight is stored. Fields beyond `kind` apply to some kinds only."""

    kind: str  # fp8_block | nvfp4 | mxfp4 | int
    block: tuple[int, int] = (128, 128)  # fp8_block tile
    bits: int = 4  # int
    group_size: int | None = None  # int: inputs per scale (None: one group per row, "channel")
    symmetric: bool = True  # int
    packed: bool = True  # int: pack-quantized (int32 words) vs int-quantized (int8 `weight`)
    mx_naming: str = "blocks"  # mxfp4: "blocks" (gpt-oss *_blocks/*_scales) | "packed" (compressed-tensors)


def _transformers_match(name: str, pattern: str) -> bool:
    """transformers' `should_convert_module`: a regex from the start ending at a module boundary, or a suffix."""
    boundary = r"(?:(?<=\.)|(?=\.|$))"
    return bool(re.match(rf"(?:{pattern}){boundary}", name)) or name.endswith(pattern)


def _modelopt_match(name: str, pattern: str) -> bool:
    return fnmatch.fnmatch(name, pattern) or name == pattern or name.startswith(pattern + ".")


def _ct_match(name: str, pattern: str) -> bool:
    """compressed-tensors' `is_match` for module names ("Linear" is the class every candidate has)."""
    if pattern.startswith("re:"):
        return bool(re.match(pattern[3:], name))
    return pattern in (name, "Linear")


@dataclasses.dataclass(frozen=True)
class CheckpointQuant:
    """A checkpoint's quantization: per-module format lookup and its not-converted list."""

    method: str  # as written in the config, for messages
    groups: tuple[tuple[tuple[str, ...], WeightFormat], ...]  # (targets, format); first match wins
    ignore: tuple[str, ...]
    matcher: str  # transformers | modelopt | compressed-tensors

    def _match(self, name: str, pattern: str) -> bool:
        return {"transformers": _transformers_match, "modelopt": _modelopt_match,
                "compressed-tensors": _ct_match}[self.matcher](name, pattern)

    def is_ignored(self, module: str) -> bool:
        return any(self._match(module, p) for p in self.ignore)

    def format_for(self, module: str) -> WeightFormat | None:
        """The format the config assigns to a linear module (None: left unquantized)."""
        if self.is_ignored(module):
            return None
        for targets, fmt in self.groups:
            if any(t == "Linear" or self._match(module, t) for t in targets):
                return fmt
        return None

    def formats(self) -> tuple[WeightFormat, ...]:
        return tuple(fmt for _, fmt in self.groups)


def _ct_group(group: dict[str, Any], fmt_name: str) -> WeightFormat:
    w = group.get("weights") or {}
    num_bits, typ = int(w.get("num_bits", 0)), w.get("type", "int")
    if typ == "float" and num_bits == 4 and fmt_name == "mxfp4-pack-quantized":
        return WeightFormat(MXFP4, mx_naming="packed")
    if typ != "int" or num_bits not in (4, 8):
        raise NotImplementedError(f"compressed-tensors weights {w} in format {fmt_name!r} are not supported")
    if fmt_name not in ("pack-quantized", "int-quantized", "naive-quantized"):
        raise NotImplementedError(f"compressed-tensors format {fmt_name!r} is not supported")
    strategy = w.get("strategy", "group")
    if strategy not in ("group", "channel"):
        raise NotImplementedError(f"compressed-tensors weight strategy {strategy!r} is not supported")
    if w.get("actorder") not in (None, "weight", False):
        raise NotImplementedError(f"compressed-tensors actorder={w['actorder']!r} (g_idx) is not supported")
    packed = fmt_name == "pack-quantized"
    if not packed and num_bits != 8:
        raise NotImplementedError(f"{fmt_name} with {num_bits}-bit weights is not supported")
    return WeightFormat(INT, bits=num_bits, group_size=int(w["group_size"]) if strategy == "group" else None,
                        symmetric=bool(w.get("symmetric", True)), packed=packed)


def _compressed_tensors(qc: dict[str, Any]) -> CheckpointQuant:
    groups = []
    for name, group in sorted((qc.get("config_groups") or {}).items()):
        if not group.get("weights"):
            continue
        fmt = _ct_group(group, group.get("format") or qc.get("format") or "pack-quantized")
        groups.append((tuple(group.get("targets") or ["Linear"]), fmt))
    if not groups:
        raise ValueError("compressed-tensors quantization_config has no config_groups with weights")
    return CheckpointQuant("compressed-tensors", tuple(groups), tuple(qc.get("ignore") or ()), "compressed-tensors")


def _modelopt(algo: str, group_size: int, ignore: list[str]) -> CheckpointQuant:
    if algo.upper() != "NVFP4":
        raise NotImplementedError(f"ModelOpt quant_algo {algo!r} is not supported (NVFP4 is)")
    if group_size != 16:
        raise ValueError(f"ModelOpt NVFP4 group_size must be 16, got {group_size}")
    return CheckpointQuant("modelopt", ((("Linear",), WeightFormat(NVFP4)),), tuple(ignore), "modelopt")


def _modelopt_group_size(qc: dict[str, Any]) -> int:
    for group in (qc.get("config_groups") or {}).values():
        if (group.get("weights") or {}).get("group_size"):
            return int(group["weights"]["group_size"])
    return int(qc.get("group_size", 16))


def parse_quant_config(config: dict[str, Any], hf_quant: dict[str, Any] | None = None) -> CheckpointQuant | None:
    """From config.json's dict (and hf_quant_config.json's, if any): the checkpoint's quantization, or None."""
    qc = config.get("quantization_config")
    if qc is None and hf_quant is not None:
        q = hf_quant.get("quantization") or {}
        if not q.get("quant_algo"):
            return None
        return _modelopt(q["quant_algo"], int(q.get("group_size", 16)), q.get("exclude_modules") or [])
    if qc is None:
        return None
    method = qc.get("quant_method")
    if method == "fp8":
        block = qc.get("weight_block_size")
        if not block:
            raise NotImplementedError("per-tensor FP8 checkpoints (no weight_block_size) are not supported")
        if qc.get("fmt", "e4m3") != "e4m3":
            raise NotImplementedError(f"FP8 fmt {qc['fmt']!r} is not supported (e4m3 is)")
        ignore = (qc.get("modules_to_not_convert") or []) + (qc.get("ignored_layers") or [])
        fmt = WeightFormat(FP8_BLOCK, block=(int(block[0]), int(block[1])))
        return CheckpointQuant("fp8", ((("Linear",), fmt),), tuple(ignore), "transformers")
    if method == "modelopt":
        hq = (hf_quant or {}).get("quantization") or {}
        algo = qc.get("quant_algo") or hq.get("quant_algo") or ""
        ignore = qc.get("ignore") or qc.get("exclude_modules") or hq.get("exclude_modules") or []
        return _modelopt(algo, _modelopt_group_size(qc), ignore)
    if method == "mxfp4":
        return CheckpointQuant("mxfp4", ((("Linear",), WeightFormat(MXFP4)),),
                               tuple(qc.get("modules_to_not_convert") or ()), "transformers")
    if method == "compressed-tensors":
        return _compressed_tensors(qc)
    raise NotImplementedError(f"quantization_config quant_method {method!r} is not supported")


def read_quant_config(model_dir: str) -> CheckpointQuant | None:
    """The quantization of the HF model folder `model_dir` (None: an unquantized checkpoint)."""
    with open(os.path.join(model_dir, "config.json")) as f:
        config = json.load(f)
    hf_quant = None
    path = os.path.join(model_dir, "hf_quant_config.json")
    if os.path.exists(path):
        with open(path) as f:
            hf_quant = json.load(f)
    return parse_quant_config(config, hf_quant)
