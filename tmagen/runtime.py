"""A thin layer over `cuda.bindings.driver`: the primary context, device memory, modules loaded
from a cubin, tensor maps, launches and events. Every driver call's result is checked.

Tensor maps are encoded into 128-byte-aligned storage tmagen owns (the CUDA 13 headers declare
``alignas(128)``; the driver documents 64). cuda-bindings' own ``CUtensorMap`` objects were seen
48 bytes past a 64-byte boundary; on an H200 (driver 580.159) encoding into such storage still
succeeded with identical bytes, but tmagen does not rely on that.
"""

from __future__ import annotations

import ctypes
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np

from tmagen.errors import GpuError, NoGpu
from tmagen.kinds.matmul.dispatch import peak_memory_bytes_per_us


def _driver() -> Any:
    try:
        from cuda.bindings import driver
    except ImportError as exc:
        raise NoGpu(f"cuda-bindings is not importable ({exc})") from None
    return driver


def check(result: Any, what: str) -> Any:
    """The values of a driver call after its CUresult, or GpuError naming the call and the error."""
    drv = _driver()
    err, *values = result if isinstance(result, tuple) else (result,)
    if err != drv.CUresult.CUDA_SUCCESS:
        _, name = drv.cuGetErrorName(err)
        raise GpuError(f"{what} failed: {name.decode() if isinstance(name, bytes) else err}")
    if not values:
        return None
    return values[0] if len(values) == 1 else tuple(values)


def no_gpu_reason() -> str | None:
    """Why no kernel can run here, or None when a GPU and driver are present."""
    try:
        drv = _driver()
        err, = drv.cuInit(0)
    except NoGpu as exc:
        return str(exc)
    except Exception as exc:  # noqa: BLE001 - a missing libcuda surfaces as various errors
        return f"no CUDA driver ({exc})"
    if err != drv.CUresult.CUDA_SUCCESS:
        return f"no usable GPU (cuInit returned {err.name})"
    err, count = drv.cuDeviceGetCount()
    if err != drv.CUresult.CUDA_SUCCESS or count == 0:
        return "no CUDA device"
    return None


_GPU_READY = False


def require_gpu() -> None:
    """NoGpu, saying why, unless a driver and a device are here (checked until it succeeds once)."""
    global _GPU_READY
    if not _GPU_READY:
        reason = no_gpu_reason()
        if reason:
            raise NoGpu(reason)
        _GPU_READY = True


def memory_bytes_per_us(dev: Any) -> int:
    """The DRAM peak of a CUdevice in bytes per microsecond, from the driver's memory clock and bus
    width (by which a matmul picks the dispatch table of the GPU most like it)."""
    drv = _driver()
    attr = drv.CUdevice_attribute
    clock = check(drv.cuDeviceGetAttribute(attr.CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE, dev), "attribute")
    bus = check(drv.cuDeviceGetAttribute(attr.CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH, dev), "attribute")
    return peak_memory_bytes_per_us(int(clock), int(bus))


@dataclass
class Device:
    ordinal: int
    name: str
    compute_capability: tuple[int, int]
    multiprocessors: int
    driver_version: int
    context: Any
    memory_bytes_per_us: int = 0  # the DRAM peak (by which a matmul picks its dispatch table)

    @classmethod
    def open(cls, ordinal: int = 0) -> Device:
        reason = no_gpu_reason()
        if reason:
            raise NoGpu(reason)
        drv = _driver()
        dev = check(drv.cuDeviceGet(ordinal), "cuDeviceGet")
        name = check(drv.cuDeviceGetName(256, dev), "cuDeviceGetName").split(b"\0")[0].decode()
        attr = drv.CUdevice_attribute
        major = check(drv.cuDeviceGetAttribute(attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev), "attribute")
        minor = check(drv.cuDeviceGetAttribute(attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev), "attribute")
        sms = check(drv.cuDeviceGetAttribute(attr.CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev), "attribute")
        version = check(drv.cuDriverGetVersion(), "cuDriverGetVersion")
        ctx = check(drv.cuDevicePrimaryCtxRetain(dev), "cuDevicePrimaryCtxRetain")
        check(drv.cuCtxSetCurrent(ctx), "cuCtxSetCurrent")
        return cls(ordinal, name, (major, minor), sms, version, ctx, memory_bytes_per_us(dev))

    def synchronize(self) -> None:
        check(_driver().cuCtxSynchronize(), "cuCtxSynchronize")


