"""The Python path without a GPU: reading arrays (DLPack, __cuda_array_interface__, PyTorch), the
checks of tmagen.tensor_map and of loaded kernels with their messages, the tuned and derived specs of
tmagen.ops (each compiles through NVRTC), and the PyTorch registration (fake tensors, torch.compile).
The GPU side is tests/gpu/test_python_api.py."""

from __future__ import annotations

import json
import os
import sys
from typing import Any

import numpy as np
import pytest

import tmagen
from tmagen import arrays, nvrtc, ops, runtime
from tmagen.errors import ArgumentError, RuleError, SpecError, TmagenError
from tmagen.kernels import Kernel
from tmagen.plan import load as load_plan
from tmagen.plan import resolve
from tmagen.rules import diagnose_encode_tiled

from conftest import REPO

IN_CI = os.environ.get("CI") == "true"
HAVE_GPU = runtime.no_gpu_reason() is None


class FakeCuda:
    """An array that speaks __cuda_array_interface__ (v3) for a pointer no one dereferences here."""

    def __init__(self, shape: tuple, typestr: str = "<f4", ptr: int = 0x7F0000000000, strides: tuple | None = None,
                 stream: int | None = None, version: int = 3) -> None:
        self.__cuda_array_interface__ = {"shape": shape, "typestr": typestr, "data": (ptr, False),
                                         "strides": strides, "version": version, "stream": stream}


def _fields(exc: pytest.ExceptionInfo) -> list[tuple[str, str]]:
    return [(v.rule, v.field) for v in exc.value.violations]


# ----------------------------------------------------------------------------- reading arrays
def test_dlpack_is_read_from_a_real_producer() -> None:
    base = np.zeros((6, 10), np.float32)
    view = arrays.describe(base[1:, 2:8], "x")  # numpy speaks DLPack (a CPU device)
    assert view.framework == "dlpack" and view.shape == (5, 6) and view.strides == (10, 1)
    assert view.ptr == base.ctypes.data + (10 + 2) * 4
    assert view.carrier == "float32" and view.itemsize == 4 and view.device == -1 and view.where == "cpu"
    assert arrays.describe(np.zeros(4, np.int8)).carrier == "uint8"
    assert arrays.describe(np.zeros(4, np.uint16)).carrier == "uint16"
    assert arrays.describe(np.zeros(4, np.complex128)).carrier is None


def test_cuda_array_interface_strides_and_stream() -> None:
    v = arrays.describe(FakeCuda((3, 4), "<f8", strides=(64, 8), stream=7))
    assert (v.shape, v.strides, v.itemsize, v.carrier, v.stream, v.device) == ((3, 4), (8, 1), 8, "float64", 7, None)
    assert arrays.current_stream(v) == 7
    assert arrays.describe(FakeCuda((3, 4), "<u2", version=2)).strides == (4, 1)  # no strides: C-contiguous
    assert arrays.current_stream(arrays.describe(FakeCuda((2,), stream=1))) == 0  # 1: the legacy default stream
    with pytest.raises(ArgumentError) as info:
        arrays.describe(FakeCuda((3, 4), "<f4", strides=(18, 4)))
    assert _fields(info) == [("array-strides", "x.strides")] and "element size (4 bytes)" in str(info.value)


def test_something_else_is_refused_with_the_fix() -> None:
    with pytest.raises(ArgumentError, match=r"type\(x\) = builtins.list, but tmagen reads arrays that speak "
                       r"__cuda_array_interface__ or DLPack: pass a PyTorch tensor"):
        arrays.describe([1, 2, 3])


@pytest.mark.parametrize("shape,strides,keep,expect", [
    ((2, 3, 4, 5), [(60, 20, 5, 1)], 0, ([120], [[1]])),
    ((2, 3, 4, 5), [(120, 20, 5, 1)], 0, ([2, 60], [[120, 1]])),
    ((2, 3, 4, 5), [(60, 20, 5, 1), (120, 40, 5, 1)], 0, ([6, 20], [[20, 1], [40, 1]])),
    ((2, 1, 4, 5), [(20, 999, 5, 1)], 2, ([2, 4, 5], [[20, 5, 1]])),  # extent 1: any stride
    ((1, 1), [(7, 3)], 0, ([1], [[1]])),
])
def test_merge_dims(shape: tuple, strides: list, keep: int, expect: tuple) -> None:
    assert arrays.merge_dims(shape, *strides, keep_last=keep) == expect


