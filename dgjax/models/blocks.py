"""Building blocks shared by the model families: RMSNorm, rotary embeddings, paged attention, SwiGLU MLP.

Each block's parameters are a flax struct.dataclass described once by a `*_specs` function. Math runs
in the parameters' dtype; norms, rope angles and softmax in float32.
"""

from __future__ import annotations

import functools
import math
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from dgjax.config import ModelConfig, RopeScaling
from dgjax.models.batch import ForwardBatch
from dgjax.models.ops import matmul
from dgjax.models.params import ParamSpec, normal_init, ones_init, zeros_init
from dgjax.pallas import split_sums, stacked
from dgjax.pallas.add_rms_norm import api as add_norm
from dgjax.pallas.fused_decode_attention import api as fused_decode
from dgjax.pallas.gemv import ref as gemv_ref
from dgjax.pallas.paged_attention import api as paged
from dgjax.pallas.quant_gemv import api as quant_gemv
from dgjax.quant import is_quantized

# ---------------------------------------------------------------- RMSNorm


def norm_spec(dim: int, dtype: Any) -> ParamSpec:
    return ParamSpec((dim,), dtype, (None,), ones_init)


def rms_norm(x: jax.Array, weight: Any, eps: float) -> jax.Array:
    """RMSNorm over the last axis, computed in float32, returned in x's dtype (`weight` may be a StackedRow)."""
    with jax.named_scope("rms_norm"):
        return gemv_ref.rms_norm(x, stacked.value(weight), eps)


def add_rms_norm(x: jax.Array, delta: Any, weight: Any, eps: float) -> tuple[jax.Array, jax.Array]:
    """(x + delta, rms_norm(x + delta)): the residual add and the norm after it. `delta` may be a split-K
    projection's SplitSums, which the opt-in kernel (DGJAX_ADD_NORM=kernel, dgjax/pallas/add_rms_norm) sums in
    the same launch."""
    with jax.named_scope("add_rms_norm"):
        return add_norm.add_rms_norm(x, delta, weight, eps)


# ---------------------------------------------------------------- rotary embeddings


def rotary_dim(cfg: ModelConfig) -> int:
    return int(cfg.head_dim * cfg.partial_rotary_factor)


def _yarn_mscale(scale: float, mscale: float = 1.0) -> float:
    return 1.0 if scale <= 1 else 0.1 * mscale * math.log(scale) + 1.0


