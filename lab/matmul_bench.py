"""The matmul section of the benchmark (issue 18): a named set of shapes, each with its class, and
the case that times tmagen's matmul beside cuBLAS and Triton on the same tensors.

C = A B^T for A [M, K] and B [N, K], both K-major, bfloat16 in, fp32 accumulation, bfloat16 out:
what ``tmagen.ops.matmul(a, b.T, out=c)`` computes for a Python user with B stored as [N, K] (a
linear layer's weight); the weight-gradient class gives A and B as transposed views instead (x.T
of an x [K, M] and dy [K, N]: ``tmagen.ops.matmul(x.T, dy)``). The candidates:

* tmagen: ``tmagen.ops.matmul`` (the product as a user calls it, with its per-shape dispatch), or,
  where tmagen.ops has no matmul yet or ``--tmagen-matmul spec`` asks for it, the tuned spec of
  tmagen/ops_specs launched directly (the path the benchmark took before issue 18);
* cuBLAS through ``torch.matmul(a, b.T, out=c)``;
* Triton: a persistent matmul on TMA descriptors (over the memory as it lies, for transposed
  views), and for small M (where its small tiles can win) a plain pointer-based one, both
  autotuned as a Triton user would (:mod:`lab.triton_peers`).

The shape set and the budget are pure (no GPU, no PyTorch); the case imports PyTorch when called.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from tmagen.bench import Candidate, Method, time_case

# ----------------------------------------------------------------------------- the shape set
# The classes, in the report's order, with what puts a shape in each.
CLASSES: dict[str, str] = {
    "square-tile-multiple": "M = N = K, a multiple of 256 (of every tile edge: 64, 128, 256)",
    "square-ragged": "M = N = K, not a multiple of 64 (partial tiles on every side; rows still whole 16 bytes)",
    "llm-projection": "a linear layer's x W^T: M tokens from 1 to 16384 against (N, K) of 4096 x 4096, "
                      "14336 x 4096 and 4096 x 14336",
    "short-K": "K <= 512: little work per output tile, the epilogue's share large",
    "long-K": "K >= 16384 on few output tiles",
    "odd-leading-dimension": "a row pitch of A, B or C a multiple of 16 bytes but not of 128 "
                             "(K = 4104, N = 14344, or A and B sliced views of rows K + 8 long)",
    "weight-gradient": "a linear layer's dW = x^T dy: A given as x.T (x [tokens, in]) and B as dy [tokens, out], "
                       "both MN-major; M, N = in, out and K = tokens",
}
WEIGHT_GRADIENT = "weight-gradient"
WEIGHT_GRADIENT_MNK = ((4096, 4096, 4096), (4096, 4096, 16384), (4096, 14336, 8192), (14336, 4096, 8192),
                       (1024, 4096, 8192), (768, 3072, 16384), (4104, 4096, 4096), (2048, 2048, 2048))
LLM_NK = ((4096, 4096), (14336, 4096), (4096, 14336))
LLM_M = (1, 16, 64, 256, 1024, 2048, 8192, 16384)


@dataclass(frozen=True)
class MatmulShape:
    m: int
    n: int
    k: int
    shape_class: str
    ld: int | None = None  # A's and B's row pitch in elements where they are sliced views (None: K, contiguous)
    a_major: str = "k"  # "mn": A given as x.T, a transposed view of an x [K, M] (a weight gradient's x^T dy)
    b_major: str = "k"  # "mn": B given as [K, N] (N contiguous: dy), the case's b [N, K] its .T view

    @property
    def flops(self) -> int:
        return 2 * self.m * self.n * self.k


def matmul_shapes() -> list[MatmulShape]:
    """The named shape set: 61 shapes in seven classes."""
    shapes = [MatmulShape(s, s, s, "square-tile-multiple") for s in (256, 512, 1024, 2048, 4096, 8192, 16384)]
    shapes += [MatmulShape(s, s, s, "square-ragged") for s in (264, 1000, 2056, 3000, 4000, 6000, 10000, 15000)]
    shapes += [MatmulShape(m, n, k, "llm-projection") for n, k in LLM_NK for m in LLM_M]
    shapes += [MatmulShape(m, n, k, "short-K") for m, n, k in
               ((4096, 4096, 256), (8192, 8192, 512), (16384, 16384, 128), (8192, 14336, 256))]
    shapes += [MatmulShape(m, n, k, "long-K") for m, n, k in
               ((4096, 4096, 16384), (8192, 8192, 16384), (2048, 2048, 32768), (1024, 4096, 65536))]
    shapes += [MatmulShape(4096, 4096, 4104, "odd-leading-dimension"),  # A and B rows of 8208 bytes
               MatmulShape(4104, 4104, 4104, "odd-leading-dimension"),  # and C's too
               MatmulShape(4096, 14344, 4096, "odd-leading-dimension"),  # C's rows alone: 28688 bytes
               MatmulShape(4096, 4096, 4096, "odd-leading-dimension", ld=4104),  # views of [M, K + 8]
               MatmulShape(8192, 8192, 8192, "odd-leading-dimension", ld=8200),
               MatmulShape(64, 14336, 4096, "odd-leading-dimension", ld=4104)]  # small M, odd pitch
    shapes += [shape_of(m, n, k, WEIGHT_GRADIENT) for m, n, k in WEIGHT_GRADIENT_MNK]
    return shapes


def shape_of(m: int, n: int, k: int, shape_class: str, ld: int | None = None) -> MatmulShape:
    """A shape of the set from what a case records (its class gives the operands' layouts)."""
    majors = ("mn", "mn") if shape_class == WEIGHT_GRADIENT else ("k", "k")
    return MatmulShape(m, n, k, shape_class, ld, *majors)


def pitches(shape: MatmulShape, element_bytes: int = 2) -> tuple[int, int, int]:
    """The row pitches of A, B and C in bytes (an MN-major operand's rows run along M or N)."""
    ld = shape.ld or shape.k
    a = shape.m if shape.a_major == "mn" else ld
    b = shape.n if shape.b_major == "mn" else ld
    return a * element_bytes, b * element_bytes, shape.n * element_bytes


# ----------------------------------------------------------------------------- how long each shape is timed
# Rough rates of an H200 for the plan and the budget: only the order of magnitude matters.
MATMUL_TFLOPS, MATMUL_GBPS = 600.0, 3000.0
MIN_SAMPLE_MS = 0.2  # a sample shorter than this times several launches between two events
# No launch is counted shorter than this: the rough rates made 256^3 a 0.09 us launch, hence 2289
# of them a sample; queued from Python at ~35 us each, a round of 7 candidates outlasted the 50 ms
# sleep that covers its queueing, so every round was timed 4 times and then kept late, its samples
# Python's pace rather than the GPU's (the H200 fp8 run of 2026-11-29: 191 s for the case). The
# smallest fp8 launch the tuner timed one at a time took 5.6 us (256^3, tests/data/hw_h200/
# matmul_tune_fp8_fast.json).
MIN_LAUNCH_MS = 0.005
BIG_LAUNCH_MS, LONG_LAUNCH_MS = 1.0, 4.0  # launches this long are timed in fewer rounds
ROTATION_BYTES = 8 << 30  # the buffer sets of one case (A, B and C each) stay within this


def launch_ms(shape: MatmulShape) -> float:
    """What one launch should take: the larger of its flops and its bytes at the rough rates."""
    nbytes = 2 * (shape.m * shape.k + shape.n * shape.k + shape.m * shape.n)
    return max(shape.flops / (MATMUL_TFLOPS * 1e9), nbytes / (MATMUL_GBPS * 1e6), MIN_LAUNCH_MS)


def method_for(shape: MatmulShape, base: Method) -> Method:
    """The suite's method for short launches; fewer rounds and repetitions for long ones, whose
    samples are steadier and whose time would dominate the budget."""
    ms = launch_ms(shape)
    if ms >= LONG_LAUNCH_MS:
        return Method(rounds=max(3, base.rounds // 4), repetitions=3, warmup=1)
    if ms >= BIG_LAUNCH_MS:
        return Method(rounds=max(3, base.rounds // 2), repetitions=3, warmup=2)
    return base


def launches_per_sample(shape: MatmulShape) -> int:
    return max(1, math.ceil(MIN_SAMPLE_MS / launch_ms(shape)))


def buffer_sets(shape: MatmulShape, l2_bytes: int, element_bytes: int = 2) -> int:
    """How many sets of A, B and C a case rotates through: enough that A and B are not in L2 when
    a launch reads them (lab.peers.rotation), no more than ROTATION_BYTES of memory."""
    from lab.peers import rotation

    ld = shape.ld or shape.k
    inputs = (shape.m + shape.n) * ld * element_bytes
    per_set = inputs + shape.m * shape.n * element_bytes
    return max(1, min(rotation(inputs, l2_bytes), ROTATION_BYTES // per_set))


# ----------------------------------------------------------------------------- the budget
# Triton's matmul kernels: configurations and compiled variants. The TMA kernel does not
# specialise on M, N, K (its descriptors carry them); the pointer kernel does (M = 1, and whether
# M, K and A's pitch are multiples of 16). tests/test_triton_peers.py checks the counts.
TRITON_TMA_CONFIGS, TRITON_POINTER_CONFIGS = 16, 10
TRITON_POINTER_MAX_M = 256  # the pointer kernel runs where M is at most this
TRITON_POINTER_VARIANTS = 3
# one configuration of a matmul kernel for sm_90a: measured 0.3 to 0.8 s (TMA) and 0.6 to 1.0 s
# (pointer tiles) on a 2-core machine without a GPU (Triton 3.6, triton.compile for GPUTarget cuda 90)
TRITON_COMPILE_S = 0.7
AUTOTUNE_OVERHEAD_S = 0.02  # the autotuner's own work per configuration, beside do_bench's launches
CLEAR_L2_MS = 0.1  # do_bench clears the L2 (writes 256 MB) before each timed launch
CASE_OVERHEAD_S = 1.0  # random data, the float64 reference, the checks, freeing the pools
FLOAT64_TFLOPS = 40.0  # the reference product (DGEMM on an H200)
# tmagen.ops.matmul's first calls compile its family through NVRTC: the first case took 130 s on an
# H100 (2026-11-27, 11 kernels) and 108 s on an H200 (2026-11-25, 7), Triton's ~32 s of compiles among them
OPS_FIRST_CALL_S = 90.0


def candidates_of(shape: MatmulShape, tmagen: bool, triton: bool) -> int:
    pointer = shape.m <= TRITON_POINTER_MAX_M and "mn" not in (shape.a_major, shape.b_major)
    return 1 + tmagen + (triton * (1 + pointer))


def estimate(shapes: Sequence[MatmulShape], base: Method, tmagen: bool = True, triton: bool = True,
             ops: bool = False) -> tuple[float, str]:
    """Seconds the matmul section should take on an H200, and its line of the plan."""
    timed = setup = tune = 0.0
    for s in shapes:
        m = method_for(s, base)
        ms = launch_ms(s)
        samples = (m.rounds * m.repetitions + m.warmup) * launches_per_sample(s)
        timed += samples * candidates_of(s, tmagen, triton) * ms * 1e-3 * 1.1
        setup += CASE_OVERHEAD_S + s.flops / (FLOAT64_TFLOPS * 1e12)
        if triton:
            configs = TRITON_TMA_CONFIGS + (TRITON_POINTER_CONFIGS if candidates_of(s, False, True) > 1 else 0)
            # do_bench: 5 launches behind L2 clears to estimate, then ~10 ms of warm-up and ~40 ms of
            # runs behind L2 clears (one of each at least)
            with_clear = ms + CLEAR_L2_MS
            launches_ms = 5 * with_clear + max(1, 10 // with_clear) * ms + max(1, 40 // with_clear) * with_clear
            per_config = AUTOTUNE_OVERHEAD_S + launches_ms * 1e-3
            tune += configs * per_config
    compiles = 0
    if triton and shapes:
        transposed = ["mn" in (s.a_major, s.b_major) for s in shapes]
        compiles = TRITON_TMA_CONFIGS * ((not all(transposed)) + any(transposed))  # matmul_kernel, matmul_mn_kernel
        if any(s.m <= TRITON_POINTER_MAX_M and not t for s, t in zip(shapes, transposed)):
            compiles += TRITON_POINTER_CONFIGS * TRITON_POINTER_VARIANTS
    first = OPS_FIRST_CALL_S if ops and tmagen else 0.0
    total = timed + setup + tune + compiles * TRITON_COMPILE_S + first
    line = (f"matmul    {len(shapes):2d} shapes: timing ~{timed:.0f} s, set-up and checks ~{setup:.0f} s"
            + (f"; Triton: {TRITON_TMA_CONFIGS}+{TRITON_POINTER_CONFIGS} configs, ~{compiles} compiles "
               f"~{compiles * TRITON_COMPILE_S:.0f} s, autotuning ~{tune:.0f} s" if triton else "")
            + (f"; tmagen.ops.matmul's first compiles ~{first:.0f} s" if first else ""))
    return total, line


# ----------------------------------------------------------------------------- tmagen's candidate
MatmulLaunch = Callable[[Any, Any, Any], object]  # (a [M,K], b [N,K], c [M,N]) -> queues c = a @ b.T
OPS = "tmagen.ops.matmul"  # the case's "spec" when tmagen's candidate is the Python op


def has_ops_matmul() -> bool:
    import tmagen.ops

    return callable(getattr(tmagen.ops, "matmul", None))


def tmagen_ops() -> MatmulLaunch:
    """``tmagen.ops.matmul(a, b.T, out=c)``: B passed as the ``.T`` view of its [N, K] tensor, as a
    user holding a linear layer's weight would."""
    import tmagen.ops

    matmul = getattr(tmagen.ops, "matmul", None)  # another part of issue 18 adds it
    if matmul is None:
        raise RuntimeError("this tmagen.ops has no matmul: time the tuned spec (run.py --tmagen-matmul spec)")

    def launch(a: Any, b: Any, c: Any) -> None:
        matmul(a, b.T, out=c)

    return launch


def tmagen_spec(spec: Any, cubin: bytes, device: Any) -> MatmulLaunch:
    """The launch of ``spec``'s matmul kernel (a tuned spec of tmagen/ops_specs) on torch tensors a,
    b, c of any strides TMA takes (C = A B^T, K-major B), on the default stream; each set of
    tensors is bound once."""
    from tmagen import runtime
    from tmagen.launch import Array, Workspaces, launch_parameters
    from tmagen.plan import resolve

    module = runtime.Module(cubin)
    plan = resolve(spec)
    family = plan.kernel.family  # the launch picks one kernel of the family per shape
    kernels = [module.function(v.symbol, v.smem_bytes) for v in family]
    prepared: dict[tuple[int, ...], tuple[Any, list]] = {}
    workspace = Workspaces()  # kept as long as the launch

    def launch(a: Any, b: Any, c: Any) -> None:
        key = (a.data_ptr(), b.data_ptr(), c.data_ptr(), *a.shape, *b.shape, *a.stride(), *b.stride(), *c.stride())
        if key not in prepared:
            prepared[key] = launch_parameters(
                plan, [Array.of(a.data_ptr(), a.shape, a.stride()), Array.of(b.data_ptr(), b.shape, b.stride())],
                Array.of(c.data_ptr(), c.shape, c.stride()), device.multiprocessors, workspace,
                device.memory_bytes_per_us)
        call, params = prepared[key]
        kernels[call.kernel].launch(call.grid, family[call.kernel].threads, params,
                                    dependent=family[call.kernel].dependent_launch)

    launch.module = module  # type: ignore[attr-defined]  # alive as long as the launch
    return launch


# ----------------------------------------------------------------------------- the case
def matmul_check(c: Any, reference: Any) -> str | None:
    """None when ``c`` matches ``reference`` (float64) within twice the rounding of bfloat16
    (2^-7 of the largest magnitude), else the error; NaN (the poison) fails."""
    err = (c.double() - reference).abs().max().item()
    tol = 2.0 ** -7 * reference.abs().max().item()
    if not err <= tol:  # NaN fails too
        return f"max |C - A B^T| = {err:.3g}, more than {tol:.3g}"
    return None


def operand(rows: int, k: int, ld: int | None, dtype: Any, gen: Any, major: str = "k") -> Any:
    """A random [rows, K] operand; with ``ld``, the first K columns of a [rows, ld] tensor whose
    other columns hold NaN, so that a candidate reading past K fails its check; ``major`` "mn": the
    transposed view of a [K, rows] tensor."""
    torch = _torch()
    if major == "mn":
        assert ld is None, "a transposed view of a sliced one is not in the set"
        return torch.randn(k, rows, device="cuda", generator=gen).to(dtype).T
    if ld is None:
        return torch.randn(rows, k, device="cuda", generator=gen).to(dtype)
    base = torch.full((rows, ld), float("nan"), device="cuda", dtype=dtype)
    base[:, :k] = torch.randn(rows, k, device="cuda", generator=gen).to(dtype)
    return base[:, :k]


def _torch() -> Any:
    import torch

    return torch


def matmul_case(shape: MatmulShape, base: Method, tmagen: MatmulLaunch | None = None, tmagen_name: str = OPS,
                dtype: str = "bfloat16", seed: int = 0, triton: bool = True) -> dict[str, Any]:
    """C = A @ B.T for A [M, K] and B [N, K] (K-major, sliced views where ``shape.ld`` says),
    fp32 accumulation, C contiguous in ``dtype``: tmagen (``tmagen(a, b, c)`` queues it on the
    default stream), cuBLAS, and Triton's TMA and (small M) pointer matmuls, checked against a
    float64 product, then timed on the same tensors, interleaved; TFLOP/s count 2 M N K. Inputs
    rotate through several sets where A and B would fit in L2, and short launches are timed several
    to a sample."""
    from lab import peers

    peers.free_memory()
    torch = _torch()
    dt = peers.torch_dtype(dtype)
    m, n, k = shape.m, shape.n, shape.k
    sets = buffer_sets(shape, peers.l2_bytes(), dt.itemsize)
    gen = torch.Generator(device="cuda")
    gen.manual_seed(seed)
    a_s = [operand(m, k, shape.ld, dt, gen, shape.a_major) for _ in range(sets)]
    b_s = [operand(n, k, shape.ld, dt, gen, shape.b_major) for _ in range(sets)]
    c_s = [torch.empty(m, n, device="cuda", dtype=dt) for _ in range(sets)]
    reference = a_s[0].double() @ b_s[0].double().T
    num_sms = torch.cuda.get_device_properties(0).multi_processor_count

    def candidate(name: str, role: str, fn: MatmulLaunch, note: Callable[[], str] = lambda: "") -> Candidate:
        def check() -> str | None:
            c_s[0].fill_(float("nan"))
            fn(a_s[0], b_s[0], c_s[0])
            return matmul_check(c_s[0], reference)

        return Candidate(name, role, lambda i: fn(a_s[i], b_s[i], c_s[i]), check, note)

    cands = []
    if tmagen is not None:
        cands.append(candidate(tmagen_name, "tmagen", tmagen))
    cands.append(candidate("cuBLAS (torch.matmul)", "peer", lambda a, b, c: torch.matmul(a, b.T, out=c)))
    tp = peers._triton(triton)
    transposed = "mn" in (shape.a_major, shape.b_major)
    if tp is not None and transposed:  # descriptors over the memory as it lies (lab.triton_peers.matmul_mn)
        cands.append(candidate("Triton TMA persistent (autotuned)", "peer",
                               lambda a, b, c: tp.matmul_mn(a, b, c, num_sms),
                               note=lambda: tp.chosen_config(tp.matmul_mn_kernel)))
    elif tp is not None:
        cands.append(candidate("Triton TMA persistent (autotuned)", "peer",
                               lambda a, b, c: tp.matmul(a, b, c, num_sms),
                               note=lambda: tp.chosen_config(tp.matmul_kernel)))
        if m <= TRITON_POINTER_MAX_M:
            cands.append(candidate("Triton pointer tiles (autotuned)", "peer", tp.matmul_pointer,
                                   note=lambda: tp.chosen_config(tp.matmul_pointer_kernel)))
    method = method_for(shape, base)
    in_bytes = (m + n) * k * dt.itemsize
    record = time_case(cands, method, shape=(m, n, k), dtype=dtype, bytes_moved=in_bytes + m * n * dt.itemsize,
                       flops=shape.flops, sets=sets, batch=launches_per_sample(shape))
    if transposed:
        record["majors"] = [shape.a_major, shape.b_major]
    return {**record, "ld": shape.ld, "method": {"rounds": method.rounds, "repetitions": method.repetitions,
                                                 "warmup": method.warmup}}


def time_matmul(m: int, n: int, k: int, tmagen: MatmulLaunch | None = None, dtype: str = "bfloat16",
                method: Method | None = None, ld: int | None = None, a_major: str = "k",
                b_major: str = "k") -> dict[str, Any]:
    """The entry point for a matmul of one's own: ``tmagen(a, b, c)`` must queue C = A @ B.T on the
    default stream for torch tensors a [M, K], b [N, K] and c [M, N] of ``dtype`` (``a_major`` "mn":
    a is the transposed view of a [K, M] tensor; ``b_major`` "mn": b of a [K, N] one, a weight
    gradient's dy). Returns the case record (each candidate's TFLOP/s, median and spread, and the
    checks that failed)."""
    return matmul_case(MatmulShape(m, n, k, "", ld, a_major, b_major), method or Method(), tmagen, "tmagen matmul",
                       dtype)
