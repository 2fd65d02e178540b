"""Running generated kernels on the GPU and checking them bit for bit against numpy and the model.

Every output buffer is poisoned before a launch (never zeros) and every input is fresh random
data, so an unwritten byte or a wrong index cannot pass.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from tmagen import runtime
from tmagen.launch import KernelView, encode, kernel_views, launch_arguments
from tmagen.launch import Tiles, tiles  # noqa: F401 - where callers of tmagen.verify found them
from tmagen.spec import CopyKernel, InspectKernel, Spec, kernel_maps
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


def random_bytes(rng: np.random.Generator, shape: Sequence[int], elem_bytes: int) -> np.ndarray:
    return rng.integers(0, 256, size=(*shape, elem_bytes), dtype=np.uint8)


def _box_of(host: np.ndarray, coords: Sequence[int], box: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
    """The box at ``coords`` of ``host`` (shape + (elem_bytes,)), zeros outside, and the in-bounds mask."""
    out = np.zeros((*box, host.shape[-1]), dtype=np.uint8)
    inside = np.zeros(tuple(box), dtype=bool)
    src, dst = [], []
    for c, b, n in zip(coords, box, host.shape[:-1]):
        lo, hi = max(c, 0), min(c + b, n)
        if hi <= lo:
            return out, inside
        src.append(slice(lo, hi))
        dst.append(slice(lo - c, hi - c))
    out[tuple(dst)] = host[tuple(src)]
    inside[tuple(dst)] = True
    return out, inside


class Verifier:
    """Runs the kernels of one compiled spec."""

    def __init__(self, spec: Spec, cubin: bytes, device: runtime.Device, seed: int | None = None) -> None:
        self.spec = spec
        self.device = device
        self.rng = np.random.default_rng(seed)
        self.module = runtime.Module(cubin)
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
                timed: bool = False) -> Outcome:
        m = self.maps[role]
        t = m.tensor
        view = self.views[f"{self.spec.name}_inspect_{role}"]
        shape = list(shape or t.shape)
        coords = list(coords if coords is not None else (self.spec.kernel.coords or [0] * t.rank))  # type: ignore[union-attr]
        es = t.dt.nbytes
        host = random_bytes(self.rng, shape, es)
        layout = BoxLayout(tuple(t.box), es, PATTERNS[t.swizzle.driver], t.smem_offset)
        with runtime.Buffer.from_array(host) as src, runtime.Buffer(layout.footprint) as out:
            out.fill(OUT_POISON)
            tmap = encode(m, src.ptr, shape)
            kernel = self._kernel(view)
            params = [tmap, *[ctypes.c_int32(c) for c in coords[::-1]], ctypes.c_uint8(SMEM_POISON),
                      ctypes.c_uint64(out.ptr)]

            def launch() -> None:
                kernel.launch(1, view.threads, params)

            launch()
            self.device.synchronize()
            got = out.download()
            ms = self._time(launch) if timed else None
        box, inside = _box_of(host, coords, t.box)
        expected = layout.place(box.view(_uint(es)).reshape(t.box), fill=SMEM_POISON)
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

    def copy(self, shape: Sequence[int] | None = None, timed: bool = False) -> Outcome:
        t = self.maps["src"].tensor
        shape = list(shape or t.shape)
        host = random_bytes(self.rng, shape, t.dt.nbytes)
        return self._persistent("copy", host, host, "element", timed)

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
        return self._persistent("transpose", host, expected, "unit", timed)

    def _persistent(self, kind: str, host: np.ndarray, expected: np.ndarray, what: str, timed: bool) -> Outcome:
        """Runs the copy or transpose kernel from ``host`` into a poisoned output and compares it with
        ``expected`` (last axis: the bytes of one element or unit)."""
        t = self.maps["src"].tensor
        view = self.views[f"{self.spec.name}_{kind}"]
        shape = list(host.shape[:-1])
        with runtime.Buffer.from_array(host) as src, runtime.Buffer(host.nbytes) as dst:
            dst.fill(OUT_POISON)
            grid, params = launch_arguments(self.spec, view, self.device, src.ptr, dst.ptr, shape)
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
        self.module.unload()


def _uint(nbytes: int) -> np.dtype:
    return np.dtype({1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[nbytes])
