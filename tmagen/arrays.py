"""GPU arrays of any framework as tmagen sees them: pointer, shape, strides, element type, device,
and the stream to run on.

PyTorch tensors and CuPy arrays are read through their own attributes (the fast path; neither
framework is imported here unless the caller's array is one of theirs); anything else through
``__cuda_array_interface__`` (versions 2 and 3) or DLPack (JAX, and any other producer).
Shapes and strides are outermost first, strides in elements.
"""

from __future__ import annotations

import ctypes
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from tmagen.dtypes import FRAMEWORK_FP8
from tmagen.errors import ArgumentError
from tmagen.rules import Violation
from tmagen.strides import contiguous

SOURCE = "tmagen.arrays"

# numpy type codes (kind + size) -> the TMA element type that carries those bits unchanged
_CARRIERS = {
    "f4": "float32", "f2": "float16", "f8": "float64", "u1": "uint8", "i1": "uint8", "b1": "uint8",
    "u2": "uint16", "i2": "uint16", "i4": "int32", "u4": "uint32", "i8": "int64", "u8": "uint64",
    "c8": "uint64",
}
# DLPack (type code, bits) -> carrier; codes: 0 int, 1 uint, 2 float, 4 bfloat, 5 complex, 6 bool, 7+ float8 kinds
_DLPACK_CARRIERS = {
    (0, 8): "uint8", (1, 8): "uint8", (6, 8): "uint8", (0, 16): "uint16", (1, 16): "uint16",
    (0, 32): "int32", (1, 32): "uint32", (0, 64): "int64", (1, 64): "uint64", (2, 16): "float16",
    (2, 32): "float32", (2, 64): "float64", (4, 16): "bfloat16", (5, 64): "uint64",
}
_DLPACK_CUDA_DEVICES = {2: "cuda", 13: "cuda_managed"}
_DLPACK_DEVICE_NAMES = {1: "cpu", 3: "cuda_host", 4: "opencl", 7: "vulkan", 8: "metal", 10: "rocm"}


@dataclass(slots=True)
class ArrayView:
    """One array as a kernel or a tensor map uses it."""

    obj: Any  # the array itself: held so that its memory lives while tmagen uses the pointer
    framework: str  # "torch", "cupy", "cuda_array_interface" or "dlpack"
    ptr: int
    shape: tuple[int, ...]
    strides: tuple[int, ...]  # elements
    itemsize: int
    dtype: str  # the framework's own name of the element type, for messages
    carrier: str | None  # the tmagen dtype whose TMA type moves these bits, None: none does
    device: int | None  # CUDA ordinal; -1 off the GPU; None: ask the driver (the interface does not say)
    place: str | None = None  # where it is, in words, when the device number does not say it
    stream: int | None = None  # the producer's stream (__cuda_array_interface__ v3), if it named one
    readonly: bool = False

    @property
    def rank(self) -> int:
        return len(self.shape)

    @property
    def where(self) -> str:
        """The device in words, for messages."""
        if self.place is not None:
            return self.place
        return "a CUDA device" if self.device is None else "cpu" if self.device < 0 else f"cuda:{self.device}"

    def with_layout(self, shape: Sequence[int], strides: Sequence[int]) -> ArrayView:
        """The same memory seen with another shape and strides (merged or reinterpreted dimensions)."""
        return ArrayView(self.obj, self.framework, self.ptr, tuple(shape), tuple(strides), self.itemsize, self.dtype,
                         self.carrier, self.device, self.place, self.stream, self.readonly)


def _problem(name: str, rule: str, field: str, value: object, why: str, fix: str) -> ArgumentError:
    return ArgumentError(name, [Violation(rule, field, str(value), why, fix, SOURCE)])


# ----------------------------------------------------------------------------- readers
def _read_torch(x: Any, name: str) -> ArrayView:
    info = _TORCH_INFO.get(x.dtype)
    if info is None:
        info = _TORCH_INFO[x.dtype] = (str(x.dtype), _torch_carriers().get(x.dtype), x.element_size())
    return ArrayView(x, "torch", x.data_ptr(), tuple(x.shape), x.stride(), info[2], info[0], info[1], x.get_device(),
                     None if x.is_cuda or x.device.type == "cpu" else str(x.device))


