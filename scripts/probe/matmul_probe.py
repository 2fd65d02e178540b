"""Matmul variants on the GPU, for tuning: each is built from a spec dict, verified on random ragged
shapes, then timed interleaved with cuBLAS (torch.matmul) on the shapes of the issue.

    python3 scripts/probe/matmul_probe.py OUTDIR [--quick]
"""

from __future__ import annotations

import json
import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

from tmagen import runtime, toolchain
from tmagen.launch import Array, launch_parameters
from tmagen.plan import check, resolve
from tmagen.render import render
from tmagen.spec import parse_spec
from tmagen.verify import Verifier


def spec(name: str, tile=(128, 256, 64), consumers=2, stages=4, group=8, b_major="k", out="bfloat16",
         dtype="bfloat16", a_box_rows=None) -> dict:
    bm, bn, bk = tile
    span = 64  # 128 bytes of 16-bit data
    b = {"name": "b", "dtype": dtype, "shape": [4096, 4096], "swizzle": {"mode": "128B"},
         "box": [bn, span] if b_major == "k" else [bk, span]}
    c_cols = 128 // {"bfloat16": 2, "float16": 2, "float32": 4}[out]
    return {"name": name, "tensors": [
        {"name": "a", "dtype": dtype, "shape": [4096, 4096], "box": [a_box_rows or bm, span],
         "swizzle": {"mode": "128B"}},
        b,
        {"name": "c", "dtype": out, "shape": [4096, 4096], "box": [64, min(c_cols, bn)], "swizzle": {"mode": "128B"}}],
        "kernel": {"kind": "matmul", "tile": list(tile), "consumers": consumers, "stages": stages,
                   "raster_group": group, "b_major": b_major}}


VARIANTS = [
    spec("mm_128x256_s4"),
    spec("mm_128x256_s3", stages=3),
    spec("mm_128x256_s4_g16", group=16),
    spec("mm_256x128_s4", tile=(256, 128, 64)),
    spec("mm_128x128_s5_c1", tile=(128, 128, 64), consumers=1, stages=5),
    spec("mm_128x256_mn", b_major="mn"),
    spec("mm_128x256_f16_f32", dtype="float16", out="float32"),
]
SHAPES = [(4096, 4096, 4096), (8192, 8192, 8192), (4000, 4000, 4000), (8192, 8192, 1024), (6144, 6144, 2048)]
RAGGED = [(64, 256, 64), (1, 8, 8), (129, 264, 72), (1000, 999 // 8 * 8, 520), (777, 1024, 16), (300, 40, 2056)]


def main() -> None:
    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    quick = "--quick" in sys.argv
    import torch

    specs = [parse_spec(v) for v in VARIANTS]
    for s in specs:
        assert not check(s), (s.name, check(s))
    tc = toolchain.find_toolchain()
    t0 = time.time()
    with ThreadPoolExecutor(os.cpu_count() or 4) as pool:
        results = dict(pool.map(lambda s: (s.name, toolchain.compile_folder(
            resolve(s), render(resolve(s), f"{s.name}.json"), tc,
                                                                              cubin_only=True)), specs))
    print(f"compiled {len(specs)} variants in {time.time() - t0:.1f} s", flush=True)
    report = {"variants": {}, "timings": []}
    for s in specs:
        r = results[s.name]
        report["variants"][s.name] = {"kernels": [k.__dict__ for k in r.kernels]}
        print(s.name, [(k.registers, k.spill_store_bytes) for k in r.kernels], flush=True)
    device = runtime.Device.open()
    # correctness: ragged shapes and K smaller than a tile, every variant
    for s in specs:
        checker = Verifier(resolve(s), results[s.name].cubin.read_bytes(), device, seed=5)
        try:
            rows = []
            for shape in RAGGED + ([] if quick else [(2048, 2048, 2048)]):
                o = checker.matmul(shape)
                rows.append({"shape": shape, "ok": o.ok, "detail": o.detail})
                print(f"  {s.name} {shape}: {o.result} {o.detail}", flush=True)
            report["variants"][s.name]["verify"] = rows
        finally:
            checker.close()
    # speed: interleaved with cuBLAS
    torch.manual_seed(0)
    timed = [s for s in specs if s.kernel.b_major == "k" and s.tensors[0].dtype == "bfloat16"
             and s.tensors[2].dtype == "bfloat16"]
    modules = {s.name: runtime.Module(results[s.name].cubin.read_bytes()) for s in timed}
    for (m, n, k) in SHAPES[:2] if quick else SHAPES:
        a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
        b = torch.randn(n, k, device="cuda", dtype=torch.bfloat16)
        ref = a @ b.T
        cands = {"cublas": lambda a=a, b=b: torch.matmul(a, b.T)}
        outs = {}
        for s in timed:
            plan = resolve(s).kernels[0]
            fn = modules[s.name].function(plan.symbol, plan.smem_bytes)
            c = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
            call, params = launch_parameters(resolve(s), [Array.of(a.data_ptr(), (m, k)),
                                                          Array.of(b.data_ptr(), (n, k))],
                                             Array.of(c.data_ptr(), (m, n)), device.multiprocessors)
            grid = call.grid
            cands[s.name] = (lambda fn=fn, grid=grid, params=params, th=plan.threads: fn.launch(grid, th, params))
            outs[s.name] = c
        for fn in cands.values():
            fn()
        torch.cuda.synchronize()
        for name, c in outs.items():
            err = ((c.float() - ref.float()).abs().max() / ref.float().abs().max()).item()
            report["timings"].append({"shape": [m, n, k], "name": name, "max_rel_err_vs_cublas": err})
        reps = 30 if m * n * k <= 4096 ** 3 else 12
        times = {name: [] for name in cands}
        for _ in range(reps):
            for name, fn in cands.items():
                e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                e0.record()
                fn()
                e1.record()
                e1.synchronize()
                times[name].append(e0.elapsed_time(e1))
        flops = 2 * m * n * k
        base = np.median(times["cublas"])
        for name, ts in times.items():
            med = float(np.median(ts))
            tf = flops / med / 1e9
            report["timings"].append({"shape": [m, n, k], "name": name, "median_ms": med, "tflops": tf,
                                      "ratio_to_cublas": base / med, "spread_ms": float(np.max(ts) - np.min(ts))})
            print(f"{m}x{n}x{k} {name:24s} {med:8.3f} ms {tf:7.1f} TFLOP/s  {base / med:.3f} of cuBLAS", flush=True)
        outs.clear()
        cands.clear()
        torch.cuda.empty_cache()
    (out / "matmul_probe.json").write_text(json.dumps(report, indent=1, default=str))


if __name__ == "__main__":
    main()
