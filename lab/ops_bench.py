"""The ops section of the benchmark (issue 19): ``tmagen.ops.transpose``, ``copy`` and ``permute``
off the 1 GiB grid of the copy and transpose sections, on the shapes and views a PyTorch user has.

Cases of 1, 2, 4, 8 and 16-byte elements (bool and complex128 among them), in seven classes: small
(16 KiB to 4 MiB), odd_rows (rows not whole 16 bytes), ragged (extents no multiple of a tile),
batched (3-D, and a batched permute), permute (NCHW <-> NHWC, [B, S, H, D] <-> [B, H, S, D]), views
(copies of a transposed and of a sliced view, a transpose of a sliced one) and large (1 GiB and
more). Each case's candidates, on the same tensors and interleaved (:func:`tmagen.bench.time_case`,
the suite's method): tmagen.ops with ``out=``, ``cudaMemcpyAsync`` of the same bytes (the limit),
PyTorch, CuPy, and the Triton kernels a Triton user would write (:mod:`lab.triton_peers`), each
autotuned, where the layout is theirs: a flat copy, pointer tiles with ``tl.trans`` on a 3-D grid
(batches on its third axis), the same on TMA descriptors (rows of whole 16 bytes), tiles of rows
on a 3-D grid for [P, S, H, D] -> [P, H, S, D], and a strided gather for any view or permute of up
to 4 dimensions. Every candidate is checked bit for bit against PyTorch's result before it is
timed; a peer that hands back its input instead of a copy fails its check. The host time of a
call on a 64 x 64 tensor is measured apart (:func:`host_time`).

The case list, the Triton layouts and the budget are pure (no GPU, no PyTorch); the cases import
PyTorch when called.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from tmagen.bench import Candidate, Method, round_seconds, time_case

CLASSES = ("small", "odd_rows", "narrow", "ragged", "batched", "permute", "views", "large")
HOST = "host"  # the class of the host-time record
ELEMENT_BYTES = {"bool": 1, "uint8": 1, "float16": 2, "bfloat16": 2, "float32": 4, "float64": 8, "complex128": 16}
VIEWS = {"": "x", "mT": "x.mT", "[:, 1:]": "x[:, 1:]"}  # the op's input: this view of a contiguous tensor x

# targets (issue 19, on the H200, ratios in the same loop)
OF_BEST_PEER = 1.0  # every case at or above the best peer
LARGE_OF_MEMCPY = 0.95  # large cases at or above 0.95 of cudaMemcpyAsync
COPY_OF_TRITON = 1.0  # copies at or above Triton's copy
HOST_OF_TORCH = 1.0  # host time per call on 64 x 64 no more than PyTorch's (torch's time / tmagen's >= 1)


@dataclass(frozen=True)
class OpsCase:
    """One case: ``op`` of ``view`` of a contiguous tensor of ``shape`` and ``dtype`` (``dims`` for a
    permute), in class ``shape_class``."""

    shape_class: str
    op: str  # copy, transpose, permute
    shape: tuple[int, ...]
    dtype: str
    dims: tuple[int, ...] = ()
    view: str = ""

    @property
    def element_bytes(self) -> int:
        return ELEMENT_BYTES[self.dtype]

    @property
    def input_layout(self) -> tuple[tuple[int, ...], tuple[int, ...], int]:
        """The op's input: shape, strides and offset in elements of the contiguous tensor."""
        shape, strides = list(self.shape), contiguous_strides(self.shape)
        if self.view == "mT":
            shape[-2:], strides[-2:] = shape[:-3:-1], strides[:-3:-1]
            return tuple(shape), tuple(strides), 0
        if self.view == "[:, 1:]":
            shape[1] -= 1
            return tuple(shape), tuple(strides), strides[1]
        return tuple(shape), tuple(strides), 0

    @property
    def order(self) -> tuple[int, ...]:
        """The input's dimensions in the output's order."""
        rank = len(self.shape)
        if self.op == "transpose":
            return (*range(rank - 2), rank - 1, rank - 2)
        if self.op == "permute":
            return self.dims
        return tuple(range(rank))

    @property
    def source(self) -> tuple[tuple[int, ...], tuple[int, ...], int]:
        """The output's shape, and the strides and offset at which each of its elements is read from
        the contiguous tensor (elements)."""
        shape, strides, offset = self.input_layout
        return tuple(shape[d] for d in self.order), tuple(strides[d] for d in self.order), offset

    @property
    def elements(self) -> int:
        return math.prod(self.input_layout[0])

    @property
    def bytes_moved(self) -> int:
        return 2 * self.elements * self.element_bytes

    def describe(self) -> str:
        """The call, as its row and log name it."""
        x = VIEWS[self.view]
        if self.op == "permute":
            return f"permute({x}, {list(self.dims)})"
        return f"{self.op}({x})"


