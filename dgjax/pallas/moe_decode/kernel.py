"""Routed experts for 1-16 decode tokens as two Pallas kernels (Triton lowering) that read only the routed experts.

Why this shape:
- Decode is memory-bound and a step touches top_k of E experts per token: the work is streaming those
  experts' weights once at the HBM read ceiling. `lax.ragged_dot` streams all E experts; gathering them
  first copies each routed expert (read + write + read).
- Slots and dedupe, with no preprocessing launch: slot a is assignment a = t * top_k + j of the flattened
  routing (fixed T * top_k slots, static shapes). Each program loads the whole (tiny) id list and finds the
  first slot holding its expert; only that slot is live and computes the expert for all tokens at once
  (rows of tokens that did not pick the expert get routing weight 0). Every other slot of the same expert
  runs a zero-trip K loop and writes zeros: it reads no weight. So an expert picked by several tokens is
  read once per step, and the dedupe costs a few vector ops per program instead of sort/unique launches.
- Stage 1 (`_gate_up_kernel`), grid (slot, ffw block, K split): gate and up tiles of the slot's expert are
  loaded side by side in one K loop, x rows padded to 16 by masked loads (Triton's `dot` needs every dim
  >= 16; the padding costs tensor-core time only). With one K split the program applies silu(gate) * up
  and writes h [slot, T, ffw] in x's dtype; with several splits (batch 1 has only top_k live slots, too
  few column blocks to fill 132 SMs) it writes float32 partial sums and a small jnp fusion finishes h. With
  `act_in_down` the down stage does that as it loads its h rows instead, one launch fewer, but on the H200
  its weight loop got slower by more than the launch saved (api.py), so it is off by default.
- Stage 2 (`_down_kernel`), grid (slot, embed block, K split): h of the slot times the down weight, scaled
  per row by the routing weight of that (token, expert) pair, written as float32 partials
  [split, slot, T, embed]; a jnp sum over splits and slots gives each token's output.
- Weight formats (tiles.py): plain bf16/f16/f32 arrays, FP8 blocks, NVFP4, MXFP4, int4/int8 groups and the
  lossless bf12, each decoded tile by tile in registers; the whole weight is never dequantized. bf12 adds an
  epilogue per program (dgjax/pallas/bf12_tiles.finish: the expert's row scales, and on the first K split of a
  live slot the escapes of its rows, x[col] * exact value); its down stage reads h as stored, so
  `act_in_down` is off for it.
- Stores write only the T real rows (masked stores through index arrays), so batch 1 writes 1/16 of a
  padded tile.
Numerics: float32 accumulation; h rounded to x's dtype between the stages, as ref.py does.
Why the Triton lowering (not Mosaic GPU): the work is 16-row GEMV tiles behind a data-dependent expert
index, masked gathers and masked stores of T rows, which Pallas-Triton expresses directly and which the
paged decode kernel already runs on the H200; at M = 16 there is no warpgroup MMA or TMA pipeline to win.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

import jax
import jax.numpy as jnp
from jax import lax
from jax.experimental import pallas as pl
from jax.experimental.pallas import triton as plgpu

from dgjax.pallas import bf12_tiles
from dgjax.pallas.carrier import f16_carrier
from dgjax.env import env_count
from dgjax.pallas.launch import Launch, choose_impl, sm_count, split_steps, target_programs, whole
from dgjax.pallas.moe_decode import tiles
from dgjax.pallas.moe_decode.tiles import Operand, describe, operand, valid_block_k, valid_block_n
from dgjax.pallas.split_sums import SplitSums

MIN_DOT_ROWS = tiles.MIN_DOT  # Triton's dot needs every dimension >= 16
MAX_TOKENS = MIN_DOT_ROWS  # one padded row tile holds every token
ACTIVATIONS = ("silu", "swish")
BLOCK_N_DEFAULTS = (64, 32, 16)  # 64 bf16 columns: 128-byte rows of an input-major tile
BLOCK_K_DEFAULTS = (128, 64, 32, 16)
# Plain (bf16) experts launch no K splits and take 256-row K steps for gate/up: on the H200 at one token (8
# live experts of qwen3-30b-a3b) that ran 25.4 us per layer against 33.0 us for splitting K until ~2 programs
# per SM were busy (gate_up s4, down s2): a split costs a float32 partial pass and one more launch, more than
# the idle SMs lose (benchmarks/results/2026-12-01-moe-decode-sweep-nvidia-h200.md). Quantized experts keep
# the split-to-fill rule (their smaller tiles move fewer bytes per program), except fp8 at 1-2 tokens
# (FP8_SMALL_BATCH, swept).
GATE_UP_BLOCK_K = (256, 128, 64, 32, 16)
MAX_SPLITS = 8


@dataclasses.dataclass(frozen=True)
class Config:
    gate_up: Launch
    down: Launch


# FP8 experts at 1-2 tokens (one stream decodes at width 2 with its padding row on the same ~8 experts):
# 32-column blocks, gate/up split in 2 with two K steps per iteration, down unsplit. Per layer on the H200
# (benchmarks/launch_sweep.py, trace-timed, 2026-12-01 session 5): glm-4.5-air gate/up + down ~61 µs vs
# 101.6 for the split-to-fill rule, qwen3-30b-a3b ~27 vs 34.5. Engine C1 with it: qwen3-30b-a3b fp8 254.9 ->
# 300.0 tok/s, glm-4.5-air fp8 130.0. Every fp8 variant tried (deeper unrolls and pipelines, CUDA-core FMA,
# input-major layout, integer decodes, uint32 word loads: commits fd1c86a..6135827) stayed at 30-60% of
# the read ceiling while bf16 tiles reach 80-96%: what bounds fp8 is not the launch shape. The compiled loop
# converts each e4m3 value twice on its way to bf16 (benchmarks/ptx_census.py). With the float16 dot
# (tiles.fp8_dot, default since session 6) 64-column blocks won instead of 32 (campaign_s6c, engine C1 device
# ms/tick: qwen3-30b-a3b fp8 3.17 -> 3.02, glm-4.5-air fp8 7.38 -> 6.89, 147.2 tok/s).
FP8_SMALL_BATCH = Config(Launch(64, 128, 2, unroll=2), Launch(64, 128, 1))
FP8_SMALL_BATCH_TOKENS = 2
# Session 9 (DGJAX_MOE_FP8_WIDE=on, the default): both stages take 128-column blocks (16 KB per K step, the
# bytes of a 64-column bf16 step); gate/up splits K until about one program per SM is live, a short down
# stays unsplit. The wide-tile sweep on the H200 (benchmarks/launch_sweep.py --wide, 2026-12-01-s9e-*), per layer
# at 2 rows on 8 experts: qwen3-30b-a3b gate/up s4 + down s1 23.6 µs (FP8_SMALL_BATCH 24.8; best 23.0 with
# down s2); glm-4.5-air gate/up s2 + down s1 55.2 µs (best; 61.4). Why qwen3's down stays unsplit: in the
# engine (s9f) a split down turned each layer's residual-add fusion into a reduce fusion (+13 µs per tick) and
# the qwen3 tick got longer (336.0 vs 356.8 tok/s) though its kernels took 80 µs less; s12f's pairs (331.9 /
# 331.4 split against 364.1 / 330.2) did not decide it either. Longer downs split: LONG_DOWN_STEPS below.
FP8_WIDE_BLOCK_N = 128
FP8_WIDE_ENV_VAR = "DGJAX_MOE_FP8_WIDE"
# The wide down stage in K splits: 2 where it has at least LONG_DOWN_STEPS 128-wide steps, else 1;
# $DGJAX_MOE_DOWN_SPLITS overrides. glm-4.5-air's 11-step down took 21.8 µs a layer in 2 (6 + 5 steps)
# against 23.5-25.2 unsplit in the s11c sweep, and the engine followed (s12b, two interleaved pairs on
# glm-4.5-air fp8 C1: 169.0 / 168.6 tok/s, device 5.98 / 5.96 ms a tick, against 165.6 / 158.2 and 6.08 /
# 6.20; moe_down 792 against 970 µs a tick). Session 16 lowered the bar from 10 steps to 6, taking in
# qwen3-30b-a3b's 6-step down: with the graph's early launches working in every run compared (s16b, s16d),
# qwen3-30b-a3b fp8 C1 read 366.2 / 367.9 / 367.2 tok/s split against 363.0 / 363.2 / 364.1 / 364.6 unsplit,
# device 2.77-2.78 ms a tick against 2.80-2.83 (moe_down 419 against 459 µs; the residual add becomes a
# reduce, +13 µs); greedy tokens the same.
LONG_DOWN_STEPS = 6
DOWN_SPLITS_ENV_VAR = "DGJAX_MOE_DOWN_SPLITS"


def fp8_wide() -> bool:
    """Whether fp8 experts at 1-2 tokens take `fp8_wide_config` (on) or FP8_SMALL_BATCH (off)."""
    return choose_impl(None, FP8_WIDE_ENV_VAR, ("on", "off"), "moe decode wide fp8 blocks", default="on") == "on"


def fp8_wide_config(g: Operand, d: Operand, top_k: int, sms: int | None = None) -> Config | None:
    """128-column blocks for both stages; gate/up's K split (keeping >= 2 steps per split) until top_k live
    experts run about one program per SM, down split by `down_splits`; None where 128 columns do not tile a
    stage."""
    bn, bk = FP8_WIDE_BLOCK_N, 128
    if not all(valid_block_n(op, bn) and valid_block_k(op, bk) and op.k % bk == 0 for op in (g, d)):
        return None
    splits = _splits_until(g, bn, bk, top_k, sms or sm_count(), min_steps=2)
    return Config(Launch(bn, bk, splits), Launch(bn, bk, down_splits(d.k // bk)))


def down_splits(steps: int) -> int:
    """$DGJAX_MOE_DOWN_SPLITS, else 2 for a down of >= LONG_DOWN_STEPS K steps and 1 below; lowered until
    every split runs at least two of the `steps` K steps (a model whose down K is shorter still runs)."""
    want = env_count(DOWN_SPLITS_ENV_VAR, 2 if steps >= LONG_DOWN_STEPS else 1, "a split count", minimum=1)
    while want > 1:
        per = split_steps(steps, want)
        if per is not None and min(per, steps - (want - 1) * per) >= 2:
            break
        want -= 1
    return want


def supports(tokens: int, gate: Any, up: Any, down: Any, hidden_act: str) -> bool:
    """Whether the kernel handles this token count, activation and these weights (else use the reference)."""
    ops = [describe(w) for w in (gate, up, down)]
    if tokens > MAX_TOKENS or hidden_act not in ACTIVATIONS or any(o is None for o in ops):
        return False
    g, u, d = ops
    if g != u or (d.experts, d.k, d.n) != (g.experts, g.n, g.k):
        return False
    tiles_exist = lambda o: (any(valid_block_n(o, b) for b in BLOCK_N_DEFAULTS)  # noqa: E731
                             and any(valid_block_k(o, b) for b in BLOCK_K_DEFAULTS))
    return tiles_exist(g) and tiles_exist(d)


def expected_live_slots(num_experts: int, top_k: int, tokens: int) -> float:
    """Distinct experts that `tokens` uniformly routed tokens touch on average (sizes the grid)."""
    return min(tokens * top_k, num_experts * (1.0 - (1.0 - top_k / num_experts) ** tokens))


def default_launch(op: Operand, block_ks: tuple[int, ...] = BLOCK_K_DEFAULTS) -> Launch:
    """Widest column block, the first K step of `block_ks` the weight allows, no K split (see above)."""
    bn = next(b for b in BLOCK_N_DEFAULTS if valid_block_n(op, b))
    bk = next(b for b in block_ks if valid_block_k(op, b))
    return Launch(bn, bk)


def split_launch(op: Operand, live_slots: float, programs: int | None = None,
                 block_ks: tuple[int, ...] = BLOCK_K_DEFAULTS) -> Launch:
    """`default_launch`, then K splits until about `programs` programs are busy (quantized experts)."""
    launch = default_launch(op, block_ks)
    bn, bk = launch.block_n, launch.block_k
    return Launch(bn, bk, _splits_until(op, bn, bk, live_slots, programs or target_programs()))


def _splits_until(op: Operand, bn: int, bk: int, live_slots: float, programs: int, min_steps: int = 1) -> int:
    """K splits, doubling while `live_slots` experts of `bn`-column blocks run fewer than `programs` programs,
    up to MAX_SPLITS, every split an equal whole number of at least `min_steps` `bk` steps."""
    splits = 1
    while (live_slots * (op.n // bn) * splits < programs and splits < MAX_SPLITS
           and op.k % (2 * splits * bk) == 0 and op.k // (2 * splits * bk) >= min_steps):
        splits *= 2
    return splits


BF12_STAGES = 2  # as the dense bf12 GEMV (quant_gemv.kernel.BF12_STAGES): its 256-input steps move 48 KB
# bf12 experts: the dense bf12 GEMV's steps (256 inputs, 2 stages), split to fill. s27a's sweep (qwen3-30b-a3b,
# 2 tokens) put 128-input steps with 128-column down blocks at 48.7 µs a layer against 58.1; re-timed in s27c the
# same launch took 59.0 in moe_kernel_check and lost in the engine (gate/up 21.2 vs 18.8 µs, down 14.8 vs 13.1:
# C1 234.6 vs 281.8 tok/s), so this launch stays (benchmarks/results/2026-12-04-s27-tma-gemv-bf12-experts.md).


def default_config(gate: Any, down: Any, tokens: int, top_k: int) -> Config:
    g, d = describe(gate), describe(down)
    if g.fmt == "bf12":
        live = expected_live_slots(g.experts, top_k, tokens)
        return Config(*(dataclasses.replace(split_launch(op, live, block_ks=GATE_UP_BLOCK_K),
                                            num_stages=BF12_STAGES) for op in (g, d)))
    if g.fmt == "plain":
        return Config(default_launch(g, GATE_UP_BLOCK_K), default_launch(d))
    if g.fmt == "fp8" and tokens <= FP8_SMALL_BATCH_TOKENS:
        small = fp8_wide_config(g, d, top_k) if fp8_wide() else None
        small = small or FP8_SMALL_BATCH
        if launch_fits(g, small.gate_up) and launch_fits(d, small.down):
            return small
    live = expected_live_slots(g.experts, top_k, tokens)
    return Config(split_launch(g, live), split_launch(d, live))


def launch_fits(op: Operand, launch: Launch) -> bool:
    """Blocks are powers of two that tile the weight and sit on its scale grid (tiles.valid_block_k); every K
    split runs at least one step (the last may run fewer: glm-4.5-air's experts' down has 11 steps of 128)."""
    fits = op.k % launch.block_k == 0 and split_steps(op.k // launch.block_k, launch.splits) is not None
    return valid_block_n(op, launch.block_n) and valid_block_k(op, launch.block_k) and fits


def _split_base(op: Operand, launch: Launch, s):
    """The first K input of split `s` (every split but the last runs split_steps() steps)."""
    return s * (split_steps(op.k // launch.block_k, launch.splits) * launch.block_k)


def _split_loop(op: Operand, launch: Launch, s, live):
    """tiles.k_loop over split `s`'s share of K: the dead slots run none, the last split of an uneven cut
    runs what is left."""
    bk, total = launch.block_k, op.k // launch.block_k
    k_steps = split_steps(total, launch.splits)
    steps = None
    if k_steps * launch.splits != total:
        steps = jnp.where(live, jnp.minimum(jnp.int32(k_steps), total - s * k_steps), 0)
    return functools.partial(tiles.k_loop, k_steps=k_steps, base=_split_base(op, launch, s), block_k=bk,
                             unroll=launch.unroll, live=live, steps=steps)


def check_launch(op: Operand, launch: Launch) -> None:
    if not launch_fits(op, launch):
        raise ValueError(f"{launch} does not tile a [{op.k}, {op.n}] {op.fmt} expert weight "
                         f"(scale block {op.scale_block})")


# ---------------------------------------------------------------- in-kernel helpers


def slot_expert(ids_ref, slot, num_slots: int):
    """(expert of this slot, whether this slot is the first to hold that expert)."""
    width = pl.next_power_of_2(num_slots)
    pos = lax.broadcasted_iota(jnp.int32, (width,), 0)
    ids = plgpu.load(ids_ref.at[jnp.minimum(pos, num_slots - 1)], mask=pos < num_slots, other=-1)
    expert = ids_ref[slot]
    first = jnp.min(jnp.where(ids == expert, pos, width))
    return expert, first == slot


def row_weights(ids_ref, wts_ref, expert, tokens: int, top_k: int):
    """float32 [16]: each token row's routing weight for `expert` (0 where the token did not pick it)."""
    width = pl.next_power_of_2(top_k)
    r = lax.broadcasted_iota(jnp.int32, (MIN_DOT_ROWS, width), 0)
    j = lax.broadcasted_iota(jnp.int32, (MIN_DOT_ROWS, width), 1)
    ok = (r < tokens) & (j < top_k)
    flat = jnp.where(ok, r * top_k + j, 0)
    ids = plgpu.load(ids_ref.at[flat], mask=ok, other=-1)
    wts = plgpu.load(wts_ref.at[flat], mask=ok, other=0.0)
    return jnp.sum(jnp.where(ids == expert, wts, 0.0), axis=1)


