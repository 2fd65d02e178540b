"""The benchmark suite, on a GPU with PyTorch (CuPy and Triton too, for their peers): every spec
in tmagen/ops_specs (the tuned specs tmagen.ops runs) at 1 GiB (transposes, and two copies, also on
ragged and odd-stride shapes),
each case's candidates (tmagen, cudaMemcpyAsync, PyTorch, CuPy, Triton) interleaved on the same
tensors; the matmul section (lab/matmul_bench.py: 61 named shapes in seven classes, tmagen.ops.matmul
beside cuBLAS and Triton); and a size sweep for the plot. The fp8 section (lab/fp8_bench.py: the same
shapes in e4m3 with scales, beside torch._scaled_mm and Triton's fp8 matmul) and the ops section
(lab/ops_bench.py: tmagen.ops.transpose, copy and permute on small, odd-row, ragged, batched, permuted,
viewed and large tensors of 1 to 16-byte elements, beside PyTorch, CuPy and Triton, and the host time
of a call) run when named: the whole suite with either would outlast one 10-minute call, so each is
measured apart and merged.

    python3 benchmarks/run.py OUTDIR                 # writes OUTDIR/bench.json (after every case)
    python3 benchmarks/run.py OUTDIR --only matmul   # or copy, transpose, sweep; comma-separated
    python3 benchmarks/run.py OUTDIR --only matmul --matmul-class short-K,long-K   # some classes only
    python3 benchmarks/run.py OUTDIR --only matmul --tmagen-matmul spec  # the tuned spec, not tmagen.ops.matmul
    python3 benchmarks/run.py OUTDIR --only fp8 --merge   # the fp8 section into OUTDIR/bench.json's other cases
    python3 benchmarks/run.py OUTDIR --only ops --merge   # the ops section likewise
    python3 benchmarks/run.py OUTDIR --only ops --ops-class small,host --merge  # some of its classes, again
    python3 benchmarks/run.py OUTDIR --only fp8 --matmul-shape 2048x2048x32768 --merge  # some shapes, in place
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

from lab import fp8_bench, matmul_bench, ops_bench  # noqa: E402
from tmagen.bench import Method  # noqa: E402
from tmagen.dtypes import DTYPES  # noqa: E402
from tmagen.plan import load as load_plan  # noqa: E402
from tmagen.plan import resolve  # noqa: E402
from tmagen.spec import MatmulKernel, Spec, TransposeKernel  # noqa: E402

GROUPS = ("copy", "transpose", "matmul", "sweep", "fp8", "ops")
DEFAULT_GROUPS = ("copy", "transpose", "matmul", "sweep")  # what fits one 10-minute call; fp8, ops apart (--merge)
OPS_CLASSES = (*ops_bench.CLASSES, ops_bench.HOST)  # the ops section's classes, and its host time
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
    group: str  # copy, transpose, matmul, sweep, fp8, ops
    spec: str  # the benchmark spec, or "" for matmuls (tmagen.ops.matmul for fp8 ones)
    shape_kind: str  # full, square, ragged, odd strides; or the matmul's M x N x K
    shape: list[int]
    dtype: str
    size_mib: int | None = None  # sweep cases
    ld: int | None = None  # matmul and fp8 cases: A's and B's row pitch in elements where they are sliced views
    ops: ops_bench.OpsCase | None = None  # ops cases: the call (None: the host time)


def plan(specs: list[Spec], groups: set[str], tmagen_matmul: str = "spec",
         matmul_classes: set[str] | None = None, ops_classes: set[str] | None = None) -> list[Case]:
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
    if "matmul" in groups:
        cases += matmul_cases(specs, tmagen_matmul, matmul_classes)
    if "fp8" in groups:
        cases += fp8_cases(matmul_classes)
    if "ops" in groups:
        cases += ops_cases(ops_classes)
    if "sweep" in groups:
        dtypes = {s.name: s.tensors[0].dtype for s in specs}
        for mib in SWEEP_MIB:
            for name, es in SWEEP.items():
                cols = 65536 // es
                if name in dtypes:
                    cases.append(Case("sweep", name, "sweep", [(mib << 20) // (cols * es), cols], dtypes[name],
                                      size_mib=mib))
    return cases


def matmul_cases(specs: list[Spec], tmagen_matmul: str, classes: set[str] | None = None) -> list[Case]:
    """The matmul section: each shape of the named set (of ``classes``, or all) once with
    tmagen.ops.matmul ("ops"), or once per matmul spec among ``specs`` ("spec": the tuned spec
    launched directly), or with the peers alone where there is no spec."""
    shapes = [s for s in matmul_bench.matmul_shapes() if classes is None or s.shape_class in classes]
    if tmagen_matmul == "ops":
        tmagens = [(matmul_bench.OPS, "bfloat16")]
    else:
        # the bf16 section's specs (the fp8 one is the fp8 section's, through tmagen.ops.matmul)
        tmagens = [(m.name, m.tensors[2].dtype) for m in specs if isinstance(m.kernel, MatmulKernel)
                   and "float8" not in m.tensors[0].dtype]
        tmagens = tmagens or [("", "bfloat16")]
    if tmagen_matmul != "ops":  # a tuned spec reads A and B K-major: the weight gradients are tmagen.ops.matmul's
        shapes = [s for s in shapes if s.shape_class != matmul_bench.WEIGHT_GRADIENT]
    return [Case("matmul", name, s.shape_class, [s.m, s.n, s.k], dtype, ld=s.ld) for name, dtype in tmagens
            for s in shapes]


def fp8_cases(classes: set[str] | None = None) -> list[Case]:
    """The fp8 section: each shape of the named set (of ``classes``, or all), e4m3 operands; tmagen's
    candidates are tmagen.ops.matmul's."""
    return [Case("fp8", matmul_bench.OPS, s.shape_class, [s.m, s.n, s.k], "float8_e4m3", ld=s.ld)
            for s in fp8_bench.fp8_shapes() if classes is None or s.shape_class in classes]


