"""What one launch of a copy or transpose kernel takes, from tensors' real pointers, shapes and
strides: the tensor-map arguments (driver order), the tiles, the output's shape and the grid.
`tmagen verify`, `tmagen bench` and the Python API (`tmagen.load`) all launch through here.

Shapes and strides are outermost first, strides in elements (as ``torch.Tensor.stride()``);
``None`` strides mean contiguous.
"""

from __future__ import annotations

import ctypes
import math
from dataclasses import asdict, dataclass
from typing import Sequence

from tmagen import runtime
from tmagen.enums import Interleave, L2Promotion, OobFill
from tmagen.plan import KernelPlan, flat_copy_shape
from tmagen.spec import CopyKernel, MapSpec, Spec, TransposeKernel, kernel_maps

__all__ = ["Tiles", "tiles", "MapArguments", "map_arguments", "encode",
           "contiguous_strides", "output_shape", "flat_view", "grid_size", "launch_arguments"]


class Tiles(ctypes.Structure):
    """The kernels' ``<name>_tiles``: tile counts per dimension, innermost first, and their total."""

    _fields_ = [("count", ctypes.c_uint32 * 5), ("total", ctypes.c_uint32)]


def tiles(shape: Sequence[int], box: Sequence[int], into: Tiles | None = None) -> Tiles:
    """Tiles of a tensor of ``shape`` by ``box`` (both outermost first)."""
    counts = [math.ceil(n / b) for n, b in zip(shape[::-1], box[::-1])] + [1] * (5 - len(shape))
    t = into if into is not None else Tiles()
    for i, c in enumerate(counts):
        t.count[i] = c
    t.total = math.prod(counts)
    return t


def contiguous_strides(shape: Sequence[int]) -> list[int]:
    """Strides in elements of a contiguous tensor of ``shape``, outermost first."""
    out, run = [], 1
    for n in reversed(shape):
        out.append(run)
        run *= n
    return out[::-1]


@dataclass(frozen=True)
class MapArguments:
    """The arguments of cuTensorMapEncodeTiled, innermost first, as the driver takes them."""

    dtype: int
    rank: int
    global_address: int
    global_dim: tuple[int, ...]
    global_strides: tuple[int, ...]  # bytes, dimensions 1 .. rank-1
    box_dim: tuple[int, ...]
    element_strides: tuple[int, ...]
    interleave: int
    swizzle: int
    l2_promotion: int
    oob_fill: int

    def encode(self, into: runtime.TensorMap | None = None) -> runtime.TensorMap:
        return runtime.encode_tiled(**asdict(self), into=into)


def map_arguments(m: MapSpec, address: int, shape: Sequence[int], strides: Sequence[int] | None = None) -> MapArguments:
    """Map ``m`` (its box, swizzle, dtype) over a tensor of ``shape`` and ``strides`` at ``address``."""
    t = m.tensor
    es = t.dt.nbytes
    strides = contiguous_strides(shape) if strides is None else strides
    return MapArguments(
        dtype=t.dt.driver, rank=t.rank, global_address=int(address), global_dim=tuple(int(n) for n in shape[::-1]),
        global_strides=tuple(int(s) * es for s in strides[::-1][1:]), box_dim=tuple(t.box[::-1]),
        element_strides=tuple(t.element_strides_or_default[::-1]), interleave=int(Interleave.parse(t.interleave)),
        swizzle=int(t.swizzle.driver), l2_promotion=int(L2Promotion.parse(t.l2_promotion)),
        oob_fill=int(OobFill.parse(t.oob_fill)))


def encode(m: MapSpec, address: int, shape: Sequence[int], strides: Sequence[int] | None = None) -> runtime.TensorMap:
    """The tensor map of ``m`` for a tensor of ``shape`` (contiguous unless ``strides``) at ``address``."""
    return map_arguments(m, address, shape, strides).encode()


def output_shape(spec: Spec, shape: Sequence[int]) -> list[int]:
    """The shape of the kernel's output for an input of ``shape``: the same for a copy; for a transpose
    the last two dimensions turned, in the kernel's units."""
    shape = list(shape)
    if isinstance(spec.kernel, TransposeKernel):
        src = kernel_maps(spec)[0]
        per = src.unit_bytes // src.tensor.dt.nbytes
        return [*shape[:-2], shape[-1] // per, shape[-2] * per]
    return shape


def flat_view(spec: Spec, shape: Sequence[int], *strides: Sequence[int] | None) -> list[int] | None:
    """The flat view a copy of ``shape`` takes (`tmagen.plan.flat_copy_shape`) when every array's
    ``strides`` (None: contiguous) are contiguous, as the generated C API decides; None for
    transposes, and where the arrays keep their own shapes and strides."""
    if not isinstance(spec.kernel, CopyKernel):
        return None
    contiguous = all(s is None or list(s) == contiguous_strides(shape) for s in strides)
    t = kernel_maps(spec)[0].tensor
    return flat_copy_shape(list(shape), t.box, t.dt.nbytes, contiguous)


def grid_size(view: KernelPlan, total_tiles: int, multiprocessors: int) -> int:
    """Blocks of the grid: one per ``units_per_block`` stage units; for a persistent grid as many as
    are resident, at most one per stage unit."""
    units = -(-total_tiles // view.boxes_per_stage)
    if view.units_per_block:
        return max(1, -(-units // view.units_per_block))
    return max(1, min(units, multiprocessors * view.blocks_per_sm))


def launch_arguments(spec: Spec, view: KernelPlan, device: runtime.Device, src_ptr: int, dst_ptr: int,
                     shape: Sequence[int], src_strides: Sequence[int] | None = None,
                     dst_strides: Sequence[int] | None = None) -> tuple[int, list]:
    """Grid size and parameters of the copy or transpose kernel from a tensor of ``shape`` at
    ``src_ptr`` into its output (`output_shape`) at ``dst_ptr``, each contiguous unless given strides."""
    maps = {m.role: m for m in kernel_maps(spec)}
    src = maps["src"]
    flat = flat_view(spec, shape, src_strides, dst_strides)
    if flat is not None:
        shape, src_strides, dst_strides = flat, None, None
    tl = tiles(shape, src.tensor.box)
    params = [encode(src, src_ptr, shape, src_strides), encode(maps["dst"], dst_ptr, output_shape(spec, shape),
                                                               dst_strides), tl]
    return grid_size(view, tl.total, device.multiprocessors), params
