"""The fused decode attention kernel (interpret mode) against its reference: outputs, written K/V, untouched pages."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from dgjax.pallas.fused_decode_attention import kernel, ref
from dgjax.pallas.paged_attention import api as paged

PAGE, PAGES, WIDTH = 4, 20, 6


def _case(seed, b, kvh, g, d, rot, dtype, qk_norm):
    rng = np.random.default_rng(seed)
    qkv = jnp.asarray(rng.standard_normal((b, kvh, g + 2, d)), dtype)
    k_pages = jnp.asarray(rng.standard_normal((PAGES, PAGE, kvh, d)), dtype)
    v_pages = jnp.asarray(rng.standard_normal((PAGES, PAGE, kvh, d)), dtype)
    ctx = rng.integers(1, WIDTH * PAGE, size=b).astype(np.int32)
    ctx[-1] = 0 if b > 2 else ctx[-1]  # a padding row
    qlen = (ctx > 0).astype(np.int32)
    tables = (1 + rng.permutation(PAGES - 1)[: b * WIDTH]).reshape(b, WIDTH).astype(np.int32)
    pos = np.maximum(ctx - 1, 0)[:, None].astype(np.int32)
    slots = np.asarray(paged.kv_slots(jnp.asarray(pos), jnp.asarray(qlen), jnp.asarray(tables), PAGE))
    angles = pos.astype(np.float32) * (1.0 / 10000 ** (np.arange(0, rot, 2) / rot))[None, :]
    emb = np.concatenate([angles, angles], axis=-1)
    norms = (jnp.asarray(1 + 0.3 * rng.standard_normal(d), dtype), jnp.asarray(1 + 0.3 * rng.standard_normal(d), dtype))
    return dict(qkv=qkv, cos=jnp.asarray(np.cos(emb)), sin=jnp.asarray(np.sin(emb)), k_pages=k_pages,
                v_pages=v_pages, block_tables=jnp.asarray(tables), context_lens=jnp.asarray(ctx),
                positions=jnp.asarray(pos), query_lens=jnp.asarray(qlen), slots=jnp.asarray(slots),
                q_norm=norms[0] if qk_norm else None, k_norm=norms[1] if qk_norm else None)


@pytest.mark.parametrize(
    "b,kvh,g,d,rot,splits,qk_norm,window,early_keys",  # early_keys: the first key block loaded before q is used
    [
        (3, 2, 4, 64, 64, 1, False, None, False),   # llama-like GQA, one split, a padding row
        (3, 2, 4, 64, 64, 1, False, None, True),
        (3, 2, 2, 64, 32, 3, True, None, False),    # partial rotary (GLM), q/k norm (Qwen3), three splits
        (3, 2, 2, 64, 32, 3, True, None, True),
        (2, 1, 8, 32, 32, 2, False, 5, False),      # group 8, sliding window
        (2, 1, 8, 32, 32, 2, False, 5, True),
        (2, 2, 1, 64, 64, 2, True, None, False),    # MHA (group padded 1 -> 16)
    ],
)
def test_kernel_matches_reference(b, kvh, g, d, rot, splits, qk_norm, window, early_keys):
    c = _case(b * 100 + g, b, kvh, g, d, rot, jnp.float32, qk_norm)
    want_out, want_k, want_v = ref.fused_decode_attention(**c, scale=d**-0.5, eps=1e-6, sliding_window=window)
    start, end = paged.decode_window(c["context_lens"], c["positions"], c["query_lens"], WIDTH * PAGE, window)
    got_out, got_k, got_v = kernel.fused_decode_attention(
        c["qkv"], c["cos"], c["sin"], c["k_pages"], c["v_pages"], c["block_tables"], start, end, c["slots"][:, 0],
        c["q_norm"], c["k_norm"], scale=d**-0.5, eps=1e-6, num_splits=splits, block_tokens=8, early_keys=early_keys,
        interpret=True,
    )
    np.testing.assert_allclose(np.asarray(got_out), np.asarray(want_out), atol=2e-5, rtol=1e-5)
    # the new K/V rows land in their slots and nothing else of the pages changes
    np.testing.assert_allclose(np.asarray(got_k), np.asarray(want_k), atol=1e-6, rtol=0)
    np.testing.assert_array_equal(np.asarray(got_v), np.asarray(want_v))
    assert not np.array_equal(np.asarray(want_k), np.asarray(c["k_pages"]))


@pytest.mark.parametrize("qk_norm", [False, True])
def test_idle_splits_store_the_empty_state_and_match_the_loading_path(qk_norm):
    """8 splits over contexts of at most 23 keys in blocks of 4: most programs (and all but split 0 of the
    padding row) have no key. Skipping their loads must not change a bit of the outputs or the pages, and
    the result still matches the reference."""
    b, kvh, g, d = 3, 2, 3, 64
    c = _case(7, b, kvh, g, d, d, jnp.float32, qk_norm)
    start, end = paged.decode_window(c["context_lens"], c["positions"], c["query_lens"], WIDTH * PAGE, None)
    args = (c["qkv"], c["cos"], c["sin"], c["k_pages"], c["v_pages"], c["block_tables"], start, end,
            c["slots"][:, 0], c["q_norm"], c["k_norm"])
    kw = dict(scale=d**-0.5, eps=1e-6, num_splits=8, block_tokens=4, interpret=True)
    lean = kernel.fused_decode_attention(*args, skip_idle=True, **kw)
    full = kernel.fused_decode_attention(*args, **kw)
    for got, want in zip(lean, full):
        np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
    want_out, _, _ = ref.fused_decode_attention(**c, scale=d**-0.5, eps=1e-6)
    np.testing.assert_allclose(np.asarray(lean[0]), np.asarray(want_out), atol=2e-5, rtol=1e-5)


def test_bf16_kernel_close_to_reference():
    c = _case(7, 3, 2, 4, 64, 64, jnp.bfloat16, True)
    want_out, want_k, _ = ref.fused_decode_attention(**c, scale=0.125, eps=1e-6)
    start, end = paged.decode_window(c["context_lens"], c["positions"], c["query_lens"], WIDTH * PAGE, None)
    got_out, got_k, _ = kernel.fused_decode_attention(
        c["qkv"], c["cos"], c["sin"], c["k_pages"], c["v_pages"], c["block_tables"], start, end, c["slots"][:, 0],
        c["q_norm"], c["k_norm"], scale=0.125, eps=1e-6, block_tokens=8, interpret=True,
    )
    err = float(jnp.max(jnp.abs(got_out.astype(jnp.float32) - want_out.astype(jnp.float32))))
    assert err < 3e-2, err
    k_err = float(jnp.max(jnp.abs(got_k.astype(jnp.float32) - want_k.astype(jnp.float32))))
    assert k_err <= 2 ** -6 * 4, k_err  # rope/norm rounding of the new rows only


def test_reference_equals_unfused_composition():
    """ref.py's split/norm/rope/write/attend equals writing K/V then calling the paged-attention reference."""
    c = _case(3, 3, 2, 2, 64, 32, jnp.float32, True)
    out, k_pages, _ = ref.fused_decode_attention(**c, scale=0.1, eps=1e-6)
    q, k, v = ref.split_qkv(c["qkv"])
    q = ref.rope(ref.rms_norm(q, c["q_norm"], 1e-6), c["cos"], c["sin"])
    k = ref.rope(ref.rms_norm(k, c["k_norm"], 1e-6), c["cos"], c["sin"])
    kp, vp = paged.write_kv(c["k_pages"], c["v_pages"], k[:, None], v[:, None], c["slots"])
    want = paged.paged_attention(q[:, None], kp, vp, c["block_tables"], c["context_lens"], c["positions"],
                                 c["query_lens"], scale=0.1, impl="ref")[:, 0]
    np.testing.assert_array_equal(np.asarray(out), np.asarray(want))
    np.testing.assert_array_equal(np.asarray(k_pages), np.asarray(kp))
    assert float(jnp.max(jnp.abs(out[-1]))) == 0.0  # padding row