def ops_cases(classes: set[str] | None = None) -> list[Case]:
    """The ops section: the host time of a call on 64 x 64, then each case of lab.ops_bench (of
    ``classes``, or all; "host" names the host time)."""
    host = [Case("ops", "", ops_bench.HOST, list(ops_bench.HOST_SHAPE), "float32")]
    return (host if classes is None or ops_bench.HOST in classes else []) + [
        Case("ops", "", c.shape_class, list(c.shape), c.dtype, ops=c)
        for c in ops_bench.ops_cases() if classes is None or c.shape_class in classes]


def matmul_shape(case: Case) -> matmul_bench.MatmulShape:
    return matmul_bench.shape_of(*case.shape, case.shape_kind, case.ld)


# ----------------------------------------------------------------------------- the budget
# Rough rates for the estimate (H200): what matters is the order of magnitude of each term.
GOOD_GBPS, SLOW_TRANSPOSE_GBPS = 3800.0, 400.0
CASE_OVERHEAD_S = {"sweep": 0.3}  # allocation, random data, the checks, CuPy's first compile of a kernel
CASE_OVERHEAD_DEFAULT_S = 1.5
TRITON_COMPILE_S = 0.3  # one configuration of a small kernel (measured 0.1 to 0.5 s for sm_90 on 2 cores)
TRITON_LAUNCHERS_S = 20.0  # Triton builds a C launcher per kernel signature with the host compiler, once
AUTOTUNE_PER_CONFIG_S = 0.08  # do_bench's 10 ms warm-up and 40 ms of runs, and its overheads
# Triton kernels per group: (configurations, compiled variants per dtype: the pointer transpose
# specialises on whether M and N are multiples of 16). tests/test_triton_peers.py checks the counts.
# The matmul's are counted by lab.matmul_bench.estimate.
TRITON_KERNELS = {"copy": [(18, 1)], "transpose": [(18, 2), (18, 1)]}