def contiguous_strides(shape: Sequence[int]) -> list[int]:
    strides, step = [], 1
    for n in reversed(shape):
        strides.append(step)
        step *= n
    return strides[::-1]


def ops_cases() -> list[OpsCase]:
    """The section's cases, by class (issue 19's list, extended with views, bool, complex128, a
    batched permute and a small attention permute)."""
    c = OpsCase
    nchw, nhwc, bshd, swap_last = (0, 2, 3, 1), (0, 3, 1, 2), (0, 2, 1, 3), (0, 1, 3, 2)
    return [
        # small: 16 KiB to 4 MiB
        c("small", "transpose", (64, 64), "float32"),
        c("small", "transpose", (256, 256), "float32"),
        c("small", "transpose", (512, 512), "bfloat16"),
        c("small", "transpose", (1024, 1024), "uint8"),
        c("small", "transpose", (1024, 1024), "float32"),
        c("small", "transpose", (1024, 1024), "bool"),
        c("small", "transpose", (512, 512), "float64"),
        c("small", "transpose", (512, 512), "complex128"),
        c("small", "copy", (1024, 1024), "float32"),
        c("small", "permute", (2, 64, 32, 32), "bfloat16", nchw),
        c("small", "permute", (4, 256, 8, 64), "bfloat16", bshd),
        # rows not whole 16 bytes (or not whole 128)
        c("odd_rows", "transpose", (777, 1032), "float16"),
        c("odd_rows", "transpose", (16385, 8), "bfloat16"),
        c("odd_rows", "transpose", (1000, 1000), "float32"),
        c("odd_rows", "transpose", (4099, 4101), "uint8"),
        c("odd_rows", "copy", (8192, 1001), "float32"),
        c("odd_rows", "transpose", (2000000, 3), "float32"),  # a point cloud's coordinates
        c("odd_rows", "transpose", (1000000, 12), "bfloat16"),  # few columns of odd bytes
        # extents no multiple of a tile
        c("ragged", "transpose", (12000, 9000), "float32"),
        c("ragged", "transpose", (16352, 16352), "float32"),
        # batched: a 3-D grid
        c("batched", "transpose", (8, 4096, 4096), "bfloat16"),
        c("batched", "transpose", (64, 1024, 1024), "float32"),
        c("batched", "permute", (16, 32, 2048, 128), "bfloat16", swap_last),  # [B, H, S, D] -> [B, H, D, S]
        # permutes
        c("permute", "permute", (32, 256, 64, 64), "bfloat16", nchw),
        c("permute", "permute", (32, 64, 64, 256), "bfloat16", nhwc),
        c("permute", "permute", (16, 2048, 32, 128), "bfloat16", bshd),
        c("permute", "permute", (64, 512, 512, 8), "uint8", nhwc),
        c("permute", "permute", (32, 224, 224, 3), "uint8", nhwc),  # images, NHWC -> NCHW of 3 channels
        c("permute", "permute", (8, 256, 256, 16), "bfloat16", nhwc),  # feature maps of 16 channels, rows of 32 bytes
        # planes narrow along C: rows of 20 to 80 bytes
        c("narrow", "transpose", (300000, 20), "uint8"),
        c("narrow", "transpose", (500000, 48), "uint8"),
        c("narrow", "transpose", (300000, 20), "float32"),
        # views: a copy of a transposed view is a transpose; a sliced one's rows start 4 bytes off 16
        c("views", "copy", (8192, 8192), "float32", view="mT"),
        c("views", "copy", (8192, 8193), "float32", view="[:, 1:]"),
        c("views", "copy", (512, 513), "float32", view="[:, 1:]"),
        c("views", "transpose", (8192, 8193), "float32", view="[:, 1:]"),
        # 1 GiB and more
        c("large", "transpose", (32768, 32768), "uint8"),
        c("large", "transpose", (16384, 32768), "bfloat16"),
        c("large", "transpose", (16384, 16384), "float32"),
        c("large", "transpose", (8192, 16384), "float64"),
        c("large", "transpose", (8192, 8192), "complex128"),
        c("large", "transpose", (32768, 32768), "bool"),
        c("large", "copy", (16384, 16384), "float32"),
        c("large", "copy", (16384, 8192), "float64"),
    ]