def silu_mul(g, u):
    return g * lax.logistic(g) * u  # silu(g) * u


def _gate_up_kernel(ids_ref, x_ref, *refs, op: Operand, tokens: int, num_slots: int, launch: Launch, fused: bool,
                    carrier: bool):
    n_w = op.num_arrays
    expert, live = slot_expert(ids_ref, pl.program_id(0), num_slots)
    gate_up_body(x_ref, refs[:n_w], refs[n_w: 2 * n_w], refs[2 * n_w:], expert, live, op=op, tokens=tokens,
                 launch=launch, fused=fused, carrier=carrier)


def gate_up_body(x_ref, g_refs, u_refs, out_refs, expert, live, *, op: Operand, tokens: int, launch: Launch,
                 fused: bool, carrier: bool = False):
    """A gate/up program's work once its slot's expert (and whether the slot is live) is known. `carrier`: the h
    this stage stores unsplit is bf16 rows carried as f16 (dgjax/pallas/carrier.py)."""
    j, s = pl.program_id(1), pl.program_id(2)
    bk, bn = launch.block_k, launch.block_n
    n0 = j * bn
    loop = _split_loop(op, launch, s, live)

    ahead = tiles.ScalePrefetch(op, bn)  # DGJAX_FP8_SCALE=prefetch: each step's scales loaded in the step before

    def step(k0, carry):  # carry: (acc_g, acc_u, this step's gate and up scales: None unless `ahead.on`)
        acc_g, acc_u, sg, su = carry
        xs = tiles.x_tiles(x_ref, tokens, k0, bk, op)
        return (acc_g + tiles.tile_dot(xs, g_refs, op, expert, k0, n0, bk, bn, scale=sg),
                acc_u + tiles.tile_dot(xs, u_refs, op, expert, k0, n0, bk, bn, scale=su),
                ahead.next(g_refs, expert, k0, n0, bk), ahead.next(u_refs, expert, k0, n0, bk))

    zeros = tiles.acc_zeros(op, x_ref.dtype, bn)
    k_first = _split_base(op, launch, s)
    init = (zeros, zeros, ahead.first(g_refs, expert, k_first, n0), ahead.first(u_refs, expert, k_first, n0))
    acc_g, acc_u = (tiles.acc_rows(op, x_ref.dtype, acc) for acc in loop(step, init)[:2])
    if op.fmt == "bf12":  # row scales; a live slot's escapes once per column block (its first K split)
        first = live & (s == 0)
        acc_g, acc_u = (bf12_tiles.finish(acc, w, x_ref, op.n, op.slots, expert, n0, bn, tokens, first)
                        for acc, w in ((acc_g, g_refs), (acc_u, u_refs)))
    if fused:
        (h_ref,) = out_refs
        h = silu_mul(acc_g, acc_u)
        if carrier:  # rounded as the bf16 model rounds h, then carried as f16
            h = f16_carrier(h)
        tiles.store_rows(h_ref, h.astype(h_ref.dtype), tokens)
    else:
        g_out, u_out = out_refs
        tiles.store_rows(g_out, acc_g, tokens)
        tiles.store_rows(u_out, acc_u, tokens)


