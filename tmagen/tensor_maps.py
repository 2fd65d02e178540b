"""Checked tensor maps for any kernel: ``tmagen.tensor_map(x, box=...)`` applies every rule to
the array's real pointer, shape, strides and dtype, then encodes the map.

Messages name fields as a Python caller writes them, outermost first (``box[-1]``,
``x.shape[0]``, ``x.strides[0]``): the rules are those of `tmagen.rules`, the same as
`tmagen diagnose` applies in the driver's order.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from tmagen import limits, runtime
from tmagen.arrays import ArrayView, describe
from tmagen.dtypes import DTYPES, DType
from tmagen.enums import Interleave, L2Promotion, OobFill, Swizzle
from tmagen.errors import ArgumentError
from tmagen.launch import encode
from tmagen.rules import FieldNames, TensorMapArgs, Violation, run_rules

CALL = "tmagen.tensor_map"
_SPAN_MODES = ("none", "32B", "64B", "128B")
_ATOMICITIES = {"16B": Swizzle.B128, "32B": Swizzle.B128_ATOM_32B, "32B_flip_8B": Swizzle.B128_ATOM_32B_FLIP_8B,
                "64B": Swizzle.B128_ATOM_64B}


class ArrayFieldNames(FieldNames):
    """Names fields as a Python caller writes them: the array's ``shape``, ``strides`` and data
    pointer by the argument's name, the map's own arguments by theirs; indices outermost first,
    the innermost written [-1]."""

    def __init__(self, name: str, rank: int) -> None:
        super().__init__()
        self.name = name
        self.tensor_rank = rank
        self.dtype = f"{name}.dtype"
        self.rank = f"{name}.ndim"
        self.address = f"{name}'s data pointer"
        self.interleave = "interleave"
        self.swizzle = "swizzle"
        self.l2 = "l2_promotion"
        self.oob = "oob_fill"
        self.target = "target"
        self.smem_offset = "smem_offset"
        self.atomicity = "atomicity"
        self.coords = "coords"

    def _ix(self, driver_index: int) -> str:
        return "-1" if driver_index == 0 else str(self.tensor_rank - 1 - driver_index)

    def dim(self, i: int) -> str:
        return f"{self.name}.shape[{self._ix(i)}]"

    def stride(self, i: int) -> str:
        return f"{self.name}.strides[{self._ix(i + 1)}]"

    def box(self, i: int) -> str:
        return f"box[{self._ix(i)}]"

    def estride(self, i: int) -> str:
        return f"element_strides[{self._ix(i)}]"

    def enum(self, value: Interleave | Swizzle | L2Promotion | OobFill) -> str:
        if isinstance(value, Swizzle) and value >= Swizzle.B128_ATOM_32B:
            return {4: '"128B" with atomicity "32B"', 5: '"128B" with atomicity "32B_flip_8B"',
                    6: '"128B" with atomicity "64B"'}[int(value)]
        return repr(value.spec_name)

    def dtype_name(self, dtype: DType) -> str:
        return dtype.name


def array_map_args(view: ArrayView, dt: DType, name: str, *, box: Sequence[int], element_strides: Sequence[int],
                   interleave: Interleave, swizzle: Swizzle, l2_promotion: L2Promotion, oob_fill: OobFill,
                   target: str, smem_offset: int | None = None, loads: bool = True, stores: bool = False,
                   requested_swizzle: tuple[str, str] | None = None) -> TensorMapArgs:
    """The rules' view of a map over ``view`` (driver order), the array's real address included."""
    es = view.itemsize
    return TensorMapArgs(
        dtype=dt, rank=view.rank, global_address=view.ptr, global_dim=tuple(view.shape[::-1]),
        global_strides=tuple(s * es for s in view.strides[::-1][1:]), box_dim=tuple(box[::-1]),
        element_strides=tuple(element_strides[::-1]), interleave=interleave, swizzle=swizzle,
        l2_promotion=l2_promotion, oob_fill=oob_fill, target=limits.TARGETS[target], smem_offset=smem_offset,
        stores=stores, loads=loads, requested_swizzle=requested_swizzle)


def layout_problems(view: ArrayView, name: str) -> list[Violation]:
    """What no rule of the driver's says but TMA needs of an array: GPU memory, and rows whose
    elements are adjacent."""
    found = []
    if view.device is not None and view.device < 0:
        found.append(Violation("array-device", f"{name}.device", view.where, "TMA reads and writes GPU memory",
                               f"move {name} to the GPU first (e.g. {name}.cuda())", "tmagen.arrays"))
    if view.rank and view.shape[-1] > 1 and view.strides[-1] != 1:
        found.append(Violation("array-inner-stride", f"{name}.strides[-1]", f"{view.strides[-1]} elements",
                               "TMA reads each row contiguously: the innermost stride must be 1",
                               f"pass {name}.contiguous(), or a view whose last dimension is contiguous",
                               "PTX ISA, cp.async.bulk.tensor (globalStrides start at dimension 1)"))
    return found


@dataclass
class CheckedTensorMap:
    """A ``CUtensorMap`` whose arguments passed every rule, encoded for one array.

    It holds the array, so that the memory the map points at lives as long as the map.
    """

    array: Any
    arguments: TensorMapArgs  # the driver's arguments, innermost first, as the rules checked them
    _storage: runtime.TensorMap

    @property
    def bytes(self) -> bytes:
        """The 128 bytes of the encoded map."""
        return self._storage.bytes

    @property
    def cu_tensor_map(self) -> Any:
        """The map as a ``cuda.bindings.driver.CUtensorMap`` (a copy of the bytes)."""
        from cuda.bindings import driver

        out = driver.CUtensorMap()
        out.opaque = list(struct.unpack("<16Q", self.bytes))
        return out

    def as_numpy(self) -> np.void:
        """The 128 bytes as a numpy scalar of a 128-byte structured type: what CuPy's ``RawKernel``
        passes by value to a ``const __grid_constant__ CUtensorMap`` parameter."""
        dtype = np.dtype({"names": ["opaque"], "formats": [(np.uint64, 16)], "itemsize": 128})
        return np.frombuffer(self.bytes, dtype=dtype)[0]

    def __repr__(self) -> str:
        a = self.arguments
        return (f"CheckedTensorMap(dtype={a.dtype.name}, global_dim={list(a.global_dim)}, box_dim={list(a.box_dim)}, "
                f"swizzle={Swizzle(a.swizzle).spec_name}, address={a.global_address:#x})")


def _parse_enum(cls: Any, value: object, fld: str, found: list[Violation]) -> Any:
    try:
        return cls.parse(value)
    except ValueError as exc:
        why, _, fix = str(exc).partition("; ")
        found.append(Violation("argument-form", fld, repr(value), why, fix or "use a listed value", CALL))
        return None


def _ints(value: object, fld: str, rank: int, found: list[Violation]) -> list[int] | None:
    seq = list(value) if isinstance(value, (list, tuple)) else None
    if seq is None or not all(isinstance(v, int) and not isinstance(v, bool) for v in seq):
        found.append(Violation("argument-form", fld, repr(value), "it must be a list of integers",
                               "give one integer per dimension, outermost first", CALL))
        return None
    if len(seq) != rank:
        found.append(Violation("argument-form", fld, repr(value), f"it has {len(seq)} entries and the array has "
                               f"{rank} dimensions", "give one per dimension, outermost first", CALL))
        return None
    return [int(v) for v in seq]


def tensor_map(x: Any, box: Sequence[int], *, swizzle: str | int = "none", atomicity: str = "16B",
               element_strides: Sequence[int] | None = None, interleave: str | int = "none",
               l2_promotion: str | int = "none", oob_fill: str | int = "zero", dtype: str | None = None,
               smem_offset: int | None = None, loads: bool = True, stores: bool = False,
               target: str = limits.DEFAULT_TARGET) -> CheckedTensorMap:
    """A checked ``CUtensorMap`` over array ``x`` (PyTorch, CuPy, or anything that speaks
    ``__cuda_array_interface__`` or DLPack), for a kernel of your own.

    ``box`` and ``element_strides`` are outermost first, as ``x.shape``; ``swizzle`` is none, 32B,
    64B or 128B (with ``atomicity`` 16B, or on sm_100a 32B, 32B_flip_8B, 64B); ``dtype`` overrides
    the TMA type carrying ``x``'s elements (default: the one of ``x.dtype``; fp8 travels as uint8).
    ``smem_offset`` (where the box lands past a 1024-byte boundary), ``loads`` and ``stores`` (how
    the kernel uses the map) bring the rules that depend on them. Every broken rule raises one
    `ArgumentError` naming field, value, limit and fix; a driver that still refuses raises GpuError.
    """
    view = describe(x, "x")
    names = ArrayFieldNames("x", view.rank)
    found: list[Violation] = list(layout_problems(view, "x"))
    dt = _element_type(view, dtype, found)
    box_list = _ints(box, "box", view.rank, found)
    estrides = [1] * view.rank if element_strides is None else _ints(element_strides, "element_strides",
                                                                        view.rank, found)
    swz, requested = _swizzle(swizzle, atomicity, found)
    enums = (_parse_enum(Interleave, interleave, "interleave", found),
             _parse_enum(L2Promotion, l2_promotion, "l2_promotion", found),
             _parse_enum(OobFill, oob_fill, "oob_fill", found))
    if target not in limits.TARGETS:
        found.append(Violation("argument-form", "target", repr(target), "tmagen knows no such target",
                               f"use one of {', '.join(limits.TARGETS)}", CALL))
    if found or dt is None or box_list is None or estrides is None or swz is None or None in enums:
        raise ArgumentError(CALL, found)
    args = array_map_args(view, dt, "x", box=box_list, element_strides=estrides, interleave=enums[0], swizzle=swz,
                          l2_promotion=enums[1], oob_fill=enums[2], target=target, smem_offset=smem_offset,
                          loads=loads, stores=stores, requested_swizzle=requested)
    violations = run_rules(args, names)
    if violations:
        raise ArgumentError(CALL, violations)
    device = view.device if view.device is not None else runtime.pointer_device(view.ptr)
    with runtime.OnDevice(device):  # the driver wants a current context to encode
        storage = encode(args)
    return CheckedTensorMap(x, args, storage)


def _element_type(view: ArrayView, dtype: str | None, found: list[Violation]) -> DType | None:
    if dtype is None:
        if view.carrier is None:
            found.append(Violation("array-dtype", "x.dtype", view.dtype, "no TMA element type carries it",
                                   "pass dtype= with a TMA type of the same size (e.g. dtype='uint8' for bytes)",
                                   CALL))
            return None
        return DTYPES[view.carrier]
    dt = DTYPES.get(dtype)
    if dt is None or dt.packed:
        names = ", ".join(n for n, d in DTYPES.items() if not d.packed)
        found.append(Violation("argument-form", "dtype", repr(dtype), "it is not a TMA element type tmagen maps "
                               "arrays with", f"use one of {names}", CALL))
        return None
    if dt.nbytes != view.itemsize:
        found.append(Violation("array-dtype", "dtype", f"{dtype!r} ({dt.nbytes} bytes)",
                               f"x's elements ({view.dtype}) are {view.itemsize} bytes",
                               f"use a type of {view.itemsize} bytes, or view x as one", CALL))
        return None
    return dt


def _swizzle(swizzle: str | int, atomicity: str, found: list[Violation]) -> tuple[Swizzle | None, tuple[str, str]]:
    if swizzle in _SPAN_MODES:
        mode = str(swizzle)
        if mode != "128B":
            return {"none": Swizzle.NONE, "32B": Swizzle.B32, "64B": Swizzle.B64}[mode], (mode, atomicity)
        if atomicity not in _ATOMICITIES:
            found.append(Violation("argument-form", "atomicity", repr(atomicity), "it is no 128B atomicity",
                                   f"use one of {', '.join(_ATOMICITIES)}", CALL))
            return None, (mode, atomicity)
        return _ATOMICITIES[atomicity], (mode, atomicity)
    parsed = _parse_enum(Swizzle, swizzle, "swizzle", found)  # a driver name or value, e.g. 128B_atom_32B
    return parsed, ("128B" if parsed is not None and parsed >= Swizzle.B128 else str(swizzle), "16B")
