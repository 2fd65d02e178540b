"""Planes narrow along C, every route measured: where the narrow kernel (in words, and in bytes) should
take a transpose from the plane kernel and from TMA, and in what tiles TMA should take it
(tests/test_ops_routes.py replays the measurement against tmagen.ops's routes).

Each case transposes a [R, C] tensor with short rows (C x E of 4 to 512 bytes) into [C, R], or
permutes a batch of images NHWC -> NCHW (planes of few channels), by every route tmagen.ops could
take for it: the shipped one, the plane kernel, the TMA kernel in its tuned and smaller tiles and in
tiles as wide as the rows, the narrow kernel in words in tiles of 2 to 8 KiB and in bytes; beside
cudaMemcpyAsync and Triton's kernels (lab.ops_bench's peers, autotuned), with the suite's method
(tmagen.bench.time_case: interleaved, sleep-queued, buffer sets rotated, several launches a sample
where one is short). Every candidate is checked bit for bit against PyTorch first. Needs PyTorch and
a GPU.

    python -m lab.narrow_routes OUT.json
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

from lab.ops_bench import OpsCase

TILE_BYTES = (2048, 4096, 8192)
FIT_ROWS = (64, 128, 256)  # rows of the TMA tiles as wide as a narrow plane's rows
ROUTES = ("plane", "tma_tuned", "tma_mid", "tma_small")
# NHWC -> NCHW: batched planes of a few channels
PERMUTES = [((64, 512, 512, 8), "uint8", (0, 3, 1, 2)), ((8, 256, 256, 16), "bfloat16", (0, 3, 1, 2)),
            ((32, 128, 128, 6), "uint8", (0, 3, 1, 2)), ((16, 128, 128, 16), "uint8", (0, 3, 1, 2))]
# (rows, cols) per dtype: rows of 4 to 512 bytes, most of them whole words
SHAPES = {
    "uint8": [(16385, 8), (40000, 12), (300000, 20), (1000000, 12), (2000000, 4), (500000, 48), (100000, 96),
              (50000, 256), (1000000, 32), (1000000, 40)],
    "bfloat16": [(16385, 8), (2000, 12), (40000, 12), (40000, 48), (300000, 20), (1000000, 12), (500000, 48),
                 (100000, 96), (200000, 64), (60000, 200), (500000, 16)],
    "float32": [(16385, 8), (40000, 12), (300000, 20), (2000000, 3), (1000000, 12), (500000, 48), (100000, 96),
                (200000, 64), (50000, 128), (500000, 8)],
    "float64": [(40000, 12), (1000000, 6), (200000, 32), (100000, 64)],
}


def measure(case: OpsCase, method: Any) -> dict[str, Any]:
    import tmagen.ops as ops
    from lab.ops_routes import VARIANTS, RouteTimer, timer_plan
    from tmagen.kinds.strided import plan as sp

    timer = RouteTimer.of(case)
    itemsize, src_align, sms = timer.layout[3], timer.layout[4], timer.layout[6]
    for name in ROUTES:
        move = timer_plan(timer.layout, VARIANTS[name])
        if move.how == "transpose":
            timer.force(name, move)
    tma = timer_plan(timer.layout, VARIANTS["tma_tuned"])
    if tma.how == "transpose":  # TMA's tiles as wide as the rows (16-byte multiples), as long as a box allows
        width = -(-tma.shape[-1] * itemsize // 16) * 16
        for rows in FIT_ROWS if width < 128 else ():
            timer.force(f"tma fit {rows}", replace(tma, tile=(rows, width)))
    plane = timer_plan(timer.layout, VARIANTS["plane"])  # the plane's [*batch, R, C] layout
    shape, src, dst = plane.shape, plane.src, plane.dst
    batch, rows, cols = shape[:-2], shape[-2], shape[-1]
    # the plane kernel itself, where the planner takes the narrow one
    timer.force("plane", ops.Move("plane", itemsize, shape, src, shape, dst,
                                  sp.plane(batch, rows, cols, src, dst, itemsize, sms, src_align=src_align)))
    for tile in TILE_BYTES if sp.narrow_words_fit(cols, src, itemsize, src_align) else ():
        call = sp.narrow(batch, rows, cols, src, dst, itemsize, sms, tile_bytes=tile, src_align=src_align, words=True)
        timer.add(f"words {tile}", ops.Move("narrow", itemsize, shape, src, shape, dst, call))
    if sp.narrow_fits(rows, cols, src, itemsize):
        call = sp.narrow(batch, rows, cols, src, dst, itemsize, sms, src_align=src_align, words=False)
        timer.add("bytes", ops.Move("narrow", itemsize, shape, src, shape, dst, call))
    return timer.time(method, torch_peer=False)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lab.narrow_routes", description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--dtypes", default=",".join(SHAPES), help="comma-separated: which dtypes' cases")
    args = parser.parse_args(argv)
    import torch

    from tmagen.bench import Method

    cases = [OpsCase("narrow", "transpose", shape, dtype)
             for dtype in args.dtypes.split(",") for shape in SHAPES[dtype]]
    cases += [OpsCase("narrow", "permute", shape, dtype, dims) for shape, dtype, dims in PERMUTES]
    records = []
    for case in cases:
        records.append(measure(case, Method(rounds=10, repetitions=3)))
        print(json.dumps(records[-1]), flush=True)
        args.out.write_text(json.dumps({"gpu": torch.cuda.get_device_name(), "what": "python -m lab.narrow_routes",
                                        "records": records}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
