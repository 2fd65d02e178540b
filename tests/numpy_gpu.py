"""tmagen.ops on a GPU made of numpy, for the CPU tests: arrays live in one arena of host memory
(their pointers are its addresses, so a test chooses each pointer's alignment), and the edges of a
move (`tmagen.ops.launch_kernel`, `prepare_strided`, `run_strided`, `copy_bytes`) are replaced by
numpy doing what each kernel does with the layout it is handed: a TMA kernel after its own checks
of that layout (the rules, on the real strides and pointers), a strided kernel from its parameter
block alone (`StridedCall`: extents, strides, counts), as the CUDA code reads it.

It proves the routing and every layout handed to a kernel; it proves nothing about the kernels on
silicon (tests/gpu/test_ops_layouts.py does)."""

from __future__ import annotations

import ctypes
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from tmagen import kernels, ops
from tmagen.kinds.strided.plan import StridedCall

ARENA = np.zeros(1 << 26, np.uint8)
BASE = ARENA.ctypes.data
_NEXT = [0]
ROUTES: list[str] = []  # the kernels run, in order


class Array:
    """A "GPU" array in the arena, speaking __cuda_array_interface__ (v3, on stream 0)."""

    def __init__(self, shape: Sequence[int], strides: Sequence[int], itemsize: int, ptr: int, typestr: str) -> None:
        self.shape, self.strides, self.itemsize, self.ptr = tuple(shape), tuple(strides), itemsize, ptr
        self.__cuda_array_interface__ = {"shape": self.shape, "typestr": typestr, "data": (ptr, False),
                                         "strides": tuple(s * itemsize for s in strides), "version": 3,
                                         "stream": None}

    def bytes_view(self) -> np.ndarray:
        """The elements as bytes: shape + (itemsize,)."""
        return _view(self.ptr, self.shape, self.strides, self.itemsize)


