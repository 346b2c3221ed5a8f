"""Entry point the models call for one decode token per row with a fused qkv projection.

Dispatch (at trace time), following DGJAX_ATTENTION like dgjax/pallas/paged_attention/api.py: on a GPU
(or with `kernel` forced, interpreted off GPU) the fused kernel where `kernel.supports` the shapes and
page dtype; otherwise the reference (ref.py), which is the unfused path's math.
DGJAX_PREFETCH_O (`off` by default): extra programs of the kernel read the o projection's weight (its largest
array, its first PREFETCH_MAX_BYTES: llama-3.1-8b's bf16 o is 33.5 MB) into L2 while the attention waits on
its small loads; the o GEMV then reads L2 (qwen3-30b-a3b fp8 o: 3.9 µs L2-warm, 5.5 a layer in the engine).
On the H200 (s10h) the o GEMV fell to 4.6 µs a layer and the attention rose 0.4 µs: 363.4 tok/s, inside the
spread of runs without it (359.8-364.1).
DGJAX_ATTENTION_SKIP_IDLE (`off` by default): whether splits with no keys skip their loads. It lost on the
H200 (s10d, llama-3.1-8b C1: 231.2 vs 239.5 tok/s; the kernel 6.25 vs 5.96 µs): the working programs wait
on kv_start/kv_end before loading q, and the loads it saves hit L2.
DGJAX_ATTENTION_EARLY_KEYS (`off` by default; `on` | `off`): each program issues its first block's table and K/V
loads before q's norm and rope use q's loads (kernel.py `early_keys`). Slower on the H200 (s24f, 1K context, the
C1 bucket): llama-3.1-8b heads 8.0 -> 11.0 µs a layer, qwen3-30b-a3b 7.7 -> 8.0, glm-4.5-air 8.4 -> 11.4.
"""

from __future__ import annotations

import jax

from dgjax.pallas import split_sums, stacked
from dgjax.pallas.fused_decode_attention import kernel, ref
from dgjax.env import env_count
from dgjax.pallas.launch import choose_impl
from dgjax.pallas.paged_attention import api as paged

SKIP_IDLE_ENV_VAR = "DGJAX_ATTENTION_SKIP_IDLE"
EARLY_KEYS_ENV_VAR = "DGJAX_ATTENTION_EARLY_KEYS"
PROGRAMS_ENV_VAR = "DGJAX_ATTENTION_PROGRAMS"
BLOCK_TOKENS_ENV_VAR = "DGJAX_ATTENTION_BLOCK_TOKENS"
PREFETCH_ENV_VAR = "DGJAX_PREFETCH_O"
PREFETCH_MAX_BYTES = 16 << 20  # a third of the H200's 50 MB L2


def split_programs() -> int | None:
    """$DGJAX_ATTENTION_PROGRAMS: the grid size the split rule aims at (default: a couple per SM, padding rows
    counted); for A/B of the split count at long contexts."""
    return env_count(PROGRAMS_ENV_VAR, None, "a program count", minimum=1)


def block_tokens() -> int | None:
    """$DGJAX_ATTENTION_BLOCK_TOKENS: keys a loop step (a power of two >= 16; the split count then follows the
    paged rule for it); default: `kernel.default_launch`'s choice. For A/B of the launch."""
    return env_count(BLOCK_TOKENS_ENV_VAR, None, "keys a step", minimum=16, power_of_two=True)


def prefetch_array(w):
    """The array of weight `w` (a plain array or a quantized node) worth prefetching, if DGJAX_PREFETCH_O is
    on: its largest leaf (the kernel reads its first PREFETCH_MAX_BYTES); else None."""
    if w is None or choose_impl(None, PREFETCH_ENV_VAR, ("on", "off"), "o weight prefetch", default="off") != "on":
        return None
    return max(jax.tree_util.tree_leaves(w), key=lambda a: a.size * a.dtype.itemsize)


def early_keys() -> bool:
    return choose_impl(None, EARLY_KEYS_ENV_VAR, ("on", "off"), "early attention key loads", default="off") == "on"


def skip_idle() -> bool:
    return choose_impl(None, SKIP_IDLE_ENV_VAR, ("on", "off"), "idle attention splits", default="off") == "on"


def supported(qkv_shape, rotary_dim: int, page_dtype) -> bool:
    _, kvh, g2, d = qkv_shape
    return kernel.supports(kvh * (g2 - 2), kvh, d, rotary_dim, page_dtype)


def decode_attention(
    qkv, cos, sin, k_pages, v_pages, block_tables, context_lens, positions, query_lens, slots, *,
    scale: float, eps: float, q_norm=None, k_norm=None, sliding_window: int | None = None, impl: str | None = None,
    num_splits: int | None = None, page_offset: int = 0, prefetch=None, carry_f16: bool = False,
):
    """qkv [B, KVH, G+2, D] (or a split-K projection's SplitSums of it), cos/sin float32 [B, R], positions/slots
    [B, 1] -> (out [B, H, D], k_pages, v_pages). `page_offset`: the layer's first page in a pool several layers
    share, added to `block_tables` and `slots` (the kernel adds it as it reads them). `prefetch`: the weight the
    caller multiplies the output by next (see `prefetch_array`). `carry_f16`: where the kernel runs, the output is
    its bf16 values carried as f16 (dgjax/pallas/carrier.py), for an fp8 o GEMV; the reference keeps bf16."""
    chosen = paged.resolve_impl(impl)
    on_gpu = jax.default_backend() == "gpu"
    use_kernel = (chosen == "kernel" or (chosen == "auto" and on_gpu)) and supported(
        qkv.shape, cos.shape[-1], k_pages.dtype) and not isinstance(k_pages, paged.QuantizedPages)
    if not use_kernel:
        block_tables, slots = paged.offset_pages(block_tables, slots, page_offset, k_pages.shape[1])
        return ref.fused_decode_attention(
            split_sums.value(qkv), cos, sin, k_pages, v_pages, block_tables, context_lens, positions, query_lens, slots,
            scale=scale, eps=eps, q_norm=stacked.value(q_norm), k_norm=stacked.value(k_norm),
            sliding_window=sliding_window,
        )
    ps = k_pages.shape[1]
    start, end = paged.decode_window(context_lens, positions, query_lens, block_tables.shape[1] * ps, sliding_window)
    norm_row = 0
    if q_norm is not None:  # stacked norms (runtime/param_packing.py) are read in place by their row
        (q_norm, norm_row), (k_norm, k_row) = stacked.as_stack(q_norm), stacked.as_stack(k_norm)
        assert k_row == norm_row, (k_row, norm_row)
    return kernel.fused_decode_attention(
        qkv, cos, sin, k_pages, v_pages, block_tables, start, end, slots[:, 0], q_norm, k_norm,
        scale=scale, eps=eps, block_tokens=block_tokens(), num_splits=num_splits, split_programs=split_programs(),
        norm_row=norm_row,
        page_offset=page_offset, skip_idle=skip_idle(), early_keys=early_keys(), prefetch=prefetch_array(prefetch),
        prefetch_max_bytes=PREFETCH_MAX_BYTES, carry_f16=carry_f16, interpret=not on_gpu,
    )