@pytest.mark.parametrize("qk_norm,rot,splits", [(False, 128, 1), (True, 128, 17), (True, 64, 4)])
def test_kernel_lowers_to_valid_triton_modules_at_llama_shapes(qk_norm, rot, splits, verified_triton_lowering):
    """Lower for CUDA without a GPU (llama/qwen3 heads; partial rotary) and verify the Triton module."""
    b, kvh, g, d, pages, ps, width = 2, 8, 4, 128, 64, 16, 32
    spec = jax.ShapeDtypeStruct
    args = [spec((b, kvh, g + 2, d), jnp.bfloat16), spec((b, rot), jnp.float32), spec((b, rot), jnp.float32),
            spec((pages, ps, kvh, d), jnp.bfloat16), spec((pages, ps, kvh, d), jnp.bfloat16),
            spec((b, width), jnp.int32), spec((b,), jnp.int32), spec((b,), jnp.int32), spec((b,), jnp.int32)]
    args += [spec((d,), jnp.bfloat16)] * 2 if qk_norm else []

    def run(*a):
        return kernel.fused_decode_attention(*a, scale=d**-0.5, num_splits=splits, early_keys=splits > 1)

    lowered = jax.jit(run).trace(*args).lower(lowering_platforms=("cuda",))
    text = lowered.as_text()
    # with splits, the split_merge kernel is the second module
    assert verified_triton_lowering == [True] * (1 + (splits > 1)) and "fused_decode_attention" in text
    assert ("split_merge" in text) == (splits > 1)