def _yarn(inv_freq: np.ndarray, dim: int, base: float, rs: RopeScaling) -> tuple[np.ndarray, float]:
    """YaRN frequencies and attention factor, as transformers' `_compute_yarn_parameters`."""
    factor = rs.factor
    if rs.attention_factor is not None:
        attn = rs.attention_factor
    elif rs.mscale and rs.mscale_all_dim:
        attn = _yarn_mscale(factor, rs.mscale) / _yarn_mscale(factor, rs.mscale_all_dim)
    else:
        attn = _yarn_mscale(factor)
    orig = rs.original_max_position_embeddings

    def correction_dim(rotations: float) -> float:
        return dim * math.log(orig / (rotations * 2 * math.pi)) / (2 * math.log(base))

    low, high = correction_dim(rs.beta_fast), correction_dim(rs.beta_slow)
    if rs.truncate:
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, dim - 1)
    if low == high:
        high += 0.001
    ramp = np.clip((np.arange(dim // 2, dtype=np.float64) - low) / (high - low), 0.0, 1.0)
    extrapolation = 1.0 - ramp
    inv = (inv_freq / factor) * (1.0 - extrapolation) + inv_freq * extrapolation
    return inv, float(attn)


def _llama3(inv_freq: np.ndarray, rs: RopeScaling) -> np.ndarray:
    """Llama 3.1 frequency smoothing, as transformers' `_compute_llama3_parameters`."""
    orig = rs.original_max_position_embeddings
    low_wavelen = orig / rs.low_freq_factor
    high_wavelen = orig / rs.high_freq_factor
    wavelen = 2 * math.pi / inv_freq
    scaled = np.where(wavelen > low_wavelen, inv_freq / rs.factor, inv_freq)
    smooth = (orig / wavelen - rs.low_freq_factor) / (rs.high_freq_factor - rs.low_freq_factor)
    smoothed = (1 - smooth) * scaled / rs.factor + smooth * scaled
    medium = (wavelen >= high_wavelen) & (wavelen <= low_wavelen)
    return np.where(medium, smoothed, scaled)


@functools.lru_cache(maxsize=64)
def rope_frequencies(cfg: ModelConfig) -> tuple[np.ndarray, float]:
    """(inverse frequencies float32 [rotary_dim // 2], attention scaling applied to cos and sin)."""
    dim = rotary_dim(cfg)
    base = cfg.rope_theta
    inv_freq = 1.0 / (base ** (np.arange(0, dim, 2, dtype=np.float64) / dim))
    rs = cfg.rope_scaling
    scaling = 1.0
    if rs.rope_type == "linear":
        inv_freq = inv_freq / rs.factor
    elif rs.rope_type == "llama3":
        inv_freq = _llama3(inv_freq, rs)
    elif rs.rope_type == "yarn":
        inv_freq, scaling = _yarn(inv_freq, dim, base, rs)
    elif rs.rope_type != "default":
        raise ValueError(f"unsupported rope type {rs.rope_type!r}")
    return inv_freq.astype(np.float32), scaling


def rope_cos_sin(positions: jax.Array, cfg: ModelConfig) -> tuple[jax.Array, jax.Array]:
    """float32 cos, sin [..., rotary_dim] for integer positions (computed once per forward)."""
    inv_freq, scaling = rope_frequencies(cfg)
    angles = positions.astype(jnp.float32)[..., None] * jnp.asarray(inv_freq)
    emb = jnp.concatenate([angles, angles], axis=-1)
    return jnp.cos(emb) * scaling, jnp.sin(emb) * scaling


def apply_rope(x: jax.Array, cos: jax.Array, sin: jax.Array) -> jax.Array:
    """Rotate-half rope on the first rotary_dim features of x [B, T, heads, head_dim]."""
    with jax.named_scope("rope"):
        rot = cos.shape[-1]
        xf = x.astype(jnp.float32)
        xr, xpass = xf[..., :rot], xf[..., rot:]
        half = rot // 2
        rotated = jnp.concatenate([-xr[..., half:], xr[..., :half]], axis=-1)
        out = xr * cos[:, :, None, :] + rotated * sin[:, :, None, :]
        return jnp.concatenate([out, xpass], axis=-1).astype(x.dtype)


# ---------------------------------------------------------------- attention


@struct.dataclass
class AttentionParams:
    """As loaded: separate q, k, v. After `dgjax.models.fused.fuse_projections`: q, k, v (and their
    biases) are None and `qkv` [embed, kv_heads, group + 2, head_dim] holds, per KV head, its group's q
    heads, then its k, then its v."""

    q: Any  # [embed, heads, head_dim]
    k: Any  # [embed, kv_heads, head_dim]
    v: Any  # [embed, kv_heads, head_dim]
    o: Any  # [heads, head_dim, embed]
    q_bias: Any = None  # [heads, head_dim]
    k_bias: Any = None  # [kv_heads, head_dim]
    v_bias: Any = None
    o_bias: Any = None  # [embed]
    q_norm: Any = None  # [head_dim] (Qwen3)
    k_norm: Any = None
    qkv: Any = None  # [embed, kv_heads, group + 2, head_dim]
    qkv_bias: Any = None  # [kv_heads, group + 2, head_dim]


def attention_specs(cfg: ModelConfig, dtype: Any) -> AttentionParams:
    e, h, kv, d = cfg.hidden_size, cfg.num_attention_heads, cfg.num_key_value_heads, cfg.head_dim
    w = lambda shape, axes: ParamSpec(shape, dtype, axes, normal_init())  # noqa: E731
    b = lambda shape, axes: ParamSpec(shape, dtype, axes, zeros_init)  # noqa: E731
    bias = cfg.attention_bias
    return AttentionParams(
        q=w((e, h, d), ("embed", "heads", "head_dim")),
        k=w((e, kv, d), ("embed", "kv_heads", "head_dim")),
        v=w((e, kv, d), ("embed", "kv_heads", "head_dim")),
        o=w((h, d, e), ("heads", "head_dim", "embed")),
        q_bias=b((h, d), ("heads", "head_dim")) if bias else None,
        k_bias=b((kv, d), ("kv_heads", "head_dim")) if bias else None,
        v_bias=b((kv, d), ("kv_heads", "head_dim")) if bias else None,
        o_bias=b((e,), ("embed",)) if cfg.o_proj_bias else None,
        q_norm=norm_spec(d, dtype) if cfg.qk_norm else None,
        k_norm=norm_spec(d, dtype) if cfg.qk_norm else None,
    )


def _project(x: jax.Array, w: jax.Array, bias: jax.Array | None, norm: jax.Array | None = None,
             eps: float = 1e-6, carry: bool = False) -> jax.Array:
    y = matmul(x, w, norm=norm, eps=eps, carry=carry)
    return y if bias is None else y + bias.astype(y.dtype)


def _project_qkv(p: AttentionParams, x: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array]:
    """q [B, T, heads, head_dim], k and v [B, T, kv_heads, head_dim], by one GEMM when fused."""
    if p.qkv is None:
        return _project(x, p.q, p.q_bias), _project(x, p.k, p.k_bias), _project(x, p.v, p.v_bias)
    y = _project(x, p.qkv, p.qkv_bias)  # [B, T, kv_heads, group + 2, head_dim]
    group = p.qkv.shape[2] - 2
    q = y[..., :group, :].reshape(y.shape[:2] + (-1, y.shape[-1]))
    return q, y[..., group, :], y[..., group + 1, :]


def _fused_decode_attention(p, x, input_norm, k_pages, v_pages, batch, slots, cos_sin, cfg, sliding_window,
                            page_offset, after=()):
    with jax.named_scope("attention_decode"):
        with jax.named_scope("qkv"):  # the input norm runs inside the GEMV where its kernel does
            # [B, kv_heads, group + 2, head_dim]; a split-K quantized GEMV hands over its partial sums unsummed
            # (the norm's output has no other reader: a quantized kernel may take it as carried f16)
            qkv = matmul(x[:, 0], p.qkv, norm=input_norm, eps=cfg.rms_norm_eps, keep_splits=True, carry=True,
                         after=after)
            qkv = split_sums.add_bias(qkv, p.qkv_bias)
        cos, sin = cos_sin
        # an fp8 o GEMV takes the merged heads as carried f16 (dgjax/pallas/carrier.py), written by the merge kernel
        carry_o = is_quantized(p.o) and quant_gemv.carries_input(
            jax.ShapeDtypeStruct((x.shape[0], 1) + tuple(p.o.in_shape), x.dtype), p.o, contract=2)
        o, k_pages, v_pages = fused_decode.decode_attention(
            qkv, cos[:, 0], sin[:, 0], k_pages, v_pages, batch.block_tables, batch.context_lens,
            batch.positions, batch.query_lens, slots, scale=cfg.head_dim**-0.5, eps=cfg.rms_norm_eps,
            q_norm=p.q_norm, k_norm=p.k_norm, sliding_window=sliding_window, page_offset=page_offset,
            prefetch=p.o, carry_f16=carry_o,
        )
        with jax.named_scope("o_proj"):  # split-K partials may stay unsummed for the add + norm that follows
            out = matmul(o[:, None], p.o, contract=2, keep_splits=add_norm.use_kernel(x, splits=True),
                         out_dtype=x.dtype)
            out = split_sums.add_bias(out, p.o_bias)
        return out, k_pages, v_pages


def attention(
    p: AttentionParams,
    x: jax.Array,
    k_pages: jax.Array,
    v_pages: jax.Array,
    batch: ForwardBatch,
    slots: jax.Array,
    cos_sin: tuple[jax.Array, jax.Array],
    cfg: ModelConfig,
    sliding_window: int | None,
    input_norm: jax.Array | None = None,
    page_offset: int = 0,
    after: tuple = (),
) -> tuple[jax.Array, jax.Array, jax.Array]:
    """Self-attention of x [B, T, embed] through the paged cache: (output, new k_pages, new v_pages).

    `input_norm`: the layer's pre-attention RMSNorm weight, applied to x here (x is then the raw residual
    stream) so that decode can fuse it into the qkv GEMV (dgjax/pallas/gemv).
    `page_offset`: where this layer's pages start in a pool several layers share (KVCache.page_offset);
    `batch.block_tables` and `slots` hold per-layer page ids and slots. The fused decode kernel adds the offset
    as it reads them, so the shift never costs a launch (XLA ran two small index fusions per layer for it at
    1 row); the other paths shift them here.
    `after`: arrays the decode q/k/v GEMV kernel takes as unread operands, so it runs after their producers (the L2
    prefetch of its weight: dgjax/pallas/l2_prefetch/api.py); other paths ignore them.
    Decode (T == 1) with fused qkv weights hands the projection's output to one fused call (norm, rope,
    K/V append and attention: dgjax/pallas/fused_decode_attention) instead of the separate steps below.
    """
    if x.shape[1] == 1 and p.qkv is not None and fused_decode.supported(
            p.qkv.shape, cos_sin[0].shape[-1], k_pages.dtype):
        return _fused_decode_attention(p, x, input_norm, k_pages, v_pages, batch, slots, cos_sin, cfg,
                                       sliding_window, page_offset, after)
    if page_offset:
        tables, slots = paged.offset_pages(batch.block_tables, slots, page_offset, k_pages.shape[1])
        batch = batch.replace(block_tables=tables)
    if input_norm is not None:
        x = rms_norm(x, input_norm, cfg.rms_norm_eps)
    with jax.named_scope("attention"):
        with jax.named_scope("qkv"):
            q, k, v = _project_qkv(p, x)
        if p.q_norm is not None:
            with jax.named_scope("qk_norm"):
                q = rms_norm(q, p.q_norm, cfg.rms_norm_eps)  # rms_norm reads a StackedRow's row
                k = rms_norm(k, p.k_norm, cfg.rms_norm_eps)
        cos, sin = cos_sin
        q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
        with jax.named_scope("write_kv"):
            k_pages, v_pages = paged.write_kv(k_pages, v_pages, k, v, slots)
        with jax.named_scope("paged_attention"):
            o = paged.paged_attention(
                q, k_pages, v_pages, batch.block_tables, batch.context_lens, batch.positions,
                batch.query_lens, scale=cfg.head_dim**-0.5, sliding_window=sliding_window,
            )
        with jax.named_scope("o_proj"):
            out = matmul(o, p.o, contract=2)
            if p.o_bias is not None:
                out = out + p.o_bias.astype(out.dtype)
        return out, k_pages, v_pages


# ---------------------------------------------------------------- MLP


@struct.dataclass
class MLPParams:
    """As loaded: separate gate and up. After `fuse_projections`: both None, `gate_up` [embed, 2, ffw]."""

    gate: Any  # [embed, ffw]
    up: Any  # [embed, ffw]
    down: Any  # [ffw, embed]
    gate_bias: Any = None
    up_bias: Any = None
    down_bias: Any = None
    gate_up: Any = None  # [embed, 2, ffw]
    gate_up_bias: Any = None  # [2, ffw]


def mlp_specs(cfg: ModelConfig, dtype: Any, intermediate_size: int | None = None) -> MLPParams:
    e, f = cfg.hidden_size, intermediate_size or cfg.intermediate_size
    w = lambda shape, axes: ParamSpec(shape, dtype, axes, normal_init())  # noqa: E731
    b = lambda shape, axes: ParamSpec(shape, dtype, axes, zeros_init) if cfg.mlp_bias else None  # noqa: E731
    return MLPParams(
        gate=w((e, f), ("embed", "ffw")),
        up=w((e, f), ("embed", "ffw")),
        down=w((f, e), ("ffw", "embed")),
        gate_bias=b((f,), ("ffw",)),
        up_bias=b((f,), ("ffw",)),
        down_bias=b((e,), ("embed",)),
    )


ACTIVATIONS = {
    "silu": jax.nn.silu,
    "swish": jax.nn.silu,
    "gelu": lambda x: jax.nn.gelu(x, approximate=False),
    "gelu_pytorch_tanh": lambda x: jax.nn.gelu(x, approximate=True),
}


def activation(name: str):
    if name not in ACTIVATIONS:
        raise ValueError(f"unsupported hidden_act {name!r}; supported: {sorted(ACTIVATIONS)}")
    return ACTIVATIONS[name]


def gated_mlp(p: MLPParams, x: jax.Array, hidden_act: str) -> jax.Array:
    """down(act(gate(x)) * up(x)): SwiGLU for silu."""
    with jax.named_scope("mlp"):
        act = activation(hidden_act)
        if p.gate_up is None:
            gate, up = _project(x, p.gate, p.gate_bias), _project(x, p.up, p.up_bias)
        else:
            y = _project(x, p.gate_up, p.gate_up_bias)  # [..., 2, ffw]
            gate, up = y[..., 0, :], y[..., 1, :]
        # the activation's fusion has no other reader: a quantized down kernel may take it as carried f16
        return _project(act(gate) * up, p.down, p.down_bias, carry=True)
