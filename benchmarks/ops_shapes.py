"""tmagen.ops off the benchmark grid (issue 19): copies, transposes and permutes of 1, 2, 4 and
8-byte elements, 2-D, batched and permuted; square, ragged, rows not whole 16 bytes, small (16 KiB
to 4 MiB) and large (1 GiB and more); each beside cudaMemcpyAsync of the same bytes, PyTorch, CuPy
and the Triton kernels a Triton user would write (lab/triton_peers.py: pointer tiles with tl.trans,
batched on a 3-D grid, a permute gather, a copy; each autotuned), every result checked bit for bit
against PyTorch's, the candidates interleaved round by round with CUDA events. Host time per call
on 64 x 64 too. Needs PyTorch and a GPU (CuPy and Triton where installed).

    python3 benchmarks/ops_shapes.py OUT.json [--quick] [--only small,large]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

DT = {1: "uint8", 2: "bfloat16", 4: "float32", 8: "float64"}
# (group, op, shape, element bytes, dims)
CASES: list[tuple[str, str, tuple[int, ...], int, tuple[int, ...]]] = [
    *[("small", "transpose", (n, n), es, ()) for n, es in ((64, 4), (256, 4), (512, 2), (1024, 1), (1024, 4))],
    ("small", "copy", (1024, 1024), 4, ()), ("small", "permute", (2, 64, 32, 32), 2, (0, 2, 3, 1)),
    ("odd_rows", "transpose", (777, 1032), 2, ()), ("odd_rows", "transpose", (16385, 8), 2, ()),
    ("odd_rows", "transpose", (1000, 1000), 4, ()), ("odd_rows", "transpose", (4099, 4101), 1, ()),
    ("odd_rows", "copy", (8192, 1001), 4, ()),
    ("ragged", "transpose", (12000, 9000), 4, ()), ("ragged", "transpose", (16352, 16352), 4, ()),
    ("batched", "transpose", (8, 4096, 4096), 2, ()), ("batched", "transpose", (64, 1024, 1024), 4, ()),
    ("permute", "permute", (32, 256, 64, 64), 2, (0, 2, 3, 1)),  # NCHW -> NHWC
    ("permute", "permute", (32, 64, 64, 256), 2, (0, 3, 1, 2)),  # NHWC -> NCHW
    ("permute", "permute", (16, 2048, 32, 128), 2, (0, 2, 1, 3)),  # [B,S,H,D] -> [B,H,S,D]
    ("permute", "permute", (64, 512, 512, 8), 1, (0, 3, 1, 2)),
    ("large", "transpose", (32768, 32768), 1, ()), ("large", "transpose", (16384, 32768), 2, ()),
    ("large", "transpose", (16384, 16384), 4, ()), ("large", "transpose", (8192, 16384), 8, ()),
    ("large", "copy", (16384, 16384), 4, ()), ("large", "copy", (16384, 8192), 8, ()),
]


def _tensor(torch: Any, shape: tuple[int, ...], es: int) -> Any:
    n = 1
    for s in shape:
        n *= s
    raw = torch.randint(0, 256, (n * es,), dtype=torch.uint8, device="cuda")
    return raw.view(getattr(torch, DT[es])).reshape(shape)


def candidates(torch: Any, op: str, x: Any, dims: tuple[int, ...]) -> dict[str, Any]:
    import tmagen.ops as ops

    want_view = x.transpose(-2, -1) if op == "transpose" else x.permute(dims) if op == "permute" else x
    out = torch.empty(want_view.shape, dtype=x.dtype, device="cuda")
    flat_in, flat_out = x.reshape(-1), out.reshape(-1)
    run: dict[str, Any] = {
        "tmagen": (lambda: ops.transpose(x, out=out)) if op == "transpose" else
        (lambda: ops.permute(x, dims, out=out)) if op == "permute" else (lambda: ops.copy(x, out=out)),
        "memcpy": lambda: flat_out.copy_(flat_in),  # cudaMemcpyAsync of the same bytes: the ceiling
        "torch": lambda: out.copy_(want_view),
    }
    try:
        import cupy as cp

        # CuPy has no bfloat16: its bits as int16 (a uint8 view would double the last dimension)
        cx = cp.from_dlpack(x.view(torch.int16) if x.dtype == torch.bfloat16 else x)
        cview = cx.swapaxes(-1, -2) if op == "transpose" else cx.transpose(dims) if op == "permute" else cx
        # a copy must copy: ascontiguousarray of a contiguous array returns the array itself
        run["cupy"] = (lambda: cview.copy()) if op == "copy" else (lambda: cp.ascontiguousarray(cview))
    except Exception:  # noqa: BLE001 - no CuPy, or a dtype it lacks
        pass
    try:
        from lab import triton_peers

        if op == "transpose":
            run["triton"] = lambda: triton_peers.transpose(x, out)
        elif op == "permute" and x.dim() <= 4:
            run["triton"] = lambda: triton_peers.permute(x, list(dims), out)
        else:
            run["triton"] = lambda: triton_peers.copy(x, out)
    except Exception:  # noqa: BLE001 - no Triton
        pass
    return {"out": out, "want": want_view.contiguous(), "run": run}


def time_case(torch: Any, c: dict[str, Any], rounds: int) -> dict[str, Any]:
    results: dict[str, Any] = {}
    for name, fn in c["run"].items():
        fn()
        torch.cuda.synchronize()
        if name in ("tmagen", "triton", "torch"):
            results[f"{name}_correct"] = bool(torch.equal(c["out"].view(torch.uint8), c["want"].view(torch.uint8)))
            c["out"].zero_()
    times: dict[str, list[float]] = {n: [] for n in c["run"]}
    for _ in range(rounds):  # interleaved
        # The round is queued whole behind a sleep kernel, so that no launch waits for Python: the
        # events time the GPU's work, not the host's (without it a 64 x 64 transpose timed ~20 us
        # of launch overhead; host time is measured apart, in host_time).
        torch.cuda._sleep(200_000 * len(c["run"]))
        marks = []
        for name, fn in c["run"].items():
            start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(3):
                fn()
            stop.record()
            marks.append((name, start, stop))
        torch.cuda.synchronize()
        for name, start, stop in marks:
            times[name].append(start.elapsed_time(stop) / 3)
    for name, t in times.items():
        results[f"{name}_ms"] = statistics.median(t)
    return results


def host_time(torch: Any) -> dict[str, float]:
    import tmagen.ops as ops

    x = torch.randn(64, 64, device="cuda")
    out: dict[str, float] = {}
    for name, fn in (("torch", lambda: x.transpose(-2, -1).contiguous()), ("tmagen", lambda: ops.transpose(x))):
        for _ in range(100):
            fn()
        torch.cuda.synchronize()
        best = float("inf")
        for _ in range(7):
            start = time.perf_counter()
            for _ in range(2000):
                fn()
            best = min(best, (time.perf_counter() - start) / 2000 * 1e6)
            torch.cuda.synchronize()
        out[name] = best
    return out


def main(argv: list[str] | None = None) -> int:
    import torch

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("out", type=Path)
    p.add_argument("--quick", action="store_true")
    p.add_argument("--only", default="")
    args = p.parse_args(argv)
    only = set(filter(None, args.only.split(",")))
    records: list[dict[str, Any]] = []
    report: dict[str, Any] = {"device": torch.cuda.get_device_name(), "host_time_us_64x64": host_time(torch),
                              "cases": records}
    for group, op, shape, es, dims in CASES:
        if only and group not in only:
            continue
        x = _tensor(torch, shape, es)
        c = candidates(torch, op, x, dims)
        r = {"group": group, "op": op, "shape": list(shape), "element_bytes": es, "dims": list(dims),
             "bytes": x.numel() * es, **time_case(torch, c, 5 if args.quick else 20)}
        peers = [r[f"{n}_ms"] for n in ("torch", "cupy", "triton") if f"{n}_ms" in r]
        r["vs_best_peer"] = min(peers) / r["tmagen_ms"] if peers else None
        r["vs_memcpy"] = r["memcpy_ms"] / r["tmagen_ms"]
        records.append(r)
        print(f"{group:9} {op:9} {shape} e{es}: tmagen {r['tmagen_ms']:.4f} ms, x{r['vs_best_peer']:.3f} of the best "
              f"peer, {r['vs_memcpy']:.3f} of memcpy", flush=True)
        args.out.write_text(json.dumps(report, indent=2) + "\n")
        del x, c
        torch.cuda.empty_cache()
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
