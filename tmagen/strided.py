"""The strided kernels (`tmagen.kinds.strided.plan`) as calls: their source rendered from
``templates/strided/kernels.cu.j2``, compiled by NVRTC at the first call (cached on disk like every
tmagen kernel), loaded once per device and process, and launched on a stream with one parameter
block that tmagen owns per call layout (so a call with a known layout allocates nothing)."""

from __future__ import annotations

import ctypes
import threading
from dataclasses import dataclass
from functools import cache
from typing import Any

from tmagen import __version__, runtime
from tmagen.kinds.strided import plan as sp
from tmagen.kinds.strided.plan import StridedCall

NAME = "tmagen_strided"
ARCH = "sm_90a"


class Layout(ctypes.Structure):
    """The kernels' ``tmagen_strided_layout``."""

    _fields_ = [("extent", ctypes.c_int64 * 5), ("src", ctypes.c_int64 * 5), ("dst", ctypes.c_int64 * 5),
                ("count", ctypes.c_uint64), ("tiles_c", ctypes.c_uint64), ("tiles_r", ctypes.c_uint64),
                ("dst_linear", ctypes.c_uint32), ("tile_cw", ctypes.c_uint32),
                ("pitch", ctypes.c_uint32), ("src_linear", ctypes.c_uint32), ("src_words", ctypes.c_uint32),
                ("tile_rows", ctypes.c_uint32)]


def source() -> str:
    """The CUDA source of every strided kernel (every element size, both index widths)."""
    from tmagen.render import environment

    return environment().get_template("strided/kernels.cu.j2").render(
        version=__version__, sizes=sp.SIZES, vector_bytes=sp.VECTOR_BYTES, plane_kernels=sp.plane_kernels(),
        plane_threads=sp.PLANE_THREADS, gather_threads=sp.GATHER_THREADS, tile_kernels=sp.tile_kernels(),
        tile_threads=sp.TILE_THREADS, tile_blocks=sp.TILE_BLOCKS_PER_SM, dependent_launch=sp.DEPENDENT_LAUNCH,
        narrow_threads=sp.NARROW_THREADS, narrow_bytes_span=sp.narrow_bytes_span(),
        narrow_words_span=sp.narrow_words_span())


@dataclass
class Prepared:
    """A call ready to launch: the function, its grid and block, and its parameters (the addresses of
    the two pointers and the layout, in storage this object owns)."""

    function: int
    grid: int
    block: int
    pointers: Any  # c_uint64 * 2: src, dst
    layout: Layout
    params: Any  # c_void_p * 3


_LOCK = threading.Lock()
_FUNCTIONS: dict[tuple[int, str], int] = {}  # (device, symbol) -> CUfunction
_MODULES: dict[int, runtime.Module] = {}


@cache
def compiled() -> bytes:
    """The cubin, compiled by NVRTC (from the disk cache when there)."""
    from tmagen import nvrtc

    return nvrtc.compile_cached(NAME, source(), {}, ARCH).data


def function(device: int, symbol: str, stream: int | None = None) -> int:
    """The kernel ``symbol`` loaded on ``device`` (compiled and loaded at the first call)."""
    key = (device, symbol)
    fn = _FUNCTIONS.get(key)
    if fn is not None:
        return fn
    module = runtime.load_once(_MODULES, device, device, stream, "strided kernels", lambda: runtime.Module(compiled()))
    with _LOCK, runtime.OnDevice(device):
        fn = _FUNCTIONS[key] = int(module.function(symbol).function)
    return fn


def prepare(call: StridedCall, src: int, dst: int, device: int, stream: int | None = None) -> Prepared:
    """``call`` on the arrays at ``src`` and ``dst``, ready for `run`."""
    layout = Layout((ctypes.c_int64 * 5)(*call.extent), (ctypes.c_int64 * 5)(*call.src),
                    (ctypes.c_int64 * 5)(*call.dst), call.count, call.tiles_c, call.tiles_r, int(call.dst_linear),
                    call.tile_cw, call.pitch, int(call.src_linear), int(call.src_words), call.tile_rows)
    pointers = (ctypes.c_uint64 * 2)(src, dst)
    base = ctypes.addressof(pointers)
    params = (ctypes.c_void_p * 3)(base, base + 8, ctypes.addressof(layout))
    return Prepared(function(device, call.symbol, stream), call.grid, call.block, pointers, layout, params)


def run(p: Prepared, stream: int) -> None:
    """Launches a prepared call on ``stream`` (in the current context)."""
    from tmagen.kernels import launch_function

    if sp.DEPENDENT_LAUNCH:
        result = runtime.launch_dependent(int(p.function), p.grid, p.block, 0, stream, ctypes.addressof(p.params))
    else:
        result = launch_function()(p.function, p.grid, 1, 1, p.block, 1, 1, 0, stream, ctypes.addressof(p.params),
                                   None)
    if result:
        runtime._raise_for(result, "launching a strided kernel")
