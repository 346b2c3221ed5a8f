"""Read (and write) safetensors files by parsing the header ourselves and memory-mapping the data.

safetensors' own numpy/flax loaders reject fp8 / e8m0 tensors; here every dtype maps to numpy through
ml_dtypes, and tensors are zero-copy views of a read-only memory map.
"""

from __future__ import annotations

import json
import os
import struct
from collections.abc import Iterator, Mapping

import ml_dtypes
import numpy as np

DTYPES: dict[str, np.dtype] = {
    "BOOL": np.dtype(np.bool_),
    "U8": np.dtype(np.uint8),
    "I8": np.dtype(np.int8),
    "U16": np.dtype(np.uint16),
    "I16": np.dtype(np.int16),
    "U32": np.dtype(np.uint32),
    "I32": np.dtype(np.int32),
    "U64": np.dtype(np.uint64),
    "I64": np.dtype(np.int64),
    "F16": np.dtype(np.float16),
    "BF16": np.dtype(ml_dtypes.bfloat16),
    "F32": np.dtype(np.float32),
    "F64": np.dtype(np.float64),
    "F8_E4M3": np.dtype(ml_dtypes.float8_e4m3fn),
    "F8_E5M2": np.dtype(ml_dtypes.float8_e5m2),
    "F8_E8M0": np.dtype(ml_dtypes.float8_e8m0fnu),
}
DTYPE_NAMES: dict[np.dtype, str] = {v: k for k, v in DTYPES.items()}

INDEX_FILE = "model.safetensors.index.json"
SINGLE_FILE = "model.safetensors"


class SafetensorsFile:
    """One .safetensors file: its header and memory-mapped tensors."""

    def __init__(self, path: str):
        self.path = path
        with open(path, "rb") as f:
            (header_len,) = struct.unpack("<Q", f.read(8))
            header = json.loads(f.read(header_len))
        self.metadata: dict[str, str] = header.pop("__metadata__", {}) or {}
        self._entries: dict[str, dict] = header
        self._data_start = 8 + header_len
        self._mmap = np.memmap(path, dtype=np.uint8, mode="r") if os.path.getsize(path) > self._data_start else None

    def keys(self) -> list[str]:
        return list(self._entries)

    def __contains__(self, name: str) -> bool:
        return name in self._entries

    def dtype_name(self, name: str) -> str:
        return self._entries[name]["dtype"]

    def shape(self, name: str) -> tuple[int, ...]:
        return tuple(self._entries[name]["shape"])

    def tensor(self, name: str) -> np.ndarray:
        """A read-only view of the tensor (no copy)."""
        entry = self._entries[name]
        if entry["dtype"] not in DTYPES:
            raise ValueError(f"{self.path}: tensor {name} has unsupported dtype {entry['dtype']}")
        dtype = DTYPES[entry["dtype"]]
        shape = tuple(entry["shape"])
        start, end = entry["data_offsets"]
        if end - start != int(np.prod(shape)) * dtype.itemsize:
            raise ValueError(f"{self.path}: tensor {name} byte range does not match {shape} {entry['dtype']}")
        if end == start:
            return np.zeros(shape, dtype)
        raw = self._mmap[self._data_start + start : self._data_start + end]
        return raw.view(dtype).reshape(shape)


class SafetensorsFolder(Mapping[str, np.ndarray]):
    """All tensors of an HF model folder (single `model.safetensors` or a sharded index)."""

    def __init__(self, model_dir: str):
        self.model_dir = model_dir
        index_path = os.path.join(model_dir, INDEX_FILE)
        if os.path.exists(index_path):
            with open(index_path) as f:
                weight_map: dict[str, str] = json.load(f)["weight_map"]
            files = sorted(set(weight_map.values()))
        else:
            files = sorted(n for n in os.listdir(model_dir) if n.endswith(".safetensors"))
            if not files:
                raise FileNotFoundError(f"no .safetensors files in {model_dir}")
            weight_map = {}
        self._files = {n: SafetensorsFile(os.path.join(model_dir, n)) for n in files}
        if not weight_map:
            for n, f in self._files.items():
                for key in f.keys():
                    if key in weight_map:
                        raise ValueError(f"tensor {key} appears in both {weight_map[key]} and {n}")
                    weight_map[key] = n
        for key, n in weight_map.items():
            if key not in self._files[n]:
                raise ValueError(f"{INDEX_FILE} puts {key} in {n}, whose header lacks it")
        self._where = weight_map

    def file_of(self, name: str) -> SafetensorsFile:
        return self._files[self._where[name]]

    def __getitem__(self, name: str) -> np.ndarray:
        return self.file_of(name).tensor(name)

    def __iter__(self) -> Iterator[str]:
        return iter(self._where)

    def __len__(self) -> int:
        return len(self._where)

    def shape(self, name: str) -> tuple[int, ...]:
        return self.file_of(name).shape(name)


def write_safetensors(path: str, tensors: Mapping[str, np.ndarray], metadata: dict[str, str] | None = None) -> None:
    """Write numpy tensors (any dtype in DTYPES, fp8 included) as a safetensors file."""
    header: dict[str, dict] = {}
    offset = 0
    arrays = {}
    for name, arr in tensors.items():
        arr = np.ascontiguousarray(arr)
        if arr.dtype not in DTYPE_NAMES:
            raise ValueError(f"tensor {name}: dtype {arr.dtype} has no safetensors name")
        header[name] = {"dtype": DTYPE_NAMES[arr.dtype], "shape": list(arr.shape),
                        "data_offsets": [offset, offset + arr.nbytes]}
        offset += arr.nbytes
        arrays[name] = arr
    if metadata:
        header["__metadata__"] = metadata
    blob = json.dumps(header, separators=(",", ":")).encode()
    blob += b" " * (-len(blob) % 8)  # data start aligned to 8 bytes
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(blob)))
        f.write(blob)
        for arr in arrays.values():
            f.write(arr.tobytes())