# ----------------------------------------------------------------------------- which Triton kernels a layout takes
@dataclass(frozen=True)
class TritonLayout:
    """One Triton peer for a case: ``kernel`` (copy, tiles, tma, rows, gather) on ``shape`` (the
    contiguous tensor as that kernel sees it, in elements of ``element_bytes``)."""

    kernel: str
    shape: tuple[int, ...]
    element_bytes: int
    strides: tuple[int, ...] = ()  # gather: the strides read, in the output's order
    offset: int = 0  # gather: the first element read (a sliced view)

    def int_args(self) -> tuple[int, ...]:
        """The integer arguments the kernel is launched with (Triton specialises on them)."""
        if self.kernel == "copy":
            return (math.prod(self.shape),)
        if self.kernel in ("tiles", "tma"):
            return self.shape[-2:]
        if self.kernel == "rows":
            return self.shape[1:]
        padded = (1,) * (4 - len(self.shape)) + self.shape
        strides = (0,) * (4 - len(self.strides)) + self.strides
        return (math.prod(self.shape), *padded[1:], *strides)


TRITON_NAMES = {
    "copy": "Triton copy (autotuned)",
    "tiles": "Triton tl.trans, pointer tiles (autotuned)",
    "tma": "Triton tl.trans, TMA descriptors (autotuned)",
    "rows": "Triton row tiles, 3-D grid (autotuned)",
    "gather": "Triton strided gather (autotuned)",
}


def merged(shape: Sequence[int], strides: Sequence[int]) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """The layout with extents of 1 dropped and neighbours merged where one steps over the other
    exactly (the output's order kept)."""
    dims = [(n, s) for n, s in zip(shape, strides) if n != 1]
    out: list[tuple[int, int]] = []
    for n, s in dims:
        if out and out[-1][1] == s * n:
            out[-1] = (out[-1][0] * n, s)
        else:
            out.append((n, s))
    return tuple(n for n, _ in out), tuple(s for _, s in out)


