"""Generated kernels as Python callables: ``tmagen.load(spec)``.

The kernel compiles through NVRTC at the first call (`tmagen.nvrtc`, cached on disk), loads once
per device and process, and runs on the caller's arrays (PyTorch, CuPy, or anything speaking
``__cuda_array_interface__`` or DLPack) on the framework's current stream, with no host sync and no
allocation outside the framework's allocator (so it can be captured in a CUDA graph once loaded).

Every array is checked by the same rules as a spec (`tmagen.rules`), against its real pointer,
shape and strides, once per layout; tensor maps are encoded once per pointer and layout, and a call
repeated into another output (a new output each call) re-encodes only the output's map where the
kind's launcher says that the output enters its launch only through that map.

How a call of each kernel kind is made is its launcher (`tmagen/kinds/<kind>/launch.py`), the same
one `tmagen verify` and `tmagen bench` use. Every kind runs here: ``copy(x)``, ``transpose(x)``,
``matmul(a, b)``, and ``inspect(x)``, which gives the raw bytes of the box's shared-memory footprint
(where TMA wrote nothing, `tmagen.kinds.inspect.launch.POISON`).
"""

from __future__ import annotations

import ctypes
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from functools import cache
from pathlib import Path
from typing import Any

from tmagen import runtime
from tmagen.arrays import ArrayView, current_stream, describe, element_type, empty_view
from tmagen.dtypes import FP8_NAMES
from tmagen.errors import ArgumentError, NoWorkspace, SpecError
from tmagen.kinds.base import Launcher, MapBinding
from tmagen.launch import array_args, driver_arguments, encode_each
from tmagen.plan import Plan, resolve
from tmagen.rules import ENCODE_RULES, Violation, run_rules
from tmagen.spec import Spec, load_spec, parse_spec
from tmagen.tensor_maps import ArrayFieldNames, array_map_args, layout_problems

_CACHE_LIMIT = 256  # launches kept per kernel: pointer and layout pairs seen lately


@dataclass
class Launch:
    """Everything one launch needs, ready to pass: the kernel's parameters in storage tmagen owns."""

    device: int
    grid: int
    params: ctypes.Array  # void*[]: the address of each parameter
    keep: tuple[Any, ...] = field(repr=False)  # the storage the addresses point into
    clear: tuple[int, int, int, int] | None = None  # (pointer, pitch, row bytes, rows) to zero instead
    skip: bool = False  # nothing to do
    kernel: int = 0  # which kernel of the family
    context: int = 0  # the context the kernel is loaded in (0: none is launched)
    out_map: MapBinding | None = None  # the output's map (the only place of its address), for `Kernel._retarget`
    out_index: int = -1  # its place among the maps


@dataclass
class _Loaded:
    """The kernel in one device's primary context."""

    context: int
    functions: tuple[int, ...]  # the family's kernels (`KernelPlan.family`), in order
    module: runtime.Module


_MEMSET = None
_RAW_LAUNCH = None
launch_function = runtime.launch_function  # cuLaunchKernel through ctypes (strided and quantize launch with it)


def raw_launch_function() -> Any:
    """cuLaunchKernel as a ctypes function that converts nothing: its caller passes ctypes values of
    the exact C types (c_void_p function, seven c_uint, c_void_p stream and parameter array, None),
    built once, so that a call costs ctypes its least (tmagen.ops's replayed launches). It keeps the
    GIL, as PyTorch's own launches do: a launch returns in microseconds, and handing the GIL to
    another thread and back costs more than that where one waits for it."""
    global _RAW_LAUNCH
    if _RAW_LAUNCH is None:
        _RAW_LAUNCH = ctypes.PYFUNCTYPE(ctypes.c_int)(runtime.driver_address("cuLaunchKernel"))
    return _RAW_LAUNCH


# A launch made again as it was made: cuLaunchKernel's first eight arguments (function, grid,
# block, shared memory) and its parameter array's address as ctypes values, and the parameters
# (kept alive). tmagen.ops and tmagen.ops.matmul replay their calls so: no argument is converted
# per call, and no context is asked for (a launch in another context is refused, and the caller's
# general path then decides). A programmatic dependent launch (`runtime.launch_dependent`) keeps a
# `_DependentLaunch` in place of the eight arguments.
Replayed = tuple[Any, Any, Any]
_ONE = ctypes.c_uint(1)
_STREAM_ARGS: dict[int, Any] = {}  # stream handle -> its c_void_p
_STREAMS_LIMIT = 64


