"""The quantize kernels (`tmagen.kinds.quantize.plan`) as calls: one source per configuration,
rendered from ``templates/quantize/kernels.cu.j2``, compiled by NVRTC at its first call (cached on
disk like every tmagen kernel), loaded once per device and process, and launched on a stream."""

from __future__ import annotations

import ctypes
from dataclasses import dataclass

from tmagen import __version__, runtime
from tmagen.kinds.quantize.plan import Geometry, QuantizePlan

ARCH = "sm_90a"


class Layout(ctypes.Structure):
    """The kernels' ``tmagen_quantize_layout``."""

    _fields_ = [("rows", ctypes.c_int64), ("cols", ctypes.c_int64), ("si", ctypes.c_int64), ("sj", ctypes.c_int64),
                ("tiles_j", ctypes.c_int64)]


def source(plan: QuantizePlan) -> str:
    """The CUDA source of ``plan``'s kernel (and of its amax pass, where it has one)."""
    from tmagen.render import environment

    return environment().get_template("quantize/kernels.cu.j2").render(version=__version__, plan=plan)


_COMPILED: dict[str, bytes] = {}
_LOADED: dict[tuple[int, str], tuple[int, int]] = {}  # (device, plan name) -> (kernel, amax kernel or 0)
_MODULES: list[runtime.Module] = []  # kept loaded for the process


def compiled(plan: QuantizePlan) -> bytes:
    """``plan``'s cubin, compiled by NVRTC (from the disk cache when there)."""
    cubin = _COMPILED.get(plan.name)
    if cubin is None:
        from tmagen import nvrtc

        cubin = _COMPILED[plan.name] = nvrtc.compile_cached(plan.name, source(plan), {}, ARCH).data
    return cubin


def functions(plan: QuantizePlan, device: int, stream: int | None = None) -> tuple[int, int]:
    """``plan``'s kernel and amax kernel (0 where none) loaded on ``device`` (compiled and loaded at
    the first call)."""
    def load() -> tuple[int, int]:
        module = runtime.Module(compiled(plan))
        _MODULES.append(module)
        main = int(module.function(plan.symbol, plan.smem_bytes).function)
        return main, int(module.function(plan.amax_symbol).function) if plan.amax_symbol else 0

    return runtime.load_once(_LOADED, (device, plan.name), device, stream, "quantize kernels", load)


@dataclass
class Pointers:
    """A call's device addresses: x, q, the scales, the amax word and the given scale (0: none)."""

    x: int
    q: int
    scale_inv: int
    amax: int
    given: int = 0


def launch(plan: QuantizePlan, g: Geometry, p: Pointers, device: int, stream: int) -> None:
    """Zeroes the amax word and launches ``plan``'s kernel(s) over geometry ``g`` on ``stream`` (in
    ``device``'s primary context)."""
    from tmagen.kernels import launch_function

    main, amax = functions(plan, device, stream)
    layout = Layout(g.rows, g.cols, g.si, g.sj, g.tiles_j)
    u64 = ctypes.c_uint64
    with runtime.OnDevice(device):
        runtime.zero_bytes_async(p.amax, 4, stream)
        if g.grid == 0:
            return
        launcher = launch_function()
        if amax:
            args = [u64(p.x), u64(p.amax), layout]
            params = (ctypes.c_void_p * 3)(*[ctypes.addressof(a) for a in args])
            result = launcher(amax, g.grid, 1, 1, plan.threads, 1, 1, 0, stream, ctypes.addressof(params), None)
            if result:
                runtime._raise_for(result, f"launching {plan.amax_symbol}")
        args = [u64(p.x), u64(p.q), u64(p.scale_inv), u64(p.amax), u64(p.given), layout]
        params = (ctypes.c_void_p * 6)(*[ctypes.addressof(a) for a in args])
        result = launcher(main, g.grid, 1, 1, plan.threads, 1, 1, plan.smem_bytes, stream, ctypes.addressof(params),
                          None)
        if result:
            runtime._raise_for(result, f"launching {plan.symbol}")