def test_stacked_norms_are_read_at_their_row():
    """Norm vectors stacked over layers (runtime/param_packing) reach the kernel as a StackedRow through the
    api: the kernel reads row `index` in place and matches the reference on that row's vectors."""
    from dgjax.pallas import stacked
    from dgjax.pallas.fused_decode_attention import api

    c = _case(11, 3, 2, 2, 64, 32, jnp.float32, True)
    rng = np.random.default_rng(5)
    q_stack = jnp.asarray(1 + 0.3 * rng.standard_normal((4, 64)), jnp.float32).at[2].set(c["q_norm"])
    k_stack = jnp.asarray(1 + 0.3 * rng.standard_normal((4, 64)), jnp.float32).at[2].set(c["k_norm"])
    want = ref.fused_decode_attention(**c, scale=0.1, eps=1e-6)
    args = {k: v for k, v in c.items() if k not in ("q_norm", "k_norm")}
    got = api.decode_attention(**args, scale=0.1, eps=1e-6, q_norm=stacked.StackedRow(q_stack, 2),
                               k_norm=stacked.StackedRow(k_stack, 2), impl="kernel")
    for g, w in zip(got, want):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), atol=2e-5, rtol=1e-5)
    other = api.decode_attention(**args, scale=0.1, eps=1e-6, q_norm=stacked.StackedRow(q_stack, 1),
                                 k_norm=stacked.StackedRow(k_stack, 1), impl="kernel")
    assert not np.allclose(np.asarray(other[0]), np.asarray(want[0]), atol=1e-3)  # the row does matter
    via_ref = api.decode_attention(**args, scale=0.1, eps=1e-6, q_norm=stacked.StackedRow(q_stack, 2),
                                   k_norm=stacked.StackedRow(k_stack, 2), impl="ref")
    np.testing.assert_array_equal(np.asarray(via_ref[0]), np.asarray(want[0]))


def _abstract_args(b=2, kvh=8, g=4, d=128, pages=64, ps=16, width=32, layers=48):
    """Shape structs for kernel.fused_decode_attention at llama-like shapes with [layers, d] norm stacks."""
    spec = jax.ShapeDtypeStruct
    return [spec((b, kvh, g + 2, d), jnp.bfloat16), spec((b, d), jnp.float32), spec((b, d), jnp.float32),
            spec((pages, ps, kvh, d), jnp.bfloat16), spec((pages, ps, kvh, d), jnp.bfloat16),
            spec((b, width), jnp.int32), spec((b,), jnp.int32), spec((b,), jnp.int32), spec((b,), jnp.int32),
            spec((layers, d), jnp.bfloat16), spec((layers, d), jnp.bfloat16)]


def test_kernel_lowers_with_stacked_norms(verified_triton_lowering):
    d = 128
    args = _abstract_args(d=d)

    def run(*a):
        return kernel.fused_decode_attention(*a, scale=d**-0.5, num_splits=1, norm_row=47)

    jax.jit(run).trace(*args).lower(lowering_platforms=("cuda",))
    assert verified_triton_lowering == [True]