def allocate(nbytes: int, misalign: int = 0) -> int:
    """A pointer to ``nbytes`` fresh bytes, ``misalign`` bytes past a 256-byte boundary."""
    start = -(-(_NEXT[0] + BASE) // 256) * 256 - BASE + misalign
    _NEXT[0] = start + nbytes + 512
    if _NEXT[0] > ARENA.size:
        _NEXT[0] = 0
        return allocate(nbytes, misalign)
    ARENA[start:start + nbytes] = 0xEE
    return BASE + start


def from_numpy(a: np.ndarray, misalign: int = 0) -> Array:
    """``a`` (any view) copied into the arena with the same strides, its first element ``misalign``
    bytes past a 256-byte boundary."""
    es = a.itemsize
    strides = [s // es for s in a.strides]
    low = sum((n - 1) * s for n, s in zip(a.shape, strides) if s < 0)
    span = (sum((n - 1) * abs(s) for n, s in zip(a.shape, strides)) + 1) * es if 0 not in a.shape else es
    ptr = allocate(span, misalign) - low * es
    arr = Array(a.shape, strides, es, ptr, a.dtype.str)
    if 0 not in a.shape:
        arr.bytes_view()[...] = a.reshape(*a.shape, 1).view(np.uint8).reshape(*a.shape, es) if a.ndim else \
            np.frombuffer(a.tobytes(), np.uint8)
    return arr


def empty(shape: Sequence[int], dtype: np.dtype, misalign: int = 0) -> Array:
    es = np.dtype(dtype).itemsize
    strides = [int(math.prod(shape[i + 1:])) for i in range(len(shape))]
    return Array(shape, strides, es, allocate(max(math.prod(shape), 1) * es, misalign), np.dtype(dtype).str)


def to_numpy(arr: Array, dtype: np.dtype) -> np.ndarray:
    return np.ascontiguousarray(arr.bytes_view()).view(dtype).reshape(arr.shape)


def _view(ptr: int, shape: Sequence[int], strides: Sequence[int], es: int) -> np.ndarray:
    return np.lib.stride_tricks.as_strided(ARENA[ptr - BASE:], shape=(*shape, es),
                                           strides=(*(s * es for s in strides), 1))


# ----------------------------------------------------------------------------- the kernels
def launch_kernel(kind: str, carrier: str, rank: int, src: Any, dst: Any, tile: tuple[int, int] | None = None) -> None:
    k = ops.kernel(kind, carrier, rank, tile)
    k._check([src], dst)  # every rule of the kernel's maps on the real layout: raises ArgumentError
    problems = k.launcher.problems(k.plan, [src], dst)
    if problems:
        from tmagen.errors import ArgumentError

        raise ArgumentError("numpy GPU", problems)
    s = _view(src.ptr, src.shape, src.strides, src.itemsize)
    d = _view(dst.ptr, dst.shape, dst.strides, dst.itemsize)

    def run() -> None:
        ROUTES.append(kind)
        d[...] = s if kind == "copy" else np.swapaxes(s, -2, -3)

    run()
    _record(run)


FUNCTIONS: dict[int, Any] = {}  # "CUfunction" -> what it does, for the launches tmagen.ops replays


def _record(run: Any) -> None:
    recording = getattr(ops._LOCAL, "recording", None)
    if recording is not None:
        handle = len(FUNCTIONS) + 1
        FUNCTIONS[handle] = run
        recording.append(("launch", handle, 1, 1, 0, (ctypes.c_void_p * 1)()))


def raw_launch_function() -> Any:
    """cuLaunchKernel as tmagen.ops's replay calls it: every argument a ctypes value of its C type."""
    def launch(fn: ctypes.c_void_p, *args: Any) -> int:
        assert len(args) == 10 and all(isinstance(a, ctypes.c_uint) for a in args[:7]), args
        assert isinstance(args[7], ctypes.c_void_p) and isinstance(args[8], ctypes.c_void_p) and args[9] is None
        FUNCTIONS[fn.value]()
        return 0
    return launch


def prepare_strided(call: StridedCall, src: int, dst: int, device: int, stream: int) -> Any:
    return call, src, dst


def run_strided(prepared: Any, stream: int, device: int) -> None:
    """The kernel's arithmetic on its parameter block: element i of ``extent`` (row-major) at
    sum(c * src) and sum(c * dst), dst at i where ``dst_linear``; the plane's tiles cover the same."""
    call, src, dst = prepared
    es = call.elem_bytes
    shape = call.extent

    def run() -> None:
        ROUTES.append(call.kernel)
        if call.kernel == "gather":
            assert call.count == math.prod(shape)
            s = _view(src, shape, call.src, es)
            if call.dst_linear:
                _view(dst, (call.count,), (1,), es)[...] = s.reshape(call.count, es)
            else:
                _view(dst, shape, call.dst, es)[...] = s
        else:
            assert call.count == call.tiles_c * call.tiles_r * math.prod(shape[:3])
            tile_r, tile_c = call.tile
            assert call.tiles_c * tile_c >= shape[4] > (call.tiles_c - 1) * tile_c
            assert call.tiles_r * tile_r >= shape[3] > (call.tiles_r - 1) * tile_r
            assert call.src[4] == 1 and call.dst[3] == 1
            if call.kernel == "narrow":  # the source's rows follow one another: a tile is one span
                assert call.src[3] == shape[4] and call.tile_rows % 4 == 0
            if call.kernel == "tile":  # every row's address a whole word of the kernel's loads and stores
                assert src % call.load_bytes == 0 and all(s * es % call.load_bytes == 0 for s in call.src[:4])
                assert dst % call.store_bytes == 0 and all(
                    s * es % call.store_bytes == 0 for s in (*call.dst[:3], call.dst[4]))
            _view(dst, shape, call.dst, es)[...] = _view(src, shape, call.src, es)

    run()
    _record(run)


def copy_bytes(dst: int, src: int, nbytes: int, stream: int, device: int) -> None:
    ROUTES.append("bytes")
    ARENA[dst - BASE:dst - BASE + nbytes] = ARENA[src - BASE:src - BASE + nbytes]
    recording = getattr(ops._LOCAL, "recording", None)
    if recording is not None:
        recording.append(None)


def install(monkeypatch: Any) -> None:
    for name in ("launch_kernel", "prepare_strided", "run_strided", "copy_bytes"):
        monkeypatch.setattr(ops, name, globals()[name])
    monkeypatch.setattr(kernels, "_RAW_LAUNCH", raw_launch_function())
    monkeypatch.setattr(ops, "_device", lambda view: 0)
    monkeypatch.setattr(ops, "_sms", lambda view: 132)
    ops._MOVES.clear()
    ops._PREPARED.clear()
    ROUTES.clear()


# ----------------------------------------------------------------------------- PyTorch's per-call path
class Tensor(Array):
    """What tmagen.ops's per-call path reads of a torch.Tensor."""

    def __init__(self, shape: Sequence[int], strides: Sequence[int], itemsize: int, ptr: int, typestr: str) -> None:
        super().__init__(shape, strides, itemsize, ptr, typestr)
        self.dtype, self.device, self.requires_grad = typestr, "cuda:0", False

    def data_ptr(self) -> int:
        return self.ptr

    def stride(self) -> tuple[int, ...]:
        return self.strides

    def get_device(self) -> int:
        return 0


class FakeTorch:
    """torch.empty on the numpy GPU: a freed block is handed out again, as PyTorch's caching
    allocator does for a loop that drops each result (``reuse``)."""

    Tensor = Tensor

    def __init__(self) -> None:
        self.reuse: dict[tuple, int] = {}
        self.hold = True  # hand the same block to the same shape

    def empty(self, shape: Sequence[int], dtype: str, device: str) -> Tensor:
        es = np.dtype(dtype).itemsize
        key = (tuple(shape), dtype)
        if not self.hold or key not in self.reuse:
            self.reuse[key] = allocate(max(math.prod(shape), 1) * es)
        strides = [int(math.prod(shape[i + 1:])) for i in range(len(shape))]
        return Tensor(shape, strides, es, self.reuse[key], dtype)

    def empty_strided(self, shape: Sequence[int], strides: Sequence[int], dtype: str, device: str) -> Tensor:
        assert tuple(strides) == tuple(int(math.prod(shape[i + 1:])) for i in range(len(shape)))
        return self.empty(shape, dtype, device)

    class compiler:  # noqa: N801 - as torch spells it
        @staticmethod
        def is_compiling() -> bool:
            return False

    @staticmethod
    def is_grad_enabled() -> bool:
        return True


def tensor(a: np.ndarray) -> Tensor:
    arr = from_numpy(a)
    return Tensor(arr.shape, arr.strides, arr.itemsize, arr.ptr, a.dtype.str)


def install_torch(monkeypatch: Any) -> FakeTorch:
    from tmagen import runtime

    torch = FakeTorch()
    monkeypatch.setattr(ops, "_TORCH_MODULE", torch)
    monkeypatch.setattr(ops, "_TENSOR", Tensor)
    monkeypatch.setattr(ops, "_TORCH_STREAM", lambda device: 0)
    monkeypatch.setattr(ops, "_TORCH_DEVICE", lambda: 0)
    monkeypatch.setattr(ops, "_EMPTY_STRIDED", torch.empty_strided)
    monkeypatch.setattr(ops, "_GRAD_ENABLED", torch.is_grad_enabled)
    monkeypatch.setattr(ops, "_IS_COMPILING", torch.compiler.is_compiling)
    monkeypatch.setattr(runtime, "current_context", lambda: 1)
    monkeypatch.setattr(runtime, "primary_context", lambda device: 1)
    ops._forget_replays()
    return torch
