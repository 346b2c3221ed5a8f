"""Routed experts of a prefill chunk as a grouped GEMM: two Pallas kernels (Triton lowering) over expert-sorted rows.

Why this shape:
- A prefill chunk routes thousands of (token, expert) rows; sorted by expert, each expert's rows form one
  contiguous group. The work is then a GEMM per group at tensor-core rate, and every expert's weights
  should be read from HBM about once. `lax.ragged_dot` on the H200 ran this at ~9 TFLOP/s.
- Tile table (a few jnp ops, no extra kernel): every group is cut into row tiles of `block_m` rows; tile t
  knows its expert and its row range [start, end). The number of tiles is data dependent but bounded by
  cdiv(rows, block_m) + experts (each group adds at most one partial tile), a static grid size; tiles past
  the real count have an empty range, run a zero-trip K loop and store nothing.
- Grid (output column tile, row tile): the column tile varies fastest, so the programs of one row tile run
  together and share its x rows from L2, and the row tiles of one expert follow each other, so the
  expert's weight columns are read from HBM about once.
- Each program loops over K in [block_m, block_k] x [block_k, block_n] `plgpu.dot` steps with float32
  accumulators. x rows are masked gathers through index arrays (a tile may straddle its group's end);
  weight tiles are read with moe_decode's per-format tile decoders (moe_decode/tiles.py: plain, FP8 blocks,
  NVFP4, MXFP4, int4/int8 groups, bf12), so quantized stacks are decoded tile by tile, never whole. bf12 adds
  an epilogue (dgjax/pallas/bf12_tiles.finish_rows: the expert's row scales, its rows' escapes).
- Stage 1 (gate/up) holds two accumulators and writes h = silu(x.gate) * (x.up) in x's dtype; stage 2
  (down) writes x's dtype too. Stores are masked to the tile's rows (no clamping: see `_store_rows`).
Precondition: group_sizes sum to the row count (rows past the groups are never written).
Numerics: float32 accumulation; h rounded to x's dtype between the stages, as ref.py does.
Why the Triton lowering (not Mosaic GPU): data-dependent expert and row ranges per program and masked
row gathers/stores, which Pallas-Triton expresses directly and which the decode kernels already run.
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
from dgjax.pallas.launch import choose_impl, whole
from dgjax.pallas.moe_decode import tiles
from dgjax.pallas.moe_decode.tiles import Operand, describe, operand, valid_block_k, valid_block_n

ACTIVATIONS = ("silu", "swish")
MIN_BLOCK = tiles.MIN_DOT  # Triton's dot needs every dimension >= 16


@dataclasses.dataclass(frozen=True)
class Launch:
    """Tile and launch knobs of one stage: rows, output columns and K inputs per step; Triton params."""

    block_m: int = 64
    block_n: int = 64
    block_k: int = 64
    num_warps: int = 4
    num_stages: int = 3


@dataclasses.dataclass(frozen=True)
class Config:
    gate_up: Launch = Launch(64, 64, 64)
    down: Launch = Launch(64, 128, 64)


# Experts whose tiles are rebuilt from packed bytes (bf12) or nibbles (nvfp4) take K steps of 128 inputs in two
# stages for gate/up: qwen3-30b-a3b at 2048 tokens (benchmarks/moe_prefill_check.py --sweep, 2026-12-04 s27d)
# 1.79 ms a layer instead of 2.40 for bf12, 2.23 instead of 2.56 for nvfp4 (bf16's default: 0.86).
PACKED_CONFIG = Config(gate_up=Launch(64, 64, 128, 4, 2))
PACKED_CONFIG_FORMATS = ("bf12", "nvfp4")


def default_config(gate: Any) -> Config:
    """The launches for experts in `gate`'s format (measured where a format has its own)."""
    return PACKED_CONFIG if describe(gate).fmt in PACKED_CONFIG_FORMATS else Config()


def supports(gate: Any, up: Any, down: Any, hidden_act: str) -> bool:
    """Whether the kernel handles this activation and these weights (else use the reference)."""
    ops = [describe(w) for w in (gate, up, down)]
    if hidden_act not in ACTIVATIONS or any(o is None for o in ops):
        return False
    g, u, d = ops
    if g != u or (d.experts, d.k, d.n) != (g.experts, g.n, g.k):
        return False
    fits = lambda o: (_largest(lambda b: valid_block_n(o, b), 256)  # noqa: E731
                      and _largest(lambda b: valid_block_k(o, b), 256))
    return bool(fits(g) and fits(d))


def _largest(ok, start: int) -> int:
    """The largest power of two <= start (and >= 16) that `ok` accepts, 0 if none."""
    b = start
    while b >= MIN_BLOCK and not ok(b):
        b //= 2
    return b if b >= MIN_BLOCK else 0


