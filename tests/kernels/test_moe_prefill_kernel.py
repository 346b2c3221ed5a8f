"""The MoE prefill grouped-GEMM kernel (interpreted on CPU) against ref.py (lax.ragged_dot), ref.py against a
numpy loop, the tile table against a numpy walk of the groups, the api's dispatch, and the CUDA lowering.

Experts whose group is empty hold NaN weights (and NaN fp8 scales): a kernel that reads any of them
returns NaN.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from dgjax.pallas.moe_prefill import api, kernel, ref

from moe_weights import E, FP8_BLOCK, H, _abstract_node, _dense, _fp8, _node, _np_moe, _poison  # on sys.path
from moe_weights import bf12_escape_experts
from moe_weights import _check as _check_routed

L, C = kernel.Launch, kernel.Config


def _check(got, want, dtype):
    """moe_weights' check, with the grouped GEMM's bf16 tolerance."""
    _check_routed(got, want, dtype, bf16_atol=1.5e-2, unread="an empty group")


# ---------------------------------------------------------------- tile table and ref.py


def test_tile_table_covers_every_row_once_with_its_expert():
    rng = np.random.default_rng(0)
    for sizes in ([5, 0, 37, 1, 0, 16, 11, 0], [0] * 7 + [70], [16] * 8, list(rng.integers(0, 40, 8))):
        sizes = np.asarray(sizes, np.int32)
        m = int(sizes.sum())
        for bm in (16, 32):
            expert, start, end = (np.asarray(a) for a in kernel.tile_table(jnp.asarray(sizes), m, bm))
            assert len(expert) == -(-m // bm) + E
            owner = np.repeat(np.arange(E), sizes)
            seen = np.zeros(m, int)
            for e, s, t in zip(expert, start, end):
                rows = np.arange(s, min(s + bm, t))
                seen[rows] += 1
                assert (owner[rows] == e).all()
            assert (seen == 1).all()


def test_reference_matches_a_numpy_loop():
    rng = np.random.default_rng(1)
    gate, up, down = _dense(rng)
    ids = np.stack([rng.choice(E, 3, replace=False) for _ in range(9)]).astype(np.int32)
    weights = rng.uniform(0.1, 1.0, ids.shape).astype(np.float32)
    x = rng.standard_normal((9, H)).astype(np.float32)
    got = ref.moe_prefill(jnp.asarray(x), jnp.asarray(ids), jnp.asarray(weights), gate, up, down)
    np.testing.assert_allclose(np.asarray(got), _np_moe(x, ids, weights, gate, up, down), atol=2e-5, rtol=1e-5)


# ---------------------------------------------------------------- kernel against ref.py

CASES = [
    # group sizes, dtype, format, config
    ([5, 0, 37, 1, 0, 16, 11, 0], jnp.float32, "plain", C(L(16, 32, 32), L(16, 32, 16))),  # uneven, empty
    ([0, 0, 0, 45, 0, 0, 0, 0], jnp.float32, "plain", C(L(32, 16, 64), L(16, 64, 32))),  # one group holds all
    ([3, 20, 0, 9, 17, 0, 2, 30], jnp.bfloat16, "plain", None),  # defaults, shrunk to the tiny weight
    ([7, 0, 12, 0, 33, 1, 0, 4], jnp.bfloat16, "fp8", C(L(16, 32, 32), L(32, 16, 32))),
    ([6, 0, 21, 3, 0, 9, 40, 0], jnp.float32, "bf12", C(L(16, 32, 32), L(32, 16, 32))),  # rows with escapes
    ([2, 17, 0, 8, 0, 30, 1, 5], jnp.bfloat16, "bf12", None),
    ([4, 0, 19, 6, 0, 11, 0, 25], jnp.bfloat16, "nvfp4", C(L(16, 32, 32), L(32, 16, 32))),
]
PACKED = ("bf12", "nvfp4")  # the formats whose x tiles are even and odd columns (split or strided x)


LAYOUT_CASES = [(*case, layout) for case in CASES
                for layout in (kernel.X_LAYOUTS if case[2] in PACKED else kernel.X_LAYOUTS[:1])]


@pytest.mark.parametrize("sizes,dtype,fmt,config,x_layout", LAYOUT_CASES)
def test_kernel_matches_ragged_dot_reference_reading_only_routed_experts(sizes, dtype, fmt, config, x_layout,
                                                                         monkeypatch):
    monkeypatch.setenv(kernel.X_ENV_VAR, x_layout)  # how packed formats read x (others ignore it)
    rng = np.random.default_rng(sum(sizes))
    sizes = np.asarray(sizes, np.int32)
    empty = tuple(int(e) for e in np.flatnonzero(sizes == 0))
    poisoned = _dense(np.random.default_rng(5), poisoned=empty)
    clean = _dense(np.random.default_rng(5))
    if fmt == "fp8":
        weights_in, clean_in = [_fp8(w) for w in poisoned], [_fp8(w) for w in clean]
    elif fmt in PACKED:
        clean_in = [_node(fmt, w) for w in clean]
        weights_in = [_poison(n, np.asarray(empty, np.int32)) for n in clean_in]
    else:
        weights_in = [jnp.asarray(w, dtype) for w in poisoned]
        clean_in = [jnp.asarray(w, dtype) for w in clean]
    x = jnp.asarray(rng.standard_normal((int(sizes.sum()), H)), dtype)
    got = kernel.grouped_mlp(x, jnp.asarray(sizes), *weights_in, config=config, interpret=True)
    assert got.dtype == dtype
    _check(got, ref.grouped_mlp(x, jnp.asarray(sizes), *clean_in), dtype)


def test_bad_launch_knobs_are_rejected():
    op = kernel.Operand("fp8", 8, 64, 32, num_arrays=2, scale_block=FP8_BLOCK, scale_grid=(2, 2))
    with pytest.raises(ValueError):
        kernel.check_launch(op, L(16, 64, 32))  # 64 columns do not tile 32
    with pytest.raises(ValueError):
        kernel.check_launch(op, L(16, 32, 64))  # a K step across two fp8 scale blocks
    with pytest.raises(ValueError):
        kernel.check_launch(op, L(24, 32, 32))  # rows per tile not a power of two
    assert kernel.fit_launch(op, 5, L(128, 128, 128)) == L(16, 32, 32)


# ---------------------------------------------------------------- dispatch


def _uses_kernel(fn, *args) -> bool:
    return "pallas_call" in str(jax.make_jaxpr(fn)(*args))


def test_dispatch_rules(monkeypatch, caplog):
    rng = np.random.default_rng(3)
    gate, up, down = (jnp.asarray(w) for w in _dense(rng))
    ids = jnp.asarray(np.stack([rng.choice(E, 2, replace=False) for _ in range(20)]).astype(np.int32))
    weights = jnp.asarray(rng.uniform(0.1, 1.0, (20, 2)), jnp.float32)
    x = jnp.asarray(rng.standard_normal((20, H)), jnp.float32)
    call = lambda impl: lambda *a: api.moe_prefill(*a, gate, up, down, "silu", impl=impl)  # noqa: E731
    monkeypatch.delenv(api.ENV_VAR, raising=False)
    assert _uses_kernel(call("kernel"), x, ids, weights)
    assert not _uses_kernel(call("ref"), x, ids, weights)
    assert _uses_kernel(call("auto"), x, ids, weights) == (jax.default_backend() == "gpu")
    assert not api.use_kernel(api.MIN_TOKENS, gate, up, down, "silu", "auto")  # decode sizes: not here
    monkeypatch.setenv(api.ENV_VAR, "kernel")
    assert _uses_kernel(call(None), x, ids, weights)
    with caplog.at_level("WARNING", logger=api.__name__):
        assert not api.use_kernel(20, gate, up, down, "gelu")
    assert "does not support" in caplog.text
    want = ref.moe_prefill(x, ids, weights, gate, up, down)
    _check(api.moe_prefill(x, ids, weights, gate, up, down), want, jnp.float32)
    monkeypatch.setenv(api.ENV_VAR, "ref")
    assert not _uses_kernel(call(None), x, ids, weights)
    monkeypatch.setenv(api.ENV_VAR, "fast")
    with pytest.raises(ValueError, match=api.ENV_VAR):
        api.moe_prefill(x, ids, weights, gate, up, down)


# ---------------------------------------------------------------- the GPU lowering, checked on the CPU


@pytest.mark.parametrize("fmt", ["plain", "fp8", "bf12", "nvfp4"])
def test_kernel_lowers_to_valid_triton_modules_at_qwen3_moe_shapes(fmt, verified_triton_lowering):
    """Lower for CUDA without a GPU and verify every Triton module (catches e.g. mistyped loop bounds,
    which otherwise only fail inside XLA's GPU compile)."""
    verified = verified_triton_lowering
    experts, embed, ffw, rows = 128, 2048, 768, 2048 * 8
    spec = jax.ShapeDtypeStruct
    gate, down = _abstract_node(fmt, experts, embed, ffw), _abstract_node(fmt, experts, ffw, embed)
    args = (spec((rows, embed), jnp.bfloat16), spec((experts,), jnp.int32), gate, gate, down)
    lowered = jax.jit(lambda *a: kernel.grouped_mlp(*a)).trace(*args).lower(lowering_platforms=("cuda",))
    assert verified == [True, True] and "moe_prefill_gate_up" in lowered.as_text()


@pytest.mark.parametrize("x_layout", kernel.X_LAYOUTS)
@pytest.mark.parametrize("config", [None, C(L(16, 32, 32), L(32, 16, 32))])
def test_bf12_escapes_carry_the_whole_result_when_x_skips_the_outliers(config, x_layout, monkeypatch):
    """moe_weights.bf12_escape_experts with x[:, 0] = 0: the grouped GEMM's result is its escapes alone (row tiles
    that straddle a group's end included), with x split into even and odd columns or read as stored."""
    monkeypatch.setenv(kernel.X_ENV_VAR, x_layout)
    rng = np.random.default_rng(12)
    nodes, dense = bf12_escape_experts(rng)
    sizes = np.asarray([9, 0, 21, 3, 0, 17, 1, 5], np.int32)
    x = rng.standard_normal((int(sizes.sum()), H)).astype(np.float32)
    x[:, 0] = 0.0
    got = np.asarray(kernel.grouped_mlp(jnp.asarray(x), jnp.asarray(sizes), *nodes, config=config, interpret=True))
    owner = np.repeat(np.arange(E), sizes)
    silu = lambda v: v / (1.0 + np.exp(-v))  # noqa: E731
    want = np.stack([(silu(x[i] @ dense[0][e]) * (x[i] @ dense[1][e])) @ dense[2][e] for i, e in enumerate(owner)])
    assert np.abs(want).max() > 1.0
    np.testing.assert_allclose(got, want, atol=2e-4 * np.abs(want).max(), rtol=0)


def test_packed_experts_take_their_own_default_launches():
    """bf12 and nvfp4 experts (tiles rebuilt from packed bytes) get 128-input gate/up steps (s27d); others keep
    the bf16-tuned launches."""
    e, k, n = 128, 2048, 768
    for fmt in ("bf12", "nvfp4"):
        assert kernel.default_config(_abstract_node(fmt, e, k, n)) == kernel.PACKED_CONFIG
    for fmt in ("plain", "fp8"):
        assert kernel.default_config(_abstract_node(fmt, e, k, n)) == kernel.Config()
    assert kernel.PACKED_CONFIG.gate_up.block_k == 128 and kernel.PACKED_CONFIG.down == kernel.Config().down