# ----------------------------------------------------------------------------- tensor_map
def test_tensor_map_names_the_box_as_a_python_caller_writes_it() -> None:
    with pytest.raises(ArgumentError) as info:
        tmagen.tensor_map(FakeCuda((64, 100)), box=[8, 64], swizzle="128B")
    v = info.value.violations[0]
    assert (v.rule, v.field, v.value) == ("box-inner-within-swizzle-span", "box[-1]", "64 float32 = 256 bytes")
    assert "at most 128 bytes per row" in v.why and "use box[-1] <= 32" in v.fix
    assert str(info.value).startswith("tmagen.tensor_map: 1 problem\n  1. box[-1] = 64 float32 = 256 bytes, but")
    assert isinstance(info.value, (TmagenError, ValueError))


def test_tensor_map_checks_the_real_pointer_and_strides() -> None:
    x = FakeCuda((64, 64), ptr=0x7F0000000004, strides=(260, 4))
    with pytest.raises(ArgumentError) as info:
        tmagen.tensor_map(x, box=[8, 16], swizzle="64B", atomicity="32B")
    assert _fields(info) == [("global-address-alignment", "x's data pointer"),
                             ("global-stride-multiple", "x.strides[0]"), ("atomicity-needs-128B", "atomicity")]
    msg = str(info.value)
    assert ("x's data pointer = 0x7f0000000004, but the tensor must start on a 16-byte boundary (it is 4 past one)"
            in msg)
    assert "x.strides[0] = 260 bytes, but strides must be multiples of 16 bytes: pad each row to 272 bytes" in msg


def test_tensor_map_argument_forms() -> None:
    x = FakeCuda((4, 8, 64), strides=(2048, 256, 8))
    with pytest.raises(ArgumentError) as info:
        tmagen.tensor_map(x, box=[8, 32], swizzle="weird", dtype="bfloat16", smem_offset=64)
    assert _fields(info) == [("array-inner-stride", "x.strides[-1]"), ("array-dtype", "dtype"),
                             ("argument-form", "box"), ("argument-form", "swizzle")]
    with pytest.raises(ArgumentError) as info:
        tmagen.tensor_map(FakeCuda((64, 64)), box=[8, 32], swizzle="128B", smem_offset=200, stores=True,
                          atomicity="32B_flip_8B", target="sm_100a")
    assert _fields(info) == [("smem-offset-alignment", "smem_offset"), ("flip-8b-load-only", "swizzle")]
    with pytest.raises(ArgumentError) as info:
        tmagen.tensor_map(np.zeros((64, 64), np.float32), box=[8, 32])
    assert _fields(info) == [("array-device", "x.device")] and "x.device = cpu" in str(info.value)


@pytest.mark.parametrize("shape,strides,ptr,box,swizzle,typestr", [
    ((100, 64), None, 0x7F0000000000, [300, 32], "none", "<f4"),
    ((5, 100, 64), (6432 * 2, 6432, 4), 0x7F0000000008, [1, 8, 64], "128B", "<f4"),
    ((0, 64), None, 0x7F0000000000, [8, 8], "32B", "<u2"),
    ((64, 64), None, 0x7F0000000000, [256, 128], "none", "<f8"),
])
def test_tensor_map_breaks_the_rules_check_encode_tiled_breaks(shape, strides, ptr, box, swizzle, typestr) -> None:
    """The same rules as `tmagen diagnose`, the field names turned to the caller's order: its errors
    and its warnings, since a map for a kernel must also fit the kernel (a box no block holds)."""
    es = int(typestr[2:])
    byte_strides = strides or tuple(int(np.prod(shape[i + 1:])) * es for i in range(len(shape)))
    with pytest.raises(ArgumentError) as info:
        tmagen.tensor_map(FakeCuda(shape, typestr, ptr, strides), box=box, swizzle=swizzle)
    found = diagnose_encode_tiled(
        dtype={"<f4": "FLOAT32", "<u2": "UINT16", "<f8": "FLOAT64"}[typestr], rank=len(shape), global_address=ptr,
        global_dim=list(shape[::-1]), global_strides=list(byte_strides[::-1][1:]), box_dim=box[::-1],
        element_strides=[1] * len(shape), interleave=0, swizzle=swizzle if swizzle != "none" else 0, l2_promotion=0,
        oob_fill=0)
    driver = found.errors + found.warnings
    assert [v.rule for v in info.value.violations] == [v.rule for v in driver]
    assert [v.value for v in info.value.violations] == [v.value for v in driver]


