"""The generated matmul C API's host time per launch (issue 18, item 5; the target: "the C API's host
time per launch with repeated pointers <= 3 us").

Renders the matmul specs tmagen.ops uses (bf16: tmagen/ops_specs/bench_matmul_bfloat16.json with
a K-major B, as ``tmagen.ops.matmul(a, w.T)`` runs it; fp8: bench_matmul_fp8.json, e4m3), builds each
generated C API together with lab/capi_host_time.cu (pip nvcc, as the GPU tests build), and runs it.
For each shape the driver allocates A, B and C once and times, with std::chrono around a loop of
launches and nothing waiting for the GPU inside it (a sync between batches; best and median of
the batches):

* ``matmul_launch_repeat``: NAME_matmul_launch on the same pointers every time (the maps and the
  choice are cached per thread: the target's case);
* ``matmul_launch_alternate``: two sets of pointers in turn, so each operand's one-entry cache misses
  every time (the cost of three encodes; four where M has an edge, whose launch encodes A's
  8-row map too);
* ``matmul_launch_scaled_repeat``: NAME_matmul_launch_scaled with per-tensor scales, same pointers;
* the floors: ``empty_kernel`` (<<<>>> of an empty kernel), ``empty_with_matmul_parameters`` (the
  same, with the matmul kernels' 3 tensor maps, M, N, K, epilogue and split to copy) and
  ``cuLaunchKernel_empty`` (the driver's launch of the empty kernel);
* ``encode_a``: one NAME_encode_a into a caller's map (checks, driver entry point, driver encode),
  and its two driver calls alone: ``driver_lookup`` (cudaGetDriverEntryPointByVersion of
  cuTensorMapEncodeTiled) and ``driver_encode`` (cuTensorMapEncodeTiled on a 2-D map);

and the encodes and driver entry-point lookups per launch it counted (through a hook on the
generated code's driver lookups: see the .cu). ``choice`` times NAME_matmul_choice alone (the
dispatch's arithmetic) on seven shapes: no GPU needed.

    python -m lab.capi_host_time OUT.json                     # GPU: writes OUT.json, prints one line
    python -m lab.capi_host_time OUT.json --apis bf16 --shapes 64x64x64:200 --batches 10
    python -m lab.capi_host_time OUT.json --choice-only       # no GPU: matmul_choice's host time

Argument parsing, the result's shape and the summary are pure (tests/test_capi_host_time.py);
building and running need nvcc, timing a GPU.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tmagen.spec import Spec

DRIVER = Path(__file__).resolve().with_suffix(".cu")
TARGET_US = 3.0  # issue 18: host time per launch with repeated pointers
TIMED = ("empty_kernel", "empty_with_matmul_parameters", "cuLaunchKernel_empty", "matmul_launch_repeat",
         "matmul_launch_alternate", "matmul_launch_scaled_repeat", "encode_a", "driver_lookup", "driver_encode")
FLOORS = ("empty_kernel", "empty_with_matmul_parameters", "cuLaunchKernel_empty")


@dataclass(frozen=True)
class Shape:
    m: int
    n: int
    k: int
    iters: int  # launches per batch: few on large shapes, whose GPU work is long (the queue must not fill)

    @property
    def label(self) -> str:
        return f"{self.m}x{self.n}x{self.k}"


# A tiny product (host time alone), one of small M that splits K (the workspace's path), one large square.
DEFAULT_SHAPES = (Shape(64, 64, 64, 200), Shape(1, 4096, 4096, 20), Shape(4096, 4096, 4096, 20))
DEFAULT_BATCHES = 20


def _bf16_spec() -> Spec:
    from tmagen.ops_matmul import ops_spec

    return ops_spec("bfloat16", "bfloat16", "k")


def _fp8_spec() -> Spec:
    from tmagen.ops_matmul_fp8 import fp8_spec

    return fp8_spec("float8_e4m3", "float8_e4m3", "bfloat16", False)


APIS: dict[str, Callable[[], Spec]] = {"bf16": _bf16_spec, "fp8": _fp8_spec}


@dataclass(frozen=True)
class Options:
    out: Path
    apis: tuple[str, ...] = tuple(APIS)
    shapes: tuple[Shape, ...] = DEFAULT_SHAPES
    batches: int = DEFAULT_BATCHES
    choice_only: bool = False


class UsageError(ValueError):
    pass


_SHAPE = re.compile(r"^(\d+)x(\d+)x(\d+)(?::(\d+))?$")


def parse_shape(text: str) -> Shape:
    """"MxNxK" or "MxNxK:ITERS" (launches per batch; 200 by default)."""
    m = _SHAPE.match(text.strip())
    if not m:
        raise UsageError(f"shape {text!r}: write MxNxK or MxNxK:ITERS (e.g. 64x64x64:200)")
    m_, n, k = (int(g) for g in m.groups()[:3])
    iters = int(m.group(4) or 200)
    if min(m_, n, k) < 1 or iters < 1:
        raise UsageError(f"shape {text!r}: M, N, K and ITERS are 1 or more")
    if n % 8 or k % 16:
        raise UsageError(f"shape {text!r}: N a multiple of 8, K of 16 (rows of whole 16 bytes in every API)")
    return Shape(m_, n, k, iters)


def parse_args(argv: Sequence[str]) -> Options:
    args = list(argv)
    out: Path | None = None
    apis: tuple[str, ...] = tuple(APIS)
    shapes: tuple[Shape, ...] = DEFAULT_SHAPES
    batches = DEFAULT_BATCHES
    choice_only = False
    while args:
        a = args.pop(0)
        if a in ("--apis", "--shapes", "--batches"):
            if not args:
                raise UsageError(f"{a} needs a value")
            value = args.pop(0)
            if a == "--apis":
                apis = tuple(v for v in value.split(",") if v)
                unknown = [v for v in apis if v not in APIS]
                if unknown or not apis:
                    raise UsageError(f"--apis {value}: choose among {', '.join(APIS)}")
            elif a == "--shapes":
                shapes = tuple(parse_shape(v) for v in value.split(",") if v)
                if not shapes:
                    raise UsageError("--shapes: at least one MxNxK")
            else:
                if not value.isdigit() or int(value) < 1:
                    raise UsageError(f"--batches {value}: a whole number, 1 or more")
                batches = int(value)
        elif a == "--choice-only":
            choice_only = True
        elif a.startswith("-"):
            raise UsageError(f"unknown option {a}")
        elif out is None:
            out = Path(a)
        else:
            raise UsageError(f"one output file, not {out} and {a}")
    if out is None:
        raise UsageError("usage: python -m lab.capi_host_time OUT.json [--apis bf16,fp8] [--shapes MxNxK[:ITERS],...] "
                         "[--batches N] [--choice-only]")
    return Options(out, apis, shapes, batches, choice_only)


# ----------------------------------------------------------------------------- building and running
def driver_command(nvcc: Path, lib_dir: Path, folder: Path, name: str, exe: Path) -> list[str]:
    """The nvcc line building the driver around the generated ``folder`` of spec ``name``."""
    from tmagen.limits import TARGETS

    return [str(nvcc), "-std=c++17", "-O3", f"-gencode={TARGETS['sm_90a'].gencode}", "-Xcompiler", "-pthread",
            f"-I{folder}", f"-DTMAGEN_API={name}", f'-DTMAGEN_SOURCE="{name}.cu"', f"-L{lib_dir}", "-o", str(exe),
            str(folder / DRIVER.name)]


def build_driver(spec: Spec) -> Path:
    """The driver for ``spec``'s generated C API, built once per sources and compiler (in the
    tmagen compile cache)."""
    from tmagen import toolchain
    from tmagen.plan import resolve
    from tmagen.render import render

    tc = toolchain.find_toolchain()
    files = render(resolve(spec), f"{spec.name}.json")
    files[DRIVER.name] = DRIVER.read_text()
    key = hashlib.sha256(json.dumps({"files": files, "nvcc": tc.version}, sort_keys=True).encode()).hexdigest()[:24]
    folder = toolchain.cache_root() / f"capi_host_time-{spec.name}-{key}"
    exe = folder / "capi_host_time"
    if exe.is_file():
        return exe
    folder.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix="capi_host_time-", dir=folder.parent))
    try:
        for rel, text in files.items():
            (staging / rel).write_text(text, encoding="utf-8")
        cmd = driver_command(tc.nvcc, tc.root / "lib", staging, spec.name, staging / exe.name)
        run = subprocess.run(cmd, capture_output=True, text=True)
        if run.returncode != 0:
            raise RuntimeError(f"building the driver for {spec.name} failed:\n{' '.join(cmd)}\n{run.stderr[-4000:]}")
        os.replace(staging, folder)
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)
    return exe


def run_driver(exe: Path, *args: object, timeout: float = 600) -> dict[str, Any]:
    run = subprocess.run([str(exe), *(str(a) for a in args)], capture_output=True, text=True, timeout=timeout)
    if run.returncode != 0:
        raise RuntimeError(f"{exe.name} {' '.join(str(a) for a in args)} failed ({run.returncode}): "
                           f"{(run.stderr or run.stdout).strip()[-2000:]}")
    data: dict[str, Any] = json.loads(run.stdout)
    return data


def measure(options: Options) -> dict[str, Any]:
    result: dict[str, Any] = {"tool": "lab.capi_host_time", "target_us": TARGET_US, "batches": options.batches,
                              "apis": {}}
    for api in options.apis:
        spec = APIS[api]()
        exe = build_driver(spec)
        entry: dict[str, Any] = {"spec": spec.name, "choice": run_driver(exe, "choice", 2000, options.batches)}
        if not options.choice_only:
            entry["runs"] = [run_driver(exe, "time", s.m, s.n, s.k, s.iters, options.batches) for s in options.shapes]
        result["apis"][api] = entry
    return result


# ----------------------------------------------------------------------------- the result
def check_result(result: dict[str, Any]) -> list[str]:
    """What is missing or malformed in a result (the JSON's shape, which the summary reads); [] if none."""
    problems = [f"no {k}" for k in ("tool", "target_us", "batches", "apis") if k not in result]
    for api, entry in result.get("apis", {}).items():
        for row in entry.get("choice", {}).get("choice_us", None) or [None]:
            if not isinstance(row, dict) or not {"shape", "best_us", "kernel", "splits"} <= row.keys():
                problems.append(f"{api}: a choice row without shape, kernel, splits and best_us: {row!r}")
        for run in entry.get("runs", []):
            where = f"{api} {run.get('shape')}"
            if len(run.get("shape", ())) != 3:
                problems.append(f"{where}: no shape [M, N, K]")
            for key in TIMED:
                timing = run.get("us", {}).get(key)
                if not isinstance(timing, dict) or not all(isinstance(timing.get(t), (int, float))
                                                           for t in ("best_us", "median_us")):
                    problems.append(f"{where}: no best_us and median_us for {key}")
            for key in ("encodes_per_launch", "lookups_per_launch"):
                if set(run.get(key, {})) != {"repeat", "alternate"}:
                    problems.append(f"{where}: {key} needs repeat and alternate")
    return problems


def _label(shape: Sequence[int]) -> str:
    return "x".join(str(v) for v in shape)


def summary(result: dict[str, Any]) -> str:
    """One line: per API the repeat launch's host time (best batch) over the shapes, the alternating
    one and its encodes, then the floors, then the target's verdict."""
    parts: list[str] = []
    worst: tuple[float, str] | None = None
    floors = None
    for api, entry in result["apis"].items():
        runs = entry.get("runs", [])
        if not runs:
            choice = entry["choice"]["choice_us"]
            slowest = max(choice, key=lambda r: r["best_us"])
            parts.append(f"{api}: matmul_choice {min(r['best_us'] for r in choice):.2f} to {slowest['best_us']:.2f} us "
                         f"({_label(slowest['shape'])})")
            continue
        repeat = [(r["us"]["matmul_launch_repeat"]["best_us"], _label(r["shape"])) for r in runs]
        alternate = [r["us"]["matmul_launch_alternate"]["best_us"] for r in runs]
        encodes = max(r["encodes_per_launch"]["alternate"] for r in runs)
        repeat_encodes = max(r["encodes_per_launch"]["repeat"] for r in runs)
        scaled = max(r["us"]["matmul_launch_scaled_repeat"]["best_us"] for r in runs)
        text = ", ".join(f"{us:.2f} ({label})" for us, label in repeat)
        parts.append(f"{api}: repeat {text} us, {repeat_encodes:g} encodes; scaled <= {scaled:.2f} us; alternate "
                     f"{min(alternate):.2f} to {max(alternate):.2f} us, {encodes:g} encodes")
        top = max(repeat)
        worst = top if worst is None or top > worst else worst
        if floors is None:
            floors = runs[0]["us"]
    line = "C API host time per launch (best batch): " + "; ".join(parts)
    if floors is not None:
        line += (f"; floors <<<>>> {floors['empty_kernel']['best_us']:.2f} us, with the matmul's parameters "
                 f"{floors['empty_with_matmul_parameters']['best_us']:.2f} us, cuLaunchKernel "
                 f"{floors['cuLaunchKernel_empty']['best_us']:.2f} us")
    if worst is not None:
        verdict = "met" if worst[0] <= result["target_us"] else "missed"
        line += f"; target <= {result['target_us']:g} us on repeats: {verdict} (worst {worst[0]:.2f} us, {worst[1]})"
    return line


def main(argv: Sequence[str]) -> int:
    try:
        options = parse_args(argv)
    except UsageError as exc:
        print(exc, file=sys.stderr)
        return 2
    result = measure(options)
    problems = check_result(result)
    if problems:
        print("the driver's output is malformed:\n" + "\n".join(problems), file=sys.stderr)
        return 1
    options.out.parent.mkdir(parents=True, exist_ok=True)
    options.out.write_text(json.dumps(result, indent=2) + "\n")
    print(summary(result))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
