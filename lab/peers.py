"""The candidates of a benchmark case, on the same tensors: tmagen's generated kernel, the limit
(``cudaMemcpyAsync``) and the peers a user would otherwise reach for: PyTorch, CuPy and Triton
kernels written as a Triton user would (:mod:`lab.triton_peers`).

Everything here runs on a GPU with PyTorch; CuPy and Triton are optional (a missing one is
reported as such). tmagen imports this module only for benchmarks, and it imports PyTorch,
CuPy and Triton only when called, so tmagen stays importable without them.

Every candidate's output is checked against PyTorch's before it is timed (bit for bit), and one
that fails is reported as failed, never timed. The matmul's candidates are in lab/matmul_bench.py.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

from tmagen import runtime
from tmagen.bench import Candidate, Method, time_case
from tmagen.launch import Array, launch_parameters
from tmagen.plan import resolve
from tmagen.spec import Spec, TransposeKernel
from tmagen.verify import OUT_POISON

# The L2 of an H100 (50 MiB) or H200 (60 MiB) is read at run time; a case whose buffers would fit
# in a few L2s rotates through this many times the L2 of input and output sets.
L2_MULTIPLE = 4
MAX_SETS = 16
# A sample shorter than this is several launches between two events (event resolution is ~0.5 us).
MIN_SAMPLE_MS = 0.2


def _torch() -> Any:
    import torch

    return torch


def torch_dtype(name: str) -> Any:
    torch = _torch()
    return {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16, "float64": torch.float64,
            "uint8": torch.uint8, "uint16": torch.uint16, "uint32": torch.uint32, "uint64": torch.uint64,
            "int32": torch.int32, "int64": torch.int64}[name]


def random_tensor(shape: Sequence[int], dtype: str, seed: int = 0) -> Any:
    """Random values: normal ones for floating-point types (finite, every mantissa bit random; no
    NaN, whose payload a peer's float copy might be allowed to change), random bytes otherwise."""
    torch = _torch()
    dt = torch_dtype(dtype)
    gen = torch.Generator(device="cuda")
    gen.manual_seed(seed)
    if dt.is_floating_point:
        wide = torch.float64 if dt == torch.float64 else torch.float32
        return torch.randn(tuple(shape), dtype=wide, device="cuda", generator=gen).to(dt)
    x = torch.empty(tuple(shape), dtype=dt, device="cuda")
    x.view(torch.uint8).random_(0, 256, generator=gen)
    return x


def same_bytes(a: Any, b: Any) -> bool:
    torch = _torch()
    return a.shape == b.shape and torch.equal(a.contiguous().view(torch.uint8), b.contiguous().view(torch.uint8))


def poison(t: Any) -> None:
    t.view(_torch().uint8).fill_(OUT_POISON)


def rotation(bytes_per_set: int, l2_bytes: int) -> int:
    """How many sets of buffers a case rotates through so that no launch finds its inputs in L2."""
    if bytes_per_set >= L2_MULTIPLE * l2_bytes:
        return 1
    return min(MAX_SETS, math.ceil(L2_MULTIPLE * l2_bytes / bytes_per_set))


def launches_per_sample(estimated_ms: float) -> int:
    return max(1, math.ceil(MIN_SAMPLE_MS / max(estimated_ms, 1e-6)))


def l2_bytes() -> int:
    return int(_torch().cuda.get_device_properties(0).L2_cache_size)


# ----------------------------------------------------------------------------- the limit and tmagen
def memcpy(xs: Sequence[Any], outs: Sequence[Any]) -> Candidate:
    """cudaMemcpyAsync device to device of the same bytes, on the default stream."""
    drv = runtime._driver()

    def launch(i: int) -> None:
        runtime.check(drv.cuMemcpyDtoDAsync(outs[i].data_ptr(), xs[i].data_ptr(), xs[i].nbytes, 0),
                      "cuMemcpyDtoDAsync")

    def check() -> str | None:
        poison(outs[0])
        launch(0)
        return None if same_bytes(outs[0].reshape(-1), xs[0].reshape(-1)) else "cudaMemcpyAsync's bytes differ"

    return Candidate("cudaMemcpyAsync D2D", "limit", launch, check)


class TmagenKernel:
    """A spec's copy or transpose kernel, loaded from its cubin, as a candidate on given tensors."""

    def __init__(self, spec: Spec, cubin: bytes, device: runtime.Device) -> None:
        self.spec = spec
        self.device = device
        self.plan = resolve(spec)
        self.view = self.plan.kernel
        src = self.plan.map("src")
        if src.unit_bytes != src.tensor.dt.nbytes:
            raise ValueError(f"{spec.name}: the peers transpose elements, not {src.unit_bytes}-byte units")
        self.module = runtime.Module(cubin)
        self.kernel = self.module.function(self.view.symbol, self.view.smem_bytes)

    def candidate(self, xs: Sequence[Any], outs: Sequence[Any], reference: Callable[[], Any]) -> Candidate:
        shape = list(xs[0].shape)
        out_shape = list(outs[0].shape)
        args = [launch_parameters(self.plan, [Array.of(x.data_ptr(), shape)], Array.of(o.data_ptr(), out_shape),
                                  self.device.multiprocessors) for x, o in zip(xs, outs)]

        def launch(i: int) -> None:
            call, params = args[i]
            self.kernel.launch(call.grid, self.view.threads, params, dependent=self.view.dependent_launch)

        def check() -> str | None:
            poison(outs[0])
            launch(0)
            return None if same_bytes(outs[0], reference()) else f"{self.view.symbol}'s output differs from PyTorch's"

        return Candidate(f"tmagen {self.view.symbol}", "tmagen", launch, check)

    def unload(self) -> None:
        self.module.unload()


# ----------------------------------------------------------------------------- peers of copies and transposes
def _checked_against(run: Callable[[], Any], reference: Callable[[], Any], what: str) -> Callable[[], str | None]:
    def check() -> str | None:
        return None if same_bytes(run(), reference()) else f"{what}'s output differs from PyTorch's"

    return check


def _cupy_array(x: Any) -> Any:
    """The same memory as a CuPy array: NumPy's dtype where it has one, else (bfloat16) the
    unsigned integer of the same width (a copy or transpose moves the same bytes either way)."""
    import cupy

    torch = _torch()
    if x.dtype not in (torch.float32, torch.float16, torch.float64, torch.uint8, torch.int32, torch.int64):
        x = x.view({1: torch.uint8, 2: torch.uint16, 4: torch.uint32, 8: torch.uint64}[x.element_size()])
    return cupy.asarray(x)


def _cupy_to_torch(a: Any, like: Any) -> Any:
    """A CuPy result as a torch tensor of ``like``'s dtype, on the same memory (through bytes, the
    one type every version of both exchanges)."""
    import cupy

    return _torch().as_tensor(a.view(cupy.uint8), device="cuda").view(like.dtype)


def _triton(wanted: bool = True) -> Any | None:
    if not wanted:
        return None
    try:
        from lab import triton_peers
    except Exception:  # noqa: BLE001 - no Triton peers; unavailable() says why
        return None
    return triton_peers


def unavailable() -> list[dict[str, str]]:
    """The optional peers that cannot run here, and why (the report lists them)."""
    missing = []
    for module, what in (("cupy", "CuPy"), ("lab.triton_peers", "Triton")):
        try:
            __import__(module)
        except Exception as exc:  # noqa: BLE001 - CuPy built for another CUDA raises more than ImportError
            missing.append({"name": what, "why": f"not importable ({type(exc).__name__}: {exc})"})
    return missing


def copy_peers(x: Any, out: Any, triton: bool = True) -> list[Candidate]:
    """torch clone(), CuPy copy(), a Triton copy: each on ``x``; the Triton copy into ``out``."""
    cands = [Candidate("torch clone()", "peer", lambda i: x.clone(), _checked_against(x.clone, lambda: x, "clone()"))]
    try:
        xc = _cupy_array(x)
    except Exception:  # noqa: BLE001 - no CuPy peer; unavailable() says why
        xc = None
    if xc is not None:
        def cupy_copy() -> Any:
            return _cupy_to_torch(xc.copy(), x).view(x.shape)

        cands.append(Candidate("cupy x.copy()", "peer", lambda i: xc.copy(), _checked_against(cupy_copy, lambda: x,
                                                                                              "cupy copy()")))
    tp = _triton(triton)
    if tp is not None:
        def triton_copy() -> Any:
            poison(out)
            return tp.copy(x, out)

        cands.append(Candidate("Triton copy (autotuned)", "peer", lambda i: tp.copy(x, out),
                               _checked_against(triton_copy, lambda: x, "Triton copy"),
                               note=lambda: tp.chosen_config(tp.copy_kernel)))
    return cands


def transpose_peers(x: Any, out: Any, reference: Callable[[], Any], triton: bool = True) -> list[Candidate]:
    """torch .transpose(-2,-1).contiguous(), CuPy's, Triton's pointer tiles and Triton's TMA
    descriptors: the last two dimensions of ``x`` turned; Triton's into ``out``."""
    def torch_t() -> Any:
        return x.transpose(-2, -1).contiguous()

    cands = [Candidate("torch .transpose(-2,-1).contiguous()", "peer", lambda i: torch_t(),
                       _checked_against(torch_t, reference, "torch transpose"))]
    try:
        import cupy

        xc = _cupy_array(x)
    except Exception:  # noqa: BLE001 - no CuPy peer; unavailable() says why
        xc = None
    if xc is not None:
        def cupy_t() -> Any:
            return cupy.ascontiguousarray(cupy.swapaxes(xc, -2, -1))

        cands.append(Candidate("cupy ascontiguousarray(swapaxes(x,-2,-1))", "peer", lambda i: cupy_t(),
                               _checked_against(lambda: _cupy_to_torch(cupy_t(), x), reference, "cupy transpose")))
    tp = _triton(triton)
    if tp is not None:
        def triton_run(fn: Callable[[Any, Any], Any]) -> Callable[[], Any]:
            def run() -> Any:
                poison(out)
                return fn(x, out)

            return run

        cands.append(Candidate("Triton tl.trans, pointer tiles (autotuned)", "peer", lambda i: tp.transpose(x, out),
                               _checked_against(triton_run(tp.transpose), reference, "Triton tl.trans"),
                               note=lambda: tp.chosen_config(tp.transpose_kernel)))
        cands.append(Candidate("Triton tl.trans, TMA descriptors (autotuned)", "peer",
                               lambda i: tp.transpose_tma(x, out),
                               _checked_against(triton_run(tp.transpose_tma), reference, "Triton TMA transpose"),
                               note=lambda: tp.chosen_config(tp.transpose_tma_kernel)))
    return cands


def data_movement_case(spec: Spec, cubin: bytes, device: runtime.Device, shape: Sequence[int],
                       method: Method, seed: int = 0, triton: bool = True) -> dict[str, Any]:
    """tmagen's kernel of ``spec`` on a random tensor of ``shape``, cudaMemcpyAsync of the same
    bytes and the peers of the same operation on the same tensor, interleaved (1 GiB cases; no
    rotation is needed above a few L2s)."""
    free_memory()
    torch = _torch()
    t = spec.tensors[0]
    transpose = isinstance(spec.kernel, TransposeKernel)
    x = random_tensor(shape, t.dtype, seed)
    out_shape = [*shape[:-2], shape[-1], shape[-2]] if transpose else list(shape)
    out = torch.empty(out_shape, dtype=x.dtype, device="cuda")
    ref_cache: list[Any] = []

    def reference() -> Any:
        if not transpose:
            return x
        if not ref_cache:
            ref_cache.append(x.transpose(-2, -1).contiguous())
        return ref_cache[0]

    kernel = TmagenKernel(spec, cubin, device)
    try:
        cands = [kernel.candidate([x], [out], reference), memcpy([x], [out])]
        cands += transpose_peers(x, out, reference, triton) if transpose else copy_peers(x, out, triton)
        return time_case(cands, method, shape=shape, dtype=t.dtype, bytes_moved=2 * x.nbytes)
    finally:
        kernel.unload()


def free_memory() -> None:
    """Returns what the previous case left in PyTorch's and CuPy's pools (called before each case:
    by then its tensors are gone)."""
    torch = _torch()
    torch.cuda.synchronize()
    try:
        import cupy

        cupy.get_default_memory_pool().free_all_blocks()
    except Exception:  # noqa: BLE001 - no usable CuPy, no pool to empty
        pass
    torch.cuda.empty_cache()


def sweep_case(spec: Spec, cubin: bytes, device: runtime.Device, shape: Sequence[int],
               method: Method) -> dict[str, Any]:
    """tmagen's kernel and cudaMemcpyAsync only, at one size of the bandwidth-against-size plot,
    rotating through buffer sets where the size would fit in L2, several launches per sample where
    one is short."""
    free_memory()
    torch = _torch()
    t = spec.tensors[0]
    nbytes = math.prod(shape) * t.dt.nbytes
    sets = rotation(2 * nbytes, l2_bytes())
    xs = [random_tensor(shape, t.dtype, seed) for seed in range(sets)]
    out_shape = [*shape[:-2], shape[-1], shape[-2]] if isinstance(spec.kernel, TransposeKernel) else list(shape)
    outs = [torch.empty(out_shape, dtype=xs[0].dtype, device="cuda") for _ in range(sets)]

    def reference() -> Any:
        return xs[0].transpose(-2, -1).contiguous() if isinstance(spec.kernel, TransposeKernel) else xs[0]

    kernel = TmagenKernel(spec, cubin, device)
    try:
        batch = launches_per_sample(2 * nbytes / 3.0e9)  # ~3 TB/s: only the order of magnitude matters
        return time_case([kernel.candidate(xs, outs, reference), memcpy(xs, outs)], method, shape=shape,
                         dtype=t.dtype, bytes_moved=2 * nbytes, sets=sets, batch=batch)
    finally:
        kernel.unload()


# ----------------------------------------------------------------------------- matmul
# The matmul's case, its shape set and tmagen's candidates are in lab/matmul_bench.py.
