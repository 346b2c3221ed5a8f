"""bf12: every bf16 bit pattern survives encode -> decode (numpy and jnp, bit for bit), the codes mean what the
format says (checked by rebuilding each value with float arithmetic), unencodable matrices are refused, and
siblings with different table widths still join row-wise."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest

from dgjax.quant import Bf12Weight, bf12
from dgjax.quant.rows import concat_row_segments

RNG = np.random.default_rng(5)
N, K = 48, 512


def _bits(x) -> np.ndarray:
    return np.asarray(x, np.float32).astype(ml_dtypes.bfloat16).view(np.uint16)


def _matrix() -> np.ndarray:
    """uint16 bf16 patterns: Gaussian rows of different scales, plus rows of every special pattern."""
    w = RNG.standard_normal((N, K)) * np.exp2(RNG.integers(-40, 20, (N, 1)))
    bits = _bits(w)
    bits[2] = 0  # an all-zero row
    bits[3, : K // 2] = 0x8000  # -0 (no table entry: code 0 with the sign byte)
    bits[4, :8] = [0x7F80, 0xFF80, 0x7FC1, 0xFFFF, 0x0001, 0x807F, 0x0080, 0x0040]  # inf, NaNs, subnormals
    bits[5, ::64] = _bits(RNG.standard_normal(K // 64) * 1e-20)  # far below the row's window: escapes
    return bits


def _all_patterns() -> np.ndarray:
    """[256, 512] holding every encodable bf16 pattern: row r has every sign/mantissa at exponent clip(r, 1,
    MAX_TOP) and 14 below it (inside its window), and two of the 512 zero/subnormal/inf/NaN patterns. Exponent
    fields above MAX_TOP (|w| >= 2**114) are what bf12 refuses (test_unencodable_matrices_are_refused)."""
    sm = np.arange(256, dtype=np.uint16)
    sign_mant = ((sm & 0x80) << 8) | (sm & 0x7F)
    out = np.zeros((256, 512), np.uint16)
    special = [int(b) for b in range(1 << 16) if ((b >> 7) & 0xFF) in (0, 255)]
    normal_done = set()
    for r in range(256):
        e = min(max(r, 1), bf12.MAX_TOP)
        lower = max(e - 14, 1)
        out[r, :256] = sign_mant | (e << 7)
        out[r, 256:] = sign_mant | (lower << 7)
        out[r, 510:] = special[2 * r: 2 * r + 2]  # replaces two of the lower half's patterns ...
        normal_done |= set(out[r].tolist())
    missing = set(range(1 << 16)) - normal_done  # ... which the rows of that exponent hold
    assert missing == {b for b in range(1 << 16) if bf12.MAX_TOP < (b >> 7) & 0xFF < 255}
    return out


MATRICES = {"gaussian+specials": _matrix, "every pattern": _all_patterns}


def _value(bits: np.ndarray) -> np.ndarray:
    return bits.view(ml_dtypes.bfloat16).astype(np.float64)


@pytest.mark.parametrize("which", list(MATRICES))
def test_numpy_round_trip_is_bit_exact_and_the_jnp_twins_agree(which):
    bits = MATRICES[which]()
    n, k = bits.shape
    arrays = bf12.encode_np(bits)
    assert arrays["low"].dtype == np.uint16 and arrays["low"].shape == (n, k // 2)
    assert arrays["codes"].dtype == np.uint8 and arrays["row_scale"].shape == (n,)
    np.testing.assert_array_equal(bf12.decode_np(**arrays), bits)
    w = jax.lax.bitcast_convert_type(jnp.asarray(bits), jnp.bfloat16)
    slots = arrays["escape_cols"].shape[-1]
    for name, array in zip(arrays, jax.jit(bf12.encode, static_argnums=1)(w, slots)):
        np.testing.assert_array_equal(np.asarray(array), arrays[name], err_msg=name)
    decoded = jax.jit(bf12.decode)(*[jnp.asarray(a) for a in arrays.values()])
    np.testing.assert_array_equal(np.asarray(jax.lax.bitcast_convert_type(decoded, jnp.uint16)), bits)
    node = bf12.node_from(w, (k, n), 1)  # the load-time path: counts first, then the encoder
    assert node.slots == slots and node.nbytes == n * k * 3 // 2 + n * 4 + n * slots * 4  # 12 bits a weight + tables
    np.testing.assert_array_equal(np.asarray(jax.lax.bitcast_convert_type(node.bf16_rows(), jnp.uint16)), bits)


@pytest.mark.parametrize("which", list(MATRICES))
def test_codes_bytes_and_row_scales_mean_what_the_format_says(which):
    """Rebuild every non-escape weight as sign * (1 + mantissa / 128) * 2**(top + code - 15 - 127) with float
    arithmetic (no bit tricks), and check the table holds exactly the rest."""
    bits = MATRICES[which]()
    N, K = bits.shape
    a = bf12.encode_np(bits)
    byte = np.stack([a["low"] & 0xFF, a["low"] >> 8], -1).reshape(N, K).astype(np.int64)
    code = np.stack([a["codes"] & 15, a["codes"] >> 4], -1).reshape(N, K).astype(np.int64)
    scale_exp = np.log2(a["row_scale"].astype(np.float64))
    assert np.all(scale_exp == np.round(scale_exp))  # powers of two
    top = scale_exp + bf12.WINDOW + bf12.X_SHIFT
    exps = (bits.astype(np.int64) >> 7) & 0xFF
    normal = (exps >= 1) & (exps <= 254)
    want_top = np.where(normal.any(1), np.where(normal, exps, 0).max(1), 127)
    np.testing.assert_array_equal(top, want_top)
    sign = np.where(byte & 0x80, -1.0, 1.0)
    rebuilt = sign * (1 + (byte & 0x7F) / 128) * np.exp2(top[:, None] + code - bf12.WINDOW - 127)
    coded = code > 0
    np.testing.assert_array_equal(rebuilt[coded], _value(bits)[coded])
    table = {(n, int(c)): int(b) for n in range(N) for c, b in zip(a["escape_cols"][n], a["escape_bits"][n]) if b}
    rest = {(n, k): int(bits[n, k]) for n, k in zip(*np.nonzero(~coded)) if bits[n, k] & 0x7FFF}
    assert table == rest and len(rest) >= 8  # specials, the tiny values below a row's window
    zeros = ~coded & ((bits & 0x7FFF) == 0)
    np.testing.assert_array_equal(byte[zeros], (bits[zeros] >> 8) & 0x80)  # +-0: the sign byte, no entry


def test_unencodable_matrices_are_refused():
    bits = _bits(RNG.standard_normal((4, 256)))
    bits[1, : bf12.MAX_ESCAPES + 1] = 0x0001  # subnormals escape: one too many in a row
    with pytest.raises(bf12.Bf12Unencodable, match="escapes"):
        bf12.encode_np(bits)
    with pytest.raises(bf12.Bf12Unencodable, match="escapes"):
        bf12.node_from(jax.lax.bitcast_convert_type(jnp.asarray(bits), jnp.bfloat16), (256, 4), 1)
    with pytest.raises(bf12.Bf12Unencodable, match="even"):
        bf12.encode_np(_bits(np.ones((2, 7))))
    with pytest.raises(bf12.Bf12Unencodable, match="exponent"):
        bf12.encode_np(_bits(np.full((2, 8), 2.0**120)))
    assert [bf12.slots_for(c) for c in (0, 16, 17, 64)] == [16, 16, 32, 64]


def test_siblings_with_different_table_widths_join_row_wise():
    narrow = _bits(RNG.standard_normal((32, 64)))
    wide = narrow.copy()
    wide[3, :20] = 0x0001  # 20 escapes: a 32-slot table
    nodes = [bf12.node_from(jax.lax.bitcast_convert_type(jnp.asarray(b), jnp.bfloat16), (64, 32), 1)
             for b in (narrow, wide)]
    assert [n.slots for n in nodes] == [16, 32]
    joined = concat_row_segments(nodes, [(0, 0, 32), (1, 0, 32)], (64, 2, 32))
    assert isinstance(joined, Bf12Weight) and joined.slots == 32
    got = np.asarray(jax.lax.bitcast_convert_type(joined.bf16_rows(), jnp.uint16))
    np.testing.assert_array_equal(got, np.concatenate([narrow, wide]))


def test_a_matrix_narrower_than_the_table_round_trips():
    bits = _bits(RNG.standard_normal((3, 8)))
    bits[1, 1] = _bits(np.float32(1e-30))  # one escape
    arrays = bf12.encode_np(bits)
    assert arrays["escape_cols"].shape == (3, bf12.MIN_ESCAPE_SLOTS)
    np.testing.assert_array_equal(bf12.decode_np(**arrays), bits)
    w = jax.lax.bitcast_convert_type(jnp.asarray(bits), jnp.bfloat16)
    for name, array in zip(arrays, bf12.encode(w, bf12.MIN_ESCAPE_SLOTS)):
        np.testing.assert_array_equal(np.asarray(array), arrays[name], err_msg=name)
