"""The benchmark suite, on a GPU: every spec in benchmarks/specs at 1 GiB (transposes also on a
ragged shape), a size sweep for the plot, cudaMemcpyAsync and PyTorch in the same run.

    python3 benchmarks/run.py OUTDIR        # writes OUTDIR/bench.json
    python3 -m tmagen.bench OUTDIR/bench.json > BENCHMARKS.md   # on any machine
"""

from __future__ import annotations

import json
import os
import sys
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

from tmagen import bench, runtime, toolchain
from tmagen.render import render
from tmagen.spec import load_checked_spec

HERE = Path(__file__).resolve().parent
RUNS = 30


def ragged(shape: list[int], es: int, box: list[int]) -> list[int]:
    """Extents that are no multiple of the tile (where 128-byte rows allow it), strides still multiples
    of 128 bytes on both sides: what raggedness itself costs."""
    step = 128 // es
    out = list(shape)
    for d in (-2, -1):
        n = shape[d] - step
        while n % box[d] == 0 and n - step > box[d] and step % box[d] != 0:
            n -= step
        out[d] = n
    return out


def odd(shape: list[int], es: int) -> list[int]:
    """Extents whose rows are 16-byte multiples but not 128-byte ones, on both sides: rows then start
    off the 32-byte sectors of the memory system, which no tiling can avoid."""
    return [*shape[:-2], shape[-2] - 16, shape[-1] - 16 // es]


def main() -> None:
    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    specs = [load_checked_spec(p) for p in sorted((HERE / "specs").glob("*.json"))]
    tc = toolchain.find_toolchain()
    with ThreadPoolExecutor(os.cpu_count() or 4) as pool:
        cubins = dict(pool.map(lambda s: (s.name, toolchain.compile_folder(
            s, render(s, f"benchmarks/specs/{s.name}.json"), tc, cubin_only=True).cubin.read_bytes()), specs))
    device = runtime.Device.open()
    records = []

    def record(kind: str, spec_name: str, t: bench.Timing, limit: bench.Timing, **extra: object) -> None:
        row = {"kind": kind, "spec": spec_name, **t.as_dict(), "memcpy_gbps": limit.gbps,
               "ratio": t.gbps / limit.gbps, **extra}
        records.append(row)
        print(f"{kind:10s} {spec_name:28s} {str(list(t.shape)):24s} {t.gbps:7.0f} GB/s  {row['ratio']:.3f}", flush=True)

    limit_1g = bench.memcpy_timing(1 << 30, RUNS)
    records.append({"kind": "memcpy", "spec": "-", **limit_1g.as_dict(), "memcpy_gbps": limit_1g.gbps, "ratio": 1.0})
    print(f"memcpy 1 GiB: {limit_1g.gbps:.0f} GB/s", flush=True)
    for spec in specs:
        t = spec.tensors[0]
        shape = list(t.shape)
        # the limit again right before each kernel, so that drift in clocks cannot favour either
        limit_here = bench.memcpy_timing(int(np.prod(shape)) * t.dt.nbytes, RUNS)
        timing = bench.kernel_timing(spec, cubins[spec.name], device, shape, RUNS)
        record(spec.kernel.kind, spec.name, timing, limit_here,
               shape_kind="square" if spec.kernel.kind == "transpose" else "full")
        if spec.name in ("bench_copy_float32", "bench_copy_uint8"):  # the memory system's own cost of those strides
            box = [b if b <= 128 // t.dt.nbytes else 128 // t.dt.nbytes for b in t.box]
            for kind, other in (("ragged", ragged(shape, t.dt.nbytes, box)), ("odd strides", odd(shape, t.dt.nbytes))):
                record("copy", spec.name, bench.kernel_timing(spec, cubins[spec.name], device, other, RUNS),
                       limit_here, shape_kind=kind)
        if spec.kernel.kind == "transpose":
            for kind, other in (("ragged", ragged(shape, t.dt.nbytes, t.box)), ("odd strides", odd(shape, t.dt.nbytes))):
                record("transpose", spec.name, bench.kernel_timing(spec, cubins[spec.name], device, other, RUNS),
                       limit_here, shape_kind=kind)
        for tt in bench.torch_timings(shape, t.dtype, RUNS):
            record("torch", spec.name, tt, limit_here, shape_kind=tt.name)
    # bandwidth against size, for the plot: memcpy of the same bytes at each size
    sweep = {"bench_copy_float32": 4, "bench_transpose_float32": 4, "bench_transpose_bfloat16": 2,
             "bench_transpose_uint8": 1}
    by_name = {s.name: s for s in specs}
    for mib in (16, 64, 256, 1024, 2048):
        nbytes = mib << 20
        limit = bench.memcpy_timing(nbytes, RUNS)
        records.append({"kind": "memcpy", "spec": "sweep", **limit.as_dict(), "memcpy_gbps": limit.gbps, "ratio": 1.0,
                        "size_mib": mib})
        for name, es in sweep.items():
            spec = by_name[name]
            cols = 65536 // es
            shape = [nbytes // (cols * es), cols]
            record("sweep", name, bench.kernel_timing(spec, cubins[name], device, shape, RUNS), limit, size_mib=mib)
    try:
        import subprocess

        driver = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                                capture_output=True, text=True).stdout.strip() or "?"
    except OSError:
        driver = "?"
    meta = {"gpu": device.name, "driver": f"{driver} (CUDA {device.driver_version // 1000}.{device.driver_version % 1000 // 10})",
            "date": datetime.now(timezone.utc).strftime("%Y-%m-%d"), "runs": RUNS, "records": records}
    (out / "bench.json").write_text(json.dumps(meta, indent=1))


if __name__ == "__main__":
    main()
