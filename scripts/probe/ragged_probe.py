"""Why are ragged transposes slower? Times f32/bf16/u8 transposes on square, ragged (128-byte
aligned strides) and odd shapes with each L2 promotion, then (with --ncu-child) launches one
kernel for Nsight Compute to measure.

    python3 scripts/probe/ragged_probe.py OUTDIR
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

from tmagen import bench, runtime, toolchain
from tmagen.render import render
from tmagen.spec import parse_spec

BASE = {"float32": ([64, 64], 3, 1, 4), "bfloat16": ([128, 128], 2, 3, 2), "uint8": ([256, 128], 2, 1, 1)}
SHAPES = {"float32": {"square": [16384, 16384], "ragged": [16352, 16352], "odd": [16368, 16380]},
          "bfloat16": {"square": [16384, 32768], "ragged": [16320, 32704], "odd": [16368, 32760]},
          "uint8": {"square": [16384, 65536], "ragged": [16256, 65408], "odd": [16368, 65520]}}


def spec_for(dtype: str, l2: str) -> dict:
    box, stages, bps, es = BASE[dtype]
    return {"name": f"p_{dtype}_{l2.lower()}", "tensors": [{"name": "m", "dtype": dtype, "shape": [16384, 65536 // es],
            "box": box, "swizzle": {"mode": "none"}, "l2_promotion": l2}],
            "kernel": {"kind": "transpose", "tiles_per_stage": 1, "stages": stages, "blocks_per_sm": bps}}


def main() -> None:
    if sys.argv[1] == "--ncu-child":
        dtype, l2, shape_kind = sys.argv[2:5]
        spec = parse_spec(spec_for(dtype, l2))
        r = toolchain.compile_folder(spec, render(spec, "x"), cubin_only=True)
        bench.kernel_timing(spec, r.cubin.read_bytes(), runtime.Device.open(), SHAPES[dtype][shape_kind], runs=1, )
        return
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    device = runtime.Device.open()
    rows = []
    for dtype in BASE:
        for l2 in ("none", "128B", "256B"):
            spec = parse_spec(spec_for(dtype, l2))
            r = toolchain.compile_folder(spec, render(spec, "x"), cubin_only=True)
            for kind, shape in SHAPES[dtype].items():
                t = bench.kernel_timing(spec, r.cubin.read_bytes(), device, shape, runs=10)
                rows.append((dtype, l2, kind, round(t.gbps)))
                print(dtype, l2, kind, round(t.gbps), flush=True)
    metrics = ",".join(["gpu__time_duration.sum", "dram__bytes_read.sum", "dram__bytes_write.sum",
                        "lts__t_sectors_op_read.sum", "lts__t_sectors_op_write.sum",
                        "lts__t_sector_hit_rate.pct", "dram__throughput.avg.pct_of_peak_sustained_elapsed"])
    ncu = {}
    for dtype in ("float32", "uint8"):
        for kind in ("square", "ragged", "odd"):
            run = subprocess.run(["ncu", "--clock-control", "none", "--csv", "--metrics", metrics, "--kernel-name",
                                  "regex:transpose", "--launch-skip", "3", "--launch-count", "1", sys.executable,
                                  __file__, "--ncu-child", dtype, "none", kind], capture_output=True, text=True)
            vals = {}
            for line in run.stdout.splitlines():
                parts = [p.strip('"') for p in line.split('","')]
                if len(parts) > 3 and parts[-3] in metrics:
                    vals[parts[-3]] = parts[-1]
            ncu[f"{dtype} {kind}"] = vals or run.stderr[-500:]
            print(dtype, kind, vals, flush=True)
    with open(os.path.join(out, "ragged.json"), "w") as f:
        json.dump({"timings": rows, "ncu": ncu}, f, indent=1)


if __name__ == "__main__":
    main()