_TORCH_INFO: dict[Any, tuple[str, str | None, int]] = {}  # dtype -> name, carrier, bytes per element
_TORCH_NAMES = {  # torch dtype name -> carrier
    "float32": "float32", "float16": "float16", "bfloat16": "bfloat16", "float64": "float64",
    "uint8": "uint8", "int8": "uint8", "bool": "uint8", "int16": "uint16", "uint16": "uint16",
    "int32": "int32", "uint32": "uint32", "int64": "int64", "uint64": "uint64",
    "complex32": "uint32", "complex64": "uint64",
    "float8_e4m3fn": "uint8", "float8_e5m2": "uint8", "float8_e4m3fnuz": "uint8", "float8_e5m2fnuz": "uint8",
    "float8_e8m0fnu": "uint8",  # fp8 data travels as uint8
}
_TORCH_CARRIERS: dict[Any, str] = {}
def element_type(view: ArrayView) -> str | None:
    """The spec dtype of ``view``'s elements: an fp8 type where the framework says so; raw uint8 bytes
    may hold one too (CuPy and numpy have no fp8 type); else the carrier."""
    name = FRAMEWORK_FP8.get(view.dtype.removeprefix("torch."))
    return name if name is not None else view.carrier


def _torch_carriers() -> dict[Any, str]:
    if not _TORCH_CARRIERS:
        import torch

        for name, carrier in _TORCH_NAMES.items():
            if isinstance(getattr(torch, name, None), torch.dtype):
                _TORCH_CARRIERS[getattr(torch, name)] = carrier
    return _TORCH_CARRIERS


def _read_cupy(x: Any, name: str) -> ArrayView:
    itemsize = x.dtype.itemsize
    return ArrayView(x, "cupy", int(x.data.ptr), tuple(x.shape), _element_strides(x.strides, itemsize, name),
                     itemsize, f"cupy.{x.dtype.name}", _CARRIERS.get(x.dtype.str[1:]), int(x.device.id))


def _read_cuda_array_interface(x: Any, name: str) -> ArrayView:
    cai = x.__cuda_array_interface__
    if not isinstance(cai, dict) or "shape" not in cai or "typestr" not in cai or "data" not in cai:
        raise _problem(name, "array-interface", f"{name}.__cuda_array_interface__", type(cai).__name__,
                       "it must be a dict with shape, typestr and data (version 2 or 3)",
                       "fix the producer, or pass a PyTorch tensor or CuPy array")
    shape = tuple(int(n) for n in cai["shape"])
    typestr = str(cai["typestr"])
    itemsize = int(typestr[2:]) if typestr[2:].isdigit() else 0
    ptr, readonly = cai["data"]
    strides = cai.get("strides")
    elem = _element_strides(strides, itemsize, name) if strides is not None else contiguous(shape)
    stream = cai.get("stream")
    return ArrayView(x, "cuda_array_interface", int(ptr or 0), shape, elem, itemsize, f"typestr {typestr!r}",
                     _CARRIERS.get(typestr[1:]), None, None, int(stream) if stream else None, bool(readonly))


class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", _DLDevice), ("ndim", ctypes.c_int32), ("dtype", _DLDataType),
                ("shape", ctypes.POINTER(ctypes.c_int64)), ("strides", ctypes.POINTER(ctypes.c_int64)),
                ("byte_offset", ctypes.c_uint64)]


_CAPSULE_POINTER = ctypes.pythonapi.PyCapsule_GetPointer
_CAPSULE_POINTER.restype = ctypes.c_void_p
_CAPSULE_POINTER.argtypes = [ctypes.py_object, ctypes.c_char_p]
_CAPSULE_VALID = ctypes.pythonapi.PyCapsule_IsValid
_CAPSULE_VALID.restype = ctypes.c_int
_CAPSULE_VALID.argtypes = [ctypes.py_object, ctypes.c_char_p]