def _split_act_rows(g_ref, u_ref, slot, num_slots: int, splits: int, tokens: int, dtype):
    """h rows of `slot` from the gate/up stage's float32 partials ([splits * slots * T, ffw] each): summed over
    the splits, act(gate) * up, rounded to `dtype`: what gate_up_stage's jnp finish computes."""
    def rows(idx):
        g = u = None
        for sp in range(splits):
            first = (sp * num_slots + slot) * tokens
            gs, us = tiles.x_rows(g_ref, tokens, idx, first), tiles.x_rows(u_ref, tokens, idx, first)
            g, u = (gs, us) if g is None else (g + gs, u + us)
        return silu_mul(g, u).astype(dtype)
    return rows


def _down_kernel(ids_ref, wts_ref, *refs, op: Operand, tokens: int, top_k: int, num_slots: int,
                 launch: Launch, act_splits: int, dtype):
    h_refs, refs = (refs[:2], refs[2:]) if act_splits else (refs[:1], refs[1:])
    w_refs, o_ref = refs[:-1], refs[-1]
    a, j, s = pl.program_id(0), pl.program_id(1), pl.program_id(2)
    bk, bn = launch.block_k, launch.block_n
    expert, live = slot_expert(ids_ref, a, num_slots)
    n0 = j * bn
    loop = _split_loop(op, launch, s, live)
    rows = _split_act_rows(*h_refs, a, num_slots, act_splits, tokens, dtype) if act_splits else None
    h_ref = None if act_splits else h_refs[0]

    ahead = tiles.ScalePrefetch(op, bn)  # DGJAX_FP8_SCALE=prefetch: each step's scale loaded in the step before

    def step(k0, carry):  # carry: (acc, this step's scale: None unless `ahead.on`)
        acc, scale = carry
        xs = tiles.x_tiles(h_ref, tokens, k0, bk, op, rows=rows)
        return (acc + tiles.tile_dot(xs, w_refs, op, expert, k0, n0, bk, bn, scale=scale),
                ahead.next(w_refs, expert, k0, n0, bk))

    init = (tiles.acc_zeros(op, dtype, bn), ahead.first(w_refs, expert, _split_base(op, launch, s), n0))
    acc = tiles.acc_rows(op, dtype, loop(step, init)[0])
    if op.fmt == "bf12":  # h as stored (no act_splits for bf12, see down_stage)
        acc = bf12_tiles.finish(acc, w_refs, h_ref, op.n, op.slots, expert, n0, bn, tokens, live & (s == 0))
    rw = row_weights(ids_ref, wts_ref, expert, tokens, top_k)[:, None]
    # where, not a plain product: a token that did not pick this expert must add exactly 0, even if its
    # row overflowed.
    tiles.store_rows(o_ref, jnp.where(rw != 0.0, acc * rw, 0.0), tokens)