class Buffer:
    """Device memory of ``nbytes`` bytes (cuMemAlloc: plain, not managed)."""

    def __init__(self, nbytes: int) -> None:
        self.nbytes = int(nbytes)
        self.ptr = int(check(_driver().cuMemAlloc(max(self.nbytes, 1)), f"cuMemAlloc({self.nbytes})"))

    @classmethod
    def from_array(cls, array: np.ndarray) -> Buffer:
        buf = cls(array.nbytes)
        buf.upload(array)
        return buf

    def upload(self, array: np.ndarray) -> None:
        data = np.ascontiguousarray(array)
        if data.nbytes > self.nbytes:
            raise GpuError(f"{data.nbytes} bytes do not fit a buffer of {self.nbytes}")
        check(_driver().cuMemcpyHtoD(self.ptr, data.ctypes.data, data.nbytes), "cuMemcpyHtoD")

    def fill(self, byte: int) -> None:
        check(_driver().cuMemsetD8(self.ptr, byte & 0xFF, self.nbytes), "cuMemsetD8")

    def download(self, dtype: np.dtype | type = np.uint8, shape: Sequence[int] | None = None) -> np.ndarray:
        out = np.empty(self.nbytes, dtype=np.uint8)
        check(_driver().cuMemcpyDtoH(out.ctypes.data, self.ptr, self.nbytes), "cuMemcpyDtoH")
        out = out.view(dtype)
        return out.reshape(shape) if shape is not None else out

    def free(self) -> None:
        if self.ptr:
            check(_driver().cuMemFree(self.ptr), "cuMemFree")
            self.ptr = 0

    def __enter__(self) -> Buffer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.free()


class TensorMap:
    """128 bytes of ``CUtensorMap`` in storage aligned to 128 bytes."""

    SIZE = 128

    def __init__(self) -> None:
        self._raw = (ctypes.c_uint8 * (2 * self.SIZE))()
        self.address = (ctypes.addressof(self._raw) + self.SIZE - 1) & ~(self.SIZE - 1)

    @property
    def bytes(self) -> bytes:
        return ctypes.string_at(self.address, self.SIZE)

    def as_parameter(self) -> ctypes.Array:  # a by-value kernel parameter (__grid_constant__)
        return (ctypes.c_uint8 * self.SIZE).from_buffer_copy(self.bytes)


_FUNCTIONS: dict[str, Any] = {}


def driver_function(symbol: str, restype: Any, *argtypes: Any) -> Any:
    """A driver entry point (its CUDA 12.0 version, through cuGetProcAddress) as a ctypes function:
    calls without cuda-bindings' per-call conversions, and on storage tmagen owns."""
    fn = _FUNCTIONS.get(symbol)
    if fn is None:
        fn = _FUNCTIONS[symbol] = ctypes.CFUNCTYPE(restype, *argtypes)(driver_address(symbol))
    return fn


def driver_address(symbol: str) -> int:
    """The address of a driver entry point (its CUDA 12.0 version, through cuGetProcAddress)."""
    drv = _driver()
    pfn, _status = check(drv.cuGetProcAddress(symbol.encode(), 12000,
                                              drv.CUdriverProcAddress_flags.CU_GET_PROC_ADDRESS_DEFAULT),
                         f"cuGetProcAddress({symbol})")
    if not int(pfn):
        raise GpuError(f"the CUDA driver has no {symbol}")
    return int(pfn)


def launch_function() -> Any:
    """cuLaunchKernel as a ctypes function (for the kernels tmagen launches on storage it owns)."""
    u = ctypes.c_uint
    return driver_function("cuLaunchKernel", ctypes.c_int, ctypes.c_void_p, u, u, u, u, u, u, u,
                           ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p)


# Programmatic dependent launch (CUDA Programming Guide, "Programmatic Dependent Launch and
# Synchronization"; PTX ISA, griddepcontrol): a kernel launched with programmatic stream
# serialization may start while the kernel before it in the stream finishes, once every block of
# that one has signalled (griddepcontrol.launch_dependents) or exited; it waits for that kernel's
# completion and its memory (griddepcontrol.wait) before it touches global memory. Only kernels
# that wait so are launched this way (`KernelPlan.dependent_launch`). What it saves is the launch's
# latency and the block's set-up: on an H200, back-to-back tmagen matmuls of 512^3 took 3.9 us
# each against 5.2 (scratch probe of 2026-11-25, in the note of issue 18).
class LaunchAttribute(ctypes.Structure):
    """CUlaunchAttribute: an id, padding to 8 bytes, and a 64-byte union (an int here)."""

    _fields_ = [("id", ctypes.c_int), ("_pad", ctypes.c_char * 4), ("value", ctypes.c_int),
                ("_rest", ctypes.c_char * 60)]