def fit_launch(op: Operand, rows: int, launch: Launch) -> Launch:
    """The launch with its blocks shrunk to what this weight and row count allow (powers of two >= 16)."""
    bm = max(MIN_BLOCK, min(launch.block_m, pl.next_power_of_2(max(rows, 1))))
    bn = _largest(lambda b: valid_block_n(op, b), launch.block_n)
    bk = _largest(lambda b: valid_block_k(op, b), launch.block_k)
    return dataclasses.replace(launch, block_m=bm, block_n=bn or launch.block_n, block_k=bk or launch.block_k)


def check_launch(op: Operand, launch: Launch) -> None:
    """Blocks are powers of two that tile the weight and sit on its scale grid (tiles.valid_block_k)."""
    bm = launch.block_m
    if not (bm >= MIN_BLOCK and bm & (bm - 1) == 0 and valid_block_n(op, launch.block_n)
            and valid_block_k(op, launch.block_k)):
        raise ValueError(f"{launch} does not tile a [{op.k}, {op.n}] {op.fmt} expert weight "
                         f"(scale block {op.scale_block})")


def max_tiles(rows: int, num_experts: int, block_m: int) -> int:
    """Static bound on the row tiles of any grouping: each non-empty group adds at most one partial tile."""
    return pl.cdiv(rows, block_m) + num_experts


def tile_table(group_sizes: jax.Array, rows: int, block_m: int) -> tuple[jax.Array, jax.Array, jax.Array]:
    """Per row tile (static count `max_tiles`): (expert, first row, end row) int32; unused tiles: 0, 0, 0."""
    e = group_sizes.shape[0]
    sizes = group_sizes.astype(jnp.int32)
    ends = jnp.cumsum(sizes)
    counts = (sizes + (block_m - 1)) // block_m
    tile_ends = jnp.cumsum(counts)
    t = jnp.arange(max_tiles(rows, e, block_m), dtype=jnp.int32)
    group = jnp.searchsorted(tile_ends, t, side="right").astype(jnp.int32)  # skips empty groups
    used = group < e
    g = jnp.minimum(group, e - 1)
    start = ends[g] - sizes[g] + (t - (tile_ends[g] - counts[g])) * block_m
    zero = jnp.int32(0)
    return g, jnp.where(used, start, zero), jnp.where(used, ends[g], zero)


# ---------------------------------------------------------------- in-kernel helpers


def _row_ids(start, block_m: int):
    return start + lax.broadcasted_iota(jnp.int32, (block_m, 1), 0)


X_ENV_VAR = "DGJAX_MOE_PREFILL_X"
X_LAYOUTS = ("split", "strided")


def x_layout() -> str:
    """How packed-weight stages read x: "split" (default: `deinterleave`d by XLA first, contiguous loads) or
    "strided" (x as stored, stride-2 gathers of its even and odd columns); $DGJAX_MOE_PREFILL_X at trace time."""
    return choose_impl(None, X_ENV_VAR, X_LAYOUTS, "moe prefill x layout", default="split")


def deinterleave(x: jax.Array) -> jax.Array:
    """[M, K] -> [M, K]: each row's even columns, then its odd ones (the two halves a packed weight tile meets)."""
    return jnp.concatenate([x[:, 0::2], x[:, 1::2]], axis=1)


