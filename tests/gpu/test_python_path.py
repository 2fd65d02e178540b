"""The Python path on the GPU: tmagen.ops.transpose and copy on PyTorch tensors and CuPy arrays
(every dtype, contiguous and strided, batched and ragged, on non-default streams), checked bit for
bit against PyTorch's own transpose and clone on fresh random bits with poisoned outputs;
tmagen.load on both frameworks; tmagen.tensor_map driving a CuPy RawKernel's TMA load, checked
byte for byte against tmagen.swizzle.smem_offsets; torch.compile and CUDA graphs."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

import tmagen
from tmagen.errors import ArgumentError
from tmagen.swizzle import PATTERNS, BoxLayout, smem_offsets

from conftest import REPO

pytestmark = pytest.mark.gpu

POISON = 0xA5

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("PyTorch sees no CUDA device", allow_module_level=True)

DTYPES = [torch.float32, torch.float16, torch.bfloat16, torch.float64, torch.uint8, torch.int8, torch.int16,
          torch.int32, torch.int64, torch.bool, torch.complex64, torch.float8_e4m3fn]
_BITS = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}


def bits(t: Any) -> Any:
    """The tensor's bytes as integers of its size: a comparison NaN and -0.0 cannot fool."""
    t = t.contiguous()
    if t.dtype == torch.complex64:
        t = torch.view_as_real(t)
        return t.view(torch.int32)
    return t.view(_BITS[t.element_size()])


def random(shape: tuple, dtype: Any, gen: Any) -> Any:
    """Fresh random bits of ``dtype`` (0 or 1 for bool)."""
    if dtype == torch.bool:
        return torch.randint(0, 2, shape, device="cuda", generator=gen).bool()
    size = torch.empty((), dtype=dtype).element_size()
    raw = torch.randint(0, 256, (math.prod(shape) * size,), dtype=torch.uint8, device="cuda", generator=gen)
    return raw.view(dtype).reshape(shape)


def poisoned(shape: tuple, dtype: Any) -> Any:
    out = torch.empty(shape, dtype=dtype, device="cuda")
    out.view(torch.uint8).fill_(POISON)
    return out


def unit(dtype: Any) -> int:
    """Elements per 16 bytes: rows of both the input and the transposed output must be whole 16 bytes."""
    return 16 // torch.empty((), dtype=dtype).element_size()


@pytest.fixture()
def gen() -> Any:
    return torch.Generator(device="cuda").manual_seed(1234)


# ----------------------------------------------------------------------------- torch: transpose
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_torch_transpose_every_dtype_square_ragged_batched(dtype: Any, gen: Any, report: Any) -> None:
    u = unit(dtype)
    shapes = [(256, 512), (u * 37, u * 23), (3, u * 19, u * 41), (2, 3, u * 8, u * 11), (1, 1, u * 5, u * 7)]
    for shape in shapes:
        x = random(shape, dtype, gen)
        out = poisoned((*shape[:-2], shape[-1], shape[-2]), dtype)
        got = tmagen.ops.transpose(x, out=out)
        assert got is out
        assert torch.equal(bits(out), bits(x.transpose(-2, -1).contiguous())), (dtype, shape)
        allocated = tmagen.ops.transpose(x)  # a new tensor of torch, on x's device
        assert allocated.dtype == dtype and allocated.is_contiguous() and allocated.device == x.device
        assert torch.equal(bits(allocated), bits(out)), (dtype, shape)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.uint8, torch.float64], ids=str)
