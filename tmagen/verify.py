"""Running generated kernels on the GPU and checking them bit for bit against numpy and the model.

Every output buffer is poisoned before a launch (never zeros) and every input is fresh random
data, so an unwritten byte or a wrong index cannot pass. Tensors may have padded strides: the
padding of a source is random too, and the padding of an output must keep its poison.
"""

from __future__ import annotations

import ctypes
import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from tmagen import runtime
from tmagen.enums import Interleave, L2Promotion, OobFill
from tmagen.render import KernelView, kernel_views
from tmagen.spec import CopyKernel, InspectKernel, MapSpec, Spec, TensorSpec, TransposeKernel, kernel_maps
from tmagen.swizzle import BoxLayout, PATTERNS

OUT_POISON = 0xA5  # output buffers before a launch
SMEM_POISON = 0x5A  # shared memory before an inspect load: what TMA leaves alone keeps it


@dataclass(frozen=True)
class Outcome:
    kernel: str
    shape: tuple[int, ...]
    dtype: str
    ok: bool
    detail: str
    ms: float | None = None

    @property
    def result(self) -> str:
        return "match" if self.ok else "MISMATCH"


class Tiles(ctypes.Structure):
    """The kernels' ``<name>_tiles``: tile counts per dimension, innermost first, and their total."""

    _fields_ = [("count", ctypes.c_uint32 * 5), ("total", ctypes.c_uint32)]


def tiles(shape: Sequence[int], box: Sequence[int]) -> Tiles:
    """Tiles of a tensor of ``shape`` by ``box`` (both outermost first)."""
    counts = [math.ceil(n / b) for n, b in zip(shape[::-1], box[::-1])] + [1] * (5 - len(shape))
    t = Tiles()
    for i, c in enumerate(counts):
        t.count[i] = c
    t.total = math.prod(counts)
    return t


def contiguous_strides(shape: Sequence[int]) -> list[int]:
    """Element strides, outermost first, of a contiguous tensor of ``shape``."""
    out, run = [], 1
    for n in reversed(list(shape)):
        out.append(run)
        run *= n
    return out[::-1]


def encode(m: MapSpec, address: int, shape: Sequence[int], strides: Sequence[int] | None = None) -> runtime.TensorMap:
    """The tensor map of ``m`` for a tensor of ``shape`` at ``address``, with element ``strides``
    (outermost first; default contiguous)."""
    t = m.tensor
    es = t.dt.nbytes
    elements = list(strides) if strides is not None else contiguous_strides(shape)
    return runtime.encode_tiled(
        dtype=t.dt.driver, rank=t.rank, global_address=address, global_dim=list(shape[::-1]),
        global_strides=[s * es for s in elements[::-1][1:]], box_dim=t.box[::-1],
        element_strides=t.element_strides_or_default[::-1],
        interleave=int(Interleave.parse(t.interleave)), swizzle=int(t.swizzle.driver),
        l2_promotion=int(L2Promotion.parse(t.l2_promotion)), oob_fill=int(OobFill.parse(t.oob_fill)))