def test_layers_reading_different_norm_rows_share_one_kernel():
    """The norm row and the page offset are kernel arguments: two layers' calls lower to the very same Triton
    kernel (as a compile-time constant the row made every layer's kernel distinct, and XLA compiled each one)."""
    import re

    d = 128
    args = _abstract_args(d=d)

    def two_layers(qkv, cos, sin, kp, vp, *rest):
        outs = []
        for row, offset in ((3, 0), (47, 16)):
            o, kp, vp = kernel.fused_decode_attention(qkv, cos, sin, kp, vp, *rest, scale=d**-0.5, num_splits=1,
                                                      norm_row=row, page_offset=offset)
            outs.append(o)
        return outs, kp, vp

    text = jax.jit(two_layers).trace(*args).lower(lowering_platforms=("cuda",)).as_text()
    kernels = set(re.findall(r'custom_call @__gpu\$xla\.gpu\.triton\(.*? ir = "(.*?)", ', text))
    assert len(kernels) == 1, len(kernels)  # a constant row gave two (3 and 47 baked in)


@pytest.mark.parametrize("parts,splits,dtype,bias", [(4, 2, jnp.bfloat16, False), (2, 1, jnp.float32, False),
                                                    (4, 3, jnp.bfloat16, True)])
def test_split_sums_are_summed_as_the_rows_load(parts, splits, dtype, bias):
    """qkv as a split-K projection's SplitSums (float32 partials, optionally a qkv bias): the kernel gives what
    the summed, rounded (biased) qkv gives, through the api too (the reference path sums them first)."""
    from dgjax.pallas.fused_decode_attention import api
    from dgjax.pallas.split_sums import SplitSums

    c = _case(parts * 10 + splits, 3, 2, 2, 64, 64, dtype, True)
    rng = np.random.default_rng(parts)
    sums = SplitSums(jnp.asarray(rng.standard_normal((parts,) + c["qkv"].shape), jnp.float32), jnp.dtype(dtype),
                     jnp.asarray(rng.standard_normal(c["qkv"].shape[1:]), dtype) if bias else None)
    start, end = paged.decode_window(c["context_lens"], c["positions"], c["query_lens"], WIDTH * PAGE, None)
    rest = (c["cos"], c["sin"], c["k_pages"], c["v_pages"], c["block_tables"], start, end, c["slots"][:, 0],
            c["q_norm"], c["k_norm"])
    kw = dict(scale=0.125, eps=1e-6, num_splits=splits, block_tokens=8, interpret=True)
    got = kernel.fused_decode_attention(sums, *rest, **kw)
    want = kernel.fused_decode_attention(sums.value(), *rest, **kw)
    assert got[0].dtype == dtype
    for g, w in zip(got, want):
        np.testing.assert_allclose(np.asarray(g, np.float32), np.asarray(w, np.float32), atol=1e-2 if dtype ==
                                   jnp.bfloat16 else 1e-5, rtol=1e-5)
    args = {k: v for k, v in c.items() if k != "qkv"}
    via_ref = api.decode_attention(sums, **args, scale=0.125, eps=1e-6, impl="ref")
    np.testing.assert_array_equal(np.asarray(via_ref[0]),
                                  np.asarray(ref.fused_decode_attention(**(c | {"qkv": sums.value()}), scale=0.125,
                                                                        eps=1e-6)[0]))


def test_kernel_lowers_with_split_sums(verified_triton_lowering):
    from dgjax.pallas.split_sums import SplitSums

    b, kvh, g, d = 2, 4, 8, 128
    qkv, *args = _abstract_args(b=b, kvh=kvh, g=g, d=d)
    sums = SplitSums(jax.ShapeDtypeStruct((4,) + qkv.shape, jnp.float32), jnp.dtype(jnp.bfloat16))

    def run(s, *a):
        return kernel.fused_decode_attention(s, *a, scale=d**-0.5, num_splits=4, norm_row=5)

    jax.jit(run).trace(sums, *args).lower(lowering_platforms=("cuda",))
    assert verified_triton_lowering == [True, True]  # the attention kernel and its split merge


