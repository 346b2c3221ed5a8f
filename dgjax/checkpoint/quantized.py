"""Read quantized linear weights (several checkpoint tensors each) into `dgjax.quant` nodes, kept packed.

A linear leaf is a source whose tensors are transformers Linear weights [out, in]: an `HFSource` with
`transpose=True` named `<module>.weight`, or an `HFStackedSource` of such per-expert names (expert order).
Each quantized module contributes the tensors its format stores (see `FORMAT_TENSORS`); the arrays are
reshaped (never dequantized) into the node's device layout on the host, stacked over experts, and placed
straight into their shardings.
"""

from __future__ import annotations

import dataclasses
import logging
import math
from typing import Any

import jax
import numpy as np
from jax.sharding import Mesh

from dgjax.checkpoint.hf_names import HFSource, HFStackedSource
from dgjax.checkpoint.quant_config import FP8_BLOCK, INT, MXFP4, NVFP4, CheckpointQuant, WeightFormat, read_quant_config
from dgjax.checkpoint.safetensors_io import SafetensorsFolder
from dgjax.models.params import ParamSpec
from dgjax.quant import Fp8BlockWeight, IntWeight, Mxfp4Weight, Nvfp4Weight, QuantizedWeight, array_shardings
from dgjax.quant import int_group
from dgjax.quant.base import split_shape
from dgjax.sharding import ShardingRules

log = logging.getLogger("dgjax.checkpoint")

# Tensor-name suffixes a quantized module stores: (required, optional). The first required one is the
# packed weight; its rows are N. Optional ones are read (input_scale) or knowingly dropped (ModelOpt's
# FP8 KV-cache k_scale / v_scale on k_proj / v_proj: dgjax's fp8 KV cache keeps its own scales).
FORMAT_TENSORS: dict[tuple[str, str], tuple[tuple[str, ...], tuple[str, ...]]] = {
    (FP8_BLOCK, ""): (("weight", "weight_scale_inv"), ("input_scale", "k_scale", "v_scale")),
    (NVFP4, ""): (("weight", "weight_scale", "weight_scale_2"), ("input_scale", "k_scale", "v_scale")),
    (MXFP4, "blocks"): (("weight_blocks", "weight_scales"), ()),
    (MXFP4, "packed"): (("weight_packed", "weight_scale"), ()),
    (INT, "packed"): (("weight_packed", "weight_scale"), ("weight_shape", "weight_zero_point")),
    (INT, "int8"): (("weight", "weight_scale"), ("weight_zero_point",)),
}
# Any of these next to a module's weight means the module is stored quantized.
QUANT_MARKERS = ("weight_scale_inv", "weight_scale", "weight_scale_2", "weight_packed", "weight_blocks")


def linear_prefixes(src: Any) -> tuple[tuple[str, ...], int] | None:
    """(module names, number of expert dims) if `src` reads Linear weights, else None."""
    if isinstance(src, HFStackedSource):
        if src.transpose and src.names and all(n.endswith(".weight") for n in src.names):
            return tuple(n.removesuffix(".weight") for n in src.names), 1
        return None
    if isinstance(src, HFSource) and src.transpose and src.name.endswith(".weight"):
        return (src.name.removesuffix(".weight"),), 0
    return None


def _tensor_key(fmt: WeightFormat) -> tuple[str, str]:
    if fmt.kind == MXFP4:
        return fmt.kind, fmt.mx_naming
    if fmt.kind == INT:
        return fmt.kind, "packed" if fmt.packed else "int8"
    return fmt.kind, ""


@dataclasses.dataclass(frozen=True)
class QuantLeafPlan:
    fmt: WeightFormat
    modules: tuple[str, ...]
    expert_dims: int
    consumed: frozenset[str]  # checkpoint tensors this leaf reads (or knowingly drops)
    replaced: frozenset[str]  # the dense `<module>.weight` names it stands in for


