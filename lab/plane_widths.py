"""The plane kernel's tile width on narrow planes, measured: what `plane_tile_cw`'s rule for planes
narrow along C is set from (tests/test_ops_layouts.py replays the measurement against the rule).

Each case transposes a [R, C] tensor with few columns into [C, R] through the plane kernel, once in
each tile width (units along C, 1 to 64, the rest of the tile's units along R), beside Triton's
pointer tiles (lab.triton_peers.transpose, autotuned), with the suite's method (tmagen.bench.time_case:
interleaved, sleep-queued, three buffer sets, several launches a sample where one is short). Needs
PyTorch and a GPU.

    python -m lab.plane_widths OUT.json
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

DTYPES = ("uint8", "bfloat16", "float32")
SHAPES = [(2000, 12), (16385, 8), (40000, 3), (40000, 6), (40000, 12), (40000, 20), (40000, 48), (300000, 20),
          (1000000, 12), (2000000, 3), (500000, 48), (100000, 96)]
WIDTHS = (1, 2, 4, 8, 16, 32, 64)
SETS = 3
SHORT_BYTES = 8 << 20  # moves of fewer bytes are timed several launches to a sample
BATCH = 10


def measure(dtype: str, rows: int, cols: int) -> dict[str, Any]:
    """One case: microseconds per launch of every width (and Triton's), and the width the rule picks."""
    import torch

    from lab import triton_peers
    from tmagen import strided
    from tmagen.bench import Candidate, Method, time_case
    from tmagen.kinds.strided import plan as sp

    dt = getattr(torch, dtype)
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    stream = torch.cuda.current_stream().cuda_stream
    ins = [torch.randint(0, 255, (rows, cols), device="cuda", dtype=torch.uint8) if dt == torch.uint8
           else torch.randn(rows, cols, device="cuda").to(dt) for _ in range(SETS)]
    outs = [torch.empty(cols, rows, device="cuda", dtype=dt) for _ in range(SETS)]
    size = ins[0].element_size()
    planned = sp.plane((), rows, cols, (cols, 1), (1, rows), size, sms)
    units = sp.plane_units(size, planned.packed)

    def writes(call: Any) -> tuple[Any, Any]:
        prepared = [strided.prepare(call, x.data_ptr(), y.data_ptr(), 0, stream) for x, y in zip(ins, outs)]

        def launch(i: int) -> None:
            strided.run(prepared[i], stream)

        def check() -> str | None:
            outs[0].zero_()
            launch(0)
            torch.cuda.synchronize()
            same = torch.equal(outs[0].view(torch.uint8), ins[0].t().contiguous().view(torch.uint8))
            return None if same else "differs from x.t().contiguous()"

        return launch, check

    cands = []
    for cw in WIDTHS:
        if cw <= units // 2:
            launch, check = writes(sp.plane((), rows, cols, (cols, 1), (1, rows), size, sms, tile_cw=cw))
            cands.append(Candidate(f"cw {cw}", "tmagen", launch, check))

    def triton(i: int) -> None:
        triton_peers.transpose(ins[i], outs[i])

    cands.append(Candidate("Triton tl.trans, pointer tiles", "peer", triton))
    nbytes = 2 * rows * cols * size
    record = time_case(cands, Method(rounds=10, repetitions=3), shape=(rows, cols), dtype=dtype, bytes_moved=nbytes,
                       sets=SETS, batch=BATCH if nbytes < SHORT_BYTES else 1)
    us = {c["name"]: round(c["median_ms"] * 1000, 3) for c in record["candidates"]}
    return {"dtype": dtype, "rows": rows, "cols": cols, "planned_cw": planned.tile_cw, "us": us,
            "failed": record["failed"]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lab.plane_widths", description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    args = parser.parse_args(argv)
    import torch

    cases = []
    for dtype in DTYPES:
        for rows, cols in SHAPES:
            case = measure(dtype, rows, cols)
            print(dtype, rows, cols, case["planned_cw"], case["us"], flush=True)
            cases.append(case)
    data = {"gpu": torch.cuda.get_device_name(), "what": "python -m lab.plane_widths", "cases": cases}
    args.out.write_text(json.dumps(data, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