def test_tensor_map_refuses_a_null_data_pointer() -> None:
    """A map over address 0 encodes (the driver lets it pass: a warning for `tmagen diagnose`), and a
    kernel's first copy through it faults: a map for a kernel refuses it."""
    with pytest.raises(ArgumentError) as info:
        tmagen.tensor_map(FakeCuda((64, 64), "<f4", 0), box=[8, 32], swizzle="128B")
    assert _fields(info) == [("global-address-not-null", "x's data pointer")]
    assert "x's data pointer = 0 (null)" in str(info.value)


@pytest.mark.skipif(HAVE_GPU, reason="the GPU suite encodes for real")
def test_a_valid_map_needs_a_gpu_to_encode_and_says_so() -> None:
    with pytest.raises(runtime.NoGpu) as info:
        tmagen.tensor_map(FakeCuda((64, 100)), box=[8, 32], swizzle="128B")
    assert info.value.exit_status == 3


def test_checked_map_bytes_and_cuda_bindings_object() -> None:
    storage = runtime.TensorMap()
    raw = bytes(range(128))
    import ctypes

    ctypes.memmove(storage.address, raw, 128)
    from tmagen.tensor_maps import CheckedTensorMap

    m = CheckedTensorMap(None, None, storage)  # type: ignore[arg-type]  # the bytes alone
    assert m.bytes == raw
    assert bytes(m.as_numpy().tobytes()) == raw and m.as_numpy().dtype.itemsize == 128
    cu = m.cu_tensor_map
    assert [int(v) for v in cu.opaque] == list(np.frombuffer(raw, np.uint64))


# ----------------------------------------------------------------------------- tmagen.load
TRANSPOSE = {"name": "t_f32", "tensors": [{"name": "m", "dtype": "float32", "shape": [64, 64], "box": [32, 32]}],
             "kernel": {"kind": "transpose"}}


def test_load_takes_a_path_a_dict_or_a_spec() -> None:

    path = REPO / "specs" / "copy_f32_3d.json"
    for spec in (path, str(path), json.loads(path.read_text()), load_plan(path).spec):
        k = tmagen.load(spec)
        assert isinstance(k, Kernel) and k.spec.name == "copy_f32_3d" and k.view.symbol == "copy_f32_3d_copy"
    inspect = tmagen.load(REPO / "specs" / "nhwc_64b_fp16.json")  # one tensor: its inspect kernel, as a callable
    assert inspect.view.symbol == "nhwc_64b_fp16_inspect_activations"
    two = json.loads((REPO / "specs" / "maps_only_bf16_f32.json").read_text())
    with pytest.raises(SpecError, match="makes 2 kernels, but tmagen.load runs one"):
        tmagen.load({**two, "kernel": {"kind": "inspect"}})
    with pytest.raises(RuleError, match="box-inner-within-swizzle-span"):
        tmagen.load({**TRANSPOSE, "tensors": [{**TRANSPOSE["tensors"][0], "swizzle": {"mode": "64B"}}]})
    with pytest.raises(TypeError):
        tmagen.load(3)  # type: ignore[arg-type]


