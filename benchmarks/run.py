"""The benchmark suite, on a GPU with PyTorch (CuPy and Triton too, for their peers): every spec
in tmagen/ops_specs (the tuned specs tmagen.ops runs) at 1 GiB (transposes, and two copies, also on
ragged and odd-stride shapes),
each case's candidates (tmagen, cudaMemcpyAsync, PyTorch, CuPy, Triton) interleaved on the same
tensors; the matmul shapes (cuBLAS, Triton and tmagen's matmul when a launcher is given); and a
size sweep for the plot.

    python3 benchmarks/run.py OUTDIR                 # writes OUTDIR/bench.json (after every case)
    python3 benchmarks/run.py OUTDIR --only matmul   # or copy, transpose, sweep; comma-separated
    python3 benchmarks/run.py OUTDIR --quick         # fewer rounds: a smoke run
    python3 benchmarks/run.py --estimate             # the plan and its expected duration; runs nothing
    python3 -m lab.bench_report OUTDIR/bench.json    # BENCHMARKS.md and its plot, on any machine
"""

from __future__ import annotations

import argparse
import importlib
import json
import math
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
SPECS = HERE.parent / "tmagen" / "ops_specs"  # the tuned specs, one copy: what tmagen.ops runs is what is timed
sys.path.insert(0, str(HERE.parent))

from tmagen.bench import Method  # noqa: E402
from tmagen.dtypes import DTYPES  # noqa: E402
from tmagen.plan import load as load_plan  # noqa: E402
from tmagen.plan import resolve  # noqa: E402
from tmagen.spec import MatmulKernel, Spec, TransposeKernel  # noqa: E402

GROUPS = ("copy", "transpose", "matmul", "sweep")
MATMUL_SHAPES = [(4096, 4096, 4096), (8192, 8192, 8192), (4000, 4000, 4000), (8192, 8192, 1024), (6144, 6144, 2048)]
SWEEP = {"bench_copy_float32": 4, "bench_transpose_float32": 4, "bench_transpose_bfloat16": 2,
         "bench_transpose_uint8": 1}
SWEEP_MIB = (16, 64, 256, 1024, 2048)
FULL = Method(rounds=20, repetitions=5, warmup=3)
QUICK = Method(rounds=5, repetitions=3, warmup=2)
SWEEP_METHOD = Method(rounds=10, repetitions=3, warmup=2)


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


@dataclass
class Case:
    group: str  # copy, transpose, matmul, sweep
    spec: str  # the benchmark spec, or "" for matmuls
    shape_kind: str  # full, square, ragged, odd strides; or the matmul's M x N x K
    shape: list[int]
    dtype: str
    size_mib: int | None = None  # sweep cases