def test_torch_transpose_reads_strided_views_in_place(dtype: Any, gen: Any) -> None:
    u = unit(dtype)
    base = random((6, u * 20, u * 30), dtype, gen)
    views = [base[0, : u * 17, u * 2: u * 25],  # rows of a wider tensor: a 16-byte-multiple row stride
             base[::2, u:, : u * 28],  # every other matrix: one batch stride
             base[1:5, u * 3: u * 9]]
    for x in views:
        assert not x.is_contiguous()
        out = poisoned((*x.shape[:-2], x.shape[-1], x.shape[-2]), dtype)
        tmagen.ops.transpose(x, out=out)
        assert torch.equal(bits(out), bits(x.transpose(-2, -1).contiguous()))
    # into a strided output: a window of a larger poisoned tensor, the rest untouched
    x = views[0]
    big = poisoned((x.shape[1] + u, x.shape[0] + 2 * u), dtype)
    window = big[u:, u: u + x.shape[0]]
    tmagen.ops.transpose(x, out=window)
    assert torch.equal(bits(window), bits(x.t().contiguous()))
    assert (big.view(torch.uint8)[:u] == POISON).all()


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.uint8, torch.int64, torch.complex64], ids=str)
def test_torch_transposed_views_are_read_the_other_way(dtype: Any, gen: Any) -> None:
    """copy of a transposed view is a transpose of the memory it views, and transpose of one is a
    copy (both were refused: the view's rows are not contiguous), batched and into out= too."""
    u = unit(dtype)
    for shape in [(u * 40, u * 24), (3, u * 16, u * 8), (u * 8, u * 2)]:
        y = random(shape, dtype, gen)
        view = y.transpose(-2, -1)
        assert torch.equal(bits(tmagen.ops.copy(view)), bits(view.contiguous()))
        assert torch.equal(bits(tmagen.ops.transpose(view)), bits(y))
        out = poisoned(tuple(view.shape), dtype)
        tmagen.ops.copy(view, out=out)
        assert torch.equal(bits(out), bits(view.contiguous()))
        out = poisoned(tuple(y.shape), dtype)
        tmagen.ops.transpose(view, out=out)
        assert torch.equal(bits(out), bits(y))


def test_torch_once_refused_layouts_run_and_cpu_is_refused(gen: Any) -> None:
    x = random((7, 64), torch.float32, gen)  # transposed rows of 7 floats: 28 bytes, no TMA stride
    assert torch.equal(bits(tmagen.ops.transpose(x)), bits(x.t().contiguous()))
    y = random((65, 64), torch.float32, gen).view(-1)[1:4097].view(64, 64)  # 4 bytes past 16
    assert torch.equal(bits(tmagen.ops.copy(y)), bits(y.clone()))
    with pytest.raises(ArgumentError, match="x.device = cpu"):
        tmagen.ops.transpose(torch.zeros(64, 64))


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_torch_copy_every_dtype_rank_and_stride(dtype: Any, gen: Any) -> None:
    u = unit(dtype)
    base5 = random((3, 4, 5, u * 6, u * 9), dtype, gen)
    cases = [random((u * 1000 + 3,), dtype, gen), random((u * 31, u * 7 + 1), dtype, gen), base5,
             base5[:, 1:3], base5[:, :, ::2, :, : u * 4], base5[1, 2, :, u:, u * 2:]]
    for x in cases:
        out = poisoned(tuple(x.shape), dtype)
        tmagen.ops.copy(x, out=out)
        assert torch.equal(bits(out), bits(x.clone())), (dtype, tuple(x.shape), x.stride())
    assert torch.equal(bits(tmagen.ops.copy(cases[3])), bits(cases[3].contiguous()))


def test_torch_non_default_stream(gen: Any) -> None:
    """The op runs on torch's current stream: behind a long sleep on that stream, a launch on any
    other stream would read the input before it is written."""
    x = random((4096, 2048), torch.float32, gen)
    src = torch.zeros_like(x)
    out = poisoned((2048, 4096), torch.float32)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        torch.cuda._sleep(200_000_000)
        src.copy_(x)
        tmagen.ops.transpose(src, out=out)
        copied = tmagen.ops.copy(src)
    s.synchronize()
    # NaNs among the bits
    assert torch.equal(bits(out), bits(x.t().contiguous())) and torch.equal(bits(copied), bits(x))


def test_torch_cuda_graph_capture_and_replay(gen: Any) -> None:
    x = random((3, 512, 768), torch.bfloat16, gen)
    tmagen.ops.transpose(x)  # warm-up: compiles and loads, which a capture does not allow
    tmagen.ops.copy(x)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        y = tmagen.ops.transpose(x)
        z = tmagen.ops.copy(x)
    for seed in (5, 6):
        x.copy_(random(tuple(x.shape), torch.bfloat16, torch.Generator(device="cuda").manual_seed(seed)))
        g.replay()
        torch.cuda.synchronize()
        assert torch.equal(bits(y), bits(x.transpose(-2, -1).contiguous())) and torch.equal(bits(z), bits(x))