class _DependentLaunch:
    """cuLaunchKernelEx's arguments built once per stream: a configuration is never changed once
    made (another thread may be launching with it), so each stream has its own."""

    __slots__ = ("function", "grid", "block", "smem", "configs")

    def __init__(self, function: int, grid: int, block: int, smem: int) -> None:
        self.function = ctypes.c_void_p(int(function))
        self.grid, self.block, self.smem = grid, block, smem
        self.configs: dict[int, Any] = {}  # stream -> byref(its LaunchConfig)

    def launch(self, stream: int, params: Any) -> int:
        config = self.configs.get(stream)
        if config is None:
            if len(self.configs) >= _STREAMS_LIMIT:
                self.configs.clear()
            config = self.configs[stream] = ctypes.byref(
                runtime.dependent_config(self.grid, self.block, self.smem, stream))
        result = runtime.launch_ex_function()(config, self.function, params, None)
        if result == runtime.CUDA_ERROR_NOT_SUPPORTED:  # a driver without programmatic launches: a plain one
            result = runtime.launch_function()(self.function, self.grid, 1, 1, self.block, 1, 1, self.smem, stream,
                                               params, None)
        return int(result)


def replayable(function: int, grid: int, block: int, smem: int, params: Any, dependent: bool = False) -> Replayed:
    """A launch's arguments built once, to make it again with `launch_again`."""
    u = ctypes.c_uint
    head = (_DependentLaunch(function, grid, block, smem) if dependent else
            (ctypes.c_void_p(int(function)), u(grid), _ONE, _ONE, u(block), _ONE, _ONE, u(smem)))
    return head, ctypes.c_void_p(ctypes.addressof(params)), params


def launch_again(runs: Sequence[Replayed], stream: int) -> bool:
    """``runs`` on ``stream``, in order; False where the driver refused one (another context current
    on this thread, say): the caller's general path then decides."""
    sv = _STREAM_ARGS.get(stream)
    if sv is None:
        if len(_STREAM_ARGS) >= _STREAMS_LIMIT:
            _STREAM_ARGS.clear()
        sv = _STREAM_ARGS[stream] = ctypes.c_void_p(stream or None)
    launch = _RAW_LAUNCH or raw_launch_function()
    for head, params, _ in runs:  # a loop, not any() over a generator: 0.1 us less a call
        if type(head) is tuple:
            if launch(*head, sv, params, None):
                return False
        elif head.launch(stream, params):
            return False
    return True


def _memset_function() -> Any:
    global _MEMSET
    if _MEMSET is None:
        size = ctypes.c_size_t
        _MEMSET = runtime.driver_function("cuMemsetD2D8Async", ctypes.c_int, ctypes.c_uint64, size, ctypes.c_ubyte,
                                          size, size, ctypes.c_void_p)
    return _MEMSET


NO_KERNEL_FIX = ("for a CUtensorMap of your own kernel call tmagen.tensor_map(array, box=..., swizzle=...), for CUDA "
                 "code run `tmagen build` on the spec")