def plan(specs: list[Spec], groups: set[str]) -> list[Case]:
    cases = []
    for spec in specs:
        if isinstance(spec.kernel, MatmulKernel):
            continue
        t = spec.tensors[0]
        shape, es = list(t.shape), t.dt.nbytes
        is_t = isinstance(spec.kernel, TransposeKernel)
        group = "transpose" if is_t else "copy"
        if group not in groups:
            continue
        cases.append(Case(group, spec.name, "square" if is_t else "full", shape, t.dtype))
        if is_t or spec.name in ("bench_copy_float32", "bench_copy_uint8"):
            # a copy's box is capped at 128 bytes a row here, so that its raggedness shows
            box = list(t.box) if is_t else [b if b <= 128 // es else 128 // es for b in t.box]
            cases.append(Case(group, spec.name, "ragged", ragged(shape, es, box), t.dtype))
            cases.append(Case(group, spec.name, "odd strides", odd(shape, es), t.dtype))
    if "matmul" in groups:  # tmagen's matmul of each benchmark spec beside the peers (the peers alone without one)
        matmuls = [s for s in specs if isinstance(s.kernel, MatmulKernel)] or [None]
        cases += [Case("matmul", m.name if m else "", "x".join(map(str, s)), list(s),
                       m.tensors[2].dtype if m else "bfloat16") for m in matmuls for s in MATMUL_SHAPES]
    if "sweep" in groups:
        dtypes = {s.name: s.tensors[0].dtype for s in specs}
        for mib in SWEEP_MIB:
            for name, es in SWEEP.items():
                cols = 65536 // es
                if name in dtypes:
                    cases.append(Case("sweep", name, "sweep", [(mib << 20) // (cols * es), cols], dtypes[name],
                                      size_mib=mib))
    return cases


# ----------------------------------------------------------------------------- the budget
# Rough rates for the estimate (H200): what matters is the order of magnitude of each term.
GOOD_GBPS, SLOW_TRANSPOSE_GBPS, MATMUL_TFLOPS = 3800.0, 400.0, 600.0
CASE_OVERHEAD_S = {"sweep": 0.3}  # allocation, random data, the checks, CuPy's first compile of a kernel
CASE_OVERHEAD_DEFAULT_S = 1.5
TRITON_COMPILE_S = 0.3  # one configuration of a small kernel (measured 0.1 to 0.5 s for sm_90 on 2 cores)
TRITON_LAUNCHERS_S = 20.0  # Triton builds a C launcher per kernel signature with the host compiler, once
AUTOTUNE_PER_CONFIG_S = 0.08  # do_bench's 10 ms warm-up and 40 ms of runs, and its overheads
# Triton kernels per group: (configurations, compiled variants per dtype: the pointer transpose
# specialises on whether M and N are multiples of 16). tests/test_triton_peers.py checks the counts.
TRITON_KERNELS = {"copy": [(18, 1)], "transpose": [(18, 2), (18, 1)], "matmul": [(8, 1)]}


def estimate(cases: list[Case], method: Method, triton: bool = True) -> tuple[float, list[str]]:
    """Seconds the plan should take, and the terms of the sum."""
    lines, total = [], 0.0
    by_group: dict[str, list[Case]] = {}
    for c in cases:
        by_group.setdefault(c.group, []).append(c)
    for group, cs in by_group.items():
        m = SWEEP_METHOD if group == "sweep" else method
        samples = m.repetitions * m.rounds + m.warmup
        timed = 0.0
        for c in cs:
            if group == "matmul":
                one = 2 * math.prod(c.shape) / (MATMUL_TFLOPS * 1e12)
                timed += samples * (2 + triton) * one * 1.1
                continue
            nbytes = 2 * math.prod(c.shape) * DTYPES[c.dtype].nbytes
            one = nbytes / (GOOD_GBPS * 1e9)
            if group == "sweep":
                timed += samples * 2 * max(one, 0.2e-3)
            elif group == "copy":
                timed += samples * (5 if triton else 4) * one
            else:
                slow = 2 * nbytes / (SLOW_TRANSPOSE_GBPS * 1e9)  # torch and CuPy
                timed += samples * ((4 if triton else 2) * one + slow)
        timed += len(cs) * CASE_OVERHEAD_S.get(group, CASE_OVERHEAD_DEFAULT_S)
        line = f"{group:9s} {len(cs):2d} cases x {samples} samples of each candidate: ~{timed:.0f} s with set-up"
        total += timed
        if triton and group != "sweep":
            kernels = TRITON_KERNELS[group]
            keys = len({(tuple(c.shape), c.dtype) for c in cs})
            compiles = sum(n * variants * len({c.dtype for c in cs}) for n, variants in kernels)
            tune = sum(n for n, _ in kernels) * keys * AUTOTUNE_PER_CONFIG_S
            line += (f"; Triton: {'+'.join(str(n) for n, _ in kernels)} configs, ~{compiles} compiles "
                     f"~{compiles * TRITON_COMPILE_S:.0f} s, autotuning {keys} keys ~{tune:.0f} s")
            total += compiles * TRITON_COMPILE_S + tune
        lines.append(line)
    if triton and set(by_group) - {"sweep"}:
        total += TRITON_LAUNCHERS_S
        lines.append(f"Triton's launchers ~{TRITON_LAUNCHERS_S:.0f} s")
    return total, lines


# ----------------------------------------------------------------------------- running it
def machine() -> dict[str, Any]:
    import torch

    versions = {"torch": torch.__version__}
    for module in ("triton", "cupy"):
        try:
            versions[module] = importlib.import_module(module).__version__
        except ImportError:
            versions[module] = None
    try:
        driver = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                                capture_output=True, text=True).stdout.strip() or "?"
    except OSError:
        driver = "?"
    props = torch.cuda.get_device_properties(0)
    return {"gpu": props.name, "driver": driver, "sms": props.multi_processor_count,
            "l2_bytes": int(props.L2_cache_size), "versions": versions}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out", nargs="?", help="folder for bench.json")
    ap.add_argument("--only", default=",".join(GROUPS), help=f"comma-separated groups of {', '.join(GROUPS)}")
    ap.add_argument("--spec", action="append", default=[], help="only these benchmark specs (by name)")
    ap.add_argument("--quick", action="store_true", help=f"{QUICK.rounds} rounds x {QUICK.repetitions} repetitions")
    ap.add_argument("--no-triton", action="store_true", help="leave the Triton peers out")
    ap.add_argument("--estimate", action="store_true", help="print the plan and its expected duration, run nothing")
    args = ap.parse_args(argv)
    groups = set(args.only.split(","))
    if not groups <= set(GROUPS):
        ap.error(f"--only takes {', '.join(GROUPS)}, not {', '.join(sorted(groups - set(GROUPS)))}")
    method = QUICK if args.quick else FULL
    specs = [load_plan(p).spec for p in sorted(SPECS.glob("*.json"))]
    if args.spec:
        specs = [s for s in specs if s.name in args.spec]
    cases = plan(specs, groups)
    seconds, lines = estimate(cases, method, triton=not args.no_triton)
    print(f"plan: {len(cases)} cases, {method.rounds} rounds x {method.repetitions} repetitions; expected "
          f"~{seconds:.0f} s after the specs compile", flush=True)
    for line in lines:
        print("  " + line, flush=True)
    if args.estimate:
        return 0
    if not args.out:
        ap.error("give an output folder")
    return run(cases, specs, method, Path(args.out), triton=not args.no_triton)


def run(cases: list[Case], specs: list[Spec], method: Method, out: Path, triton: bool) -> int:
    from lab import peers
    from tmagen import runtime, toolchain
    from tmagen.render import render

    out.mkdir(parents=True, exist_ok=True)
    began = time.perf_counter()
    needed = {c.spec for c in cases if c.spec}
    by_name = {s.name: s for s in specs if s.name in needed}
    tc = toolchain.find_toolchain()
    with ThreadPoolExecutor(os.cpu_count() or 4) as pool:
        cubins = dict(pool.map(lambda s: (s.name, toolchain.compile_folder(
            resolve(s), render(resolve(s), f"tmagen/ops_specs/{s.name}.json"), tc, cubin_only=True).cubin.read_bytes()),
            by_name.values()))
    print(f"specs compiled in {time.perf_counter() - began:.0f} s", flush=True)
    device = runtime.Device.open()
    data = {"format": 2, **machine(), "date": datetime.now(UTC).strftime("%Y-%m-%d"),
            "method": {**asdict(method), "sweep": asdict(SWEEP_METHOD)}, "unavailable": peers.unavailable(),
            "cases": []}
    for case in cases:
        t0 = time.perf_counter()
        try:
            record = run_case(case, by_name, cubins, device, method, triton)
        except Exception as exc:  # noqa: BLE001 - the case is reported as failed and the suite goes on
            first = str(exc).splitlines()[0] if str(exc) else ""
            record = {"shape": case.shape, "dtype": case.dtype, "candidates": [], "retried_rounds": 0,
                      "failed": [{"name": "the whole case", "role": "tmagen", "why": f"{type(exc).__name__}: {first}"}]}
        record = {"group": case.group, "spec": case.spec, "shape_kind": case.shape_kind, "size_mib": case.size_mib,
                  **record, "seconds": round(time.perf_counter() - t0, 1)}
        data["cases"].append(record)
        (out / "bench.json").write_text(json.dumps(data, indent=1))
        print(one_line(record), flush=True)
    print(f"done in {time.perf_counter() - began:.0f} s: {out / 'bench.json'}", flush=True)
    return 0


def run_case(case: Case, by_name: dict[str, Spec], cubins: dict[str, bytes], device: Any, method: Method,
             triton: bool) -> dict[str, Any]:
    from lab import peers

    if case.group == "matmul":
        m, n, k = case.shape
        tmagen = peers.tmagen_matmul(by_name[case.spec], cubins[case.spec], device) if case.spec else None
        return peers.matmul_case(m, n, k, method, dtype=case.dtype, triton=triton, tmagen=tmagen)
    if case.group == "sweep":
        return peers.sweep_case(by_name[case.spec], cubins[case.spec], device, case.shape, SWEEP_METHOD)
    return peers.data_movement_case(by_name[case.spec], cubins[case.spec], device, case.shape, method, triton=triton)


def one_line(record: dict[str, Any]) -> str:
    """What a case measured, for the log."""
    what = f"{record['group']:9s} {record['spec'] or 'matmul':26s} {record['shape_kind']:11s} {record['dtype']:8s}"
    figures = []
    for c in record["candidates"]:
        value = f"{c['tflops']:.0f} TFLOP/s" if c.get("tflops") else f"{c['gbps']:.0f}"
        figures.append(f"{c['name'].split(' (')[0]}={value}")
    failed = "".join(f"  FAILED {f['name']}: {f['why']}" for f in record["failed"])
    return f"{what} {record['seconds']:5.1f}s  " + ", ".join(figures) + failed


if __name__ == "__main__":
    sys.exit(main())
