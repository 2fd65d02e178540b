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
from tmagen.render import kernel_views
from tmagen.spec import CopyKernel, Spec, TransposeKernel, kernel_maps
from tmagen.verify import encode, tiles

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
    maps = {m.role: m for m in kernel_maps(spec)}
    t = maps["src"].tensor
    es = t.dt.nbytes
    shape = list(shape)
    nbytes = int(np.prod(shape)) * es
    if isinstance(k, TransposeKernel):
        per = maps["src"].unit_bytes // es
        dst_shape = [*shape[:-2], shape[-1] // per, shape[-2] * per]
    else:
        dst_shape = shape
    view = kernel_views(spec)[0]
    module = runtime.Module(cubin)
    try:
        kernel = module.function(view.symbol, view.smem_bytes)
        rng = np.random.default_rng(seed)
        with runtime.Buffer(nbytes) as src, runtime.Buffer(nbytes) as dst:
            src.upload(rng.integers(0, 256, size=nbytes, dtype=np.uint8))
            tl = tiles(shape, t.box)
            params = [encode(maps["src"], src.ptr, shape), encode(maps["dst"], dst.ptr, dst_shape), tl]
            grid = max(1, min(tl.total, device.multiprocessors * view.blocks_per_sm))
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
    out = []
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    for name, fn in (("torch clone()", lambda: x.clone()),
                     ("torch .transpose(-2,-1).contiguous()", lambda: x.transpose(-2, -1).contiguous())):
        for _ in range(3):
            fn()
        times = []
        for _ in range(runs):
            start.record()
            fn()
            stop.record()
            stop.synchronize()
            times.append(start.elapsed_time(stop))
        out.append(Timing(name, tuple(shape), dtype, 2 * nbytes, statistics.median(times), max(times) - min(times)))
    del x
    torch.cuda.empty_cache()
    return out