class Kernel:
    """A spec's kernel, callable on arrays: ``out = kernel(x)``, ``kernel(x, out=out)``, or for a
    matmul ``c = kernel(a, b)``."""

    def __init__(self, spec: Spec | Plan, *, same_size_types: bool = False, caller: str | None = None) -> None:
        """``same_size_types`` lets arrays of any element type of the spec's dtype's size through (the
        kernels move bits): tmagen.ops uses it; a spec loaded by hand matches its dtype. ``caller``
        names the call in messages (default: the spec's kernel)."""
        plan = spec if isinstance(spec, Plan) else resolve(spec)  # every rule first, all at once
        launcher = plan.launcher
        if plan.kind is None:
            raise SpecError(plan.name, ["kernel is not given (the spec describes tensor maps only), but tmagen.load "
                                        f"runs a spec's kernel: {NO_KERNEL_FIX}"])
        if launcher is None or len(plan.kernels) != 1:
            raise SpecError(plan.name, [f"tensors has {len(plan.spec.tensors)} entries, so the {plan.kind_name} spec "
                                        f"makes {len(plan.kernels)} kernels, but tmagen.load runs one: load a spec "
                                        "of one tensor, or run `tmagen verify` on this one"])
        self.plan = plan
        self.spec = plan.spec
        self.launcher: Launcher = launcher
        self.view = plan.kernel
        self._same_size = same_size_types
        self._source = f"{caller} ({plan.name})" if caller else f"{plan.name} ({plan.kind_name} kernel)"
        input_roles, output_role = launcher.roles(plan)
        self._roles = input_roles, output_role
        self._inputs = [plan.map(role) for role in input_roles]
        # the output's element type: its map's, or bytes where the kernel writes no tensor map (inspect)
        out_map = plan.map(output_role) if output_role is not None else None
        self._out_dtype = (out_map.dtype_name, out_map.elem_bytes) if out_map is not None else ("uint8", 1)
        self._loaded: dict[int, _Loaded] = {}
        self._checked: set[tuple] = set()
        self._launches: dict[tuple, Launch] = {}
        self._into: dict[tuple, Launch] = {}  # the same keys without the output's address: the launch into any output
        # whether the output's address enters a launch only through the output's map (the launcher says so)
        self._output_by_map: bool = bool(getattr(launcher, "output_in_map_only", False)) and output_role is not None
        self._encoders: dict[tuple, Any] = {}  # (role, shape, strides) -> runtime.tiled_encoder
        self.encodes = 0  # tensor maps encoded for launches (a new output costs one where _output_by_map)
        # (device, stream) -> a split launch's counters and partials
        self._workspaces: dict[tuple[int, int], tuple[runtime.Buffer, runtime.Buffer]] = {}
        self._retired: list[runtime.Buffer] = []  # outgrown workspaces, which graphs captured earlier may use
        # the last launch made: (function, grid, threads, shared memory, parameters, whether it was a
        # programmatic dependent launch), which tmagen.ops replays
        self.last_launch: tuple[int, int, int, int, Any, bool] | None = None
        self._lock = threading.Lock()
        self._parameters: tuple[str, ...] = getattr(launcher, "parameters", ())
        # array parameters of their own type (a matmul's fp32 scales): name -> (dtype, bytes); others: the output's
        self.launcher_parameter_dtypes: dict[str, tuple[str, int]] = getattr(launcher, "parameter_dtypes", {})

    def __repr__(self) -> str:
        m = self._inputs[0]
        return f"tmagen.Kernel({self.plan.name!r}, {self.plan.kind_name}, {m.rank}-D {m.dtype_name})"

    # ------------------------------------------------------------------ calling
    def _names(self, count: int) -> list[str]:
        names = list(self.launcher.inputs)
        return names if count == len(names) else [f"inputs[{i}]" for i in range(count)]

    def __call__(self, *arrays: Any, out: Any = None, **params: Any) -> Any:
        """``params``: the kind's keyword parameters (a matmul's c, alpha, beta, bias, bias_along)."""
        if len(arrays) != len(self.launcher.inputs):
            raise TypeError(f"{self.plan.name} takes {len(self.launcher.inputs)} array(s) "
                            f"({', '.join(self.launcher.inputs)}) and an optional out=, not {len(arrays)}")
        unknown = sorted(set(params) - set(self._parameters))
        if unknown:
            known = ", ".join(self._parameters) or "none"
            raise TypeError(f"{self.plan.name} has no parameter {', '.join(unknown)} (its keyword parameters: {known})")
        params = {key: describe(v, key) if key in _ARRAY_PARAMETERS and v is not None else v
                  for key, v in params.items()}
        inputs = [describe(a, name) for a, name in zip(arrays, self._names(len(arrays)))]
        if out is None:
            problems = self._input_problems(inputs, None, params)
            if problems:
                raise ArgumentError(self._source, problems)
            want = self.launcher.output_shape(self.plan, [a.shape for a in inputs])
            dtype = None if self._same_size and self._roles[1] is not None else self._out_dtype[0]
            out, view = empty_view(inputs[0], tuple(want), dtype=dtype)
        else:
            view = describe(out, "out")
        self.launch(inputs, view, params=params or None)
        return out

    def launch(self, inputs: Sequence[ArrayView], out: ArrayView, stream: int | None = None,
               params: dict[str, Any] | None = None) -> Launch:
        """Launches on ``inputs`` into ``out`` (arrays as `tmagen.arrays.describe` reads them), on
        ``stream`` (default: the current stream of the first input's framework), with the kind's
        keyword ``params`` (arrays among them as ArrayViews). Returns the launch made (kept by the
        kernel; its ``params`` stay valid while the returned object lives)."""
        src = inputs[0]
        if len(inputs) == 1:
            key: tuple = (out.ptr, out.shape, out.strides, src.device, src.ptr, src.shape, src.strides)
        else:
            key = (out.ptr, out.shape, out.strides, src.device, *((a.ptr, a.shape, a.strides) for a in inputs))
        if params:
            key += tuple((name, (v.ptr, v.shape, v.strides) if isinstance(v, ArrayView) else v)
                         for name, v in sorted(params.items()))
        if self._parameters:  # a launch may take a workspace of its stream's own
            if stream is None:
                stream = current_stream(src)
            key += (stream,)
        launch = self._launches.get(key)
        if launch is None:
            self._check(inputs, out, params or {})  # before the framework is asked anything of a bad array
            if stream is None:
                stream = current_stream(src)
            launch = self._retarget(key, out) or self._prepare(key, inputs, out, stream, params or {})
        elif stream is None:
            stream = current_stream(src)
        if launch.skip:
            return launch
        loaded = self._loaded.get(launch.device)
        if loaded is None or runtime.current_context() != loaded.context:
            with runtime.OnDevice(launch.device):
                self._run(loaded, launch, stream)
        else:
            self._run(loaded, launch, stream)
        return launch

    def _run(self, loaded: _Loaded | None, launch: Launch, stream: int) -> None:
        if launch.clear is not None:
            ptr, pitch, width, rows = launch.clear
            result = _memset_function()(ptr, pitch, 0, width, rows, stream)
            if result:
                runtime._raise_for(result, f"clearing the output of {self.view.symbol}")
            return
        view = self.view.family[launch.kernel]
        assert loaded is not None
        function = loaded.functions[launch.kernel]
        if view.dependent_launch:
            result = runtime.launch_dependent(int(function), launch.grid, view.threads, view.smem_bytes, stream,
                                              ctypes.addressof(launch.params))
        else:
            result = launch_function()(function, launch.grid, 1, 1, view.threads, 1, 1, view.smem_bytes, stream,
                                       ctypes.addressof(launch.params), None)
        if result:
            runtime._raise_for(result, f"launching {view.symbol}")
        self.last_launch = (function, launch.grid, view.threads, view.smem_bytes, launch.params, view.dependent_launch)

    # ------------------------------------------------------------------ checks and set-up
    def _input_problems(self, inputs: Sequence[ArrayView], out: ArrayView | None = None,
                        params: dict[str, Any] | None = None) -> list[Violation]:
        """The inputs' problems, and the kind's own with ``out`` (None: the new output a call makes)."""
        found: list[Violation] = []
        for a, name, m in zip(inputs, self._names(len(inputs)), self._inputs):
            found += layout_problems(a, name)
            if a.rank != m.rank:
                found.append(Violation("array-rank", f"{name}.ndim", str(a.rank), f"the kernel of {self.plan.name} "
                                       f"takes {m.rank}-D tensors", f"pass a {m.rank}-D array, or load a spec of "
                                       f"rank {a.rank}", f"spec {self.plan.name}"))
            found += self._dtype_problems(a, name, m.dtype_name, m.elem_bytes)
        if not found:
            found += self.launcher.problems(self.plan, inputs, out, **(params or {}))
            for name, v in (params or {}).items():
                if isinstance(v, ArrayView):
                    found += layout_problems(v, name)
                    own = self.launcher_parameter_dtypes.get(name)
                    found += self._dtype_problems(v, name, *(own if own is not None else self._out_dtype))
        return found

    def _dtype_problems(self, a: ArrayView, name: str, want: str, nbytes: int) -> list[Violation]:
        if self._same_size:
            if a.itemsize != nbytes:
                return [Violation("array-dtype", f"{name}.dtype", f"{a.dtype} ({a.itemsize} bytes)",
                                  f"the kernel moves elements of {nbytes} bytes", "pass an array of that size",
                                  f"spec {self.plan.name}")]
            return []
        raw_fp8 = a.carrier == "uint8" and want in FP8_NAMES  # fp8 bits in a framework without the type
        if a.carrier != want and element_type(a) != want and not raw_fp8:
            return [Violation("array-dtype", f"{name}.dtype", a.dtype, f"the kernel of {self.plan.name} takes "
                              f"{want}", f"pass {want} data, or load a spec of its dtype", f"spec {self.plan.name}")]
        return []

    def _output_problems(self, inputs: Sequence[ArrayView], out: ArrayView) -> list[Violation]:
        want = tuple(self.launcher.output_shape(self.plan, [a.shape for a in inputs]))
        found = layout_problems(out, "out")
        if out.shape != want:
            found.append(Violation("array-shape", "out.shape", str(out.shape), f"the kernel writes {want} for these "
                                   "inputs", f"pass an output of shape {want}", f"spec {self.plan.name}"))
        found += self._dtype_problems(out, "out", *self._out_dtype)
        if out.device is not None and inputs[0].device is not None and out.device != inputs[0].device:
            found.append(Violation("array-device", "out.device", out.where, f"the input is on {inputs[0].where}",
                                   "allocate the output on the input's device", f"spec {self.plan.name}"))
        if out.readonly:
            found.append(Violation("array-readonly", "out", "read-only", "the kernel writes its output",
                                   "pass a writable array", f"spec {self.plan.name}"))
        return found

    def _check(self, inputs: Sequence[ArrayView], out: ArrayView, params: dict[str, Any] | None = None) -> None:
        """Every problem of the call, once per layout: the kind's own, then each map's rules on the
        real array (the address counts only by its alignment)."""
        key = (out.shape, out.strides, out.ptr & 127, out.carrier, out.itemsize, out.device, out.readonly,
               *((a.shape, a.strides, a.ptr & 127, a.carrier, a.itemsize, a.device) for a in inputs),
               *((name, (v.shape, v.strides, v.carrier, v.device) if isinstance(v, ArrayView) else v)
                 for name, v in sorted((params or {}).items())))
        if key in self._checked:
            return
        found = self._input_problems(inputs, out, params)
        if not found:
            found += self._output_problems(inputs, out)
        if not found:
            input_roles, output_role = self._roles
            arrays = {role: (a, name) for role, a, name in zip(input_roles, inputs, self._names(len(inputs)))}
            if output_role is not None:
                arrays[output_role] = (out, "out")
            for role, (a, name) in arrays.items():
                m = self.plan.map(role)
                if 0 in a.shape:
                    continue  # nothing is encoded over an empty array
                args = array_map_args(a, m.args.dtype, name, box=m.box, element_strides=m.args.element_strides[::-1],
                                      interleave=m.args.interleave, swizzle=m.args.swizzle,
                                      l2_promotion=m.args.l2_promotion, oob_fill=m.args.oob_fill,
                                      target=self.plan.target.name, loads=not m.stores, stores=m.stores)
                found += run_rules(args, ArrayFieldNames(name, a.rank), ENCODE_RULES)
        if found:
            raise ArgumentError(self._source, found)
        self._checked.add(key)

    def _retarget(self, key: tuple, out: ArrayView) -> Launch | None:
        """The launch of a call made before into another output (the same everything else: ``key``
        less the output's address), into ``out``: the output's map alone encoded anew, or None."""
        base = self._into.get(key[1:])
        if base is None:
            return None
        if base.skip:
            launch = base
        elif base.clear is not None:
            launch = replace(base, clear=(out.ptr, *base.clear[1:]))
        elif base.out_map is None:
            return None
        else:
            maps, extra = base.keep
            was, index = base.out_map, base.out_index
            binding = MapBinding(was.role, out.ptr, was.shape, was.strides)
            fresh = self._encode(binding, base.device)
            maps = (*maps[:index], fresh, *maps[index + 1:])
            params = (ctypes.c_void_p * len(base.params))(*base.params)
            params[index] = fresh.address
            launch = Launch(base.device, base.grid, params, (maps, extra), kernel=base.kernel, context=base.context,
                            out_map=binding, out_index=index)
        self._remember(key, launch)
        return launch

    def _encode(self, binding: MapBinding, device: int) -> runtime.TensorMap:
        """The map of ``binding``: its arguments converted once per role and layout, then one driver
        call per address."""
        layout = (binding.role, binding.shape, binding.strides)
        encoder = self._encoders.get(layout)
        if encoder is None:
            args = driver_arguments(array_args(self.plan.map(binding.role), 0, binding.shape, binding.strides))
            del args["global_address"]
            encoder = runtime.tiled_encoder(**args)
            with self._lock:
                if len(self._encoders) >= _CACHE_LIMIT:
                    self._encoders.clear()
                self._encoders[layout] = encoder
        tmap = runtime.TensorMap()
        with runtime.OnDevice(device):  # the driver encodes in a current context
            result = encoder(binding.ptr, tmap)
        if result:
            raise runtime.encode_failed(result, binding)
        self.encodes += 1
        return tmap

    def _remember(self, key: tuple, launch: Launch) -> None:
        with self._lock:
            if len(self._launches) >= _CACHE_LIMIT:
                self._launches.clear()
                self._into.clear()
            self._launches[key] = launch
            if launch.skip or launch.clear is not None or launch.out_map is not None:
                self._into[key[1:]] = launch

    def _prepare(self, key: tuple, inputs: Sequence[ArrayView], out: ArrayView, stream: int,
                 params: dict[str, Any] | None = None) -> Launch:
        device = inputs[0].device
        if device is None:  # an interface that does not say where the memory is
            device = runtime.pointer_device(inputs[0].ptr)
        if self._parameters:
            call = self.launcher.bind(self.plan, inputs, out, multiprocessors(device),  # type: ignore[call-arg]
                                      workspace=lambda c, p: self._workspace(device, stream, c, p),
                                      memory_bytes_per_us=memory_bytes_per_us(device), **(params or {}))
        else:
            call = self.launcher.bind(self.plan, inputs, out, multiprocessors(device))
        if call.skip:
            launch = Launch(device, 0, (ctypes.c_void_p * 0)(), (), skip=True)
        elif call.clear_output:
            c = call.maps[0]
            es = self._out_dtype[1]
            pitch = (c.strides[0] if c.strides else c.shape[-1]) * es
            launch = Launch(device, 0, (ctypes.c_void_p * 0)(), (),
                            clear=(out.ptr, pitch, c.shape[-1] * es, c.shape[0]))
        else:
            loaded = self._loaded.get(device) or self._load(device, stream)
            maps = tuple(encode_each(call.maps, lambda b: self._encode(b, device)))
            extra = list(call.extra)
            addresses = [s.address for s in maps] + [ctypes.addressof(v) for v in extra]
            # the output's map, where its address enters the launch nowhere else (the launcher says so)
            outs = [i for i, b in enumerate(call.maps) if b.role == self._roles[1] and b.ptr == out.ptr]
            index = outs[0] if self._output_by_map and len(outs) == 1 else -1
            launch = Launch(device, call.grid, (ctypes.c_void_p * len(addresses))(*addresses), (maps, extra),
                            kernel=call.kernel, context=loaded.context,
                            out_map=call.maps[index] if index >= 0 else None, out_index=index)
        self._remember(key, launch)
        return launch

    def compile(self) -> Any:
        """The kernel's cubin (`tmagen.nvrtc.Compiled`), compiled by NVRTC for the spec's target, from
        the disk cache when there."""
        from tmagen import nvrtc

        return nvrtc.compile_plan(self.plan)

    def _load(self, device: int, stream: int | None) -> _Loaded:
        with self._lock:
            if device in self._loaded:
                return self._loaded[device]
            if stream is not None and _capturing(device, stream):
                raise runtime.GpuError(
                    f"{self.plan.name}: the first call on a device compiles and loads the kernel, which a CUDA graph "
                    "capture does not allow: call it once before capturing (as a warm-up)")
            compiled = self.compile()
            loaded = _MODULES.get((compiled.cache_file, device))
            if loaded is None:  # the same cubin is loaded once per process, whoever loads its spec
                with runtime.OnDevice(device) as on:
                    module = runtime.Module(compiled.data)
                    functions = tuple(int(module.function(k.symbol, k.smem_bytes).function) for k in self.view.family)
                    loaded = _MODULES[(compiled.cache_file, device)] = _Loaded(on.context, functions, module)
            self._loaded[device] = loaded
            return loaded


    def _workspace(self, device: int, stream: int, counter_bytes: int, partial_bytes: int) -> tuple[int, int]:
        """A split launch's counters (zero: the kernel leaves them so) and partials on ``device`` for
        ``stream`` (two streams never share them), allocated or grown outside any capture."""
        with self._lock:
            have = self._workspaces.get((device, stream))
            if have is not None and have[0].nbytes >= counter_bytes and have[1].nbytes >= partial_bytes:
                return have[0].ptr, have[1].ptr
            if _capturing(device, stream):  # allocating is not allowed: the launcher goes unsplit
                raise NoWorkspace(f"{self.plan.name}: no workspace for a split of K on a stream being captured")
            with runtime.OnDevice(device):
                if have is not None:  # grown by half again at least, the old kept: a captured graph may use it
                    counter_bytes = max(counter_bytes, have[0].nbytes * 3 // 2)
                    partial_bytes = max(partial_bytes, have[1].nbytes * 3 // 2)
                    self._retired.extend(have)
                counters, partials = runtime.Buffer(counter_bytes), runtime.Buffer(partial_bytes)
                counters.fill(0)
            self._workspaces[(device, stream)] = (counters, partials)
            return counters.ptr, partials.ptr


def _capturing(device: int, stream: int) -> bool:
    """Whether ``stream`` of ``device`` is being captured, asked in the device's context: a thread
    may have none current (autograd's backward thread, where PyTorch's allocator reused memory and
    made no runtime call: the driver refused with CUDA_ERROR_INVALID_CONTEXT)."""
    with runtime.OnDevice(device):
        return runtime.stream_is_capturing(stream)


_MODULES: dict[tuple[Path, int], _Loaded] = {}  # (cubin, device) -> loaded
_ARRAY_PARAMETERS = frozenset({"c", "bias", "scale_a", "scale_b"})  # keyword parameters that are arrays


@cache
def multiprocessors(device: int) -> int:
    """The multiprocessors of ``device``, which size a persistent grid; asked once per device."""
    drv = runtime._driver()
    dev = runtime.check(drv.cuDeviceGet(device), "cuDeviceGet")
    return int(runtime.check(drv.cuDeviceGetAttribute(
        drv.CUdevice_attribute.CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev), "cuDeviceGetAttribute"))


@cache
def memory_bytes_per_us(device: int) -> int:
    """The DRAM peak of ``device`` in bytes per microsecond, from its memory clock and bus width (by
    which a matmul picks the dispatch table of the GPU most like this one); asked once per device."""
    return runtime.memory_bytes_per_us(runtime.check(runtime._driver().cuDeviceGet(device), "cuDeviceGet"))


def load(spec: Spec | Plan | dict | str | Path) -> Kernel:
    """The kernel of ``spec`` (a `Spec`, a dict as in a spec file, or a spec file's path) as a
    callable: ``out = tmagen.load("transpose.json")(x)``. Raises SpecError or RuleError for a spec
    that is malformed or breaks a rule; compiles at the first call."""
    if isinstance(spec, (Spec, Plan)):
        return Kernel(spec)
    if isinstance(spec, dict):
        return Kernel(parse_spec(spec, "spec"))
    if isinstance(spec, (str, Path)):
        return Kernel(load_spec(spec))
    raise TypeError(f"tmagen.load takes a Spec, a dict or a path, not {type(spec).__name__}")