class LaunchConfig(ctypes.Structure):
    """CUlaunchConfig: grid, block, dynamic shared memory, stream and attributes."""

    _fields_ = [("grid_x", ctypes.c_uint), ("grid_y", ctypes.c_uint), ("grid_z", ctypes.c_uint),
                ("block_x", ctypes.c_uint), ("block_y", ctypes.c_uint), ("block_z", ctypes.c_uint),
                ("smem", ctypes.c_uint), ("stream", ctypes.c_void_p), ("attrs", ctypes.POINTER(LaunchAttribute)),
                ("num_attrs", ctypes.c_uint)]


PROGRAMMATIC_STREAM_SERIALIZATION = 6  # CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION (cuda.h)
CUDA_ERROR_NOT_SUPPORTED = 801
_DEPENDENT = LaunchAttribute(PROGRAMMATIC_STREAM_SERIALIZATION, b"", 1, b"")  # never changed: shared by every config


def dependent_config(grid: int, block: int, smem: int, stream: int | None) -> LaunchConfig:
    """The launch configuration of a programmatic dependent launch on ``stream``."""
    return LaunchConfig(grid, 1, 1, block, 1, 1, smem, stream or None, ctypes.pointer(_DEPENDENT), 1)


def launch_ex_function() -> Any:
    """cuLaunchKernelEx as a ctypes function that converts nothing (config pointer, function,
    parameter array, extra), keeping the GIL as the other launches do."""
    fn = _FUNCTIONS.get("cuLaunchKernelEx")
    if fn is None:
        fn = _FUNCTIONS["cuLaunchKernelEx"] = ctypes.PYFUNCTYPE(ctypes.c_int)(driver_address("cuLaunchKernelEx"))
    return fn


def launch_dependent(function: int, grid: int, block: int, smem: int, stream: int | None, params: int) -> int:
    """A programmatic dependent launch; where the driver does not support one (CUDA_ERROR_NOT_SUPPORTED),
    a plain launch (the kernel's wait then returns at once). Returns the driver's result."""
    config = dependent_config(grid, block, smem, stream)
    result = launch_ex_function()(ctypes.byref(config), ctypes.c_void_p(function), ctypes.c_void_p(params), None)
    if result == CUDA_ERROR_NOT_SUPPORTED:
        result = launch_function()(function, grid, 1, 1, block, 1, 1, smem, stream, params, None)
    return result


def _encode_function() -> Any:
    """cuTensorMapEncodeTiled, callable on storage tmagen owns."""
    return driver_function("cuTensorMapEncodeTiled", ctypes.c_int, ctypes.c_void_p, ctypes.c_int, ctypes.c_uint32,
                           ctypes.c_void_p, ctypes.POINTER(ctypes.c_uint64), ctypes.POINTER(ctypes.c_uint64),
                           ctypes.POINTER(ctypes.c_uint32), ctypes.POINTER(ctypes.c_uint32),
                           ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_int)


def tiled_encoder(*, dtype: int, rank: int, global_dim: Sequence[int], global_strides: Sequence[int],
                  box_dim: Sequence[int], element_strides: Sequence[int], interleave: int, swizzle: int,
                  l2_promotion: int, oob_fill: int) -> Callable[[int, TensorMap], int]:
    """cuTensorMapEncodeTiled (driver order, innermost first) with every argument but the global
    address converted once: ``(address, into) -> CUresult`` (a map per pointer at one driver call)."""

    def arr(ctype: Any, values: Sequence[int]) -> Any:
        # room for any rank the driver might read, whatever the caller passed
        return (ctype * max(len(values), 8))(*[int(v) & ((1 << (8 * ctypes.sizeof(ctype))) - 1) for v in values])

    dims, strides = arr(ctypes.c_uint64, global_dim), arr(ctypes.c_uint64, global_strides)
    box, steps = arr(ctypes.c_uint32, box_dim), arr(ctypes.c_uint32, element_strides)
    fixed = (int(interleave), int(swizzle), int(l2_promotion), int(oob_fill))
    kind, count = int(dtype), int(rank)

    def encode(address: int, into: TensorMap) -> int:
        return int(_encode_function()(into.address, kind, count, int(address), dims, strides, box, steps, *fixed))

    return encode


