"""Run as a script with 4 fake CPU devices: quantized checkpoints load tensor-parallel (tp=4) with each
node's scales sharded along with their rows / columns, and the forward equals the single-device one.

Kept out of the pytest process because XLA_FLAGS must be set before jax initialises its backend.
"""

from __future__ import annotations

import os

os.environ["XLA_FLAGS"] = os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=4"
os.environ["JAX_PLATFORMS"] = "cpu"

import sys  # noqa: E402
import tempfile  # noqa: E402

import jax  # noqa: E402
import numpy as np  # noqa: E402
from jax.sharding import PartitionSpec as P  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "models"))
from paged_runner import PagedRunner  # noqa: E402
from quant_checkpoints import TOKENS, write_case  # noqa: E402

from dgjax.checkpoint.loader import load_params  # noqa: E402
from dgjax.config import ModelConfig  # noqa: E402
from dgjax.sharding import DEFAULT_RULES, make_mesh  # noqa: E402

# 512 = 4 x 128: q/o and the MLP split into whole 128-row (and 128-column) FP8 tiles on 4 devices.
WIDE = dict(hidden_size=512, intermediate_size=1024, num_attention_heads=4, num_key_value_heads=4, head_dim=128,
            num_hidden_layers=1)
# case -> {(layer, block, leaf, array): (PartitionSpec, shard shape)}
EXPECTED = {
    "fp8_block": {(0, "attn", "q", "weight"): (P("tp", None), (128, 512)),
                  (0, "attn", "q", "scale"): (P("tp", None), (1, 4)),
                  (0, "attn", "o", "scale"): (P(None, "tp"), (4, 1)),
                  (0, "mlp", "down", "weight"): (P(None, "tp"), (512, 256))},
    "nvfp4_modelopt": {(0, "mlp", "gate", "packed"): (P("tp", None), (256, 256)),
                       (0, "mlp", "gate", "block_scale"): (P("tp", None), (256, 32)),
                       (0, "mlp", "gate", "global_scale"): (P(), ()),
                       (0, "mlp", "down", "block_scale"): (P(None, "tp"), (512, 16))},
    "compressed_tensors_mixed": {(0, "attn", "k", "values"): (P("tp", None), (128, 256)),
                                 (0, "attn", "k", "zero_point"): (P("tp", None), (128, 8)),
                                 (0, "mlp", "down", "scale"): (P(None, "tp"), (512, 8))},
}


def check(case: str) -> float:
    path = tempfile.mkdtemp()
    write_case(case, path, **WIDE)
    cfg = ModelConfig.from_dir(path)
    mesh4, mesh1 = make_mesh(4), make_mesh(1)
    params4 = load_params(path, cfg, "float32", mesh4, DEFAULT_RULES)
    params1 = load_params(path, cfg, "float32", mesh1, DEFAULT_RULES)
    for (layer, block, leaf, arr), (spec, shard) in EXPECTED[case].items():
        a = getattr(getattr(getattr(params4.layers[layer], block), leaf), arr)
        assert a.sharding.spec == spec, (case, leaf, arr, a.sharding.spec)
        assert a.addressable_shards[0].data.shape == shard, (case, leaf, arr, a.addressable_shards[0].data.shape)
    out4 = PagedRunner(cfg, params4, mesh4).prefill("seq", TOKENS)
    out1 = PagedRunner(cfg, params1, mesh1).prefill("seq", TOKENS)
    worst = float(np.max(np.abs(out4 - out1)))
    assert worst <= 1e-4, (case, worst)
    return worst


if __name__ == "__main__":
    assert len(jax.devices()) == 4, jax.devices()
    for name in EXPECTED:
        print(f"{name} max_abs_logit_diff={check(name):.3g}")
    print("QUANT_TP_OK")