def estimate(cases: list[Case], method: Method, triton: bool = True) -> tuple[float, list[str]]:
    """Seconds the plan should take, and the terms of the sum."""
    lines, total = [], 0.0
    by_group: dict[str, list[Case]] = {}
    for c in cases:
        by_group.setdefault(c.group, []).append(c)
    for group, cs in by_group.items():
        if group == "fp8":
            seconds, line = fp8_bench.estimate([matmul_shape(c) for c in cs], method, triton=triton)
            total += seconds
            lines.append(f"{line}: ~{seconds:.0f} s")
            continue
        if group == "ops":
            seconds, line = ops_bench.estimate([c.ops for c in cs if c.ops], method, triton=triton,
                                               host=any(c.ops is None for c in cs))
            total += seconds
            lines.append(f"{line}: ~{seconds:.0f} s")
            continue
        if group == "matmul":
            seconds, line = matmul_bench.estimate([matmul_shape(c) for c in cs], method, tmagen=any(c.spec for c in cs),
                                                  triton=triton, ops=any(c.spec == matmul_bench.OPS for c in cs))
            total += seconds
            lines.append(f"{line}: ~{seconds:.0f} s")
            continue
        m = SWEEP_METHOD if group == "sweep" else method
        samples = m.repetitions * m.rounds + m.warmup
        timed = 0.0
        for c in cs:
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
    if triton and set(by_group) - {"sweep", "ops"}:  # the matmul's kernels among them (ops counts its own)
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
    ap.add_argument("--only", default=",".join(DEFAULT_GROUPS),
                    help=f"comma-separated groups of {', '.join(GROUPS)} (default: {', '.join(DEFAULT_GROUPS)})")
    ap.add_argument("--merge", action="store_true", help="keep the cases of other groups from the bench.json "
                    "already in OUTDIR (a section measured apart, e.g. --only fp8)")
    ap.add_argument("--spec", action="append", default=[], help="only these benchmark specs (by name)")
    ap.add_argument("--quick", action="store_true", help=f"{QUICK.rounds} rounds x {QUICK.repetitions} repetitions")
    ap.add_argument("--no-triton", action="store_true", help="leave the Triton peers out")
    ap.add_argument("--tmagen-matmul", choices=("auto", "ops", "spec"), default="auto",
                    help="tmagen's matmul: tmagen.ops.matmul (ops), the tuned matmul spec of tmagen/ops_specs "
                         "launched directly (spec), or ops where tmagen.ops has it (auto, the default)")
    ap.add_argument("--matmul-class", default="", help="only these classes of matmul and fp8 shapes (comma-separated: "
                    f"{', '.join(matmul_bench.CLASSES)})")
    ap.add_argument("--ops-class", default="", help="only these classes of the ops section (comma-separated: "
                    f"{', '.join(OPS_CLASSES)}); with --merge, only their cases are replaced")
    ap.add_argument("--matmul-shape", default="", help="only these shapes of the matmul and fp8 sections "
                    "(comma-separated MxNxK, every case of that M, N and K); with --merge, only their cases "
                    "are replaced")
    ap.add_argument("--estimate", action="store_true", help="print the plan and its expected duration, run nothing")
    args = ap.parse_args(argv)
    groups = set(args.only.split(","))
    if not groups <= set(GROUPS):
        ap.error(f"--only takes {', '.join(GROUPS)}, not {', '.join(sorted(groups - set(GROUPS)))}")
    method = QUICK if args.quick else FULL
    specs = [load_plan(p).spec for p in sorted(SPECS.glob("*.json"))]
    if args.spec:
        specs = [s for s in specs if s.name in args.spec]
    classes = set(args.matmul_class.split(",")) if args.matmul_class else None
    if classes and not classes <= set(matmul_bench.CLASSES):
        ap.error(f"--matmul-class takes {', '.join(matmul_bench.CLASSES)}, not "
                 f"{', '.join(sorted(classes - set(matmul_bench.CLASSES)))}")
    ops_classes = set(args.ops_class.split(",")) if args.ops_class else None
    if ops_classes and not ops_classes <= set(OPS_CLASSES):
        ap.error(f"--ops-class takes {', '.join(OPS_CLASSES)}, not {', '.join(sorted(ops_classes - set(OPS_CLASSES)))}")
    tmagen_matmul = args.tmagen_matmul
    if tmagen_matmul == "auto":
        tmagen_matmul = "ops" if matmul_bench.has_ops_matmul() else "spec"
    elif tmagen_matmul == "ops" and not matmul_bench.has_ops_matmul():
        ap.error("--tmagen-matmul ops: this tmagen.ops has no matmul (use spec)")
    cases = plan(specs, groups, tmagen_matmul, classes, ops_classes)
    shapes = None
    if args.matmul_shape:
        try:
            shapes = {tuple(int(x) for x in s.split("x")) for s in args.matmul_shape.split(",")}
        except ValueError:
            ap.error(f"--matmul-shape takes MxNxK,... (as 4096x4096x4096), not {args.matmul_shape!r}")
        cases = [c for c in cases if c.group not in ("matmul", "fp8") or tuple(c.shape) in shapes]
        unknown = shapes - {tuple(c.shape) for c in cases if c.group in ("matmul", "fp8")}
        if unknown:
            ap.error(f"--matmul-shape: no case of {', '.join('x'.join(map(str, u)) for u in sorted(unknown))} "
                     f"in the sections run ({', '.join(sorted(groups))})")
    seconds, lines = estimate(cases, method, triton=not args.no_triton)
    print(f"plan: {len(cases)} cases, {method.rounds} rounds x {method.repetitions} repetitions; expected "
          f"~{seconds:.0f} s after the specs compile", flush=True)
    for line in lines:
        print("  " + line, flush=True)
    if args.estimate:
        return 0
    if not args.out:
        ap.error("give an output folder")
    return run(cases, specs, method, Path(args.out), triton=not args.no_triton, merge=args.merge,
               ops_classes=ops_classes, matmul_classes=classes, matmul_shapes=shapes)