# ---------------------------------------------------------------- launches


def params(launch: Launch):
    return plgpu.CompilerParams(num_warps=launch.num_warps, num_stages=launch.num_stages)


def stage_outputs(x, op: Operand, num_slots: int, launch: Launch, h_dtype=None):
    """(out_shape, out_specs) of the gate/up stage: h [slots, T, ffw] in `h_dtype` (x's) unsplit, else float32
    (gate, up) partials [splits, slots, T, ffw]."""
    t, bn, splits = x.shape[0], launch.block_n, launch.splits
    if splits == 1:
        return [jax.ShapeDtypeStruct((num_slots, t, op.n), h_dtype or x.dtype)], [pl.BlockSpec((None, t, bn),
                                                                                    lambda i, j, s: (i, 0, j))]
    part = jax.ShapeDtypeStruct((splits, num_slots, t, op.n), jnp.float32)
    return [part, part], [pl.BlockSpec((None, None, t, bn), lambda i, j, s: (s, i, 0, j))] * 2


def finish_gate_up(outs, x, launch: Launch, act_in_down: bool, h_carrier: bool = False):
    """The stage's result from its kernel outputs: h, or with K splits the summed act(gate) * up (or, with
    `act_in_down`, the partials as SplitSums for the down stage). `h_carrier`: h is rounded to x's bf16 and
    carried as f16 (dgjax/pallas/carrier.py) for fp8 down weights."""
    if launch.splits == 1:
        return outs[0]
    if act_in_down:
        return SplitSums(outs[0], x.dtype), SplitSums(outs[1], x.dtype)
    h = silu_mul(outs[0].sum(0), outs[1].sum(0))
    if h_carrier:  # rounded as the bf16 model rounds h, then carried as f16
        return f16_carrier(h)
    return h.astype(x.dtype)


