"""What the quantize kernels compute, in numpy, written from the definitions (not from the kernel):
the tests' oracle, and a statement of the arithmetic for a reader.

- ``to_fp8``: float32 -> fp8 bits, rounding to nearest even and saturating to +-max: the value's
  nearest finite fp8 value, a tie going to the even code (the one whose last mantissa bit is 0); the
  sign kept (-0.0 -> 0x80); NaN -> 0x7F (`tmagen.fp8.encode`, shared with the matmul's verify).
- ``quantize``: q's orientation is x's (or x.T); amax = max |x| (NaN if any); per block of q the scale
  s = amax_block / max in float32 (1 where amax_block is 0), blocks clipped at the edges; q = fp8(x / s)
  with the division in float32.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from tmagen.fp8 import encode
from tmagen.kinds.quantize.plan import FP8

Floats = npt.NDArray[np.float32]
Bytes = npt.NDArray[np.uint8]


def to_fp8(v: Floats, fp8: str) -> Bytes:
    """``v`` (float32) as fp8 bits, rounded to nearest even and saturated to +-max (`tmagen.fp8.encode`)."""
    return encode(v, fp8)


def _scale(amax: np.float32, top: float) -> np.float32:
    return np.float32(1.0) if amax == 0 else np.float32(amax / np.float32(top))


def quantize(x: Floats, fp8: str, block: tuple[int, int] | None, transpose: bool = False,
             scale_inv: float | None = None) -> tuple[Bytes, Floats, np.float32]:
    """(q, scale_inv, amax) of ``x`` (its values as float32, 2-D), as `tmagen.ops.quantize_fp8` returns them."""
    top = FP8[fp8][1]
    xq = np.ascontiguousarray((x.T if transpose else x).astype(np.float32))
    mag = np.abs(xq)
    amax = np.float32(np.nan) if np.isnan(mag).any() else np.float32(mag.max() if mag.size else 0.0)
    rows, cols = xq.shape
    if block is None:
        s = np.float32(scale_inv) if scale_inv is not None else _scale(amax, top)
        scales: Floats = np.array(s, dtype=np.float32)
        per = np.full(xq.shape, s, dtype=np.float32)
    else:
        br, bc = block
        nb_r, nb_c = -(-rows // br), -(-cols // bc)
        scales = np.ones((nb_r, nb_c), dtype=np.float32)
        for bi in range(nb_r):
            for bj in range(nb_c):
                part = mag[bi * br:(bi + 1) * br, bj * bc:(bj + 1) * bc]
                m = np.float32(np.nan) if np.isnan(part).any() else np.float32(part.max() if part.size else 0.0)
                scales[bi, bj] = _scale(m, top)
        per = np.repeat(np.repeat(scales, br, axis=0), bc, axis=1)[:rows, :cols]
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        q = to_fp8((xq / per).astype(np.float32), fp8)
    return q, scales, amax