def merged(old: dict[str, Any], new: dict[str, Any], groups: set[str],
           ops_classes: set[str] | None = None, matmul_classes: set[str] | None = None,
           matmul_shapes: set[tuple[int, int, int]] | None = None) -> dict[str, Any]:
    """``old``'s run (its machine, date and method) with its cases of ``groups`` replaced by
    ``new``'s, whose machine and date are kept per group under "sections"; with ``ops_classes``
    (``matmul_classes``, ``matmul_shapes``), only the ops (matmul and fp8) cases of those classes
    (and M x N x K) are replaced. A new case takes the place of the old case it replaces (the same
    group, spec, class, shape and row pitch), so that the report's rows keep their order; the others
    follow the kept cases."""
    about = {k: new[k] for k in ("gpu", "driver", "sms", "l2_bytes", "versions", "date", "method") if k in new}
    sections = {g: v for g, v in old.get("sections", {}).items() if g not in groups}
    sections.update({g: about for g in sorted(groups)})

    def replaced(case: dict[str, Any]) -> bool:
        if case["group"] == "ops" and ops_classes is not None:
            return "ops" in groups and case["shape_kind"] in ops_classes
        if case["group"] in ("matmul", "fp8") and (matmul_classes is not None or matmul_shapes is not None):
            return (case["group"] in groups and (matmul_classes is None or case["shape_kind"] in matmul_classes)
                    and (matmul_shapes is None or tuple(case.get("shape", ())) in matmul_shapes))
        return case["group"] in groups

    def identity(case: dict[str, Any]) -> tuple[Any, ...]:
        return (case["group"], case.get("spec"), case["shape_kind"], tuple(case.get("shape") or ()), case.get("ld"))

    fresh = {identity(c): c for c in new["cases"]}
    cases, placed = [], set()
    for case in old["cases"]:
        if not replaced(case):
            cases.append(case)
        elif identity(case) in fresh and identity(case) not in placed:
            cases.append(fresh[identity(case)])
            placed.add(identity(case))
    cases += [c for c in new["cases"] if identity(c) not in placed]
    return {**old, "sections": sections, "cases": cases}


