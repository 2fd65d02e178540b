"""Bank conflicts a launch of a plan's kernel should show in ncu, from `tmagen.banks`' model.

The copy kernel touches shared memory only through TMA; the inspect kernel's byte loops walk
consecutive bytes (one wavefront per warp access); the matmul's operands are read by the tensor
cores. The transpose kernel's micro-tile loads and stores are enumerated warp by warp with its
thread mapping (`TransposePlan.microtile`), and are the same for every tile.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from tmagen.banks import WARP, predict
from tmagen.kinds.tiled import tile_counts
from tmagen.kinds.transpose.plan import TransposePlan
from tmagen.plan import Plan
from tmagen.planning import PATTERN_ALIGN
from tmagen.swizzle import BoxLayout


def kernel_conflicts(plan: Plan, shape: Sequence[int] | None = None) -> dict[str, int]:
    """Bank conflicts ncu should count for one launch of the plan's kernel on a tensor of ``shape``
    (default: the spec's), as ``{"ld": ..., "st": ...}``."""
    if plan.kind_name != "transpose":
        return {"ld": 0, "st": 0}
    p = plan.kernel.detail
    assert isinstance(p, TransposePlan)
    src, dst = plan.map("src"), plan.map("dst")
    src_layout = BoxLayout((src.rows, src.row_bytes // 16), 16, src.layout.pattern)
    dst_layout = BoxLayout((dst.rows, dst.row_bytes // 16), 16, dst.layout.pattern)
    src_base, dst_base = PATTERN_ALIGN * 8 + src.smem_offset, PATTERN_ALIGN * 16 + dst.smem_offset
    per_tile = {"ld": 0, "st": 0}
    for warp in range(p.threads_per_tile // WARP):
        for i in range(p.k):
            loads: list[int | None] = []
            stores: list[int | None] = []
            for lane in range(WARP):
                m = warp * WARP + lane
                if m >= p.microtiles:
                    loads.append(None)
                    stores.append(None)
                    continue
                a, c = p.microtile(m)
                loads.append(src_base + int(src_layout.pattern.apply(src_base + (p.k * a + i) * src_layout.row_pitch
                                                                     + 16 * c)) - src_base)
                stores.append(dst_base + int(dst_layout.pattern.apply(dst_base + (p.k * c + i) * dst_layout.row_pitch
                                                                      + 16 * a)) - dst_base)
            per_tile["ld"] += predict(loads, 16).conflicts
            per_tile["st"] += predict(stores, 16).conflicts
    extent = list(shape or src.shape)
    count = math.prod(tile_counts(extent, src.box))
    return {k: v * count for k, v in per_tile.items()} if math.prod(extent) else {"ld": 0, "st": 0}