def encode_tiled_raw(*, dtype: int, rank: int, global_address: int, global_dim: Sequence[int],
                     global_strides: Sequence[int], box_dim: Sequence[int], element_strides: Sequence[int],
                     interleave: int, swizzle: int, l2_promotion: int, oob_fill: int,
                     into: TensorMap | None = None) -> tuple[int, TensorMap]:
    """Calls cuTensorMapEncodeTiled (driver order, innermost first) and returns its CUresult as an
    integer with the map (written ``into`` storage given): for comparing the driver with the
    validator, where a refusal is data."""
    tmap = into if into is not None else TensorMap()
    result = tiled_encoder(dtype=dtype, rank=rank, global_dim=global_dim, global_strides=global_strides,
                           box_dim=box_dim, element_strides=element_strides, interleave=interleave, swizzle=swizzle,
                           l2_promotion=l2_promotion, oob_fill=oob_fill)(global_address, tmap)
    return result, tmap


def encode_failed(result: int, what: Any) -> GpuError:
    """The error of a refused cuTensorMapEncodeTiled (``what``: the arguments, for the message)."""
    drv = _driver()
    _, name = drv.cuGetErrorName(drv.CUresult(result))
    return GpuError(f"cuTensorMapEncodeTiled returned {name.decode()} ({result}) for {what}")


def encode_tiled(**kwargs: Any) -> TensorMap:
    result, tmap = encode_tiled_raw(**kwargs)
    if result != 0:
        raise encode_failed(result, kwargs)
    return tmap


# ----------------------------------------------------------------------------- contexts, for Python callers
_PRIMARY: dict[int, int] = {}
_VOIDP = ctypes.c_void_p


def primary_context(ordinal: int) -> int:
    """The primary context of device ``ordinal`` (the one PyTorch, CuPy and the runtime API use),
    retained once per process, as an integer handle."""
    ctx = _PRIMARY.get(ordinal)
    if ctx is None:
        require_gpu()
        drv = _driver()
        dev = check(drv.cuDeviceGet(ordinal), f"cuDeviceGet({ordinal})")
        ctx = _PRIMARY[ordinal] = int(check(drv.cuDevicePrimaryCtxRetain(dev), "cuDevicePrimaryCtxRetain"))
    return ctx


def current_context() -> int:
    out = _VOIDP()
    _raise_for(driver_function("cuCtxGetCurrent", ctypes.c_int, ctypes.POINTER(_VOIDP))(ctypes.byref(out)),
               "cuCtxGetCurrent")
    return out.value or 0


class OnDevice:
    """Makes the primary context of a device current for a block: pushed and popped where the
    thread has another one current, so that the caller's current device never changes; where it
    has none, set and left current, as the runtime API does at a thread's first call. A thread
    with none (autograd's backward thread, where PyTorch reused memory and made no runtime call)
    then keeps it, and the launches made again there (`tmagen.kernels.launch_again`, which asks
    no context) are not refused: before, each backward product of a training step fell back to
    the general path, a 64 x 64 x 64 step taking 493 us against torch's 219 on an H100 machine."""

    def __init__(self, ordinal: int) -> None:
        self.context = primary_context(ordinal)
        self._pushed = False

    def __enter__(self) -> OnDevice:
        current = current_context()
        if current == 0:
            _raise_for(driver_function("cuCtxSetCurrent", ctypes.c_int, _VOIDP)(self.context), "cuCtxSetCurrent")
        elif current != self.context:
            _raise_for(driver_function("cuCtxPushCurrent", ctypes.c_int, _VOIDP)(self.context), "cuCtxPushCurrent")
            self._pushed = True
        return self

    def __exit__(self, *exc: object) -> None:
        if self._pushed:
            self._pushed = False
            out = _VOIDP()
            _raise_for(driver_function("cuCtxPopCurrent", ctypes.c_int, ctypes.POINTER(_VOIDP))(ctypes.byref(out)),
                       "cuCtxPopCurrent")


def copy_bytes_async(dst: int, src: int, nbytes: int, stream: int, device: int) -> None:
    """``nbytes`` from device address ``src`` to ``dst``, queued on ``stream`` (cuMemcpyDtoDAsync)."""
    with OnDevice(device):
        _raise_for(driver_function("cuMemcpyDtoDAsync", ctypes.c_int, ctypes.c_uint64, ctypes.c_uint64,
                                   ctypes.c_size_t, _VOIDP)(dst, src, nbytes, stream or None), "cuMemcpyDtoDAsync")


def zero_bytes_async(dst: int, nbytes: int, stream: int) -> None:
    """``nbytes`` zero bytes at device address ``dst``, queued on ``stream`` (cuMemsetD8Async; a memset
    node under a CUDA graph capture), in the current context."""
    _raise_for(driver_function("cuMemsetD8Async", ctypes.c_int, ctypes.c_uint64, ctypes.c_ubyte, ctypes.c_size_t,
                               _VOIDP)(dst, 0, nbytes, stream or None), "cuMemsetD8Async")


