"""Generated kernels as Python callables: ``tmagen.load(spec)``.

The kernel compiles through NVRTC at the first call (`tmagen.nvrtc`, cached on disk), loads once
per device and process, and runs on the caller's arrays (PyTorch, CuPy, or anything speaking
``__cuda_array_interface__`` or DLPack) on the framework's current stream, with no host sync and no
allocation outside the framework's allocator (so it can be captured in a CUDA graph once loaded).

Every array is checked by the same rules as a spec (`tmagen.rules`), against its real pointer,
shape and strides, once per layout; tensor maps are encoded once per pointer and layout.

How a call of each kernel kind is made is one entry of `KINDS`.
"""

from __future__ import annotations

import ctypes
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, Sequence

from tmagen import runtime
from tmagen.arrays import ArrayView, current_stream, describe, empty_view
from tmagen.errors import ArgumentError, RuleError, SpecError
from tmagen.launch import flat_view, grid_size, map_arguments, output_shape, tiles
from tmagen.plan import KernelPlan
from tmagen.rules import ENCODE_RULES, Violation, run_rules
from tmagen.spec import MapSpec, Spec, check_spec, kernel_maps, kernel_plans, load_spec, parse_spec
from tmagen.tensor_maps import ArrayFieldNames, array_map_args, layout_problems

_CACHE_LIMIT = 256  # launches kept per kernel: pointer and layout pairs seen lately


@dataclass
class Launch:
    """Everything one launch needs, ready to pass: the kernel's parameters in storage tmagen owns."""

    device: int
    grid: int
    params: ctypes.Array  # void*[]: the address of each parameter
    keep: tuple[Any, ...] = field(repr=False)  # the storage the addresses point into


class Kind(Protocol):
    """How Python calls a kernel kind: its inputs, the output it allocates, and its launch."""

    inputs: int

    def output_shape(self, spec: Spec, inputs: Sequence[ArrayView]) -> tuple[int, ...]: ...

    def bindings(self, spec: Spec, inputs: Sequence[ArrayView], out: ArrayView) -> list[tuple[MapSpec, ArrayView, str]]:
        """Each tensor map of the kernel, in parameter order, with the array it covers and its name."""
        ...

    def flat_shape(self, spec: Spec, inputs: Sequence[ArrayView], out: ArrayView) -> list[int] | None:
        """The shape every map takes instead of its array's (contiguous), or None."""
        ...

    def launch(self, spec: Spec, view: KernelPlan, maps: Sequence[runtime.TensorMap], inputs: Sequence[ArrayView],
               multiprocessors: int, shape: Sequence[int] | None = None) -> tuple[int, list[Any]]:
        """The grid and the parameters after the maps (tiles over ``shape`` when given)."""
        ...


class TileKind:
    """copy and transpose: one input, one output, tiles of the input's box, a few per block or on a persistent grid."""

    inputs = 1

    def output_shape(self, spec: Spec, inputs: Sequence[ArrayView]) -> tuple[int, ...]:
        return tuple(output_shape(spec, inputs[0].shape))

    def bindings(self, spec: Spec, inputs: Sequence[ArrayView], out: ArrayView) -> list[tuple[MapSpec, ArrayView, str]]:
        maps = {m.role: m for m in kernel_maps(spec)}
        return [(maps["src"], inputs[0], "x"), (maps["dst"], out, "out")]

    def flat_shape(self, spec: Spec, inputs: Sequence[ArrayView], out: ArrayView) -> list[int] | None:
        """The flat view a copy of contiguous arrays takes (`tmagen.plan.flat_copy_shape`), as the
        generated C API does; None: the arrays' own shapes and strides."""
        return flat_view(spec, inputs[0].shape, inputs[0].strides, out.strides)

    def launch(self, spec: Spec, view: KernelPlan, maps: Sequence[runtime.TensorMap], inputs: Sequence[ArrayView],
               multiprocessors: int, shape: Sequence[int] | None = None) -> tuple[int, list[Any]]:
        tl = tiles(inputs[0].shape if shape is None else shape, kernel_maps(spec)[0].tensor.box)
        return grid_size(view, tl.total, multiprocessors), [tl]


KINDS: dict[str, Kind] = {"copy": TileKind(), "transpose": TileKind()}