@pytest.mark.parametrize("impl", ["kernel", "ref"])
def test_page_offset_reads_and_writes_the_layers_part_of_a_shared_pool(impl):
    """Two layers in one pool: layer 1's pages start at page PAGES. Given per-layer tables and slots and the
    offset, the call attends and writes layer 1's pages exactly as the reference does on shifted tables and
    slots, and leaves layer 0's pages untouched."""
    from dgjax.pallas.fused_decode_attention import api

    c = _case(21, 3, 2, 2, 64, 64, jnp.float32, True)
    rng = np.random.default_rng(21)
    layer0 = jnp.asarray(rng.standard_normal(c["k_pages"].shape), jnp.float32)
    pool_k = jnp.concatenate([layer0, c["k_pages"]])
    pool_v = jnp.concatenate([layer0, c["v_pages"]])
    shifted = c | {"k_pages": pool_k, "v_pages": pool_v, "block_tables": c["block_tables"] + PAGES,
                   "slots": c["slots"] + PAGES * PAGE}
    want = ref.fused_decode_attention(**shifted, scale=0.125, eps=1e-6)
    got = api.decode_attention(**(c | {"k_pages": pool_k, "v_pages": pool_v}), scale=0.125, eps=1e-6,
                               page_offset=PAGES, impl=impl, num_splits=2)
    np.testing.assert_allclose(np.asarray(got[0]), np.asarray(want[0]), atol=2e-5, rtol=1e-5)
    for g, w in zip(got[1:], want[1:]):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), atol=1e-6, rtol=0)
        np.testing.assert_array_equal(np.asarray(g[:PAGES]), np.asarray(layer0))
    unshifted = ref.fused_decode_attention(**(c | {"k_pages": pool_k, "v_pages": pool_v}), scale=0.125, eps=1e-6)
    assert not np.allclose(np.asarray(unshifted[0]), np.asarray(want[0]), atol=1e-3)  # the offset does matter


@pytest.mark.parametrize("splits,dtype,cap", [(1, jnp.bfloat16, None), (3, jnp.float8_e4m3fn, None),
                                              (3, jnp.bfloat16, 16384)])
