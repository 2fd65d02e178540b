"""Measures tmagen.ops's shape-class table (tmagen/ops_table.json) on the GPU: for each class, a few
representative moves (copies, transposes and permutes of 1, 2, 4 and 8-byte elements, across the
class's sizes), each knob's values timed on them interleaved with CUDA events (one knob at a time
from SEED, the others at their best so far, twice over), the fastest (least total GPU time; a knob
keeps its value unless another is more than NOISE faster) written as the class's entry. Needs
PyTorch and a GPU.

    python -m lab.tune_ops tmagen/ops_table.json        # rewrites the table (commit it)
    python -m lab.tune_ops /tmp/table.json --quick      # fewer candidates and rounds
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

CASES: dict[str, list[tuple[str, tuple[int, ...], Any, tuple[int, ...]]]] = {
    # class -> (op, shape, dtype name, dims): the class's range of sizes and layouts
    "small": [("transpose", (64, 64), "float32", ()), ("transpose", (256, 256), "float32", ()),
              ("transpose", (512, 1024), "bfloat16", ()), ("transpose", (1024, 1024), "float32", ()),
              ("copy", (1000, 24), "uint8", ()), ("copy", (1024, 1024), "float32", ()),
              ("permute", (2, 16, 32, 32), "float16", (0, 2, 3, 1)), ("transpose", (16385, 8), "bfloat16", ())],
    "batched": [("transpose", (8, 2048, 2048), "bfloat16", ()), ("permute", (8, 64, 128, 128), "float16", (0, 2, 3, 1)),
                ("permute", (4, 2048, 16, 64), "bfloat16", (0, 2, 1, 3))],
    "ragged": [("transpose", (4000, 3000), "float32", ()), ("transpose", (6000, 5000), "uint8", ())],
    "odd_rows": [("transpose", (777, 8200), "float16", ()), ("transpose", (16385, 72), "bfloat16", ()),
                 ("copy", (8192, 1001), "float32", ()), ("transpose", (4099, 4101), "uint8", ())],
    "large": [("transpose", (16384, 16384), "float32", ()), ("copy", (16384, 16384), "float64", ()),
              ("transpose", (32768, 16384), "bfloat16", ())],
}
EVERY = 1 << 62  # gather_max_bytes: every move of the class to the gather kernel
SIZES = (0, 1 << 14, 1 << 16, 1 << 18, 1 << 20, 1 << 22, EVERY)
GRID = {"gather_max_bytes": SIZES, "gather_max_bytes_transposed": SIZES, "tma_min_row_bytes": (64, 128, 256, 512),
        "tma_min_plane": (8, 16, 32, 64), "strided_blocks_per_sm": (8, 16, 32), "tma_tiles_per_sm": (1, 2, 4, 8, 16),
        "tile_max_bytes": SIZES, "tile_max_bytes_strided": SIZES, "narrow_max_bytes": SIZES,
        "narrow_words": (0, 1)}
# where each class starts, and what a knob keeps unless another value is NOISE faster over the class
SEED = {"gather_max_bytes": 0, "gather_max_bytes_transposed": 0, "tma_min_row_bytes": 128, "tma_min_plane": 16,
        "strided_blocks_per_sm": 16, "tma_tiles_per_sm": 4, "tile_max_bytes": 0, "tile_max_bytes_strided": 0,
        "narrow_max_bytes": 0, "narrow_words": 0}
NOISE = 0.01
QUICK = {"gather_max_bytes": (0, 1 << 20), "gather_max_bytes_transposed": (0, 1 << 16),
         "tma_min_row_bytes": (128, 512), "tma_min_plane": (16, 64), "strided_blocks_per_sm": (8, 16),
         "tma_tiles_per_sm": (1, 4), "tile_max_bytes": (0, 1 << 18), "tile_max_bytes_strided": (0, EVERY),
         "narrow_max_bytes": (0, 1 << 19), "narrow_words": (0, 1)}


def main(argv: list[str] | None = None) -> int:
    """Per class, one knob at a time (the others at their best so far), twice over the knobs: every
    value of the knob timed on the class's moves, interleaved round by round, each round queued
    behind a sleep kernel so that the events time the GPU's work and not the host's."""
    import torch

    import tmagen.ops as ops

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("out", type=Path)
    p.add_argument("--quick", action="store_true")
    p.add_argument("--rounds", type=int, default=10)
    p.add_argument("--classes", nargs="+", choices=list(CASES), default=list(CASES),
                   help="tune these classes only (the others keep the table's entries)")
    args = p.parse_args(argv)
    grid = QUICK if args.quick else GRID
    base = json.loads(ops.TABLE.read_text())
    results: dict[str, Any] = {}
    for cls, cases in CASES.items():
        if cls not in args.classes:
            continue
        moves = []
        for op, shape, dtype, dims in cases:
            x = torch.randint(0, 255, shape, device="cuda", dtype=torch.uint8) if dtype == "uint8" else \
                torch.randn(shape, device="cuda").to(getattr(torch, dtype))
            want = x.transpose(-2, -1) if op == "transpose" else x.permute(dims) if op == "permute" else x
            out = torch.empty(want.shape, dtype=x.dtype, device="cuda")
            moves.append((lambda x=x, dims=dims, out=out: ops.permute(x, dims, out=out)) if op == "permute" else
                         (lambda x=x, op=op, out=out: getattr(ops, op)(x, out=out)))
        config = dict(SEED)
        history = []
        for _ in range(1 if args.quick else 2):
            for knob, values in grid.items():
                if knob.startswith("gather_max_bytes") and cls != "small":
                    continue  # every move of another class is larger than small_bytes: a size says nothing there
                totals = [0.0] * len(values)
                for _ in range(args.rounds):
                    for i, value in enumerate(values):  # interleaved: every value in every round
                        table = {**base, "classes": {**base["classes"], cls: {**config, knob: value}}}
                        ops.table = lambda table=table: table  # type: ignore[assignment]  # the candidate
                        ops._MOVES.clear()
                        ops._REPLAYS.clear()
                        for fn in moves:
                            fn()  # planned (and compiled) outside the timing
                        torch.cuda.synchronize()
                        torch.cuda._sleep(20_000_000)  # ~10 ms: longer than the host takes to queue the round
                        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                        start.record()
                        for fn in moves:
                            for _ in range(5):
                                fn()
                        stop.record()
                        stop.synchronize()
                        totals[i] += start.elapsed_time(stop)
                best = min(range(len(values)), key=totals.__getitem__)
                if config[knob] in values and totals[best] > (1 - NOISE) * totals[values.index(config[knob])]:
                    best = values.index(config[knob])  # within noise of the incumbent: no change
                config[knob] = values[best]
                history.append({"knob": knob, "ms": {str(v): t / args.rounds for v, t in zip(values, totals)}})
                print(f"{cls}: {knob} = {values[best]} ({totals[best] / args.rounds:.3f} ms per round; "
                      f"worst {max(totals) / args.rounds:.3f})", flush=True)
        base["classes"][cls] = config
        results[cls] = {"best": config, "history": history}
    base["measured_on"] = torch.cuda.get_device_name()
    base["tuning"] = {**base.get("tuning", {}), **results}
    args.out.write_text(json.dumps(base, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
