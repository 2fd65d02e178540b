"""Exploration: time copy and transpose configurations on 1 GiB tensors against cudaMemcpyAsync.

Run on a GPU machine from the repository root:  python3 scripts/probe/tune.py OUTDIR [copy|transpose]...
"""

from __future__ import annotations

import json
import os
import sys
from concurrent.futures import ThreadPoolExecutor

from tmagen import bench, runtime, toolchain
from tmagen.plan import check, resolve
from tmagen.render import render
from tmagen.spec import parse_spec


def copy_specs() -> list[dict]:
    out = []
    for dtype, es in (("uint8", 1), ("bfloat16", 2), ("float32", 4), ("float64", 8)):
        inner = 256
        for stage_kib in (32, 64):
            rows = stage_kib * 1024 // (inner * es)
            for stages in (2, 3, 4):
                for bps in (1, 2):
                    if (stage_kib * 1024 * stages + 2048) * bps > 228 * 1024:
                        continue
                    out.append({"name": f"c_{dtype}_{rows}_{stages}_{bps}",
                                "tensors": [{"name": "d", "dtype": dtype, "shape": [16384, 65536 // es],
                                             "box": [rows, inner], "swizzle": {"mode": "none"}}],
                                "kernel": {"kind": "copy", "stages": stages, "blocks_per_sm": bps}})
    return out


def transpose_specs() -> list[dict]:
    out = []
    shapes = {"float32": ([32, 32, "128B"], [64, 32, "none"], [128, 32, "none"], [64, 64, "none"]),
              "bfloat16": ([64, 64, "128B"], [128, 64, "none"], [256, 64, "none"], [128, 128, "none"]),
              "uint8": ([128, 128, "128B"], [256, 128, "none"], [128, 256, "none"])}
    es = {"float32": 4, "bfloat16": 2, "uint8": 1}
    for dtype, boxes in shapes.items():
        for rows, cols, mode in boxes:
            for group in (1, 2):
                for stages in (2, 3):
                    for bps in (1, 2, 3):
                        out.append({"name": f"t_{dtype}_{rows}x{cols}{mode.lower()}_{group}_{stages}_{bps}",
                                    "tensors": [{"name": "m", "dtype": dtype, "shape": [16384, 65536 // es[dtype]],
                                                 "box": [rows, cols], "swizzle": {"mode": mode}}],
                                    "kernel": {"kind": "transpose", "tiles_per_stage": group, "stages": stages,
                                               "blocks_per_sm": bps}})
    return out


def rank1_specs() -> list[dict]:
    out = []
    for dtype, es in (("float32", 4), ("uint8", 1)):
        for boxes in (4, 8, 16, 32):
            for stages in (2, 3, 4):
                for bps in (2, 4, 8):
                    if boxes * 256 * es * stages * bps > 200 * 1024 or boxes * 1024 * stages > 200 * 1024:
                        continue
                    out.append({"name": f"c1_{dtype}_{boxes}_{stages}_{bps}", "tensors": [{
                        "name": "d", "dtype": dtype, "shape": [(1 << 30) // es], "box": [256],
                        "swizzle": {"mode": "none"}}],
                        "kernel": {"kind": "copy", "stages": stages, "blocks_per_sm": bps, "boxes_per_stage": boxes}})
    return out


def f32_transpose_specs() -> list[dict]:
    out = []
    for rows, cols in ((64, 64), (128, 64), (64, 128)):
        for stages in (2, 3, 4):
            for bps in (1, 2):
                out.append({"name": f"tf_{rows}x{cols}_{stages}_{bps}",
                            "tensors": [{"name": "m", "dtype": "float32", "shape": [16384, 16384],
                                         "box": [rows, cols], "swizzle": {"mode": "none"}}],
                            "kernel": {"kind": "transpose", "tiles_per_stage": 1, "stages": stages,
                                       "blocks_per_sm": bps}})
    return out


def main() -> None:
    out_dir = sys.argv[1]
    which = sys.argv[2:] or ["copy", "transpose"]
    os.makedirs(out_dir, exist_ok=True)
    raw = (copy_specs() if "copy" in which else []) + (transpose_specs() if "transpose" in which else []) \
        + (rank1_specs() if "rank1" in which else []) + (f32_transpose_specs() if "f32" in which else [])
    specs = [parse_spec(s) for s in raw]
    specs = [s for s in specs if not check(s)]
    tc = toolchain.find_toolchain()
    with ThreadPoolExecutor(16) as pool:
        cubins = dict(pool.map(lambda s: (s.name, toolchain.compile_folder(
            resolve(s), render(resolve(s), "x.json"), tc, cubin_only=True).cubin.read_bytes()), specs))
    device = runtime.Device.open()
    limit = bench.memcpy_timing(1 << 30)
    print(f"memcpy {limit.gbps:.0f} GB/s", flush=True)
    rows = []
    for s in specs:
        try:
            t = bench.kernel_timing(s, cubins[s.name], device, s.tensors[0].shape, runs=10)
        except Exception as exc:  # noqa: BLE001 - a probe reports and goes on
            print(f"{s.name}: {exc}", flush=True)
            continue
        rows.append((s.name, t.gbps, t.gbps / limit.gbps))
        print(f"{s.name:28s} {t.gbps:7.0f} GB/s  {t.gbps / limit.gbps:.3f}", flush=True)
    rows.sort(key=lambda r: -r[1])
    print("best:", rows[:8])
    with open(os.path.join(out_dir, "tune.json"), "w") as f:
        json.dump({"memcpy_gbps": limit.gbps, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