def triton_layouts(case: OpsCase) -> list[TritonLayout]:
    """The Triton peers a user would write for the case's layout: a flat copy where the move is one
    contiguous run; pointer tiles (and TMA descriptors, where rows and strides are whole 16 bytes)
    where it is a transpose of a contiguous [P, M, N]; tiles of rows where it is [P, S, H, D] ->
    [P, H, S, D]; the strided gather for permutes, views and 16-byte elements (up to 4 merged
    dimensions). 16-byte elements are pairs of 8 (Triton has no 16-byte type), bool is uint8."""
    shape, strides, offset = case.source
    es = case.element_bytes
    if es == 16:
        shape, strides, offset, es = (*shape, 2), (*(2 * s for s in strides), 1), 2 * offset, 8
    m_shape, m_strides = merged(shape, strides)
    found: list[TritonLayout] = []
    rank = len(m_shape)
    if offset == 0 and rank == 1 and m_strides == (1,):
        found.append(TritonLayout("copy", m_shape, es))
    if offset == 0 and rank in (2, 3):
        # the output [*P, N, M] reads a contiguous [*P, M, N] at strides [*M N, 1, N]
        n, m = m_shape[-2:]
        if m_strides[-2:] == (1, n) and (rank == 2 or m_strides[0] == m * n):
            tensor = (m_shape[0] if rank == 3 else 1, m, n)
            found.append(TritonLayout("tiles", tensor, es))
            if es in (1, 2, 4, 8) and m * es % 16 == 0 and n * es % 16 == 0:
                found.append(TritonLayout("tma", tensor, es))
    if offset == 0 and rank in (3, 4):
        # the output [*P, H, S, D] reads a contiguous [*P, S, H, D] at strides [*S H D, D, H D, 1]
        h, s, d = m_shape[-3:]
        if m_strides[-3:] == (d, h * d, 1) and (rank == 3 or m_strides[0] == s * h * d):
            found.append(TritonLayout("rows", (m_shape[0] if rank == 4 else 1, s, h, d), es))
    if rank <= 4 and (case.op == "permute" or case.view or case.element_bytes == 16):
        found.append(TritonLayout("gather", m_shape, es, m_strides, offset))
    return found


# ----------------------------------------------------------------------------- the budget (rates of an H200)
GOOD_GBPS, SLOW_GBPS = 3800.0, 400.0  # tmagen, memcpy, Triton, clone(); PyTorch's and CuPy's transposes
LAUNCH_FLOOR_MS = 0.003  # a launch of a small move, on the GPU
HOST_PER_LAUNCH_S = 20e-6  # queuing one launch (PyTorch allocates, Triton's autotuner looks up its cache)
CASE_OVERHEAD_S = 1.5  # random data, the reference, the checks, freeing the pools
OPS_FIRST_CALLS_S = 30.0  # tmagen.ops compiles the kernels of each route on first use
HOST_TIME_S = 10.0  # :func:`host_time`: 7 rounds of 2000 calls of four functions, and a warm-up
TRITON_CONFIGS = {"copy": 18, "tiles": 18, "tma": 18, "rows": 12, "gather": 18}  # tests/test_triton_peers.py checks
TRITON_COMPILE_S = 0.3  # one configuration of a small kernel
TRITON_LAUNCHERS_S = 20.0  # Triton builds a C launcher per kernel signature, once
AUTOTUNE_PER_CONFIG_S = 0.08  # do_bench's 10 ms warm-up and 40 ms of runs, and its overheads
MIN_SAMPLE_MS = 0.2  # a sample shorter than this is several launches between two events
BATCH_MAX = 64


def launch_ms(case: OpsCase) -> float:
    """A good kernel's time for the case on an H200: only its order of magnitude matters."""
    return max(case.bytes_moved / (GOOD_GBPS * 1e6), LAUNCH_FLOOR_MS)


def launches_per_sample(case: OpsCase) -> int:
    return min(BATCH_MAX, max(1, math.ceil(MIN_SAMPLE_MS / launch_ms(case))))


def _specialisation(layout: TritonLayout) -> tuple:
    """What Triton compiles a kernel apart for: its element type and, per integer argument, whether
    it is 1 or a multiple of 16 (TMA's kernel takes none: its descriptors carry the shape)."""
    if layout.kernel == "tma":
        return (layout.kernel, layout.element_bytes)
    return (layout.kernel, layout.element_bytes, *((a == 1, a % 16 == 0) for a in layout.int_args()))


def _torch_name(case: OpsCase) -> str:
    if case.op == "copy":
        return "torch .contiguous()" if case.view else "torch clone()"
    return "torch .transpose(-2,-1).contiguous()" if case.op == "transpose" else "torch .permute(dims).contiguous()"