@dataclass
class _Loaded:
    """The kernel in one device's primary context."""

    context: int
    function: int
    multiprocessors: int
    module: runtime.Module


_LAUNCH = None


def _launch_function() -> Any:
    global _LAUNCH
    if _LAUNCH is None:
        u = ctypes.c_uint
        _LAUNCH = runtime.driver_function("cuLaunchKernel", ctypes.c_int, ctypes.c_void_p, u, u, u, u, u, u, u,
                                          ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p)
    return _LAUNCH


class Kernel:
    """A spec's kernel, callable on arrays: ``out = kernel(x)`` or ``kernel(x, out=out)``."""

    def __init__(self, spec: Spec, *, same_size_types: bool = False, caller: str | None = None) -> None:
        """``same_size_types`` lets arrays of any element type of the spec's dtype's size through (the
        kernels move bits): tmagen.ops uses it; a spec loaded by hand matches its dtype. ``caller``
        names the call in messages (default: the spec's kernel)."""
        violations = check_spec(spec)
        if violations:
            raise RuleError(spec.name, violations)
        if spec.kernel is None:
            raise SpecError(spec.name, ["kernel is not given (the spec describes tensor maps only), but tmagen.load "
                                        "runs a spec's kernel: for a CUtensorMap of your own kernel call "
                                        "tmagen.tensor_map(array, box=..., swizzle=...), for CUDA code run "
                                        "`tmagen build` on the spec"])
        kind = KINDS.get(spec.kernel.kind)
        if kind is None:
            raise SpecError(spec.name, [f"kernel.kind = {spec.kernel.kind!r}, but tmagen.load runs the kinds "
                                        f"{', '.join(sorted(KINDS))}: use `tmagen verify` for an inspect spec"])
        self.spec = spec
        self.kind = kind
        self.view = kernel_plans(spec)[0]
        self._same_size = same_size_types
        self._source = f"{caller} ({spec.name})" if caller else f"{spec.name} ({spec.kernel.kind} kernel)"
        self._dtype = spec.tensors[0].dt
        self._rank = spec.tensors[0].rank
        self._loaded: dict[int, _Loaded] = {}
        self._checked: set[tuple] = set()
        self._launches: dict[tuple, Launch] = {}
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"tmagen.Kernel({self.spec.name!r}, {self.spec.kernel.kind}, {self._rank}-D {self._dtype.name})"

    # ------------------------------------------------------------------ calling
    def __call__(self, *arrays: Any, out: Any = None) -> Any:
        if len(arrays) != self.kind.inputs:
            raise TypeError(f"{self.spec.name} takes {self.kind.inputs} array(s) and an optional out=, "
                            f"not {len(arrays)}")
        inputs = [describe(a, "x" if len(arrays) == 1 else f"inputs[{i}]") for i, a in enumerate(arrays)]
        if out is None:
            problems = self._input_problems(inputs)
            if problems:
                raise ArgumentError(self._source, problems)
            out, view = empty_view(inputs[0], self.kind.output_shape(self.spec, inputs))
        else:
            view = describe(out, "out")
        self.launch(inputs, view)
        return out

    def launch(self, inputs: Sequence[ArrayView], out: ArrayView, stream: int | None = None) -> None:
        """Launches on ``inputs`` into ``out`` (arrays as `tmagen.arrays.describe` reads them), on
        ``stream`` (default: the current stream of the first input's framework)."""
        src = inputs[0]
        if 0 in src.shape:
            return  # nothing to move
        if len(inputs) == 1:
            key: tuple = (out.ptr, out.shape, out.strides, src.device, src.ptr, src.shape, src.strides)
        else:
            key = (out.ptr, out.shape, out.strides, src.device, *((a.ptr, a.shape, a.strides) for a in inputs))
        launch = self._launches.get(key)
        if launch is None:
            self._check(inputs, out)  # before the framework is asked anything of a bad array
            if stream is None:
                stream = current_stream(src)
            launch = self._prepare(key, inputs, out, stream)
        elif stream is None:
            stream = current_stream(src)
        loaded = self._loaded[launch.device]
        if runtime.current_context() != loaded.context:
            with runtime.OnDevice(launch.device):
                self._run(loaded, launch, stream)
        else:
            self._run(loaded, launch, stream)

    def _run(self, loaded: _Loaded, launch: Launch, stream: int) -> None:
        view = self.view
        result = _launch_function()(loaded.function, launch.grid, 1, 1, view.threads, 1, 1, view.smem_bytes, stream,
                                    ctypes.addressof(launch.params), None)
        if result:
            runtime._raise_for(result, f"launching {view.symbol}")

    # ------------------------------------------------------------------ checks and set-up
    def _input_problems(self, inputs: Sequence[ArrayView]) -> list[Violation]:
        found: list[Violation] = []
        for a, name in zip(inputs, ("x",) if len(inputs) == 1 else [f"inputs[{i}]" for i in range(len(inputs))]):
            found += layout_problems(a, name)
            if a.rank != self._rank:
                found.append(Violation("array-rank", f"{name}.ndim", a.rank, f"the kernel of {self.spec.name} moves "
                                       f"{self._rank}-D tensors", f"pass a {self._rank}-D array, or load a spec of "
                                       f"rank {a.rank}", f"spec {self.spec.name}"))
            found += self._dtype_problems(a, name)
        if not found and isinstance(self.kind, TileKind) and self.spec.kernel.kind == "transpose":
            src = kernel_maps(self.spec)[0]
            per = src.unit_bytes // src.tensor.dt.nbytes
            if inputs[0].shape[-1] % per:
                found.append(Violation("array-units", "x.shape[-1]", inputs[0].shape[-1],
                                       f"the kernel transposes units of {src.unit_bytes} bytes ({per} elements)",
                                       f"use a multiple of {per}", f"spec {self.spec.name}"))
        return found

    def _dtype_problems(self, a: ArrayView, name: str) -> list[Violation]:
        want = self._dtype
        if self._same_size:
            if a.itemsize != want.nbytes:
                return [Violation("array-dtype", f"{name}.dtype", f"{a.dtype} ({a.itemsize} bytes)",
                                  f"the kernel moves elements of {want.nbytes} bytes", "pass an array of that size",
                                  f"spec {self.spec.name}")]
            return []
        if a.carrier != want.name:
            return [Violation("array-dtype", f"{name}.dtype", a.dtype, f"the kernel of {self.spec.name} moves "
                              f"{want.name}", f"pass {want.name} data, or load a spec of its dtype",
                              f"spec {self.spec.name}")]
        return []

    def _output_problems(self, inputs: Sequence[ArrayView], out: ArrayView) -> list[Violation]:
        want = self.kind.output_shape(self.spec, inputs)
        found = layout_problems(out, "out")
        if out.shape != want:
            found.append(Violation("array-shape", "out.shape", out.shape, f"the kernel writes {want} for these "
                                   "inputs", f"pass an output of shape {want}", f"spec {self.spec.name}"))
        if out.itemsize != inputs[0].itemsize or (not self._same_size and out.carrier != inputs[0].carrier):
            found.append(Violation("array-dtype", "out.dtype", out.dtype, f"the input is {inputs[0].dtype}",
                                   "pass an output of the input's dtype", f"spec {self.spec.name}"))
        if out.device is not None and inputs[0].device is not None and out.device != inputs[0].device:
            found.append(Violation("array-device", "out.device", out.where, f"the input is on {inputs[0].where}",
                                   "allocate the output on the input's device", f"spec {self.spec.name}"))
        if out.readonly:
            found.append(Violation("array-readonly", "out", "read-only", "the kernel writes its output",
                                   "pass a writable array", f"spec {self.spec.name}"))
        return found

    def _check(self, inputs: Sequence[ArrayView], out: ArrayView) -> None:
        """Every problem of the call, once per layout: the kind's own, then each map's rules on the
        real array (the address counts only by its alignment)."""
        key = (out.shape, out.strides, out.ptr & 127, out.carrier, out.itemsize, out.device, out.readonly,
               *((a.shape, a.strides, a.ptr & 127, a.carrier, a.itemsize, a.device) for a in inputs))
        if key in self._checked:
            return
        found = self._input_problems(inputs)
        if not found:
            found += self._output_problems(inputs, out)
        if not found:
            for m, a, name in self.kind.bindings(self.spec, inputs, out):
                t = m.tensor
                args = array_map_args(a, t.dt, name, box=t.box, element_strides=t.element_strides_or_default,
                                      interleave=_enum(t.interleave, "Interleave"), swizzle=t.swizzle.driver,
                                      l2_promotion=_enum(t.l2_promotion, "L2Promotion"),
                                      oob_fill=_enum(t.oob_fill, "OobFill"), target=self.spec.target,
                                      loads=not m.stores, stores=m.stores)
                found += run_rules(args, ArrayFieldNames(name, a.rank), ENCODE_RULES)
        if found:
            raise ArgumentError(self._source, found)
        self._checked.add(key)

    def _prepare(self, key: tuple, inputs: Sequence[ArrayView], out: ArrayView, stream: int) -> Launch:
        device = inputs[0].device
        if device is None:  # an interface that does not say where the memory is
            device = runtime.pointer_device(inputs[0].ptr)
        loaded = self._loaded.get(device) or self._load(device, stream)
        maps = []
        flat = self.kind.flat_shape(self.spec, inputs, out)
        with runtime.OnDevice(device):  # the driver encodes in a current context
            for m, a, _ in self.kind.bindings(self.spec, inputs, out):
                shape, strides = (a.shape, a.strides) if flat is None else (flat, None)
                maps.append(map_arguments(m, a.ptr, shape, strides).encode(into=runtime.TensorMap()))
        grid, extra = self.kind.launch(self.spec, self.view, maps, inputs, loaded.multiprocessors, flat)
        addresses = [s.address for s in maps] + [ctypes.addressof(v) for v in extra]
        launch = Launch(device, grid, (ctypes.c_void_p * len(addresses))(*addresses), (maps, extra))
        with self._lock:
            if len(self._launches) >= _CACHE_LIMIT:
                self._launches.clear()
            self._launches[key] = launch
        return launch

    def compile(self) -> Any:
        """The kernel's cubin (`tmagen.nvrtc.Compiled`), compiled by NVRTC for the spec's target, from
        the disk cache when there."""
        from tmagen import nvrtc

        return nvrtc.compile_spec(self.spec)

    def _load(self, device: int, stream: int | None) -> _Loaded:
        with self._lock:
            if device in self._loaded:
                return self._loaded[device]
            if stream is not None and runtime.stream_is_capturing(stream):
                raise runtime.GpuError(
                    f"{self.spec.name}: the first call on a device compiles and loads the kernel, which a CUDA graph "
                    "capture does not allow: call it once before capturing (as a warm-up)")
            compiled = self.compile()
            loaded = _MODULES.get((compiled.cache_file, device))
            if loaded is None:  # the same cubin is loaded once per process, whoever loads its spec
                drv = runtime._driver()
                with runtime.OnDevice(device) as on:
                    module = runtime.Module(compiled.data)
                    fn = module.function(self.view.symbol, self.view.smem_bytes)
                    dev = runtime.check(drv.cuDeviceGet(device), "cuDeviceGet")
                    sms = runtime.check(drv.cuDeviceGetAttribute(
                        drv.CUdevice_attribute.CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev), "cuDeviceGetAttribute")
                    loaded = _MODULES[(compiled.cache_file, device)] = _Loaded(on.context, int(fn.function), int(sms),
                                                                               module)
            self._loaded[device] = loaded
            return loaded


_MODULES: dict[tuple[Path, int], _Loaded] = {}  # (cubin, device) -> loaded


def _enum(value: str, cls: str) -> Any:
    from tmagen import enums

    return getattr(enums, cls).parse(value)


def load(spec: Spec | dict | str | Path) -> Kernel:
    """The kernel of ``spec`` (a `Spec`, a dict as in a spec file, or a spec file's path) as a
    callable: ``out = tmagen.load("transpose.json")(x)``. Raises SpecError or RuleError for a spec
    that is malformed or breaks a rule; compiles at the first call."""
    if isinstance(spec, Spec):
        return Kernel(spec)
    if isinstance(spec, dict):
        return Kernel(parse_spec(spec, "spec"))
    if isinstance(spec, (str, Path)):
        return Kernel(load_spec(spec))
    raise TypeError(f"tmagen.load takes a Spec, a dict or a path, not {type(spec).__name__}")