def gate_up_stage(x, ids_flat, gate, up, launch: Launch, interpret: bool, act_in_down: bool = False,
                  h_carrier: bool = False) -> jax.Array | tuple[SplitSums, SplitSums]:
    """h [slots, T, ffw] in x's dtype (`h_carrier`: as f16, see finish_gate_up): act(x . gate) * (x . up) of each
    live slot's expert (zeros elsewhere). With K splits and `act_in_down`: the (gate, up) float32 partials, for
    `down_stage` to finish."""
    (op, g_arrays), (_, u_arrays) = operand(gate), operand(up)
    check_launch(op, launch)
    bf12_tiles.check_rows(op.fmt, x.dtype)
    t, a = x.shape[0], ids_flat.shape[0]
    out_shape, out_specs = stage_outputs(x, op, a, launch, jnp.float16 if h_carrier else None)
    kernel = functools.partial(_gate_up_kernel, op=op, tokens=t, num_slots=a, launch=launch,
                               fused=launch.splits == 1, carrier=h_carrier)
    outs = pl.pallas_call(
        kernel,
        grid=(a, op.n // launch.block_n, launch.splits),
        in_specs=[whole(ids_flat.shape), whole(x.shape)] + [whole(w.shape) for w in g_arrays + u_arrays],
        out_specs=out_specs,
        out_shape=out_shape,
        compiler_params=params(launch),
        interpret=interpret,
        name=f"moe_gate_up_{op.fmt}_t{t}_{launch.tag()}",
    )(ids_flat, x, *g_arrays, *u_arrays)
    return finish_gate_up(outs, x, launch, act_in_down, h_carrier)


def down_stage(h, ids_flat, wts_flat, down, top_k: int, launch: Launch, interpret: bool) -> jax.Array:
    """float32 [splits, slots, T, embed]: each live slot's routing-weighted down projection (zeros elsewhere).

    h: [slots, T, ffw], or the gate/up stage's (gate, up) SplitSums, finished here as the rows load."""
    op, d_arrays = operand(down)
    check_launch(op, launch)
    bn, splits = launch.block_n, launch.splits
    if isinstance(h, tuple):
        if op.fmt == "bf12":
            raise ValueError("bf12 down weights add their escapes from h as stored: no act_in_down")
        gate_parts, up_parts = (p.parts for p in h)
        act_splits, a, t, _ = gate_parts.shape
        h_args = [p.reshape(act_splits * a * t, op.k) for p in (gate_parts, up_parts)]
        h_specs = [whole(p.shape) for p in h_args]
        dtype = h[0].dtype
    else:
        (a, t, _), act_splits, dtype = h.shape, 0, h.dtype
        h_args, h_specs = [h], [pl.BlockSpec((None, t, op.k), lambda i, j, s: (i, 0, 0))]
    kernel = functools.partial(_down_kernel, op=op, tokens=t, top_k=top_k, num_slots=a, launch=launch,
                               act_splits=act_splits, dtype=dtype)
    return pl.pallas_call(
        kernel,
        grid=(a, op.n // bn, splits),
        in_specs=[whole(ids_flat.shape), whole(wts_flat.shape)] + h_specs + [whole(w.shape) for w in d_arrays],
        out_specs=pl.BlockSpec((None, None, t, bn), lambda i, j, s: (s, i, 0, j)),
        out_shape=jax.ShapeDtypeStruct((splits, a, t, op.n), jnp.float32),
        compiler_params=params(launch),
        interpret=interpret,
        name=f"moe_down_{op.fmt}_t{t}_{launch.tag()}",
    )(ids_flat, wts_flat, *h_args, *d_arrays)


@functools.partial(jax.jit, static_argnames=("hidden_act", "config", "interpret", "act_in_down", "carry_h"))
def expert_partials(x, expert_ids, weights, gate, up, down, *, hidden_act: str = "silu",
                    config: Config | None = None, interpret: bool = False, act_in_down: bool = False,
                    carry_h: bool | None = None) -> jax.Array:
    """float32 [splits, T * top_k, T, embed]: the down stage's output before the final sum (see module doc).
    `carry_h`: whether h reaches the down stage as carried f16 (default: `carries_h`, read when traced)."""
    t, k = expert_ids.shape
    if not supports(t, gate, up, down, hidden_act):
        raise ValueError(f"the MoE decode kernel does not support T={t}, {hidden_act!r} or these weights")
    cfg = config or default_config(gate, down, t, k)
    ids_flat = expert_ids.reshape(t * k).astype(jnp.int32)
    wts_flat = weights.reshape(t * k).astype(jnp.float32)
    carrier = carries_h(x.dtype, down) if carry_h is None else carry_h
    act_in_down = act_in_down and describe(down).fmt != "bf12"  # its escapes read h as stored
    h = gate_up_stage(x, ids_flat, gate, up, cfg.gate_up, interpret, act_in_down, h_carrier=carrier)
    return down_stage(h, ids_flat, wts_flat, down, k, cfg.down, interpret)


def carries_h(x_dtype, down) -> bool:
    """Whether h reaches fp8 down weights as f16 (dgjax/pallas/carrier.py), written at no cost by the activation's
    fusion (or the unsplit gate/up stage), so the down stage does not rescale it in every K step. (x itself stays
    bf16: carried, the router's GEMM and the gate/up stage each got slower on the H200, s22c-e.)"""
    return tiles.carries_f16(describe(down), x_dtype)


@functools.partial(jax.jit, static_argnames=("hidden_act", "config", "interpret", "act_in_down", "carry_h"))
def moe_decode(x, expert_ids, weights, gate, up, down, *, hidden_act: str = "silu",
               config: Config | None = None, interpret: bool = False, act_in_down: bool = False,
               carry_h: bool | None = None) -> jax.Array:
    """ref.moe_decode's result [T, embed] in x's dtype, reading each routed expert once (see module doc)."""
    parts = expert_partials(x, expert_ids, weights, gate, up, down, hidden_act=hidden_act, config=config,
                            interpret=interpret, act_in_down=act_in_down, carry_h=carry_h)
    return parts.sum(axis=(0, 1)).astype(x.dtype)
