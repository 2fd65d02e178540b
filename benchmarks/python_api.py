"""Figures of the Python path (issue 12), on a GPU with PyTorch:

- first call: NVRTC compile + load + launch, in a new process with an empty kernel cache;
- cached call: the first call of a new process whose disk cache has the cubin;
- host overhead of one call on a tiny tensor, tmagen.ops beside PyTorch's own
  ``.transpose(-2, -1).contiguous()`` and ``.clone()`` (the goal: no larger), and of a 64 x 64 x 64
  bfloat16 ``tmagen.ops.matmul`` beside ``torch.matmul`` (issue 18's goal: within 3 us);
- bandwidth on 1 GiB tensors, tmagen.ops beside the C API path (`tmagen.bench.kernel_timing`: the
  same tuned spec compiled by nvcc, launched through cuda-bindings) and beside the NVRTC cubin
  launched the same way.

    python3 benchmarks/python_api.py OUTDIR          # writes OUTDIR/python_api.json, prints a summary
    python3 benchmarks/python_api.py --host-only     # no GPU: tmagen's own Python cost per call, the
                                                     # driver calls stubbed out
"""

from __future__ import annotations

import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

FIRST_CALL = r"""
import json, sys, time
t0 = time.perf_counter()
import torch
torch.zeros(1, device="cuda"); torch.cuda.synchronize()
t1 = time.perf_counter()
import tmagen.ops
t2 = time.perf_counter()
x = torch.randn(1024, 1024, device="cuda")
torch.cuda.synchronize()
t3 = time.perf_counter()
y = tmagen.ops.transpose(x); torch.cuda.synchronize()
t4 = time.perf_counter()
y = tmagen.ops.transpose(x); torch.cuda.synchronize()
t5 = time.perf_counter()
assert torch.equal(y, x.t().contiguous())
k = tmagen.ops.kernel("transpose", "float32", 2)
print(json.dumps({"torch_init_s": t1 - t0, "import_tmagen_ops_s": t2 - t1, "first_call_s": t4 - t3,
                  "second_call_s": t5 - t4, "compiler": __import__("tmagen.nvrtc").nvrtc.bind().name}))
"""


def first_calls(cache: str) -> dict[str, Any]:
    env = {**os.environ, "TMAGEN_CACHE": cache, "PYTHONPATH": os.pathsep.join(
        p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p)}
    run = subprocess.run([sys.executable, "-c", FIRST_CALL], capture_output=True, text=True, env=env, check=True)
    return json.loads(run.stdout.strip().splitlines()[-1])


def per_call_us(fn: Callable[[], Any], sync: Callable[[], None], calls: int = 2000, repeats: int = 7) -> float:
    """Median over ``repeats`` of the wall time per call of ``calls`` back-to-back calls (launches
    queue; nothing waits for the GPU inside the loop)."""
    for _ in range(50):
        fn()
    sync()
    times = []
    for _ in range(repeats):
        sync()
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        t1 = time.perf_counter()
        sync()
        times.append((t1 - t0) / calls * 1e6)
    return statistics.median(times)