DLPACK_LEGACY_DEFAULT_STREAM = 1  # DLPack's name for CUDA's legacy default stream, tmagen's stream 0


def _read_dlpack(x: Any, name: str) -> ArrayView:
    device_type, device_id = x.__dlpack_device__()
    if int(device_type) in _DLPACK_CUDA_DEVICES:
        # The producer orders its pending work before tmagen's stream (the legacy default stream).
        capsule = x.__dlpack__(stream=DLPACK_LEGACY_DEFAULT_STREAM)
    else:
        capsule = x.__dlpack__()
    if not _CAPSULE_VALID(capsule, b"dltensor"):
        raise _problem(name, "array-interface", f"{name}.__dlpack__()", type(capsule).__name__,
                       "it must return a 'dltensor' capsule",
                       "fix the producer, or pass a PyTorch tensor or CuPy array")
    # Read without taking ownership: the capsule's own destructor releases the tensor when it goes.
    t = _DLTensor.from_address(_CAPSULE_POINTER(capsule, b"dltensor"))
    shape = tuple(int(t.shape[i]) for i in range(t.ndim))
    strides = tuple(int(t.strides[i]) for i in range(t.ndim)) if t.strides else contiguous(shape)
    code, bits, lanes = t.dtype.code, t.dtype.bits, t.dtype.lanes
    carrier = _DLPACK_CARRIERS.get((code, bits)) if lanes == 1 else None
    if carrier is None and lanes == 1 and bits == 8 and code >= 7:
        carrier = "uint8"  # the float8 and float4-pairs kinds travel as uint8
    kind = int(t.device.device_type)
    on_gpu = kind in _DLPACK_CUDA_DEVICES
    place = None if on_gpu else _DLPACK_DEVICE_NAMES.get(kind, f"DLPack device type {kind}")
    return ArrayView(x, "dlpack", int(t.data or 0) + int(t.byte_offset), shape, strides, max(bits * lanes // 8, 1),
                     f"DLPack dtype (code {code}, {bits} bits, {lanes} lane{'s' if lanes != 1 else ''})", carrier,
                     int(t.device.device_id) if on_gpu else -1, place)


def _element_strides(strides: Sequence[int], itemsize: int, name: str) -> tuple[int, ...]:
    if itemsize <= 0 or any(int(s) % itemsize for s in strides):
        raise _problem(name, "array-strides", f"{name}.strides", f"{list(strides)} bytes",
                       f"they must be whole multiples of the element size ({itemsize} bytes)",
                       "make a copy with whole-element strides")
    return tuple(int(s) // itemsize for s in strides)


def _read_other(x: Any, name: str) -> ArrayView:
    # Per object: the interfaces may be instance attributes.
    if hasattr(x, "__cuda_array_interface__"):
        return _read_cuda_array_interface(x, name)
    if hasattr(x, "__dlpack__") and hasattr(x, "__dlpack_device__"):
        return _read_dlpack(x, name)
    kind = type(x)
    raise _problem(name, "array-interface", f"type({name})", f"{kind.__module__}.{kind.__qualname__}",
                   "tmagen reads arrays that speak __cuda_array_interface__ or DLPack",
                   "pass a PyTorch tensor, a CuPy array, or another framework's GPU array")


def _reader(kind: type) -> Callable[[Any, str], ArrayView]:
    module = kind.__module__ or ""
    if module.startswith("torch") and "torch" in sys.modules:
        import torch

        if issubclass(kind, torch.Tensor):
            return _read_torch
    if module.startswith("cupy") and hasattr(kind, "data") and hasattr(kind, "device") and hasattr(kind, "strides"):
        return _read_cupy
    return _read_other


_READERS: dict[type, Callable[[Any, str], ArrayView]] = {}


def describe(x: Any, name: str = "x") -> ArrayView:
    """What tmagen needs of array ``x`` (``name`` is how messages call it)."""
    reader = _READERS.get(type(x))
    if reader is None:
        reader = _READERS[type(x)] = _reader(type(x))
    return reader(x, name)


# ----------------------------------------------------------------------------- the framework's side
def current_stream(view: ArrayView) -> int:
    """The stream the array's framework runs on now: PyTorch's or CuPy's current stream, the producer's
    stream for __cuda_array_interface__ v3, else the legacy default stream (0)."""
    if view.framework == "torch":
        return _torch_stream(view.device)
    if view.framework == "cupy":
        import cupy

        return int(cupy.cuda.get_current_stream().ptr)
    if view.stream is not None:
        return 0 if view.stream == 1 else view.stream  # 1 names the legacy default stream, 2 the per-thread one
    return 0


def _torch_stream(device: int | None) -> int:
    import torch

    raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)  # what torch.cuda.current_stream() wraps
    if raw is not None:
        return int(raw(device))
    return int(torch.cuda.current_stream(device).cuda_stream)


def empty(like: ArrayView, shape: Sequence[int], name: str = "out", dtype: str | None = None) -> Any:
    """A new contiguous array of ``shape`` in the framework and on the device of ``like``, of its
    dtype or of the tmagen ``dtype`` (bfloat16, float16, float32, ...)."""
    if like.device is not None and like.device < 0:  # before "pass out=": no output helps a CPU input
        raise _problem("x", "array-device", "x.device", like.where, "TMA reads and writes GPU memory",
                       "move x to the GPU first (e.g. x.cuda(), cupy.asarray(x))")
    if like.framework == "torch":
        if dtype is None:
            return like.obj.new_empty(tuple(shape))
        import torch

        return like.obj.new_empty(tuple(shape), dtype=getattr(torch, dtype))
    if like.framework == "cupy":
        import cupy
        import numpy

        with cupy.cuda.Device(like.device):
            return cupy.empty(tuple(shape), dtype=like.obj.dtype if dtype is None else numpy.dtype(dtype))
    raise _problem(name, "array-output", name, "None",
                   f"tmagen allocates outputs for PyTorch and CuPy, and the input is read through {like.framework}",
                   f"pass {name}=, a writable GPU array of shape {tuple(shape)}")


def merge_dims(shape: Sequence[int], *strides: Sequence[int], keep_last: int = 0) -> tuple[list[int], list[list[int]]]:
    """``shape`` with adjacent dimensions merged wherever every stride list lays them out as one
    (outer stride = inner stride x inner extent) and extents of 1 dropped: the fewest dimensions
    that describe the same elements. The last ``keep_last`` dimensions are kept as they are."""
    head = len(shape) - keep_last
    dims: list[int] = []
    out: list[list[int]] = [[] for _ in strides]
    for i in range(head):
        if shape[i] == 1:
            continue
        if dims and all(o[-1] == s[i] * shape[i] for o, s in zip(out, strides)):
            dims[-1] *= shape[i]
            for o, s in zip(out, strides):
                o[-1] = s[i]
            continue
        dims.append(int(shape[i]))
        for o, s in zip(out, strides):
            o.append(int(s[i]))
    dims += [int(n) for n in shape[head:]]
    for o, s in zip(out, strides):
        o += [int(v) for v in s[head:]]
    if not dims:
        return [1], [[1] for _ in strides]
    return dims, out


def empty_view(like: ArrayView, shape: tuple[int, ...], name: str = "out",
               dtype: str | None = None) -> tuple[Any, ArrayView]:
    """`empty`, and how tmagen sees it (without reading back what it already knows)."""
    out = empty(like, shape, name, dtype)
    if like.framework != "torch" or (dtype is not None and dtype != like.carrier):
        return out, describe(out, name)
    return out, ArrayView(out, "torch", out.data_ptr(), shape, _contiguous_cached(shape), like.itemsize, like.dtype,
                          like.carrier, like.device, like.place)


@lru_cache(maxsize=4096)
def _contiguous_cached(shape: tuple[int, ...]) -> tuple[int, ...]:
    return contiguous(shape)