@pytest.mark.parametrize("mode", [None, "reduce-overhead"])
def test_torch_compile(mode: Any, gen: Any) -> None:
    def f(x: Any) -> Any:
        return tmagen.ops.transpose(x * 2) + 1

    compiled = torch.compile(f, fullgraph=True, mode=mode)
    for _ in range(3):  # reduce-overhead records a CUDA graph after warm-up runs
        x = torch.randn(2, 384, 256, device="cuda", generator=gen)
        assert torch.equal(compiled(x), (x * 2).transpose(-2, -1).contiguous() + 1)


def test_torch_autograd(gen: Any) -> None:
    x = torch.randn(3, 64, 96, device="cuda", generator=gen, requires_grad=True)
    w = torch.randn(3, 96, 64, device="cuda", generator=gen)
    (tmagen.ops.transpose(x) * w).sum().backward()
    assert torch.equal(x.grad, w.transpose(-2, -1).contiguous())


def test_torch_ops_repeat_a_seen_layouts_launches(gen: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """torch.ops.tmagen.* (what compiled graphs and autograd call) repeat the launches of a layout
    they have seen, as tmagen.ops's own calls do: once warmed up, a loop of calls runs no eager path
    (no route, no tensor map) and is right on the input's new data."""
    import tmagen.ops as ops_module

    x = random((3, 256, 384), torch.float32, gen)
    # what the check needs is allocated first: a block of the outputs' size allocated between the
    # calls would move their outputs to other addresses, which the first calls have not seen
    fresh = random(tuple(x.shape), torch.float32, torch.Generator(device="cuda").manual_seed(7))
    expected = {"transpose": fresh.transpose(-2, -1).contiguous(), "copy": fresh.clone(),
                "permute": fresh.permute(1, 0, 2).contiguous()}
    calls = {"transpose": lambda: torch.ops.tmagen.transpose(x), "copy": lambda: torch.ops.tmagen.copy(x),
             "permute": lambda: torch.ops.tmagen.permute(x, [1, 0, 2])}
    for call in calls.values():  # both output blocks the caching allocator alternates between, seen
        for _ in range(4):
            y = call()
        del y

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("a repeated call through torch.ops.tmagen ran the eager path")

    monkeypatch.setattr(ops_module, "_source", refuse)  # the eager paths' first step: an ArrayView of x
    x.copy_(fresh)
    for name, call in calls.items():
        for _ in range(4):
            y = call()
            assert torch.equal(bits(y), bits(expected[name])), name
        del y


def test_torch_through_load(gen: Any) -> None:
    k = tmagen.load({"name": "py_t_f32", "tensors": [{"name": "m", "dtype": "float32", "shape": [64, 64],
                                                      "box": [32, 32], "swizzle": {"mode": "128B"}}],
                     "kernel": {"kind": "transpose"}})
    x = random((300, 200), torch.float32, gen)
    assert torch.equal(bits(k(x)), bits(x.t().contiguous()))
    with pytest.raises(ArgumentError, match="takes float32"):
        k(x.to(torch.float16))


def test_a_first_call_in_a_thread_with_no_context_current(gen: Any) -> None:
    """A kernel's first call in a thread that has no CUDA context current (autograd's backward thread,
    where PyTorch reused cached memory and made no runtime call): it loads in the device's context.
    Before, asking whether the stream was being captured failed there (CUDA_ERROR_INVALID_CONTEXT),
    and the first backward through torch.ops.tmagen.matmul of a process raised."""
    import threading

    from tmagen import runtime

    k = tmagen.load({"name": "py_t_f32_thread", "tensors": [{"name": "m", "dtype": "float32", "shape": [64, 64],
                                                             "box": [32, 32], "swizzle": {"mode": "128B"}}],
                     "kernel": {"kind": "transpose"}})
    x = random((96, 160), torch.float32, gen)
    out = torch.empty(160, 96, device="cuda")
    seen: dict[str, Any] = {}

    def first_call() -> None:
        seen["context"] = runtime.current_context()
        try:
            k(x, out=out)
        except Exception as exc:  # noqa: BLE001 (reported below)
            seen["error"] = exc
        seen["after"] = runtime.current_context()

    thread = threading.Thread(target=first_call)
    thread.start()
    thread.join()
    assert seen["context"] == 0, "the thread had no context current (what the test is about)"
    assert "error" not in seen, seen.get("error")
    # and keeps the device's, as after a runtime call: launches made again there are not refused
    assert seen["after"] == runtime.primary_context(torch.cuda.current_device())
    torch.cuda.synchronize()
    assert torch.equal(bits(out), bits(x.t().contiguous()))


@pytest.mark.parametrize("name", ["inspect_bf16_offset384", "nhwc_64b_fp16", "nc32hwc32_32b_fp16"])
def test_torch_inspect_through_load(name: str, gen: Any) -> None:
    """tmagen.load of an inspect spec gives the box's shared-memory footprint, every byte where the
    swizzle model puts it (the poison where TMA writes nothing), on a strided view too."""
    from tmagen.kinds.inspect.launch import POISON
    from tmagen.verify import _box_of

    k = tmagen.load(REPO / "specs" / f"{name}.json")
    m = k.plan.map(k.view.maps[0])
    dtype = getattr(torch, m.dtype_name)
    padded = random((*m.shape[:-1], m.shape[-1] + 8 * unit(dtype)), dtype, gen)  # rows padded by whole 16 bytes
    for x in (random(m.shape, dtype, gen), padded[..., :m.shape[-1]]):
        got = k(x)
        assert got.dtype == torch.uint8 and got.shape == (m.footprint,)
        host = x.contiguous().view(torch.uint8).cpu().numpy().reshape(*m.shape, m.elem_bytes)
        box, _ = _box_of(host, list(k.view.detail.coords), list(m.smem_shape))
        expected = m.layout.place(box.view({1: np.uint8, 2: np.uint16, 4: np.uint32}[m.elem_bytes])
                                  .reshape(m.smem_shape), fill=POISON)
        assert np.array_equal(got.cpu().numpy(), expected)


@pytest.mark.parametrize("name", ["matmul_bf16_tn", "matmul_f16_nn_f32"])
def test_torch_matmul_through_load(name: str, gen: Any, report: Any) -> None:
    """tmagen.load of a matmul spec runs on the user's own shapes (1 and ragged included, K below a
    stage and K = 0), its B as the spec lays it out, into a new C of the spec's type or into out=;
    each element within the verifier's bound of the float64 product."""
    from tmagen.verify import matmul_tolerance

    k = tmagen.load(REPO / "specs" / f"{name}.json")
    b_major = k.plan.kernel.detail.b_major
    ab = getattr(torch, k.plan.map("a").dtype_name)
    c_dtype = getattr(torch, k.plan.map("c").dtype_name)
    rows = []
    for m, n, kk in [(1, 8, 16), (1, 4096, 4096), (64, 8, 8), (130, 264, 72), (777, 1032, 520), (4096, 24, 4096),
                     (256, 256, 0)]:
        a = torch.randn(m, kk, device="cuda", generator=gen).to(ab)
        b = torch.randn(n, kk, device="cuda", generator=gen).to(ab)
        b_arg = b if b_major == "k" else b.t().contiguous()
        c = k(a, b_arg)
        assert c.shape == (m, n) and c.dtype == c_dtype
        ref = a.double() @ b.double().t()
        bound, rule = matmul_tolerance((a.double().abs() @ b.double().abs().t()).cpu().numpy(), ref.cpu().numpy(),
                                       kk, k.plan.map("c").dtype_name)
        bad = int((~((c.double() - ref).abs().cpu() <= torch.from_numpy(bound))).sum())
        out = poisoned((m, n), c_dtype)
        k(a, b_arg, out=out)
        assert torch.equal(bits(out), bits(c)), "out= writes what a new C holds"
        rows.append({"spec": name, "mnk": [m, n, kk], "outside": bad, "rule": rule})
        assert bad == 0, (m, n, kk, rule)
    report("load_matmul_" + name, rows)
    with pytest.raises(ArgumentError, match="needs K"):
        k(torch.randn(64, 32, device="cuda").to(ab), torch.randn(64, 48, device="cuda").to(ab))


# ----------------------------------------------------------------------------- CuPy
def _cupy() -> Any:
    return pytest.importorskip("cupy")


@pytest.mark.parametrize("dtype", ["float32", "float16", "uint8", "int8", "int32", "float64", "int64", "complex64"])
def test_cupy_transpose_and_copy(dtype: str) -> None:
    cp = _cupy()
    rng = np.random.default_rng(7)
    es = np.dtype(dtype).itemsize
    u = 16 // es
    for shape in [(u * 33, u * 21), (4, u * 17, u * 9)]:
        host = rng.integers(0, 256, size=math.prod(shape) * es, dtype=np.uint8).view(dtype).reshape(shape)
        x = cp.asarray(host)
        out = cp.empty((*shape[:-2], shape[-1], shape[-2]), dtype=dtype)
        out.view(cp.uint8).fill(POISON)
        assert tmagen.ops.transpose(x, out=out) is out
        want = np.ascontiguousarray(np.swapaxes(host, -2, -1))
        assert cp.asnumpy(out).tobytes() == want.tobytes()
        y = tmagen.ops.transpose(x)
        assert isinstance(y, cp.ndarray) and cp.asnumpy(y).tobytes() == want.tobytes()
        strided = x[..., u:, : u * 5]
        c = tmagen.ops.copy(strided)
        assert isinstance(c, cp.ndarray)
        assert cp.asnumpy(c).tobytes() == np.ascontiguousarray(host[..., u:, : u * 5]).tobytes()


SPIN = r"""
extern "C" __global__ void spin(long long cycles) {
  long long start = clock64();
  while (clock64() - start < cycles) {}
}
"""


def test_cupy_non_default_stream() -> None:
    cp = _cupy()
    host = np.random.default_rng(3).random((2048, 1024), dtype=np.float32)
    spin = cp.RawKernel(SPIN, "spin")
    x = cp.zeros(host.shape, dtype=cp.float32)
    out = cp.empty((1024, 2048), dtype=cp.float32)
    with cp.cuda.Stream(non_blocking=True) as s:
        spin((1,), (1,), (np.int64(400_000_000),))
        x.set(host, stream=s)
        tmagen.ops.transpose(x, out=out)
    s.synchronize()
    assert np.array_equal(cp.asnumpy(out), host.T)


def test_cupy_through_load() -> None:
    cp = _cupy()
    k = tmagen.load(REPO / "specs" / "copy_f32_3d.json")
    host = np.random.default_rng(5).random((6, 100, 120), dtype=np.float32)
    assert np.array_equal(cp.asnumpy(k(cp.asarray(host))), host)


# ----------------------------------------------------------------------------- tensor_map + RawKernel
LOAD_BOX = r"""
struct __align__(64) TensorMap { unsigned long long opaque[16]; };

// One TMA load of the box at (outer, inner) into shared memory 1024-byte aligned and poisoned
// first; then the raw footprint copied out.
extern "C" __global__ void load_box(const __grid_constant__ TensorMap map, int inner, int outer, unsigned int tx_bytes,
                                    unsigned int footprint, unsigned char poison, unsigned char* out) {
  extern __shared__ unsigned char raw[];
  __shared__ __align__(8) unsigned long long bar;
  const unsigned int base = static_cast<unsigned int>(__cvta_generic_to_shared(raw));
  unsigned char* box = raw + ((1024u - (base & 1023u)) & 1023u);
  const unsigned int box_addr = static_cast<unsigned int>(__cvta_generic_to_shared(box));
  const unsigned int bar_addr = static_cast<unsigned int>(__cvta_generic_to_shared(&bar));
  for (unsigned int i = threadIdx.x; i < footprint; i += blockDim.x) box[i] = poison;
  if (threadIdx.x == 0) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" :: "r"(bar_addr) : "memory");
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
  __syncthreads();
  if (threadIdx.x == 0) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"(bar_addr), "r"(tx_bytes) : "memory");
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes "
                 "[%0], [%1, {%2, %3}], [%4];"
                 :: "r"(box_addr), "l"(&map), "r"(inner), "r"(outer), "r"(bar_addr) : "memory");
  }
  asm volatile("{\n .reg .pred done;\nWAIT:\n mbarrier.try_wait.parity.shared::cta.b64 done, [%0], 0;\n"
               " @!done bra WAIT;\n}\n"
               :: "r"(bar_addr) : "memory");
  for (unsigned int i = threadIdx.x; i < footprint; i += blockDim.x) out[i] = box[i];
}
"""


@pytest.mark.parametrize("dtype,box,swizzle", [("float32", (8, 32), "128B"), ("uint16", (16, 32), "64B"),
                                              ("uint8", (4, 32), "32B"), ("float64", (5, 4), "none"),
                                              ("float32", (6, 8), "128B")])
def test_tensor_map_drives_a_cupy_raw_kernel(dtype: str, box: tuple, swizzle: str, report: Any) -> None:
    cp = _cupy()
    rng = np.random.default_rng(11)
    es = np.dtype(dtype).itemsize
    shape = (50, 48 * 16 // es)
    host = rng.integers(0, 256, size=math.prod(shape) * es, dtype=np.uint8).view(dtype).reshape(shape)
    x = cp.asarray(host)
    m = tmagen.tensor_map(x, box=list(box), swizzle=swizzle)
    assert len(m.bytes) == 128 and [int(v) for v in m.cu_tensor_map.opaque] == list(np.frombuffer(m.bytes, np.uint64))
    layout = BoxLayout(box, es, PATTERNS[m.arguments.swizzle], 0)
    kernel = cp.RawKernel(LOAD_BOX, "load_box")
    coords = (8, 16 // es * 2)  # outermost first; the innermost a whole 16 bytes
    out = cp.zeros(layout.footprint, dtype=cp.uint8)
    args = (m.as_numpy(), np.int32(coords[1]), np.int32(coords[0]), np.uint32(math.prod(box) * es),
            np.uint32(layout.footprint), np.uint8(0x5A), out)
    try:
        kernel((1,), (128,), args, shared_mem=layout.footprint + 1024)
        how = "cupy argument"
    except (TypeError, ValueError, NotImplementedError):
        # a CuPy that passes no structured scalars: the same kernel, launched by the driver
        from tmagen import runtime

        kernel.compile()
        params = [m._storage, np.int32(coords[1]), np.int32(coords[0]), np.uint32(math.prod(box) * es),
                  np.uint32(layout.footprint), np.uint8(0x5A), np.uint64(out.data.ptr)]
        import ctypes

        values = [ctypes.c_char.from_address(p.address) if isinstance(p, runtime.TensorMap) else
                  ctypes.create_string_buffer(p.tobytes(), p.nbytes) for p in params]
        pointers = (ctypes.c_void_p * len(values))(*[ctypes.addressof(v) for v in values])
        runtime._raise_for(runtime.driver_function(
            "cuLaunchKernel", ctypes.c_int, ctypes.c_void_p, *[ctypes.c_uint] * 7, ctypes.c_void_p, ctypes.c_void_p,
            ctypes.c_void_p)(kernel.kernel.ptr, 1, 1, 1, 128, 1, 1, layout.footprint + 1024, 0,
                             ctypes.addressof(pointers), None), "cuLaunchKernel")
        how = "driver launch of the RawKernel"
    got = cp.asnumpy(out)
    # where the model puts each element of the box: every byte of the footprint accounted for
    offsets = smem_offsets(box, es, swizzle)
    region = host[coords[0]: coords[0] + box[0], coords[1]: coords[1] + box[1]]
    want = np.full(layout.footprint, 0x5A, dtype=np.uint8)
    want[offsets[..., None] + np.arange(es)] = np.ascontiguousarray(region).view(np.uint8).reshape(*box, es)
    assert np.array_equal(got, want), f"{np.count_nonzero(got != want)} of {got.size} bytes differ"
    report(f"tensor_map_raw_kernel_{dtype}_{swizzle}", {"box": box, "footprint": layout.footprint, "match": True,
                                                        "launched_by": how})


def test_tensor_map_refuses_a_bad_box_on_a_real_array() -> None:
    cp = _cupy()
    x = cp.zeros((64, 100), dtype=cp.float32)
    with pytest.raises(ArgumentError) as info:
        tmagen.tensor_map(x, box=[8, 64], swizzle="128B")
    assert "box[-1] = 64 float32 = 256 bytes" in str(info.value) and "use box[-1] <= 32" in str(info.value)
    rows_of_392_bytes = cp.zeros((64, 98), dtype=cp.float32)
    with pytest.raises(ArgumentError, match=r"x.strides\[0\] = 392 bytes"):
        tmagen.tensor_map(rows_of_392_bytes, box=[8, 32], swizzle="128B")