def estimate(cases: Sequence[OpsCase], method: Method, triton: bool = True, host: bool = True) -> tuple[float, str]:
    """Seconds the section should take on an H200, and its line of the plan."""
    timed = 0.0
    samples = method.rounds * method.repetitions + method.warmup
    for c in cases:
        batch = launches_per_sample(c)
        fast = launch_ms(c)
        slow = max(c.bytes_moved / (SLOW_GBPS * 1e6), LAUNCH_FLOOR_MS)
        flat_copy = c.op == "copy" and not c.view
        # tmagen, memcpy and Triton's kernels at a good speed; PyTorch's gathers (its clone() of a
        # contiguous tensor is a memcpy) and CuPy's at a slow one
        launches = [fast] * (2 + len(triton_layouts(c)) * triton) + [fast if flat_copy else slow, slow]
        timed += samples * round_seconds(batch * sum(launches) * 1e-3, batch * len(launches) * HOST_PER_LAUNCH_S)
        timed += CASE_OVERHEAD_S
    layouts = [t for c in cases for t in triton_layouts(c)] if triton else []
    compiles = sum(TRITON_CONFIGS[k] for k, *_ in {_specialisation(t) for t in layouts})
    keys = {(t.kernel, t.element_bytes, t.int_args()) for t in layouts}
    tune = sum(TRITON_CONFIGS[k] for k, *_ in keys) * AUTOTUNE_PER_CONFIG_S
    first = OPS_FIRST_CALLS_S if cases else 0.0
    extra = HOST_TIME_S if host else 0.0
    total = timed + first + extra
    line = (f"ops       {len(cases):2d} cases: timing, set-up and checks ~{timed:.0f} s, tmagen.ops's first compiles "
            f"~{first:.0f} s, host time ~{extra:.0f} s")
    if triton and layouts:
        total += compiles * TRITON_COMPILE_S + tune + TRITON_LAUNCHERS_S
        line += (f"; Triton: ~{compiles} compiles ~{compiles * TRITON_COMPILE_S:.0f} s, autotuning {len(keys)} keys "
                 f"~{tune:.0f} s, launchers ~{TRITON_LAUNCHERS_S:.0f} s")
    return total, line


# ----------------------------------------------------------------------------- the case (GPU, PyTorch)
def _torch() -> Any:
    import torch

    return torch


def torch_dtype(name: str) -> Any:
    return getattr(_torch(), name)


def random_tensor(shape: Sequence[int], dtype: str, gen: Any) -> Any:
    """Random values: normal ones for floating-point and complex types (finite: no NaN, whose payload
    a peer's float copy may change), 0 and 1 for bool, random bytes otherwise."""
    torch = _torch()
    dt = torch_dtype(dtype)
    if dt == torch.bool:
        return torch.randint(0, 2, tuple(shape), device="cuda", generator=gen).bool()
    if dt.is_floating_point or dt.is_complex:
        wide = dt if dt in (torch.float64, torch.complex128) else torch.float32
        return torch.randn(tuple(shape), dtype=wide, device="cuda", generator=gen).to(dt)
    x = torch.empty(tuple(shape), dtype=dt, device="cuda")
    x.view(torch.uint8).random_(0, 256, generator=gen)
    return x


def view_of(x: Any, view: str) -> Any:
    """The case's view of ``x`` (see VIEWS)."""
    if view == "mT":
        return x.mT
    if view == "[:, 1:]":
        return x[:, 1:]
    return x


def torch_op(case: OpsCase, x: Any) -> Any:
    """PyTorch's own result for the case on input ``x``: always a new tensor."""
    if case.op == "transpose":
        return x.transpose(-2, -1).contiguous()
    if case.op == "permute":
        return x.permute(case.dims).contiguous()
    return x.contiguous() if case.view else x.clone()


def _bytes(t: Any) -> Any:
    torch = _torch()
    return t.contiguous().view(-1).view(torch.uint8)


def _same(got: Any, want: Any) -> bool:
    torch = _torch()
    return tuple(got.shape) == tuple(want.shape) and torch.equal(_bytes(got), _bytes(want))