def test_a_loaded_kernel_checks_its_arrays_with_the_spec_s_names() -> None:
    k = tmagen.load(TRANSPOSE)
    with pytest.raises(ArgumentError) as info:
        k(FakeCuda((64, 64), "<f2"), out=FakeCuda((64, 64), "<f2"))
    assert _fields(info) == [("array-dtype", "x.dtype")] and "takes float32" in str(info.value)
    with pytest.raises(ArgumentError) as info:
        k(FakeCuda((4, 64, 64)))
    assert _fields(info) == [("array-rank", "x.ndim")]
    with pytest.raises(ArgumentError, match="tmagen allocates outputs for PyTorch and CuPy"):
        k(FakeCuda((64, 64)))  # a bare interface: tmagen cannot allocate in its framework
    with pytest.raises(ArgumentError) as info:
        k(FakeCuda((64, 64)), out=FakeCuda((64, 60)))
    assert _fields(info) == [("array-shape", "out.shape")]
    # 30 rows: the transposed rows are 120 bytes, no multiple of 16
    with pytest.raises(ArgumentError) as info:
        k(FakeCuda((30, 64)), out=FakeCuda((64, 30)))
    assert _fields(info) == [("global-stride-multiple", "out.strides[0]"),
                             ("store-inner-extent-16-bytes", "out.shape[-1]")]
    assert "out.strides[0] = 120 bytes, but strides must be multiples of 16 bytes" in str(info.value)
    with pytest.raises(ArgumentError) as info:
        k(FakeCuda((64, 64), ptr=0x7F0000000008), out=FakeCuda((64, 64), ptr=0x7F0000000104))
    assert _fields(info) == [("global-address-alignment", "x's data pointer"),
                             ("global-address-alignment", "out's data pointer")]


@pytest.mark.skipif(HAVE_GPU, reason="the GPU suite launches for real")
def test_a_valid_call_reaches_the_driver() -> None:
    with pytest.raises(runtime.NoGpu):
        tmagen.load(TRANSPOSE)(FakeCuda((64, 64)), out=FakeCuda((64, 64)))


def test_the_first_call_refuses_to_load_inside_a_graph_capture(monkeypatch: pytest.MonkeyPatch) -> None:
    import contextlib

    k = tmagen.load(TRANSPOSE)
    monkeypatch.setattr(runtime, "OnDevice", lambda device: contextlib.nullcontext())
    monkeypatch.setattr(runtime, "stream_is_capturing", lambda stream: True)
    compiled = []
    monkeypatch.setattr(k, "compile", lambda: compiled.append(1))
    with pytest.raises(runtime.GpuError, match="call it once before capturing"):
        k._load(0, stream=1234)
    assert compiled == [], "nothing compiled or loaded during the capture"