def launch_arguments(spec: Spec, view: KernelView, device: runtime.Device, src_ptr: int, dst_ptr: int,
                     shape: Sequence[int], strides: Sequence[int] | None = None) -> tuple[int, list]:
    """Grid size and parameters of the copy or transpose kernel from a tensor of ``shape`` at
    ``src_ptr`` into an output at ``dst_ptr``: a copy's both with ``strides`` (default contiguous),
    a transpose's contiguous (the output with the last two dimensions turned, in units)."""
    maps = {m.role: m for m in kernel_maps(spec)}
    src = maps["src"]
    shape = list(shape)
    dst_shape = shape
    if isinstance(spec.kernel, TransposeKernel):
        per = src.unit_bytes // src.tensor.dt.nbytes
        dst_shape = [*shape[:-2], shape[-1] // per, shape[-2] * per]
    tl = tiles(shape, src.tensor.box)
    dst_strides = None if isinstance(spec.kernel, TransposeKernel) else strides
    params = [encode(src, src_ptr, shape, strides), encode(maps["dst"], dst_ptr, dst_shape, dst_strides), tl]
    return max(1, min(tl.total, device.multiprocessors * view.blocks_per_sm)), params


def random_bytes(rng: np.random.Generator, shape: Sequence[int], elem_bytes: int) -> np.ndarray:
    return rng.integers(0, 256, size=(*shape, elem_bytes), dtype=np.uint8)


def strided_span(shape: Sequence[int], strides: Sequence[int]) -> int:
    """Elements from the first to the last of a tensor of ``shape`` and element ``strides``."""
    return 1 + sum((n - 1) * s for n, s in zip(shape, strides))


def strided_view(memory: np.ndarray, shape: Sequence[int], strides: Sequence[int]) -> np.ndarray:
    """The tensor of ``shape`` and element ``strides`` in ``memory`` (elements x element bytes)."""
    es = memory.shape[-1]
    return np.lib.stride_tricks.as_strided(memory, shape=(*shape, es), strides=(*[s * es for s in strides], 1),
                                           writeable=False)


def loaded_box(t: TensorSpec) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """Elements one load brings per dimension and the step between them, outermost first:
    ceil(box / elementStride) at that stride, except the innermost without interleave, which TMA
    traverses whole (DRV)."""
    steps = list(t.element_strides_or_default)
    if Interleave.parse(t.interleave) is Interleave.NONE:
        steps[-1] = 1
    return tuple(-(-b // e) for b, e in zip(t.box, steps)), tuple(steps)


def _box_of(host: np.ndarray, coords: Sequence[int], box: Sequence[int],
            steps: Sequence[int] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The ``box`` elements at ``coords`` of ``host`` (shape + (elem_bytes,)), ``steps`` apart
    (default 1), zeros outside the tensor, and the in-bounds mask."""
    steps = steps or [1] * len(box)
    index = [c + e * np.arange(b) for c, b, e in zip(coords, box, steps)]
    inside_1d = [(i >= 0) & (i < n) for i, n in zip(index, host.shape[:-1])]
    inside = np.ones(tuple(box), dtype=bool)
    for d, mask in enumerate(inside_1d):
        inside &= mask.reshape([-1 if k == d else 1 for k in range(len(box))])
    clipped = [np.clip(i, 0, n - 1) for i, n in zip(index, host.shape[:-1])]
    out = np.array(host[np.ix_(*clipped)], dtype=np.uint8)
    out[~inside] = 0
    return out, inside


class Verifier:
    """Runs the kernels of one compiled spec."""

    def __init__(self, spec: Spec, cubin: bytes | None, device: runtime.Device, seed: int | None = None,
                 module: runtime.Module | None = None) -> None:
        """Loads ``cubin``, or uses ``module`` (already loaded, holding the spec's kernels among
        others, and left loaded by close())."""
        self.spec = spec
        self.device = device
        self.rng = np.random.default_rng(seed)
        self._owns_module = module is None
        self.module = module if module is not None else runtime.Module(cubin)  # type: ignore[arg-type]
        self.views = {k.symbol: k for k in kernel_views(spec)}
        self.maps = {m.role: m for m in kernel_maps(spec)}

    def run_all(self, timed: bool = True) -> list[Outcome]:
        k = self.spec.kernel
        if isinstance(k, InspectKernel):
            return [self.inspect(role, timed=timed) for role in self.maps]
        if isinstance(k, CopyKernel):
            return [self.copy(timed=timed)]
        return [self.transpose(timed=timed)]

    def _kernel(self, view: KernelView) -> runtime.Kernel:
        return self.module.function(view.symbol, view.smem_bytes)

    def _time(self, launch: "callable") -> float:  # type: ignore[valid-type]
        launch()  # warm
        with runtime.Timer() as t:
            launch()
        return t.ms

    def inspect(self, role: str, coords: Sequence[int] | None = None, shape: Sequence[int] | None = None,
                strides: Sequence[int] | None = None, timed: bool = False) -> Outcome:
        """One load of map ``role`` at ``coords`` (default: the spec's) from a random tensor of
        ``shape`` and element ``strides`` (default: the spec's shape and strides; contiguous for a
        shape of the caller's)."""
        m = self.maps[role]
        t = m.tensor
        view = self.views[f"{self.spec.name}_inspect_{role}"]
        if shape is None and strides is None:
            strides = t.strides
        shape = list(shape or t.shape)
        strides = list(strides) if strides is not None else contiguous_strides(shape)
        coords = list(coords if coords is not None else (self.spec.kernel.coords or [0] * t.rank))  # type: ignore[union-attr]
        es = t.dt.nbytes
        memory = random_bytes(self.rng, [strided_span(shape, strides)], es)
        host = strided_view(memory, shape, strides)
        loaded, steps = loaded_box(t)
        layout = BoxLayout(loaded, es, PATTERNS[t.swizzle.driver], t.smem_offset)
        with runtime.Buffer.from_array(memory) as src, runtime.Buffer(layout.footprint) as out:
            out.fill(OUT_POISON)
            tmap = encode(m, src.ptr, shape, strides)
            kernel = self._kernel(view)
            params = [tmap, *[ctypes.c_int32(c) for c in coords[::-1]], ctypes.c_uint8(SMEM_POISON),
                      ctypes.c_uint64(out.ptr)]

            def launch() -> None:
                kernel.launch(1, view.threads, params)

            launch()
            self.device.synchronize()
            got = out.download()
            ms = self._time(launch) if timed else None
        box, inside = _box_of(host, coords, loaded, steps)
        expected = layout.place(box.view(_uint(es)).reshape(loaded), fill=SMEM_POISON)
        care = np.ones(layout.footprint, dtype=bool)
        if t.oob_fill == "nan":  # the NaN pattern is the hardware's: compare in-bounds elements only
            starts = layout.offsets()[~inside]
            for b in range(es):
                care[starts + b] = False
        bad = np.nonzero((got != expected) & care)[0]
        detail = "every byte of the footprint" if bad.size == 0 else (
            f"{bad.size} of {layout.footprint} bytes differ, first at offset {bad[0]}: "
            f"got {got[bad[0]]:#04x}, model {expected[bad[0]]:#04x}")
        return Outcome(view.symbol, tuple(shape), t.dtype, bad.size == 0, detail, ms)

    def copy(self, shape: Sequence[int] | None = None, strides: Sequence[int] | None = None,
             timed: bool = False) -> Outcome:
        """A random tensor of ``shape`` and element ``strides`` (default: the spec's; contiguous for a
        shape of the caller's) copied into a poisoned one of the same layout, whose padding must stay
        poisoned."""
        t = self.maps["src"].tensor
        if shape is None and strides is None:
            strides = t.strides
        shape = list(shape or t.shape)
        es = t.dt.nbytes
        if strides is None:
            host = random_bytes(self.rng, shape, es)
            return self._persistent("copy", host, host, "element", timed, shape)
        memory = random_bytes(self.rng, [strided_span(shape, strides)], es)
        expected = np.full_like(memory, OUT_POISON)
        np.lib.stride_tricks.as_strided(expected, shape=(*shape, es), strides=(*[s * es for s in strides], 1))[...] = \
            strided_view(memory, shape, strides)
        return self._persistent("copy", memory, expected, "element (padding included)", timed, shape, list(strides))

    def transpose(self, shape: Sequence[int] | None = None, timed: bool = False) -> Outcome:
        src_map = self.maps["src"]
        t = src_map.tensor
        shape = list(shape or t.shape)
        es, unit = t.dt.nbytes, src_map.unit_bytes
        per = unit // es
        host = random_bytes(self.rng, shape, es)
        rows, cols = shape[-2], shape[-1] // per
        units = host.reshape(*shape[:-2], rows, cols, unit)
        expected = np.ascontiguousarray(np.swapaxes(units, -2, -3))  # (..., cols, rows, unit)
        return self._persistent("transpose", host, expected, "unit", timed, shape)

    def _persistent(self, kind: str, host: np.ndarray, expected: np.ndarray, what: str, timed: bool,
                    shape: list[int], strides: list[int] | None = None) -> Outcome:
        """Runs the copy or transpose kernel on a tensor of ``shape`` and ``strides`` whose memory is
        ``host`` into a poisoned output and compares the output's memory with ``expected`` (last
        axis: the bytes of one element or unit)."""
        t = self.maps["src"].tensor
        view = self.views[f"{self.spec.name}_{kind}"]
        with runtime.Buffer.from_array(host) as src, runtime.Buffer(host.nbytes) as dst:
            dst.fill(OUT_POISON)
            grid, params = launch_arguments(self.spec, view, self.device, src.ptr, dst.ptr, shape, strides)
            kernel = self._kernel(view)

            def launch() -> None:
                kernel.launch(grid, view.threads, params)

            launch()
            self.device.synchronize()
            got = dst.download().reshape(expected.shape)
            ms = self._time(launch) if timed else None
        bad = int(np.count_nonzero(np.any(got != expected, axis=-1)))
        count = expected.size // expected.shape[-1]
        detail = f"every {what}" if bad == 0 else f"{bad} of {count} {what}s differ"
        return Outcome(view.symbol, tuple(shape), t.dtype, bad == 0, detail, ms)

    def close(self) -> None:
        if self._owns_module:
            self.module.unload()


def _uint(nbytes: int) -> np.dtype:
    return np.dtype({1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[nbytes])