def _poison(t: Any) -> None:
    from tmagen.verify import OUT_POISON

    _bytes(t).fill_(OUT_POISON)


def _fresh(result: Any, inputs: Sequence[Any]) -> str | None:
    """Why ``result`` is no copy (it shares the memory of an input), or None."""
    if any(result.data_ptr() == x.data_ptr() for x in inputs):
        return "returned its input, not a copy"
    return None


def _checked(name: str, run: Callable[[], Any], want: Callable[[], Any],
             inputs: Sequence[Any]) -> Callable[[], str | None]:
    def check() -> str | None:
        got = run()
        not_fresh = _fresh(got, inputs)
        if not_fresh:
            return f"{name} {not_fresh}"
        return None if _same(got, want()) else f"{name}'s output differs from PyTorch's"

    return check


def _cupy_array(x: Any) -> Any:
    """The same memory as a CuPy array (bfloat16, which NumPy lacks, as uint16: the same bits)."""
    import cupy

    torch = _torch()
    return cupy.asarray(x.view(torch.uint16) if x.dtype == torch.bfloat16 else x)


def _cupy_result(a: Any, like: Any) -> Any:
    import cupy

    torch = _torch()
    return torch.as_tensor(a.view(cupy.uint8), device="cuda").view(like.dtype).view(like.shape)


def _triton_operand(t: Any) -> Any:
    """A tensor as the Triton kernels take it: bool as uint8, complex128 as pairs of float64."""
    torch = _torch()
    if t.dtype == torch.bool:
        return t.view(torch.uint8)
    if t.dtype == torch.complex128:
        return torch.view_as_real(t)
    return t


def _triton_launch(tp: Any, layout: TritonLayout, x: Any, out: Any) -> Callable[[], Any]:
    """The Triton peer of ``layout`` on the contiguous tensor ``x`` (the case's base) into ``out``."""
    torch = _torch()
    xt, ot = _triton_operand(x), _triton_operand(out)
    if layout.kernel == "copy":
        return lambda: tp.copy(xt, ot)
    if layout.kernel in ("tiles", "tma"):
        p, m, n = layout.shape
        src, dst = xt.reshape(p, m, n), ot.view(p, n, m)
        fn = tp.transpose if layout.kernel == "tiles" else tp.transpose_tma
        return lambda: fn(src, dst)
    if layout.kernel == "rows":
        p, s, h, d = layout.shape
        src, dst = xt.reshape(p, s, h, d), ot.view(p, h, s, d)
        return lambda: tp.permute_rows(src, dst)
    # the gather: the merged layout, read from x's storage
    view = torch.as_strided(xt.reshape(-1), layout.shape, layout.strides, layout.offset)
    dst = ot.view(layout.shape)
    return lambda: tp.gather(view, dst)


@dataclass
class CaseTensors:
    """A case's tensors on the GPU: ``sets`` random contiguous tensors (``xs``), the op's input view
    of each (``ins``), an output for each, and PyTorch's result on the first (``want``)."""

    nbytes: int  # the input's bytes
    sets: int
    xs: list[Any]
    ins: list[Any]
    outs: list[Any]
    want: Any

    def writes(self, name: str, launch: Callable[[int], Any]) -> Callable[[], str | None]:
        """A check of a candidate that writes the outputs: launched on the first set into a poisoned
        output, which must then hold PyTorch's result bit for bit."""
        def check() -> str | None:
            _poison(self.outs[0])
            launch(0)
            return None if _same(self.outs[0], self.want) else f"{name}'s output differs from PyTorch's"

        return check


def case_tensors(case: OpsCase, seed: int = 0) -> CaseTensors:
    """The case's buffer sets (rotated where the tensors fit in a few L2s), GPU memory freed first."""
    from lab import peers

    peers.free_memory()
    torch = _torch()
    nbytes = case.elements * case.element_bytes
    sets = peers.rotation(2 * nbytes, peers.l2_bytes())
    gen = torch.Generator(device="cuda")
    gen.manual_seed(seed)
    xs = [random_tensor(case.shape, case.dtype, gen) for _ in range(sets)]
    ins = [view_of(x, case.view) for x in xs]
    out_shape = tuple(case.source[0])
    outs = [torch.empty(out_shape, dtype=xs[0].dtype, device="cuda") for _ in range(sets)]
    return CaseTensors(nbytes, sets, xs, ins, outs, torch_op(case, ins[0]))