def test_prefetch_programs_leave_every_output_unchanged(splits, dtype, cap):
    """Extra programs that read a weight (32 KB of bf16 or 16 KB of fp8, in programs of 2 KB; or only its first
    `cap` bytes) add a sink output and change nothing else, bit for bit, with and without splits."""
    b, kvh, g, d = 3, 2, 3, 64
    c = _case(11, b, kvh, g, d, d, jnp.float32, True)
    start, end = paged.decode_window(c["context_lens"], c["positions"], c["query_lens"], WIDTH * PAGE, None)
    args = (c["qkv"], c["cos"], c["sin"], c["k_pages"], c["v_pages"], c["block_tables"], start, end,
            c["slots"][:, 0], c["q_norm"], c["k_norm"])
    kw = dict(scale=d**-0.5, eps=1e-6, num_splits=splits, block_tokens=8, interpret=True)
    w = jnp.asarray(np.random.default_rng(3).standard_normal((64, 256)), dtype)
    plan = kernel.prefetch_plan(w, b * kvh, program_bytes=2048, max_bytes=cap)
    assert plan is not None and plan[0] > 1  # several extra splits per (row, KV head)
    *with_pf, sink = kernel.fused_decode_attention(*args, prefetch=w, prefetch_bytes=2048, prefetch_max_bytes=cap,
                                                   with_sink=True, **kw)
    without = kernel.fused_decode_attention(*args, **kw)
    for got, want in zip(with_pf, without):
        np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
    # every row was read: the programs' sums (a program past the end re-reads the last row) add up to w's
    splits, chunk, per, n_rows = plan
    rows = np.asarray(w.astype(jnp.float32)).reshape(-1, kernel.PREFETCH_ROW_BYTES // w.dtype.itemsize)[:n_rows]
    padded = np.concatenate([rows, np.repeat(rows[-1:], b * kvh * splits * per - len(rows), 0)])
    want_sums = padded.reshape(b * kvh * splits, -1).sum(1)
    np.testing.assert_allclose(np.asarray(sink), want_sums, rtol=1e-5, atol=1e-3)


def test_prefetch_plan_covers_the_weight():
    """Every row of the weight's view falls in some prefetch program's range; sizes that do not tile skip."""
    for nbytes, row_programs in [(2048 * 4096, 8), (4096 * 512, 16), (512 * 3, 1)]:
        w = jax.ShapeDtypeStruct((nbytes,), jnp.uint8)
        splits, chunk, per, rows = kernel.prefetch_plan(w, row_programs)
        assert rows * kernel.PREFETCH_ROW_BYTES == nbytes
        assert per % chunk == 0 and splits * row_programs * per * kernel.PREFETCH_ROW_BYTES >= nbytes
        assert per * kernel.PREFETCH_ROW_BYTES <= 2 * kernel.PREFETCH_PROGRAM_BYTES + kernel.PREFETCH_CHUNK_BYTES
    # a cap: llama's 33.5 MB bf16 o weight, its first 16 MB
    llama_o = jax.ShapeDtypeStruct((32, 128, 4096), jnp.bfloat16)
    splits, chunk, per, rows = kernel.prefetch_plan(llama_o, 16, max_bytes=16 << 20)
    assert rows * kernel.PREFETCH_ROW_BYTES == 16 << 20 and splits * 16 * per >= rows
    assert kernel.prefetch_plan(jax.ShapeDtypeStruct((100,), jnp.uint8), 4) is None
    assert kernel.prefetch_plan(None, 4) is None


def test_kernel_lowers_with_a_prefetched_fp8_weight(verified_triton_lowering):
    """qwen3-30b-a3b's decode shapes with its o projection's fp8 weight [2048, 4096] prefetched."""
    from dgjax.pallas.split_sums import SplitSums

    b, kvh, g, d = 2, 4, 8, 128
    qkv, *args = _abstract_args(b=b, kvh=kvh, g=g, d=d)
    sums = SplitSums(jax.ShapeDtypeStruct((16,) + qkv.shape, jnp.float32), jnp.dtype(jnp.bfloat16))
    w = jax.ShapeDtypeStruct((2048, 4096), jnp.float8_e4m3fn)

    def run(s, wt, *a):
        return kernel.fused_decode_attention(s, *a, scale=d**-0.5, num_splits=33, norm_row=5, prefetch=wt)

    text = jax.jit(run).trace(sums, w, *args).lower(lowering_platforms=("cuda",)).as_text()
    assert verified_triton_lowering == [True, True] and "_pf32" in text


def test_split_programs_switch_sets_the_split_count(monkeypatch):
    """DGJAX_ATTENTION_PROGRAMS: the split rule aims at that many programs (llama heads, 2 rows, a 2064-token
    table: 264 programs give 17 splits, 528 give 33); a bad value is refused by name."""
    from dgjax.pallas.fused_decode_attention import api

    spec = jax.ShapeDtypeStruct
    b, kvh, g, d, ps, width = 2, 8, 4, 128, 16, 129
    args = [spec((b, kvh, g + 2, d), jnp.bfloat16), spec((b, 1, d), jnp.float32), spec((b, 1, d), jnp.float32),
            spec((64, ps, kvh, d), jnp.bfloat16), spec((64, ps, kvh, d), jnp.bfloat16), spec((b, width), jnp.int32),
            spec((b,), jnp.int32), spec((b, 1), jnp.int32), spec((b,), jnp.int32), spec((b, 1), jnp.int32)]

    def name(programs):
        monkeypatch.setenv("DGJAX_ATTENTION_PROGRAMS", programs)
        text = str(jax.make_jaxpr(lambda *a: api.decode_attention(
            a[0], a[1][:, 0], a[2][:, 0], *a[3:], scale=0.1, eps=1e-6, impl="kernel"))(*args))
        return [w for w in text.split() if "fused_decode_attention_g16" in w]

    assert any("_s17" in w for w in name("264")) and any("_s33" in w for w in name("528"))
    with pytest.raises(ValueError, match="DGJAX_ATTENTION_PROGRAMS"):
        name("many")
    monkeypatch.setenv("DGJAX_ATTENTION_BLOCK_TOKENS", "64")  # 128 programs: 8 splits, now of 64-key steps
    assert any("_bk64_s8" in w for w in name("128"))
    monkeypatch.delenv("DGJAX_ATTENTION_BLOCK_TOKENS")
    assert any("_bk128_s8" in w for w in name("128"))  # the default: 258 table keys a split step 128 (s28e)
    for bad in ("100", "8"):
        monkeypatch.setenv("DGJAX_ATTENTION_BLOCK_TOKENS", bad)
        with pytest.raises(ValueError, match="DGJAX_ATTENTION_BLOCK_TOKENS"):
            name("128")


def test_long_tables_get_wider_steps_and_in_the_one_stream_bucket_twice_the_splits():
    """default_launch: the paged rule up to ~2K keys a row in the one-stream bucket; an 8K table (llama heads,
    264 programs) gets 128-key steps, and at 2 rows 34 splits instead of 17 (s11a: 17.1 vs 24.2 µs a layer);
    at 2 rows a split of 192+ table keys steps 128 keys even when the table is not long (s28e),
    at 4 rows the paged rule's 9 (s12a/s12f: 38.2-38.5 vs 42.3-42.5 µs doubled), at 16 its 3."""
    h200 = 2 * 132
    bf16, fp8 = jnp.bfloat16, jnp.float8_e4m3fn
    assert kernel.default_launch(2, 8, 2064, 128, bf16, h200) == (64, 17)  # 1K engines: unchanged
    assert kernel.default_launch(2, 4, 2064, 128, bf16, h200) == (64, 33)  # qwen3-30b-a3b at 1K: unchanged
    assert kernel.default_launch(2, 8, 8400, 128, bf16, h200) == (128, 34)
    assert kernel.default_launch(2, 8, 8272, 128, bf16, 528) == (128, 33)  # ~250 keys a split: 128-key steps
    assert kernel.default_launch(2, 4, 8416, 128, bf16, h200) == (128, 33)  # qwen3-30b-a3b at 8K (s28e)
    assert kernel.default_launch(2, 8, 4160, 128, bf16, h200) == (128, 17)  # glm / llama heads at 4K (s28e)
    assert kernel.default_launch(2, 4, 4160, 128, bf16, h200) == (64, 33)  # 126 keys a split: 64-key steps
    assert kernel.default_launch(4, 8, 8400, 128, bf16, h200) == (128, 9)
    assert kernel.default_launch(16, 8, 8400, 128, bf16, h200) == (128, 3)
    assert kernel.default_launch(16, 8, 2064, 128, bf16, h200) == (128, 3)  # 688 keys a split: long
    assert kernel.default_launch(4, 8, 2064, 128, bf16, h200) == (64, 9)  # 229 keys a split: not long
    assert kernel.default_launch(2, 8, 8400, 128, fp8, h200) == (128, 34)  # fp8 pages step 128 keys anyway
    assert kernel.default_launch(1, 8, 300, 128, bf16, h200) == (64, 5)  # never more splits than blocks


def test_wide_buckets_aim_at_one_program_an_sm():
    """Without a caller's target (DGJAX_ATTENTION_PROGRAMS unset), 4+ rows at tables up to 4096 keys aim at one
    program an SM (132 off the GPU: sm_count's H200 default); the one-stream bucket and longer tables keep two
    (s26b/d/e)."""
    bf16 = jnp.bfloat16
    assert kernel.sm_count() == 132 and jax.default_backend() != "gpu"
    assert kernel.default_launch(2, 8, 2064, 128, bf16) == (64, 17)  # unchanged
    assert kernel.default_launch(4, 8, 2064, 128, bf16) == (128, 5)  # was (64, 9): 413 keys a split, long
    assert kernel.default_launch(16, 8, 2064, 128, bf16) == (128, 2)  # was (128, 3)
    assert kernel.default_launch(4, 4, 2064, 128, bf16) == (64, 9)  # qwen3-30b-a3b C4: was (64, 17)
    assert kernel.default_launch(4, 8, 8400, 128, bf16) == (128, 9)  # 8K: unchanged (5 splits lost, s26e)
    assert kernel.default_launch(16, 8, 8400, 128, bf16) == (128, 3)
    assert kernel.default_launch(4, 8, 2064, 128, bf16, 264) == (64, 9)  # a target given is kept


def test_early_keys_switch_reaches_the_kernel(monkeypatch):
    """DGJAX_ATTENTION_EARLY_KEYS: `on` traces the kernel with its first key block loaded early, `off` (default)
    without; anything else is refused by name."""
    from dgjax.pallas.fused_decode_attention import api

    seen = []
    real = api.kernel.fused_decode_attention
    monkeypatch.setattr(api.kernel, "fused_decode_attention",
                        lambda *a, **k: seen.append(k["early_keys"]) or real(*a, **k))
    c = _case(5, 2, 2, 2, 64, 64, jnp.float32, False)
    for value, want in (("on", True), ("off", False)):
        monkeypatch.setenv(api.EARLY_KEYS_ENV_VAR, value)
        api.decode_attention(c["qkv"], c["cos"], c["sin"], c["k_pages"], c["v_pages"], c["block_tables"],
                             c["context_lens"], c["positions"], c["query_lens"], c["slots"], scale=0.125, eps=1e-6,
                             impl="kernel")
        assert seen[-1] is want
    monkeypatch.setenv(api.EARLY_KEYS_ENV_VAR, "sometimes")
    with pytest.raises(ValueError, match="DGJAX_ATTENTION_EARLY_KEYS"):
        api.early_keys()