class QuantizedCheckpoint:
    """The quantized side of one checkpoint folder: plans which leaves are quantized and loads them."""

    def __init__(self, quant: CheckpointQuant | None, folder: SafetensorsFolder):
        self.quant = quant
        self.folder = folder

    @staticmethod
    def open(model_dir: str, folder: SafetensorsFolder) -> "QuantizedCheckpoint":
        return QuantizedCheckpoint(read_quant_config(model_dir), folder)

    def _has_markers(self, module: str) -> bool:
        return any(f"{module}.{m}" in self.folder for m in QUANT_MARKERS)

    def plan(self, src: Any) -> QuantLeafPlan | None:
        """How to read `src` if the checkpoint stores it quantized; None for the dense path."""
        linear = linear_prefixes(src)
        if linear is None:
            return None
        modules, expert_dims = linear
        stored = [self._has_markers(m) for m in modules]
        if self.quant is None:
            if any(stored):
                raise ValueError(f"{modules[0]} has quantized tensors but config.json has no quantization_config")
            return None
        fmts = {self.quant.format_for(m) for m in modules}
        if len(fmts) != 1:
            raise ValueError(f"the experts of {modules[0]} are assigned different formats: {fmts}")
        fmt = fmts.pop()
        if fmt is None:
            if any(stored):
                bad = [m for m, s in zip(modules, stored) if s]
                raise ValueError(f"{bad[0]} is not converted per the {self.quant.method} config's ignore list, "
                                 "but the checkpoint stores it quantized")
            return None
        if not any(stored):
            for m in modules:
                dt = self.folder[f"{m}.weight"].dtype if f"{m}.weight" in self.folder else None
                if dt is not None and dt.itemsize == 1:
                    raise ValueError(f"{m}.weight is stored as {dt} without the scales its "
                                     f"{self.quant.method} format needs")
            log.debug("%s: %s config covers it, stored unquantized", modules[0], self.quant.method)
            return None
        if not all(stored):
            raise ValueError(f"some experts of {modules[0]} are stored quantized and some not")
        required, optional = FORMAT_TENSORS[_tensor_key(fmt)]
        consumed = set()
        for m in modules:
            missing = [f"{m}.{r}" for r in required if f"{m}.{r}" not in self.folder]
            if missing:
                raise ValueError(f"{self.quant.method} checkpoint misses {missing} (found scales for {m})")
            if f"{m}.weight_g_idx" in self.folder:
                raise NotImplementedError(f"{m}.weight_g_idx: activation-ordered (g_idx) weights are not supported")
            consumed.update(f"{m}.{r}" for r in required)
            consumed.update(f"{m}.{o}" for o in optional if f"{m}.{o}" in self.folder)
        return QuantLeafPlan(fmt, modules, expert_dims, frozenset(consumed),
                             frozenset(f"{m}.weight" for m in modules))

    @staticmethod
    def wanted_names(base: set[str], plans: list[QuantLeafPlan]) -> set[str]:
        """The dense leaves' names with each quantized leaf's dense names swapped for the tensors it reads."""
        out = set(base)
        for p in plans:
            out -= p.replaced
            out |= p.consumed
        return out

    # ------------------------------------------------------------------ host arrays per module

    def _get(self, module: str, suffix: str) -> np.ndarray:
        return self.folder[f"{module}.{suffix}"]

    def _opt(self, module: str, suffix: str) -> np.ndarray | None:
        name = f"{module}.{suffix}"
        return self.folder[name] if name in self.folder else None

    def _module_arrays(self, fmt: WeightFormat, m: str, k: int) -> dict[str, np.ndarray]:
        if fmt.kind == FP8_BLOCK:
            return {"weight": self._get(m, "weight"), "scale": self._get(m, "weight_scale_inv").astype(np.float32)}
        if fmt.kind == NVFP4:
            out = {"packed": self._get(m, "weight"), "block_scale": self._get(m, "weight_scale"),
                   "global_scale": self._get(m, "weight_scale_2").astype(np.float32).reshape(())}
            inp = self._opt(m, "input_scale")
            if inp is not None:
                out["input_scale"] = inp.astype(np.float32).reshape(())
            return out
        if fmt.kind == MXFP4:
            if fmt.mx_naming == "blocks":
                blocks = self._get(m, "weight_blocks")
                return {"packed": blocks.reshape(blocks.shape[0], -1), "scale": self._get(m, "weight_scales")}
            return {"packed": self._get(m, "weight_packed"), "scale": self._get(m, "weight_scale")}
        return self._int_arrays(fmt, m, k)

    def _int_arrays(self, fmt: WeightFormat, m: str, k: int) -> dict[str, np.ndarray]:
        scale = self._get(m, "weight_scale")
        n = scale.shape[0]
        if fmt.packed:
            shape = self._opt(m, "weight_shape")
            if shape is not None and tuple(int(x) for x in shape) != (n, k):
                raise ValueError(f"{m}.weight_shape is {tuple(shape)}, the model expects ({n}, {k})")
            values = int_group.device_values_np(self._get(m, "weight_packed"), fmt.bits, k)
        else:
            values = self._get(m, "weight")
            if values.dtype != np.int8:
                raise ValueError(f"{m}.weight should be int8 in an int-quantized checkpoint, is {values.dtype}")
        out = {"values": values, "scale": scale}
        zp = self._opt(m, "weight_zero_point")
        if zp is not None:
            if zp.dtype == np.int32 and fmt.packed:
                zp = int_group.unpack_int32_np(zp, fmt.bits, n, axis=0)
            zp = np.asarray(zp, np.int8)
            if not (fmt.symmetric and not zp.any()):
                out["zero_point"] = zp
        elif not fmt.symmetric:
            raise ValueError(f"{m}: asymmetric {fmt.bits}-bit weights need weight_zero_point")
        return out

    # ------------------------------------------------------------------ node construction

    def load(self, plan: QuantLeafPlan, spec: ParamSpec, mesh: Mesh, rules: ShardingRules) -> QuantizedWeight:
        """The node for `plan`, each array placed in its sharding (see `dgjax.quant.array_specs`)."""
        e = plan.expert_dims
        if e and spec.shape[0] != len(plan.modules):
            raise ValueError(f"{plan.modules[0]}: {len(plan.modules)} experts in the checkpoint, "
                             f"{spec.shape[0]} expected")
        first_rows = self.folder.shape(f"{plan.modules[0]}.{FORMAT_TENSORS[_tensor_key(plan.fmt)][0][0]}")[0]
        in_dims = split_shape(tuple(spec.shape), first_rows, e)
        n = math.prod(spec.shape[e + in_dims :])
        k = math.prod(spec.shape[e : e + in_dims])
        per_module = [self._module_arrays(plan.fmt, m, k) for m in plan.modules]
        host = {name: np.stack([a[name] for a in per_module]) if e else per_module[0][name] for name in per_module[0]}
        node = _node(plan.fmt, host, tuple(spec.shape), in_dims, e, k)
        _check_layout(node, host, plan.modules[0], n, k)
        shardings = array_shardings(type(node), tuple(spec.shape), tuple(spec.axes), in_dims, e, mesh, rules,
                                    **node.static_args())
        placed = {name: _place(arr, shardings[name]) for name, arr in host.items()}
        return node.replace(**placed)


