"""The two fp8 types as numpy sees them (it has none): the value of each of the 256 bit patterns,
and float32 values rounded to the nearest pattern. For verify, the tests and the lab's references.

    float8_e4m3 (OCP E4M3, PyTorch's float8_e4m3fn): s eeee mmm, bias 7, no infinities; e = 0 is
        subnormal (m/8 * 2^-6); 0x7F and 0xFF are NaN; the largest value is 448 (e = 15, m = 6)
    float8_e5m2 (OCP E5M2): s eeeee mm, bias 15, IEEE-like: e = 0 subnormal (m/4 * 2^-14),
        e = 31 infinities (m = 0) and NaN; the largest finite value is 57344
"""

from __future__ import annotations

from functools import cache

import numpy as np

FORMATS = {"float8_e4m3": (4, 3, 7), "float8_e5m2": (5, 2, 15)}  # exponent bits, mantissa bits, bias


@cache
def values(dtype: str) -> np.ndarray:
    """float32 value of each bit pattern 0 .. 255 (NaN where the pattern is one)."""
    e_bits, m_bits, bias = FORMATS[dtype]
    codes = np.arange(256)
    sign = np.where(codes & 0x80, -1.0, 1.0)
    e = (codes >> m_bits) & ((1 << e_bits) - 1)
    m = codes & ((1 << m_bits) - 1)
    magnitude = np.where(e == 0, m / (1 << m_bits) * 2.0 ** (1 - bias),
                         (1 + m / (1 << m_bits)) * 2.0 ** (e - bias))
    out = sign * magnitude
    if dtype == "float8_e4m3":
        out[(e == 15) & (m == 7)] = np.nan
    else:
        out[e == 31] = np.where(m[e == 31] == 0, sign[e == 31] * np.inf, np.nan)
    return out.astype(np.float32)


def largest(dtype: str) -> float:
    return {"float8_e4m3": 448.0, "float8_e5m2": 57344.0}[dtype]


@cache
def finite_values(dtype: str) -> np.ndarray:
    """The non-negative finite values (float64), by code from 0x00 up to the largest: they grow
    with the code."""
    table = values(dtype).astype(np.float64)
    top = int(np.flatnonzero(table[:128] == largest(dtype))[0])
    return table[: top + 1]


def decode(bits: np.ndarray, dtype: str) -> np.ndarray:
    """float32 values of fp8 ``bits`` (uint8)."""
    return values(dtype)[np.asarray(bits, dtype=np.uint8)]


def encode(x: np.ndarray, dtype: str) -> np.ndarray:
    """fp8 bit patterns (uint8) of ``x`` rounded to nearest, ties to an even pattern (the one whose
    last mantissa bit is 0), saturated to the largest finite value, the sign kept (-0.0 is 0x80);
    NaN is 0x7F in both types (what PTX's cvt.rn.satfinite gives, and PyTorch for a positive NaN)."""
    positive = finite_values(dtype)
    top = len(positive) - 1
    mag = np.minimum(np.abs(np.asarray(x, dtype=np.float64)), largest(dtype))
    hi = np.clip(np.searchsorted(positive, mag), 0, top)
    lo = np.maximum(hi - 1, 0)
    d_lo, d_hi = mag - positive[lo], positive[hi] - mag
    pick = np.where((d_hi < d_lo) | ((d_hi == d_lo) & (hi % 2 == 0)), hi, lo)
    bits = pick.astype(np.uint8) | np.where(np.signbit(x), 0x80, 0).astype(np.uint8)
    return np.where(np.isnan(x), 0x7F, bits).astype(np.uint8)