def op_args(case: OpsCase, x: Any) -> tuple[Any, ...]:
    """The positional arguments of the case's tmagen.ops call on input ``x``: the input, and a permute's dims."""
    return (x, case.dims) if case.op == "permute" else (x,)


def ops_case(case: OpsCase, method: Method, seed: int = 0, triton: bool = True,
             tmagen: bool = True) -> dict[str, Any]:
    """The case's candidates on the same tensors, each checked bit for bit against PyTorch's result,
    those that pass timed interleaved (buffer sets rotated where the tensors fit in a few L2s,
    several launches a sample where one is short). ``tmagen=False`` leaves tmagen.ops out."""
    from lab import peers

    t = case_tensors(case, seed)
    xs, ins, outs, want, writes, nbytes = t.xs, t.ins, t.outs, t.want, t.writes, t.nbytes

    def reference() -> Any:
        return want

    cands: list[Candidate] = []
    if tmagen:
        import tmagen.ops as ops

        def mine(i: int) -> Any:
            return getattr(ops, case.op)(*op_args(case, ins[i]), out=outs[i])
        name = f"tmagen.ops.{case.op}"
        cands.append(Candidate(name, "tmagen", mine, writes(name, mine)))
    cands.append(_memcpy(xs, outs, nbytes))
    torch_name = _torch_name(case)
    cands.append(Candidate(torch_name, "peer", lambda i: torch_op(case, ins[i]),
                           _checked(torch_name, lambda: torch_op(case, ins[0]), reference, [xs[0]])))
    cands += _cupy_peers(case, ins, xs, reference)
    tp = peers._triton(triton)
    if tp is not None:
        cands += [_triton_candidate(tp, layout, xs, outs, writes) for layout in triton_layouts(case)]
    record = time_case(cands, method, shape=case.shape, dtype=case.dtype, bytes_moved=case.bytes_moved, sets=t.sets,
                       batch=launches_per_sample(case))
    return {**record, "op": case.op, "dims": list(case.dims), "view": case.view, "call": case.describe(),
            "element_bytes": case.element_bytes,
            "method": {"rounds": method.rounds, "repetitions": method.repetitions, "warmup": method.warmup}}


def _triton_candidate(tp: Any, layout: TritonLayout, xs: Sequence[Any], outs: Sequence[Any],
                      writes: Callable[[str, Callable[[int], Any]], Callable[[], str | None]]) -> Candidate:
    """The Triton peer of ``layout`` on every buffer set, checked by ``writes``, its autotuner's
    choice as its note."""
    name = TRITON_NAMES[layout.kernel]
    launches = [_triton_launch(tp, layout, x, o) for x, o in zip(xs, outs)]
    kernel = {"copy": tp.copy_kernel, "tiles": tp.transpose_kernel, "tma": tp.transpose_tma_kernel,
              "rows": tp.permute_rows_kernel, "gather": tp.permute_kernel}[layout.kernel]

    def launch(i: int) -> Any:
        return launches[i]()

    def note() -> str:
        return str(tp.chosen_config(kernel))

    return Candidate(name, "peer", launch, writes(name, launch), note)


def _memcpy(xs: Sequence[Any], outs: Sequence[Any], nbytes: int) -> Candidate:
    """cudaMemcpyAsync of the case's bytes (the input's count, from the start of its tensor)."""
    from tmagen import runtime

    drv = runtime._driver()

    def launch(i: int) -> None:
        runtime.check(drv.cuMemcpyDtoDAsync(outs[i].data_ptr(), xs[i].data_ptr(), nbytes, 0), "cuMemcpyDtoDAsync")

    def check() -> str | None:
        _poison(outs[0])
        launch(0)
        same = _bytes(outs[0]).equal(_bytes(xs[0])[:nbytes])
        return None if same else "cudaMemcpyAsync's bytes differ"

    return Candidate("cudaMemcpyAsync D2D", "limit", launch, check)