def run(cases: list[Case], specs: list[Spec], method: Method, out: Path, triton: bool, merge: bool = False,
        ops_classes: set[str] | None = None, matmul_classes: set[str] | None = None,
        matmul_shapes: set[tuple[int, int, int]] | None = None) -> int:
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
    old = json.loads((out / "bench.json").read_text()) if merge and (out / "bench.json").exists() else None
    groups = {c.group for c in cases}
    for case in cases:
        t0 = time.perf_counter()
        try:
            record = run_case(case, by_name, cubins, device, method, triton)
        except Exception as exc:  # noqa: BLE001 - the case is reported as failed and the suite goes on
            first = str(exc).splitlines()[0] if str(exc) else ""
            record = {"shape": case.shape, "ld": case.ld, "dtype": case.dtype, "candidates": [], "retried_rounds": 0,
                      "failed": [{"name": "the whole case", "role": "tmagen", "why": f"{type(exc).__name__}: {first}"}]}
        record = {"group": case.group, "spec": case.spec, "shape_kind": case.shape_kind, "size_mib": case.size_mib,
                  **record, "seconds": round(time.perf_counter() - t0, 1)}
        data["cases"].append(record)
        whole = merged(old, data, groups, ops_classes, matmul_classes, matmul_shapes) if old else data
        (out / "bench.json").write_text(json.dumps(whole, indent=1))
        print(one_line(record), flush=True)
    print(f"done in {time.perf_counter() - began:.0f} s: {out / 'bench.json'}", flush=True)
    return 0


def run_case(case: Case, by_name: dict[str, Spec], cubins: dict[str, bytes], device: Any, method: Method,
             triton: bool) -> dict[str, Any]:
    from lab import peers

    if case.group == "matmul":
        return run_matmul_case(case, by_name, cubins, device, method, triton)
    if case.group == "fp8":
        return fp8_bench.fp8_case(matmul_shape(case), method, triton=triton)
    if case.group == "ops":
        return ops_bench.host_time() if case.ops is None else ops_bench.ops_case(case.ops, method, triton=triton)
    if case.group == "sweep":
        return peers.sweep_case(by_name[case.spec], cubins[case.spec], device, case.shape, SWEEP_METHOD)
    return peers.data_movement_case(by_name[case.spec], cubins[case.spec], device, case.shape, method, triton=triton)


def run_matmul_case(case: Case, by_name: dict[str, Spec], cubins: dict[str, bytes], device: Any, method: Method,
                    triton: bool) -> dict[str, Any]:
    if case.spec == matmul_bench.OPS:
        tmagen, name = matmul_bench.tmagen_ops(), matmul_bench.OPS
    elif case.spec:
        tmagen = matmul_bench.tmagen_spec(by_name[case.spec], cubins[case.spec], device)
        name = f"tmagen {case.spec} (spec)"
    else:
        tmagen, name = None, ""
    return matmul_bench.matmul_case(matmul_shape(case), method, tmagen, name, dtype=case.dtype, triton=triton)


def one_line(record: dict[str, Any]) -> str:
    """What a case measured, for the log."""
    if record["group"] == "ops":
        return ops_line(record)
    kind = record["shape_kind"]
    if record["group"] in ("matmul", "fp8"):
        kind += " " + "x".join(map(str, record["shape"])) + (f" ld {record['ld']}" if record.get("ld") else "")
    what = f"{record['group']:9s} {record['spec'] or 'matmul':26s} {kind:11s} {record['dtype']:8s}"
    figures = []
    for c in record["candidates"]:
        value = f"{c['tflops']:.0f} TFLOP/s" if c.get("tflops") else f"{c['gbps']:.0f}"
        figures.append(f"{c['name'].split(' (')[0]}={value}")
    failed = "".join(f"  FAILED {f['name']}: {f['why']}" for f in record["failed"])
    return f"{what} {record['seconds']:5.1f}s  " + ", ".join(figures) + failed


def ops_line(record: dict[str, Any]) -> str:
    """An ops case (or the host time) for the log."""
    what = f"ops       {record['shape_kind']:9s}"
    if "host_us" in record:
        return what + " host time per call, us: " + ", ".join(f"{n}={v:.1f}" for n, v in record["median_us"].items())
    shape = "x".join(map(str, record["shape"]))
    figures = [f"{c['name'].split(' (')[0]}={c['gbps']:.0f}" for c in record["candidates"]]
    failed = "".join(f"  FAILED {f['name']}: {f['why']}" for f in record["failed"])
    return (f"{what} {record.get('call', ''):26s} {shape:14s} {record['dtype']:10s} {record['seconds']:5.1f}s  "
            + ", ".join(figures) + failed)


if __name__ == "__main__":
    sys.exit(main())