def _node(fmt: WeightFormat, host: dict[str, np.ndarray], shape, in_dims: int, e: int, k: int) -> QuantizedWeight:
    geo = dict(shape=shape, in_dims=in_dims, expert_dims=e)
    if fmt.kind == FP8_BLOCK:
        return Fp8BlockWeight(**host, **geo, block=fmt.block)
    if fmt.kind == NVFP4:
        return Nvfp4Weight(**host, **geo)
    if fmt.kind == MXFP4:
        return Mxfp4Weight(**host, **geo)
    return IntWeight(**host, **geo, bits=fmt.bits, group_size=fmt.group_size or k)


def _check_layout(node: QuantizedWeight, host: dict[str, np.ndarray], module: str, n: int, k: int) -> None:
    layout = type(node).array_layout(n, k, **node.static_args())
    lead = node.lead_shape
    if set(layout) != set(host):
        raise ValueError(f"{module}: {node.format_name} arrays {sorted(host)} != expected {sorted(layout)}")
    for name, lay in layout.items():
        arr = host[name]
        if arr.shape != lead + lay.shape or arr.dtype != np.dtype(lay.dtype):
            raise ValueError(f"{module}: {node.format_name} {name} is {arr.dtype}{list(arr.shape)}, expected "
                             f"{np.dtype(lay.dtype)}{list(lead + lay.shape)} for a [{n}, {k}] weight")


def _place(host: np.ndarray, sharding) -> jax.Array:
    host = np.array(host, order="C", copy=None)  # (np.ascontiguousarray would make a 0-d array 1-d)
    return jax.make_array_from_callback(host.shape, sharding, lambda idx: host[idx])
