"""Timing generated kernels on the GPU against the limit of the same GPU in the same run.

Bandwidth counts bytes read plus bytes written. Each figure is the median of ``runs`` timed
launches (CUDA events) after warm-up, on random data in tensors of 1 GiB and more, several
times the L2. The limit is ``cuMemcpyDtoDAsync`` of the same bytes; PyTorch's ``clone()`` and
``.t().contiguous()`` are timed too where PyTorch is installed.
"""

from __future__ import annotations

import statistics
from dataclasses import asdict, dataclass
from typing import Any, Callable, Sequence

import numpy as np

from tmagen import runtime
from tmagen.launch import kernel_views, launch_arguments
from tmagen.spec import CopyKernel, Spec, TransposeKernel

GIB = 1 << 30


@dataclass(frozen=True)
class Timing:
    name: str  # what was timed
    shape: tuple[int, ...]
    dtype: str
    bytes_moved: int  # read + written
    median_ms: float
    spread_ms: float  # max - min over the runs

    @property
    def gbps(self) -> float:
        return self.bytes_moved / (self.median_ms * 1e-3) / 1e9

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "gbps": self.gbps}


def median_ms(launch: Callable[[], None], runs: int = 20, warmup: int = 3) -> tuple[float, float]:
    for _ in range(warmup):
        launch()
    times = []
    for _ in range(runs):
        with runtime.Timer() as t:
            launch()
        times.append(t.ms)
    return statistics.median(times), max(times) - min(times)


def memcpy_timing(nbytes: int, runs: int = 20) -> Timing:
    """cudaMemcpyAsync device to device: the limit every ratio is taken to."""
    drv = runtime._driver()
    with runtime.Buffer(nbytes) as a, runtime.Buffer(nbytes) as b:
        a.fill(0x3C)

        def launch() -> None:
            runtime.check(drv.cuMemcpyDtoDAsync(b.ptr, a.ptr, nbytes, 0), "cuMemcpyDtoDAsync")

        ms, spread = median_ms(launch, runs)
    return Timing("cudaMemcpyAsync D2D", (nbytes,), "bytes", 2 * nbytes, ms, spread)


def kernel_timing(spec: Spec, cubin: bytes, device: runtime.Device, shape: Sequence[int],
                  runs: int = 20, seed: int = 0) -> Timing:
    """The spec's copy or transpose kernel on a random tensor of ``shape``."""
    k = spec.kernel
    if not isinstance(k, (CopyKernel, TransposeKernel)):
        raise ValueError(f"bench times copy and transpose kernels, not {k.kind}")
    t = spec.tensors[0]
    shape = list(shape)
    nbytes = int(np.prod(shape)) * t.dt.nbytes
    view = kernel_views(spec)[0]
    module = runtime.Module(cubin)
    try:
        kernel = module.function(view.symbol, view.smem_bytes)
        rng = np.random.default_rng(seed)
        with runtime.Buffer(nbytes) as src, runtime.Buffer(nbytes) as dst:
            src.upload(rng.integers(0, 256, size=nbytes, dtype=np.uint8))
            grid, params = launch_arguments(spec, view, device, src.ptr, dst.ptr, shape)
            ms, spread = median_ms(lambda: kernel.launch(grid, view.threads, params), runs)
    finally:
        module.unload()
    return Timing(view.symbol, tuple(shape), t.dtype, 2 * nbytes, ms, spread)


def torch_timings(shape: Sequence[int], dtype: str, runs: int = 20) -> list[Timing]:
    """PyTorch's clone() and .t().contiguous() (last two dimensions) on the same GPU, if installed."""
    try:
        import torch
    except ImportError:
        return []
    torch_dtype = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16,
                   "uint8": torch.uint8, "float64": torch.float64, "int32": torch.int32,
                   "int64": torch.int64, "uint16": torch.int16, "uint32": torch.int32, "uint64": torch.int64}[dtype]
    x = torch.randint(0, 100, tuple(shape), device="cuda").to(torch_dtype)
    nbytes = x.numel() * x.element_size()
    # PyTorch launches on the legacy default stream, which runtime.Timer's events bracket.
    cases = [("torch clone()", x.clone)]
    if len(shape) >= 2:
        cases.append(("torch .transpose(-2,-1).contiguous()", x.transpose(-2, -1).contiguous))
    out = [Timing(name, tuple(shape), dtype, 2 * nbytes, *median_ms(fn, runs)) for name, fn in cases]
    cases.clear()
    x = None  # noqa: F841 - the tensor goes before the cache is emptied
    torch.cuda.empty_cache()
    return out


# ----------------------------------------------------------------------------- the report
TARGETS = {  # kind, dtype -> the ratio to cudaMemcpy the performance issue asks for
    ("copy", None): 0.95, ("transpose", "float32"): 0.92, ("transpose", "bfloat16"): 0.90,
    ("transpose", "float16"): 0.90, ("transpose", "uint8"): 0.85,
}


def _target(kind: str, dtype: str) -> float | None:
    return TARGETS.get((kind, dtype), TARGETS.get((kind, None)))


def reference_gbps(data: dict[str, Any]) -> tuple[float, float, float]:
    """The median of every 1 GiB cudaMemcpyAsync measured in the run (at the start and beside each
    kernel), with the lowest and highest: a single memcpy figure was seen 10% off the others."""
    values = sorted({r["memcpy_gbps"] for r in data["records"] if "size_mib" not in r})
    return statistics.median(values), values[0], values[-1]


