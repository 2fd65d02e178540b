"""Measures tmagen.ops's shape-class table (tmagen/ops_table.json) on the GPU: for each class, a few
representative moves (copies, transposes and permutes of 1, 2, 4 and 8-byte elements), every
candidate configuration timed on them interleaved with CUDA events, the fastest (least total time)
written as the class's entry. Needs PyTorch and a GPU.

    python -m lab.tune_ops tmagen/ops_table.json        # rewrites the table (commit it)
    python -m lab.tune_ops /tmp/table.json --quick      # fewer candidates and rounds
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
from pathlib import Path
from typing import Any

CASES: dict[str, list[tuple[str, tuple[int, ...], Any, tuple[int, ...]]]] = {
    # class -> (op, shape, dtype name, dims)
    "small": [("transpose", (64, 64), "float32", ()), ("transpose", (512, 1024), "bfloat16", ()),
              ("copy", (1000, 24), "uint8", ()), ("permute", (2, 16, 32, 32), "float16", (0, 2, 3, 1))],
    "batched": [("transpose", (8, 2048, 2048), "bfloat16", ()), ("permute", (8, 64, 128, 128), "float16", (0, 2, 3, 1)),
                ("permute", (4, 2048, 16, 64), "bfloat16", (0, 2, 1, 3))],
    "ragged": [("transpose", (4000, 3000), "float32", ()), ("transpose", (6000, 5000), "uint8", ())],
    "odd_rows": [("transpose", (777, 8200), "float16", ()), ("transpose", (16385, 72), "bfloat16", ()),
                 ("copy", (8192, 1001), "float32", ())],
    "large": [("transpose", (16384, 16384), "float32", ()), ("copy", (16384, 16384), "float64", ()),
              ("transpose", (32768, 16384), "bfloat16", ())],
}
EVERY = 1 << 62  # gather_max_bytes: every move of the class to the gather kernel
GRID = {"tma_min_row_bytes": (64, 128, 256, 512), "tma_min_plane": (8, 16, 32, 64),
        "strided_blocks_per_sm": (8, 16, 32), "gather_max_bytes": (0, 1 << 16, 1 << 20, EVERY)}
QUICK = {"tma_min_row_bytes": (128, 512), "tma_min_plane": (16, 64), "strided_blocks_per_sm": (8, 16),
         "gather_max_bytes": (0, EVERY)}


def main(argv: list[str] | None = None) -> int:
    import torch

    import tmagen.ops as ops

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("out", type=Path)
    p.add_argument("--quick", action="store_true")
    p.add_argument("--rounds", type=int, default=10)
    args = p.parse_args(argv)
    grid = QUICK if args.quick else GRID
    base = json.loads(ops.TABLE.read_text())
    candidates = [dict(zip(grid, values)) for values in itertools.product(*grid.values())]
    results: dict[str, Any] = {}
    for cls, cases in CASES.items():
        tensors = [(op, torch.randn(shape, device="cuda").to(getattr(torch, dtype)) if dtype != "uint8" else
                    torch.randint(0, 255, shape, device="cuda", dtype=torch.uint8), dims)
                   for op, shape, dtype, dims in cases]
        totals = [0.0] * len(candidates)
        for _ in range(args.rounds):
            for i, config in enumerate(candidates):  # interleaved: every candidate in every round
                table = {**base, "classes": {**base["classes"], cls: config}}
                ops.table = lambda table=table: table  # type: ignore[assignment]  # the candidate, from now on
                ops._MOVES.clear()
                ops._REPLAYS.clear()
                for op, x, dims in tensors:
                    fn = (lambda x=x, dims=dims: ops.permute(x, dims)) if op == "permute" else \
                        (lambda x=x, op=op: getattr(ops, op)(x))
                    fn()
                    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                    start.record()
                    for _ in range(5):
                        fn()
                    stop.record()
                    stop.synchronize()
                    totals[i] += start.elapsed_time(stop)
        best = min(range(len(candidates)), key=totals.__getitem__)
        results[cls] = {"best": candidates[best], "ms": totals[best] / args.rounds,
                        "worst_ms": max(totals) / args.rounds}
        base["classes"][cls] = candidates[best]
        r = results[cls]
        print(f"{cls}: {candidates[best]} ({r['ms']:.3f} ms per round; worst {r['worst_ms']:.3f})", flush=True)
    base["measured_on"] = torch.cuda.get_device_name()
    base["tuning"] = results
    args.out.write_text(json.dumps(base, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