def pointer_device(ptr: int) -> int:
    """The ordinal of the device that holds ``ptr``, or GpuError where it is no device memory."""
    require_gpu()
    drv = _driver()
    value = check(drv.cuPointerGetAttribute(drv.CUpointer_attribute.CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, ptr),
                  f"cuPointerGetAttribute(device ordinal of {ptr:#x})")
    return int(value)


def stream_is_capturing(stream: int) -> bool:
    """Whether ``stream`` is being captured into a CUDA graph."""
    status = ctypes.c_int()
    _raise_for(driver_function("cuStreamIsCapturing", ctypes.c_int, _VOIDP, ctypes.POINTER(ctypes.c_int))(
        stream, ctypes.byref(status)), "cuStreamIsCapturing")
    return status.value != 0


_T = TypeVar("_T")
_LOAD_LOCK = threading.Lock()


def load_once(cache: dict[Any, _T], key: Any, device: int, stream: int | None, what: str,
              load: Callable[[], _T]) -> _T:
    """``cache[key]``, made by ``load()`` on ``device`` at the first call of the process (one thread
    loads; the others wait and take it). A first call on a stream being captured into a CUDA graph
    is refused: compiling and loading a module is not allowed there."""
    found = cache.get(key)
    if found is not None:
        return found
    with _LOAD_LOCK:
        if key in cache:
            return cache[key]
        with OnDevice(device):  # (the thread may have no context current: autograd's backward thread)
            if stream is not None and stream_is_capturing(stream):
                raise GpuError(f"tmagen's {what} compile and load at their first call on a device, which a CUDA "
                               "graph capture does not allow: call the op once before capturing")
            found = cache[key] = load()
        return found


def _raise_for(result: int, what: str) -> None:
    if result != 0:
        drv = _driver()
        _, name = drv.cuGetErrorName(drv.CUresult(result))
        raise GpuError(f"{what} failed: {name.decode() if isinstance(name, bytes) else result}")


class Module:
    """A cubin loaded into the current context."""

    def __init__(self, cubin: bytes) -> None:
        self._module = check(_driver().cuModuleLoadData(cubin), "cuModuleLoadData")

    def function(self, symbol: str, dynamic_smem: int = 0) -> Kernel:
        drv = _driver()
        fn = check(drv.cuModuleGetFunction(self._module, symbol.encode()), f"cuModuleGetFunction({symbol})")
        if dynamic_smem > 0:  # a block's static and dynamic shared memory together past 48 KB need it
            check(drv.cuFuncSetAttribute(
                fn, drv.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, dynamic_smem),
                f"allowing {symbol} {dynamic_smem} bytes of shared memory")
        return Kernel(symbol, fn, dynamic_smem)

    def unload(self) -> None:
        check(_driver().cuModuleUnload(self._module), "cuModuleUnload")


@dataclass
class Kernel:
    symbol: str
    function: Any
    dynamic_smem: int

    def launch(self, grid: int, block: int, params: Sequence[Any], stream: Any = 0, dependent: bool = False) -> None:
        """Launches with ``params``, ctypes objects in kernel-parameter order; ``dependent``: as a
        programmatic dependent launch (a kernel that waits for the one before it: `launch_dependent`)."""
        values = [p.as_parameter() if isinstance(p, TensorMap) else p for p in params]
        pointers = (ctypes.c_void_p * len(values))(*[ctypes.addressof(v) for v in values])
        if dependent:
            _raise_for(launch_dependent(int(self.function), grid, block, self.dynamic_smem, int(stream or 0) or None,
                                        ctypes.addressof(pointers)), f"launching {self.symbol}")
        else:
            check(_driver().cuLaunchKernel(self.function, grid, 1, 1, block, 1, 1, self.dynamic_smem, stream,
                                           ctypes.addressof(pointers), 0), f"launching {self.symbol}")
        self._keep = (values, pointers)  # alive until the launch has copied them


class Timer:
    """Milliseconds between two CUDA events around launches on the default stream."""

    def __init__(self) -> None:
        drv = _driver()
        self._start = check(drv.cuEventCreate(0), "cuEventCreate")
        self._stop = check(drv.cuEventCreate(0), "cuEventCreate")

    def __enter__(self) -> Timer:
        check(_driver().cuEventRecord(self._start, 0), "cuEventRecord")
        return self

    def __exit__(self, *exc: object) -> None:
        drv = _driver()
        check(drv.cuEventRecord(self._stop, 0), "cuEventRecord")
        check(drv.cuEventSynchronize(self._stop), "cuEventSynchronize")
        self.ms = float(check(drv.cuEventElapsedTime(self._start, self._stop), "cuEventElapsedTime"))
