"""Our header-parsing safetensors reader/writer agrees with the safetensors library, fp8/e8m0 included."""

from __future__ import annotations

import json

import ml_dtypes
import numpy as np
import pytest
import torch
from safetensors.torch import load_file, save_file

from dgjax.checkpoint.safetensors_io import SafetensorsFile, SafetensorsFolder, write_safetensors

TORCH_OF = {
    np.dtype(np.float32): torch.float32, np.dtype(np.float16): torch.float16, np.dtype(np.int32): torch.int32,
    np.dtype(np.uint8): torch.uint8, np.dtype(ml_dtypes.bfloat16): torch.bfloat16,
    np.dtype(ml_dtypes.float8_e4m3fn): torch.float8_e4m3fn, np.dtype(ml_dtypes.float8_e5m2): torch.float8_e5m2,
    np.dtype(ml_dtypes.float8_e8m0fnu): torch.float8_e8m0fnu,
}


def _bits(x: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(x).view(np.dtype(f"u{x.dtype.itemsize}"))


def _torch_bits(t: torch.Tensor) -> np.ndarray:
    return t.contiguous().view({1: torch.uint8, 2: torch.int16, 4: torch.int32}[t.element_size()]).numpy().view(
        np.dtype(f"u{t.element_size()}"))


def _sample() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    f = rng.standard_normal((5, 7)).astype(np.float32) * 3
    return {
        "f32": f, "f16": f.astype(np.float16), "bf16": f.astype(ml_dtypes.bfloat16),
        "fp8": f.astype(ml_dtypes.float8_e4m3fn), "e5m2": f.astype(ml_dtypes.float8_e5m2),
        "e8m0": np.abs(f).astype(ml_dtypes.float8_e8m0fnu), "i32": rng.integers(-9, 9, (3,)).astype(np.int32),
        "u8": rng.integers(0, 255, (2, 2, 2)).astype(np.uint8), "empty": np.zeros((0, 4), np.float32),
    }


def test_our_writer_is_read_bit_exactly_by_the_safetensors_library(tmp_path):
    tensors = _sample()
    write_safetensors(str(tmp_path / "x.safetensors"), tensors, {"format": "pt"})
    loaded = load_file(str(tmp_path / "x.safetensors"))
    for name, arr in tensors.items():
        assert loaded[name].dtype == TORCH_OF[arr.dtype] and tuple(loaded[name].shape) == arr.shape, name
        np.testing.assert_array_equal(_torch_bits(loaded[name]), _bits(arr), err_msg=name)


def test_files_from_the_safetensors_library_read_bit_exactly(tmp_path):
    tensors = _sample()
    as_torch = {k: torch.from_numpy(_bits(v).copy()).view(TORCH_OF[v.dtype]) for k, v in tensors.items()}
    save_file(as_torch, str(tmp_path / "y.safetensors"))
    f = SafetensorsFile(str(tmp_path / "y.safetensors"))
    assert sorted(f.keys()) == sorted(tensors)
    for name, arr in tensors.items():
        got = f.tensor(name)
        assert got.dtype == arr.dtype and got.shape == arr.shape, name
        np.testing.assert_array_equal(_bits(got), _bits(arr), err_msg=name)


def test_sharded_folder_follows_the_index_and_rejects_a_wrong_one(tmp_path):
    tensors = _sample()
    names = sorted(tensors)
    parts = {"a.safetensors": names[:4], "b.safetensors": names[4:]}
    for file, keys in parts.items():
        write_safetensors(str(tmp_path / file), {k: tensors[k] for k in keys})
    index = {"metadata": {}, "weight_map": {k: f for f, keys in parts.items() for k in keys}}
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps(index))
    folder = SafetensorsFolder(str(tmp_path))
    assert sorted(folder) == names
    for name in names:
        np.testing.assert_array_equal(_bits(folder[name]), _bits(tensors[name]))
    index["weight_map"][names[0]] = "b.safetensors"
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps(index))
    with pytest.raises(ValueError, match=names[0]):
        SafetensorsFolder(str(tmp_path))