def _cupy_peers(case: OpsCase, ins: Sequence[Any], xs: Sequence[Any], reference: Callable[[], Any]) -> list[Candidate]:
    try:
        import cupy

        arrays = [_cupy_array(x) for x in ins]
    except Exception:  # noqa: BLE001 - no CuPy, or one built for another CUDA: unavailable() says why
        return []
    if case.op == "transpose":
        name = "cupy ascontiguousarray(swapaxes(x,-2,-1))"

        def run(a: Any) -> Any:
            return cupy.ascontiguousarray(cupy.swapaxes(a, -2, -1))
    elif case.op == "permute":
        name = "cupy ascontiguousarray(transpose(x, dims))"

        def run(a: Any) -> Any:
            return cupy.ascontiguousarray(cupy.transpose(a, case.dims))
    else:
        name = "cupy x.copy()"  # C order: a copy of a view is contiguous

        def run(a: Any) -> Any:
            return a.copy()

    def check() -> str | None:
        got = run(arrays[0])
        if got.data.ptr == arrays[0].data.ptr:
            return f"{name} returned its input, not a copy"
        return None if _same(_cupy_result(got, reference()), reference()) else f"{name}'s output differs from PyTorch's"

    return [Candidate(name, "peer", lambda i: run(arrays[i]), check)]


# ----------------------------------------------------------------------------- host time per call
HOST_SHAPE = (64, 64)
HOST_PAIRS = (("tmagen.ops.transpose(x)", "torch x.transpose(-2,-1).contiguous()"),
              ("tmagen.ops.copy(x)", "torch x.clone()"))


def host_us(fns: dict[str, Callable[[], Any]], rounds: int, calls: int, warmup: int) -> dict[str, list[float]]:
    """Microseconds of host time per call of each function, one figure a round: each round times
    ``calls`` calls of each, in an order rotated by one each round, the GPU drained between them (its
    work far shorter than the host's, so the loop times the host)."""
    torch = _torch()
    names = list(fns)
    for name in names:
        for _ in range(warmup):
            fns[name]()
    torch.cuda.synchronize()
    us: dict[str, list[float]] = {n: [] for n in names}
    for r in range(rounds):
        for j in range(len(names)):
            name = names[(r + j) % len(names)]
            fn = fns[name]
            began = time.perf_counter()
            for _ in range(calls):
                fn()
            us[name].append((time.perf_counter() - began) / calls * 1e6)
            torch.cuda.synchronize()
    return us


def host_time(rounds: int = 7, calls: int = 2000, warmup: int = 200) -> dict[str, Any]:
    """Microseconds of host time per call on a 64 x 64 float32 tensor, as a user calls them (a new
    output each call): tmagen.ops.transpose against PyTorch's .transpose(-2,-1).contiguous(), and
    tmagen.ops.copy against clone(), timed by :func:`host_us`."""
    import tmagen.ops as ops

    torch = _torch()
    x = torch.randn(*HOST_SHAPE, device="cuda")
    fns: dict[str, Callable[[], Any]] = {
        HOST_PAIRS[0][0]: lambda: ops.transpose(x), HOST_PAIRS[0][1]: lambda: x.transpose(-2, -1).contiguous(),
        HOST_PAIRS[1][0]: lambda: ops.copy(x), HOST_PAIRS[1][1]: lambda: x.clone()}
    us = host_us(fns, rounds, calls, warmup)
    return {"shape": list(HOST_SHAPE), "dtype": "float32", "candidates": [], "failed": [], "calls": calls,
            "host_us": us, "pairs": [list(p) for p in HOST_PAIRS],
            "median_us": {n: statistics.median(v) for n, v in us.items()}}