def test_the_strided_and_quantize_kernels_load_once_and_never_inside_a_capture(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """runtime.load_once, which the strided and quantize kernels load through: the first call loads
    (on the device), later ones take the cached value, and a first call on a capturing stream
    raises before anything is compiled or loaded."""
    import contextlib

    monkeypatch.setattr(runtime, "OnDevice", lambda device: contextlib.nullcontext())
    capturing = {"now": False}
    monkeypatch.setattr(runtime, "stream_is_capturing", lambda stream: capturing["now"])
    cache: dict[Any, Any] = {}
    loads: list[int] = []
    assert runtime.load_once(cache, "k", 0, 7, "strided kernels", lambda: loads.append(1) or "module") == "module"
    capturing["now"] = True
    assert runtime.load_once(cache, "k", 0, 7, "strided kernels", lambda: loads.append(1) or "other") == "module"
    assert loads == [1]
    with pytest.raises(runtime.GpuError, match="strided kernels compile and load .* call the op once before capturing"):
        runtime.load_once(cache, "j", 0, 7, "strided kernels", lambda: loads.append(1) or "x")
    assert loads == [1] and "j" not in cache


# ----------------------------------------------------------------------------- tmagen.ops
def test_shipped_specs_are_the_benchmarked_ones() -> None:
    """One copy of the tuned specs: tmagen.ops runs the folder benchmarks/run.py times."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("bench_run_specs", REPO / "benchmarks" / "run.py")
    run = importlib.util.module_from_spec(spec)
    sys.modules["bench_run_specs"] = run  # dataclasses look their module up
    spec.loader.exec_module(run)
    assert run.SPECS.resolve() == ops.SPECS_DIR.resolve() == (REPO / "tmagen" / "ops_specs").resolve()
    assert len(list(ops.SPECS_DIR.glob("*.json"))) >= 12
    assert not (REPO / "benchmarks" / "specs").exists(), "a second copy of the tuned specs"


CASES = [("copy", d, r) for d in ("uint8", "bfloat16", "float16", "float32", "int32", "float64", "int64")
         for r in (1, 2, 3, 4, 5)] + [("transpose", d, r) for d in ("uint8", "bfloat16", "float16", "float32",
                                                                      "uint32", "float64") for r in (2, 3)]


def test_ops_choose_tuned_specs_and_derive_the_rest() -> None:
    assert ops.spec_for("transpose", "float32", 2).name == "bench_transpose_float32"
    assert ops.spec_for("transpose", "float16", 2).name == "bench_transpose_float16"
    assert ops.spec_for("transpose", "uint16", 2).name == "bench_transpose_bfloat16"  # a type of the same size
    assert ops.spec_for("copy", "int32", 4).name == "bench_copy_float32_r4"
    derived = ops.spec_for("transpose", "float32", 3)
    tuned = ops.spec_for("transpose", "float32", 2)
    assert derived.tensors[0].box == [1, *tuned.tensors[0].box] and derived.kernel == tuned.kernel
    # 8-byte transposes: the float32 tile's bytes per row and per column, in 8-byte elements
    rows, cols = ops.spec_for("transpose", "float32", 2).tensors[0].box
    assert ops.spec_for("transpose", "float64", 2).tensors[0].box == [rows // 2, cols // 2]
    assert ops.spec_for("copy", "uint8", 1).tensors[0].box == [256]  # TMA's limit, not 4 x 256
    # the tuned float32 copies of ranks 3 to 5 are what the derivation would give
    for rank in (3, 4, 5):
        tuned_r = ops.spec_for("copy", "float32", rank)
        assert tuned_r.tensors[0].box == [1] * (rank - 2) + ops.spec_for("copy", "float32", 2).tensors[0].box


@pytest.mark.parametrize("kind,dtype,rank", CASES, ids=lambda v: str(v))
def test_every_ops_kernel_passes_the_rules_and_compiles(kind: str, dtype: str, rank: int) -> None:
    k = ops.kernel(kind, dtype, rank)  # raises RuleError for a spec that breaks a rule
    assert k.spec.tensors[0].rank == rank and k.spec.kernel.kind == kind
    try:
        compiled = nvrtc.compile_plan(resolve(k.spec))
    except nvrtc.NvrtcError as exc:
        if IN_CI:
            raise
        pytest.skip(f"no NVRTC: {exc}")
    assert f".text.{resolve(k.spec).kernels[0].symbol}\0".encode() in compiled.data


def test_ops_refuse_only_what_no_gpu_op_means() -> None:
    """Every shape and view is taken (tests/test_ops_layouts.py); refused are a transpose of fewer
    than 2 dimensions (as PyTorch refuses it), an output of the wrong shape, elements of sizes no
    framework makes, arrays off the GPU and permutations that are none."""
    with pytest.raises(ArgumentError) as info:
        ops.transpose(FakeCuda((64,)))
    assert _fields(info) == [("array-rank", "x.ndim")]
    with pytest.raises(ArgumentError) as info:
        ops.copy(FakeCuda((64, 4), "|V3"), out=FakeCuda((64, 4), "|V3"))
    assert _fields(info) == [("array-dtype", "x.dtype")] and "1, 2, 4, 8 or 16 bytes" in str(info.value)
    with pytest.raises(ArgumentError) as info:
        ops.transpose(FakeCuda((64, 64)), out=FakeCuda((64, 32)))
    assert _fields(info) == [("array-shape", "out.shape")]
    with pytest.raises(ArgumentError) as info:
        ops.copy(np.zeros((4, 4), np.float32))
    assert _fields(info) == [("array-device", "x.device")]
    with pytest.raises(ArgumentError) as info:
        ops.permute(FakeCuda((2, 3, 4)), (0, 1, 1), out=FakeCuda((2, 3, 4)))
    assert _fields(info) == [("permute-dims", "dims")]


# ----------------------------------------------------------------------------- PyTorch
def test_importing_tmagen_imports_no_framework() -> None:
    import subprocess
    import sys

    from conftest import pythonpath_with_repo

    code = ("import sys, tmagen; tmagen.load; tmagen.tensor_map; "
            "print(sorted({'torch', 'cupy', 'jax'} & set(sys.modules)))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={**os.environ, "PYTHONPATH": pythonpath_with_repo()}).stdout
    assert out.strip() == "[]"


def test_torch_fake_implementations_give_the_output_shapes() -> None:
    torch = pytest.importorskip("torch")
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        x = torch.empty(3, 5, 64, 128, device="cuda", dtype=torch.bfloat16)
        y = torch.ops.tmagen.transpose(x)
        assert y.shape == (3, 5, 128, 64) and y.dtype == torch.bfloat16 and y.is_contiguous()
        z = torch.ops.tmagen.copy(x.transpose(-2, -1))
        assert z.shape == (3, 5, 128, 64) and z.is_contiguous()


def test_torch_compile_traces_the_ops_into_one_graph() -> None:
    torch = pytest.importorskip("torch")
    graphs: list[Any] = []

    def backend(gm: Any, example_inputs: Any) -> Any:
        graphs.append(gm)
        return lambda *args: (torch.zeros(1),)

    def f(x: Any) -> Any:
        return tmagen.ops.copy(tmagen.ops.transpose(x)) * 2

    torch.compile(f, backend=backend, fullgraph=True)(torch.randn(4, 64, 128))  # fullgraph: no graph break
    (gm,) = graphs
    calls = [n for n in gm.graph.nodes if n.op == "call_function" and "tmagen" in str(n.target)]
    assert [str(n.target) for n in calls] == ["tmagen.transpose", "tmagen.copy"]
    assert tuple(calls[0].meta["example_value"].shape) == (4, 128, 64)


def test_torch_ops_have_autograd_formulas() -> None:
    """Tensors that need gradients go through the registered ops (meta tensors: shapes only)."""
    torch = pytest.importorskip("torch")
    x = torch.empty(2, 8, 16, device="meta", requires_grad=True)
    y = tmagen.ops.transpose(x)
    assert y.shape == (2, 16, 8) and "tmagen_transpose" in type(y.grad_fn).__name__
    y.sum().backward()
    assert x.grad is not None and x.grad.shape == x.shape
    z = tmagen.ops.copy(x)
    assert "tmagen_copy" in type(z.grad_fn).__name__


def test_the_host_only_figures_run_without_a_gpu() -> None:
    """README's `python3 benchmarks/python_api.py --host-only` (tmagen's own Python cost per call, the
    driver stubbed out) runs on any machine and prints its figures: its stubs follow the launch path."""
    import subprocess

    run = subprocess.run([sys.executable, str(REPO / "benchmarks" / "python_api.py"), "--host-only"],
                         capture_output=True, text=True, timeout=300, cwd=REPO)
    assert run.returncode == 0, run.stderr[-2000:]
    figures = {name: float(us) for us, _, name in (line.strip().partition(" us  ") for line in run.stdout.splitlines())
               if name}
    assert figures.get("Kernel.launch, cached (driver stubbed)", 0) > 0, run.stdout


def test_on_device_sets_a_context_where_none_is_current_and_restores_another(monkeypatch: pytest.MonkeyPatch) -> None:
    """runtime.OnDevice: a thread with no context current is given the device's and keeps it (as the
    runtime API does); one with another current gets it pushed for the block and popped after."""
    current = {"ctx": 0}
    calls: list[str] = []

    def fake(symbol: str, *types: object) -> object:
        def call(*args: object) -> int:
            calls.append(symbol)
            if symbol == "cuCtxSetCurrent":
                current["ctx"] = args[0]
            elif symbol == "cuCtxPushCurrent":
                current["saved"], current["ctx"] = current["ctx"], args[0]
            elif symbol == "cuCtxPopCurrent":
                current["ctx"] = current["saved"]
            return 0
        return call

    monkeypatch.setattr(runtime, "driver_function", fake)
    monkeypatch.setattr(runtime, "current_context", lambda: current["ctx"])
    monkeypatch.setattr(runtime, "primary_context", lambda ordinal: 11)
    with runtime.OnDevice(0):
        assert current["ctx"] == 11
    assert current["ctx"] == 11 and calls == ["cuCtxSetCurrent"], "none was current: the device's stays"
    current["ctx"], calls[:] = 22, []
    with runtime.OnDevice(0):
        assert current["ctx"] == 11
    assert current["ctx"] == 22 and calls == ["cuCtxPushCurrent", "cuCtxPopCurrent"], "another's is restored"
    current["ctx"], calls[:] = 11, []
    with runtime.OnDevice(0):  # its own already current: nothing to do
        pass
    assert current["ctx"] == 11 and calls == []