def host_overhead() -> dict[str, float]:
    import torch

    import tmagen.ops

    sync = torch.cuda.synchronize
    out: dict[str, float] = {}
    for dtype, shape in ((torch.float32, (16, 16)), (torch.bfloat16, (32, 64))):
        x = torch.randn(shape, device="cuda").to(dtype)
        name = str(dtype).removeprefix("torch.")
        preallocated = torch.empty(shape[::-1], device="cuda", dtype=dtype)
        # each lambda is timed, and dropped, in this iteration: x and preallocated bound as defaults all the same
        out[f"torch .transpose(-2,-1).contiguous() {name} {shape}"] = per_call_us(
            lambda x=x: x.transpose(-2, -1).contiguous(), sync)
        out[f"tmagen.ops.transpose {name} {shape}"] = per_call_us(lambda x=x: tmagen.ops.transpose(x), sync)
        out[f"tmagen.ops.transpose out= {name} {shape}"] = per_call_us(
            lambda x=x, p=preallocated: tmagen.ops.transpose(x, out=p), sync)
        out[f"torch.ops.tmagen.transpose {name} {shape}"] = per_call_us(
            lambda x=x: torch.ops.tmagen.transpose(x), sync)
        out[f"torch .clone() {name} {shape}"] = per_call_us(lambda x=x: x.clone(), sync)
        out[f"tmagen.ops.copy {name} {shape}"] = per_call_us(lambda x=x: tmagen.ops.copy(x), sync)
    # issue 18's target: tmagen.ops.matmul's host time within 3 us of torch.matmul's, on a product small
    # enough that the host decides (b given as w.t(), a linear layer's weight, and as a contiguous [K, N])
    a = torch.randn(64, 64, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(64, 64, device="cuda", dtype=torch.bfloat16)
    for layout, b in (("b = w.t()", w.t()), ("b contiguous", w.t().contiguous())):
        out[f"torch.matmul bfloat16 64x64x64, {layout}"] = per_call_us(lambda b=b: torch.matmul(a, b), sync)
        out[f"tmagen.ops.matmul bfloat16 64x64x64, {layout}"] = per_call_us(lambda b=b: tmagen.ops.matmul(a, b), sync)
        out[f"torch.ops.tmagen.matmul bfloat16 64x64x64, {layout}"] = per_call_us(
            lambda b=b: torch.ops.tmagen.matmul(a, b), sync)
    return out


def bandwidth() -> list[dict[str, Any]]:
    import torch

    import tmagen.ops
    from tmagen import bench, nvrtc, runtime, toolchain
    from tmagen.plan import resolve
    from tmagen.render import render

    device = runtime.Device.open()
    rows = []
    cases = [("transpose", torch.float32, (16384, 16384)), ("transpose", torch.bfloat16, (16384, 32768)),
             ("transpose", torch.uint8, (16384, 65536)), ("copy", torch.float32, (16384, 16384))]
    for kind, dtype, shape in cases:
        name = str(dtype).removeprefix("torch.")
        x = torch.empty(shape, device="cuda", dtype=dtype)
        x.view(torch.uint8).random_(0, 256)  # random bits, NaNs included: compared as bytes below
        nbytes = x.numel() * x.element_size()
        fn = tmagen.ops.transpose if kind == "transpose" else tmagen.ops.copy
        out = fn(x)  # warm
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        times = []
        for _ in range(20):
            start.record()
            fn(x, out=out)
            stop.record()
            stop.synchronize()
            times.append(start.elapsed_time(stop))
        ops_ms = statistics.median(times)
        reference = x.transpose(-2, -1).contiguous() if kind == "transpose" else x
        assert torch.equal(out.view(torch.uint8), reference.view(torch.uint8)), (kind, name)
        del out, reference
        x = None  # noqa: F841
        torch.cuda.empty_cache()
        timed_shape = shape if kind == "transpose" else tmagen.ops.contiguous_layout(math.prod(shape), 4)
        spec = tmagen.ops.kernel(kind, name, len(timed_shape)).spec
        nvcc_cubin = toolchain.compile_folder(resolve(spec), render(resolve(spec), f"{spec.name}.json"),
                                              cubin_only=True).cubin.read_bytes()
        c_api = bench.kernel_timing(resolve(spec), nvcc_cubin, device, timed_shape, runs=20)
        plan = resolve(spec)
        nvrtc_cubin = bench.kernel_timing(plan, nvrtc.compile_plan(plan).data, device, timed_shape, runs=20)
        row = {"kind": kind, "dtype": name, "shape": list(shape), "kernel_shape": list(timed_shape), "spec": spec.name,
               "tmagen.ops_gbps": 2 * nbytes / (ops_ms * 1e-3) / 1e9, "c_api_nvcc_gbps": c_api.gbps,
               "nvrtc_cubin_gbps": nvrtc_cubin.gbps}
        row["ops_over_c_api"] = row["tmagen.ops_gbps"] / row["c_api_nvcc_gbps"]
        rows.append(row)
        print(f"{kind:9s} {name:9s} {str(shape):16s} tmagen.ops {row['tmagen.ops_gbps']:6.0f} GB/s   C API (nvcc) "
              f"{c_api.gbps:6.0f}   NVRTC cubin {nvrtc_cubin.gbps:6.0f}   ratio {row['ops_over_c_api']:.3f}",
              flush=True)
        torch.cuda.empty_cache()
    return rows


def host_only() -> dict[str, float]:
    """tmagen's own Python cost per call with the driver stubbed out (no GPU needed): a cached launch
    of a loaded kernel on arrays already read, and reading a PyTorch tensor."""
    from tmagen import kernels, ops, runtime
    from tmagen.arrays import ArrayView, describe

    k = ops.kernel("transpose", "float32", 2)
    # every kernel loads as a stub: tmagen.ops below may pick another tile of the family than k's
    def load_stub(self: kernels.Kernel, device: int, stream: int | None) -> kernels._Loaded:
        loaded = kernels._Loaded(context=1, functions=(0,) * len(self.view.family), module=None)  # type: ignore[arg-type]
        self._loaded[device] = loaded
        return loaded

    kernels.Kernel._load = load_stub  # type: ignore[method-assign]
    runtime.current_context = lambda: 1
    kernels.launch_function = lambda: (lambda *args: 0)
    runtime.launch_dependent = lambda *args: 0
    kernels.multiprocessors = lambda device: 132  # type: ignore[assignment]
    runtime._FUNCTIONS["cuTensorMapEncodeTiled"] = lambda *args: 0
    runtime._PRIMARY[0] = 1
    src = ArrayView(None, "cuda_array_interface", 0x7F0000000000, (16, 16), (16, 1), 4, "float32", "float32", 0,
                    "cuda:0")
    dst = ArrayView(None, "cuda_array_interface", 0x7F0000100000, (16, 16), (16, 1), 4, "float32", "float32", 0,
                    "cuda:0")
    figures = {"Kernel.launch, cached (driver stubbed)": per_call_us(lambda: k.launch([src], dst, stream=0),
                                                                       lambda: None, 20000)}
    try:
        import torch
    except ImportError:
        return figures
    from tmagen import arrays

    t = torch.zeros(16, 16)
    figures["arrays.describe(torch tensor)"] = per_call_us(lambda: describe(t), lambda: None, 20000)
    figures["torch.empty (CPU)"] = per_call_us(lambda: torch.empty((16, 16)), lambda: None, 20000)
    # the whole of tmagen.ops.transpose(x) on a CPU tensor read as if it were on the GPU
    read = arrays._read_torch

    def on_gpu(x: Any, name: str) -> Any:
        view = read(x, name)
        view.device = 0
        return view

    arrays._READERS[torch.Tensor] = on_gpu
    kernels.current_stream = lambda view: 0  # type: ignore[assignment]
    ops.transpose(t)
    figures["tmagen.ops.transpose(x), whole Python path (driver stubbed, torch.empty on CPU)"] = per_call_us(
        lambda: ops.transpose(t), lambda: None, 20000)
    figures["torch x.transpose(-2, -1).contiguous() on the CPU, for scale"] = per_call_us(
        lambda: t.transpose(-2, -1).contiguous(), lambda: None, 20000)
    return figures


def main() -> None:
    if sys.argv[1:] == ["--host-only"]:
        for name, us in host_only().items():
            print(f"{us:8.2f} us  {name}")
        return
    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="tmagen-cache-") as cache:
        results["new_process_empty_cache"] = first_calls(cache)
        results["new_process_cached"] = first_calls(cache)
    for what, r in results.items():
        print(f"{what}: first call {r['first_call_s'] * 1e3:.1f} ms, second {r['second_call_s'] * 1e3:.2f} ms "
              f"({r['compiler']}; import tmagen.ops {r['import_tmagen_ops_s'] * 1e3:.0f} ms)", flush=True)
    results["host_overhead_us"] = host_overhead()
    for name, us in results["host_overhead_us"].items():
        print(f"{us:8.2f} us/call  {name}", flush=True)
    results["host_only_us"] = host_only_in_subprocess()
    results["bandwidth"] = bandwidth()
    (out / "python_api.json").write_text(json.dumps(results, indent=1))


def host_only_in_subprocess() -> dict[str, float]:
    run = subprocess.run([sys.executable, __file__, "--host-only"], capture_output=True, text=True)
    figures = {}
    for line in run.stdout.splitlines():
        value, _, name = line.strip().partition(" us  ")
        if name:
            figures[name] = float(value)
    return figures


if __name__ == "__main__":
    main()