def _x_tiles(x_ref, rows, ok, num_rows: int, k0, bk: int, op: Operand, split_x: bool) -> tuple:
    """x rows `rows` ([BM, 1], masked by `ok`) for inputs k0:k0+bk: one tile, or for packed weights the
    even and odd columns as two tiles (moe_decode/tiles.py's contract). `split_x`: x arrives as its even
    columns then its odd ones (`deinterleave`), so both tiles are contiguous loads; else stride-2 gathers."""
    cols = bk // 2 if op.packed else bk
    c = lax.broadcasted_iota(jnp.int32, (1, cols), 1)
    mask = jnp.broadcast_to(ok, (rows.shape[0], cols))
    r = jnp.minimum(rows, num_rows - 1)  # masked rows past the array read its last row
    if not op.packed:
        return (plgpu.load(x_ref.at[r, k0 + c], mask=mask, other=0),)
    if split_x:
        even = plgpu.load(x_ref.at[r, k0 // 2 + c], mask=mask, other=0)
        odd = plgpu.load(x_ref.at[r, op.k // 2 + k0 // 2 + c], mask=mask, other=0)
    else:
        even = plgpu.load(x_ref.at[r, k0 + 2 * c], mask=mask, other=0)
        odd = plgpu.load(x_ref.at[r, k0 + 2 * c + 1], mask=mask, other=0)
    if op.fmt == "bf12":  # x meets the rebuilt (tiny) weights shifted, as in moe_decode/tiles.x_tiles
        return bf12_tiles.shifted_x(even), bf12_tiles.shifted_x(odd)
    return even, odd


def _store_rows(o_ref, value, rows, ok, n0):
    """Store the tile's rows. Masked rows are not clamped onto real ones: the interpreter applies a masked
    store as read-select-write, and a duplicated index could write an old value over a new one."""
    c = n0 + lax.broadcasted_iota(jnp.int32, (1, value.shape[1]), 1)
    plgpu.store(o_ref.at[rows, c], value, mask=jnp.broadcast_to(ok, value.shape))


def _act(g, u):
    return g * lax.logistic(g) * u  # silu(g) * u


def _grouped_kernel(exp_ref, start_ref, end_ref, x_ref, *refs, op: Operand, launch: Launch, num_rows: int,
                    gated: bool, split_x: bool):
    n_w = op.num_arrays
    w_sets = (refs[:n_w], refs[n_w:2 * n_w]) if gated else (refs[:n_w],)
    o_ref = refs[-1]
    j, t = pl.program_id(0), pl.program_id(1)
    bm, bn, bk = launch.block_m, launch.block_n, launch.block_k
    expert, start, end = exp_ref[t], start_ref[t], end_ref[t]
    rows = _row_ids(start, bm)
    ok = rows < end
    n0 = j * bn
    # Typed constants: a select between weak-typed Python ints lowers with the predicate's type (i1),
    # which `scf.for` rejects as a loop bound.
    trips = jnp.where(end > start, jnp.int32(op.k // bk), jnp.int32(0))

    def body(i, accs):
        k0 = i * bk
        xs = _x_tiles(x_ref, rows, ok, num_rows, k0, bk, op, split_x)
        return tuple(acc + tiles.tile_dot(xs, w, op, expert, k0, n0, bk, bn) for acc, w in zip(accs, w_sets))

    zeros = tuple(jnp.zeros((bm, bn), jnp.float32) for _ in w_sets)
    accs = lax.fori_loop(0, trips, body, zeros)
    if op.fmt == "bf12":  # the experts' row scales and escapes (x as this stage holds it: `half` maps split x)
        r = jnp.minimum(rows, num_rows - 1)
        half = op.k // 2 if split_x else None
        accs = tuple(bf12_tiles.finish_rows(acc, w, x_ref, r, ok, op.n, op.slots, expert, n0, bn, half)
                     for acc, w in zip(accs, w_sets))
    out = _act(*accs) if gated else accs[0]
    _store_rows(o_ref, out.astype(o_ref.dtype), rows, ok, n0)


# ---------------------------------------------------------------- launches

def grouped_stage(x: jax.Array, group_sizes: jax.Array, weights: tuple, launch: Launch, interpret: bool,
                  name: str) -> jax.Array:
    """[M, n] in x's dtype: x . w[group] (one weight) or silu(x . gate) * (x . up) (two weights)."""
    described = [operand(w) for w in weights]
    op = described[0][0]
    bf12_tiles.check_rows(op.fmt, x.dtype)
    launch = fit_launch(op, x.shape[0], launch)
    check_launch(op, launch)
    m = x.shape[0]
    table = tile_table(group_sizes, m, launch.block_m)
    arrays = [a for _, arrs in described for a in arrs]
    split_x = op.packed and x_layout() == "split"
    if split_x:
        x = deinterleave(x)
    kernel = functools.partial(_grouped_kernel, op=op, launch=launch, num_rows=m, gated=len(weights) == 2,
                               split_x=split_x)
    return pl.pallas_call(
        kernel,
        grid=(op.n // launch.block_n, table[0].shape[0]),
        in_specs=[whole(a.shape) for a in (*table, x, *arrays)],
        out_specs=whole((m, op.n)),
        out_shape=jax.ShapeDtypeStruct((m, op.n), x.dtype),
        compiler_params=plgpu.CompilerParams(num_warps=launch.num_warps, num_stages=launch.num_stages),
        interpret=interpret,
        name=f"{name}_{op.fmt}_bm{launch.block_m}_bn{launch.block_n}_bk{launch.block_k}",
    )(*table, x, *arrays)


@functools.partial(jax.jit, static_argnames=("hidden_act", "config", "interpret"))
def grouped_mlp(rows: jax.Array, group_sizes: jax.Array, gate: Any, up: Any, down: Any, *,
                hidden_act: str = "silu", config: Config | None = None, interpret: bool = False) -> jax.Array:
    """down(silu(rows . gate) * (rows . up)) per expert group -> [M, embed] in rows' dtype (ref.grouped_mlp).

    rows [M, embed] sorted by expert; group_sizes int [E] summing to M.
    """
    if not supports(gate, up, down, hidden_act):
        raise ValueError(f"the MoE prefill kernel does not support {hidden_act!r} or these weights")
    cfg = config or default_config(gate)
    h = grouped_stage(rows, group_sizes, (gate, up), cfg.gate_up, interpret, "moe_prefill_gate_up")
    return grouped_stage(h, group_sizes, (down,), cfg.down, interpret, "moe_prefill_down")