def markdown_report(data: dict[str, Any], plot_file: str = "benchmarks/bandwidth.svg") -> str:
    recs = [dict(r) for r in data["records"]]
    ref, low, high = reference_gbps(data)
    for r in recs:
        if "size_mib" not in r:
            r["ratio"] = r["gbps"] / ref
    lines = [
        "# Benchmarks",
        "",
        "<!-- Written by `tmagen bench --report` from the JSON that benchmarks/run.py measured: do not edit. -->",
        "",
        f"GPU: {data['gpu']}, driver {data['driver']}, measured {data['date']}; each figure is the median of "
        f"{data['runs']} timed launches (CUDA events) after warm-up, on random data in 1 GiB tensors (several times "
        "the L2). Bandwidth counts bytes read plus bytes written; ratios are to `cudaMemcpyAsync` device to device "
        f"of the same bytes on the same GPU in the same run: the median of the {data['runs']}-run medians measured at "
        f"the start and beside each kernel, {ref:.0f} GB/s (they ranged from {low:.0f} to {high:.0f}). Differences "
        "of 1% between runs are noise.",
        "",
        "| kernel | spec | dtype | shape | GB/s | ratio to memcpy | target | |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in recs:
        if r["kind"] not in ("copy", "transpose"):
            continue
        target = _target(r["kind"], r["dtype"]) if r.get("shape_kind") in (None, "full", "square") else None
        met = "" if target is None else ("met" if r["ratio"] >= target else "**missed**")
        label = r["kind"] + (f" ({r['shape_kind']})" if r.get("shape_kind") not in (None, "full") else "")
        lines.append(f"| {label} | `{r['spec']}` | {r['dtype']} | {'x'.join(map(str, r['shape']))} | "
                     f"{r['gbps']:.0f} | {r['ratio']:.3f} | {target if target else ''} | {met} |")
    base = {r["spec"]: r["ratio"] for r in recs if r.get("shape_kind") in ("square", "full")}
    for kind, what in (("ragged", "extents no multiple of the tile, rows still multiples of 128 bytes"),
                       ("odd strides", "rows 16-byte but not 128-byte multiples")):
        other = {r["spec"]: r["ratio"] for r in recs if r.get("shape_kind") == kind}
        if other:
            lines += ["", f"{kind.capitalize()} shapes ({what}) against the full ones, the same kernel: " + ", ".join(
                f"`{k}` {other[k] / base[k]:.3f}" for k in other if k in base) +
                (" (the target for transposes: within 5%)." if kind == "ragged" else ".")]
    lines.append("")
    torch_rows = [r for r in recs if r["kind"] == "torch"]
    if torch_rows:
        lines += ["PyTorch on the same GPU, same run, same tensors:", "",
                  "| operation | dtype | shape | GB/s | ratio to memcpy |", "|---|---|---|---|---|"]
        seen = set()
        for r in torch_rows:
            key = (r["name"], r["dtype"], tuple(r["shape"]))
            if key in seen:
                continue
            seen.add(key)
            lines.append(f"| {r['name']} | {r['dtype']} | {'x'.join(map(str, r['shape']))} | {r['gbps']:.0f} | "
                         f"{r['ratio']:.3f} |")
        lines.append("")
    lines += [f"![bandwidth against size]({plot_file})", "",
              "Bandwidth against size (the same kernels on shapes from 16 MiB to 2 GiB, memcpy of the same bytes).", ""]
    return "\n".join(lines)


def plot_svg(data: dict[str, Any]) -> str:
    """Bandwidth against size, one line per kernel and one for memcpy, as a small hand-made SVG."""
    recs = [r for r in data["records"] if "size_mib" in r]
    series: dict[str, list[tuple[int, float]]] = {}
    for r in recs:
        name = "cudaMemcpyAsync" if r["kind"] == "memcpy" else r["spec"].removeprefix("bench_")
        series.setdefault(name, []).append((r["size_mib"], r["gbps"]))
    sizes = sorted({s for pts in series.values() for s, _ in pts})
    top = max(g for pts in series.values() for _, g in pts) * 1.1
    width, height, left, bottom = 640, 360, 60, 40
    colours = ["#222", "#4e79a7", "#f28e2b", "#e15759", "#59a14f", "#b07aa1"]

    def x(size: int) -> float:
        return left + (sizes.index(size) / max(len(sizes) - 1, 1)) * (width - left - 150)

    def y(gbps: float) -> float:
        return height - bottom - gbps / top * (height - bottom - 20)

    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}">',
             '<style>text{font:11px sans-serif}</style>',
             f'<line x1="{left}" y1="{height - bottom}" x2="{width - 150}" y2="{height - bottom}" stroke="#888"/>',
             f'<line x1="{left}" y1="20" x2="{left}" y2="{height - bottom}" stroke="#888"/>']
    for gb in range(0, int(top) + 1, 1000):
        parts.append(f'<text x="{left - 8}" y="{y(gb) + 4:.0f}" text-anchor="end">{gb}</text>')
    for size in sizes:
        label = f"{size} MiB" if size < 1024 else f"{size // 1024} GiB"
        parts.append(f'<text x="{x(size):.0f}" y="{height - bottom + 16}" text-anchor="middle">{label}</text>')
    parts.append(f'<text x="14" y="{height / 2:.0f}" transform="rotate(-90 14 {height / 2:.0f})" '
                 'text-anchor="middle">GB/s (read + written)</text>')
    for i, (name, pts) in enumerate(sorted(series.items(), key=lambda kv: kv[0] != "cudaMemcpyAsync")):
        pts = sorted(pts)
        colour = colours[i % len(colours)]
        path = " ".join(f"{x(s):.1f},{y(g):.1f}" for s, g in pts)
        parts.append(f'<polyline fill="none" stroke="{colour}" stroke-width="2" points="{path}"/>')
        parts.append(f'<text x="{width - 140}" y="{30 + 16 * i}" fill="{colour}">{name}</text>')
    parts.append("</svg>")
    return "\n".join(parts) + "\n"
