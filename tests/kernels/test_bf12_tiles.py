"""The bf12 tile decoders: the PTX the GPU runs (emulated instruction by instruction here: and/or/shl/shr/prmt
on 32-bit registers) rebuilds the same bf16 patterns as the jnp decoder the interpreter runs, and both match
the format's numpy decoder before the row scale; the kernel lowers with the PTX decoder at llama shapes."""

from __future__ import annotations

import re

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np

from dgjax.pallas import bf12_tiles
from dgjax.pallas.quant_gemv import kernel
from dgjax.quant import Bf12Weight, bf12

MASK = 0xFFFFFFFF


def _prmt(a: int, b: int, sel: int) -> int:
    pool = [(a >> (8 * i)) & 0xFF for i in range(4)] + [(b >> (8 * i)) & 0xFF for i in range(4)]
    out = 0
    for i in range(4):
        nib = (sel >> (4 * i)) & 0xF
        byte = pool[nib & 7]
        if nib & 8:  # sign replicate
            byte = 0xFF if byte & 0x80 else 0
        out |= byte << (8 * i)
    return out


def _run_ptx(asm: str, regs: dict[str, int]) -> dict[str, int]:
    """Emulate the decoder's PTX block (the instructions it uses, on unsigned 32-bit values)."""
    val = lambda tok: int(tok, 0) if re.match(r"^(0x[0-9A-Fa-f]+|\d+)$", tok) else regs[tok]  # noqa: E731
    for line in asm.splitlines():
        line = line.strip().rstrip(";")
        if not line or line in "{}" or line.startswith(".reg"):
            continue
        op, args = line.split(None, 1)
        d, *src = [a.strip() for a in args.split(",")]
        x = [val(s) for s in src]
        regs[d] = {"and.b32": lambda: x[0] & x[1], "or.b32": lambda: x[0] | x[1],
                   "shl.b32": lambda: (x[0] << x[1]) & MASK, "shr.b32": lambda: x[0] >> x[1],
                   "prmt.b32": lambda: _prmt(*x)}[op]() & MASK
    return regs


def test_ptx_decoder_matches_the_jnp_decoder_and_the_format():
    rng = np.random.default_rng(0)
    lw = rng.integers(0, 1 << 16, (64, 8), dtype=np.uint32).astype(np.uint16)
    cw = rng.integers(0, 256, (64, 8), dtype=np.uint32).astype(np.uint8)
    cw[0] = 0  # code 0 both halves (+-0 where the byte is 0 or 0x80)
    lw[0, :4] = [0x0000, 0x8080, 0x0080, 0x8000]
    cw[1, :2] = [0x10, 0x01]  # one half coded, the other not
    keep = np.where(cw & 0x0F, 0x00FF, 0x0080) | np.where(cw & 0xF0, 0xFF00, 0x8000)  # code 0: only a sign byte
    lw = (lw & keep).astype(np.uint16)
    even, odd = (np.asarray(jax.lax.bitcast_convert_type(t, jnp.uint16)) for t in
                 bf12_tiles._decode_jnp(jnp.asarray(lw), jnp.asarray(cw)))
    flat_l, flat_c = lw.reshape(-1), cw.reshape(-1)
    for half, asm, want in (("even", bf12_tiles._EVEN_ASM, even), ("odd", bf12_tiles._ODD_ASM, odd)):
        got = []
        for i in range(0, flat_l.size, 4):  # one asm instance: four pairs, as Triton packs them (pack=4)
            l4, c4 = flat_l[i:i + 4].astype(np.uint32), flat_c[i:i + 4].astype(np.uint32)
            regs = {"$2": int(l4[0] | l4[1] << 16), "$3": int(l4[2] | l4[3] << 16),
                    "$4": int(c4[0] | c4[1] << 8 | c4[2] << 16 | c4[3] << 24)}
            out = _run_ptx(asm, regs)
            got += [out["$0"] & 0xFFFF, out["$0"] >> 16, out["$1"] & 0xFFFF, out["$1"] >> 16]
        np.testing.assert_array_equal(np.array(got, np.uint16).reshape(want.shape), want, err_msg=half)
    # the format's own reading: bf16 exponent field = code, sign and mantissa from the byte
    byte = np.stack([lw & 0xFF, lw >> 8], -1).astype(np.int64)
    code = np.stack([cw & 15, cw >> 4], -1).astype(np.int64)
    sign = np.where(byte & 0x80, -1.0, 1.0)
    value = np.where(code > 0, sign * (1 + (byte & 0x7F) / 128) * np.exp2(code - 127.0), sign * 0.0)
    np.testing.assert_array_equal(np.stack([even, odd], -1).view(ml_dtypes.bfloat16).astype(np.float64), value)


def test_the_kernel_lowers_with_the_ptx_decoder_at_llama_shapes(verified_triton_lowering, monkeypatch):
    monkeypatch.setenv(bf12_tiles.ENV_VAR, "asm")
    spec = jax.ShapeDtypeStruct
    for rows, k, n in [(1, 4096, 6144), (16, 14336, 4096), (4, 4096, 28672)]:
        node = Bf12Weight(spec((n, k // 2), jnp.uint16), spec((n, k // 2), jnp.uint8), spec((n,), jnp.float32),
                          spec((n, 16), jnp.uint16), spec((n, 16), jnp.uint16), shape=(k, n), in_dims=1,
                          expert_dims=0, slots=16)
        assert kernel.supports(rows, node) and not kernel.supports(rows, node, jnp.float16)
        x = spec((rows, k), jnp.bfloat16)
        lowered = jax.jit(lambda a, w: kernel.quant_gemv(a, w)).trace(x, node).lower(lowering_platforms=("cuda",))
        text = lowered.as_text()
        assert "quant_gemv_bf12" in text
    assert verified_triton_lowering == [True] * 3
    assert bf12.X_SHIFT == 100  # the jnp/asm decoders assume x meets weights of 2**-126..2**-111 times 2**100
