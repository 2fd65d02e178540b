"""Random cuTensorMapEncodeTiled argument sets (driver order), biased toward every rule's boundary:
alignment, strides, box limits, swizzle span, interleave, element strides, rank, packed types,
atom swizzles and the driver's box-size limit."""

from __future__ import annotations

import numpy as np

ESIZE = {0: 1, 1: 2, 2: 4, 3: 4, 4: 8, 5: 8, 6: 2, 7: 4, 8: 8, 9: 2, 10: 4, 11: 4, 12: 4, 13: 1, 14: 1, 15: 1}
SPAN = {0: 0, 1: 32, 2: 64, 3: 128, 4: 128, 5: 128, 6: 128}


def _pick(rng: np.random.Generator, *choices: object) -> object:
    return choices[int(rng.integers(len(choices)))]


def sample(rng: np.random.Generator, base: int) -> dict:
    rank = int(rng.integers(1, 6)) if rng.random() < 0.97 else int(_pick(rng, 0, 6))
    rank_for_lists = min(max(rank, 1), 5)
    dtype = int(rng.integers(0, 13)) if rng.random() < 0.93 else int(rng.integers(13, 16))
    es = ESIZE[dtype]
    interleave = int(rng.integers(1, 3)) if rng.random() < (0.3 if rank >= 3 else 0.03) else 0
    swizzle = int(rng.integers(0, 4)) if rng.random() < 0.93 else int(rng.integers(4, 7))
    if interleave == 2 and rng.random() < 0.7:
        swizzle = 1
    dims = []
    for _ in range(rank_for_lists):
        k = rng.random()
        dims.append(int(rng.integers(1, 300)) if k < 0.6 else int(rng.integers(1, 70000)) if k < 0.88 else
                    int(_pick(rng, 1, 2, 127, 128, 129, 2**32 - 1, 2**32, 2**32 + 1, 0)))
    align = 32 if interleave == 2 or dtype in (14, 15) else 16
    strides, run = [], dims[0] * es
    for i in range(1, rank_for_lists):
        k = rng.random()
        if k < 0.7:
            s = -(-run // align) * align + align * int(rng.integers(0, 3))
        elif k < 0.88:
            s = 16 * int(rng.integers(1, 4096))
        elif k < 0.95:
            s = int(_pick(rng, 2**40 - 16, 2**40, 2**40 + 16, 8, 24, 48, 2**39))
        else:
            s = int(rng.integers(1, 2**20))
        strides.append(s)
        run = s * dims[i]
    box = []
    for i in range(rank_for_lists):
        k = rng.random()
        if i == 0 and k < 0.75:
            span = SPAN[swizzle] if interleave == 0 and SPAN[swizzle] else 256 * es
            chunks = max(1, min(span, 256 * es) // 16)
            b = max(1, 16 * int(rng.integers(1, chunks + 2)) // es)  # one chunk past the span sometimes
        elif k < 0.9:
            b = int(rng.integers(1, 17))
        else:
            b = int(_pick(rng, 0, 1, 255, 256, 257, 228, 229))
        box.append(int(b))
    estride = [int(rng.integers(1, 9)) if rng.random() < 0.5 else 1 for _ in range(rank_for_lists)]
    if rng.random() < 0.04:
        estride[int(rng.integers(rank_for_lists))] = int(_pick(rng, 0, 9))
    offset = 0 if rng.random() < 0.8 else int(_pick(rng, 4, 8, 16, 32, 48, 64))
    return {
        "dtype": dtype, "rank": rank, "global_address": base + offset, "global_dim": dims,
        "global_strides": strides if rank >= 1 else [], "box_dim": box, "element_strides": estride,
        "interleave": interleave, "swizzle": swizzle, "l2_promotion": int(rng.integers(0, 4)),
        "oob_fill": int(rng.random() < 0.2), "arch": "sm_90a",
    }
