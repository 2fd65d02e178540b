"""The fp8 section of the matmul benchmark (issue 21, part 6): the bf16 section's shape set and
method (lab/matmul_bench.py), with e4m3 operands and their scales.

C = (A * sa) (B * sb)^T for A [M, K] and B [N, K] in float8_e4m3fn, both K-major, fp32 accumulation,
bfloat16 out; B reaches each candidate as ``b.t()``, the [K, N] view of its [N, K] tensor (a linear
layer's weight), which is the layout ``torch._scaled_mm`` takes. The candidates, on the same
tensors, interleaved:

* tmagen: ``tmagen.ops.matmul(a, b.t(), scale_a=sa, scale_b=sb, out=c)`` with one scale per tensor,
  with one per row of A and one per row of B (a column of C), and block-scaled (sa [M, K/128] per
  1 x 128 block of A, and sb [N/128, K/128] per 128 x 128 block of B, passed as ``sb.t()``, blocked
  as ``b.t()`` is) on the large square shapes; and per tensor with ``use_fast_accum=True`` (sums
  never promoted, as Triton's);
* cuBLASLt through ``torch._scaled_mm(a, b.t(), scale_a, scale_b, out_dtype=torch.bfloat16)``, per
  tensor (``use_fast_accum`` False, its default: partial sums promoted to fp32, and True),
  row-wise (scale_a [M, 1], scale_b [1, N]) and, beside tmagen's block-scaled candidate, with the
  same block scales (PyTorch 2.10 on: scale_a M-major, the layout it requires, tmagen's row-major;
  the same ``sb.t()``);
* Triton: a persistent fp8 matmul on TMA descriptors with per-tensor scales, autotuned
  (:func:`lab.triton_peers.matmul_fp8`).

Every candidate is checked against an fp32 product of the dequantized inputs before it is timed
(:func:`fp8_tolerance` says how close it must be, and why). ``torch._scaled_mm`` refuses shapes
whose K or N is not a multiple of 16 (:func:`scaled_mm_refusal`): its refusal is recorded as the
candidate's failure, not dropped. Nothing is padded.

The shape set, the rules and the budget are pure (no GPU, no PyTorch); the case imports PyTorch
when called.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

from lab.matmul_bench import (
    AUTOTUNE_OVERHEAD_S,
    CLEAR_L2_MS,
    MIN_LAUNCH_MS,
    MIN_SAMPLE_MS,
    ROTATION_BYTES,
    TRITON_COMPILE_S,
    MatmulShape,
    matmul_shapes,
)
from tmagen.bench import Candidate, Method, round_seconds, time_case

# ----------------------------------------------------------------------------- the candidates' names
TMAGEN_TENSOR = "tmagen per-tensor (tmagen.ops.matmul)"
TMAGEN_ROW = "tmagen per-row (tmagen.ops.matmul)"
TMAGEN_BLOCK = "tmagen block-scaled 1x128, 128x128 (tmagen.ops.matmul)"
TMAGEN_FAST = "tmagen per-tensor, use_fast_accum (tmagen.ops.matmul)"
CUBLAS_TENSOR = "cuBLASLt per-tensor (torch._scaled_mm)"
CUBLAS_ROW = "cuBLASLt row-wise (torch._scaled_mm)"
CUBLAS_FAST = "cuBLASLt per-tensor, use_fast_accum (torch._scaled_mm)"
CUBLAS_BLOCK = "cuBLASLt block-scaled 1x128, 128x128 (torch._scaled_mm)"
TRITON = "Triton fp8 TMA persistent, per-tensor (autotuned)"
NAMES = (TMAGEN_TENSOR, TMAGEN_ROW, TMAGEN_BLOCK, TMAGEN_FAST, CUBLAS_TENSOR, CUBLAS_ROW, CUBLAS_FAST, CUBLAS_BLOCK,
         TRITON)

E4M3_MAX = 448.0  # the largest finite float8_e4m3fn
SCALE_BLOCK = 128  # a block scale covers 1 x 128 of A and 128 x 128 of B (fp8api.md)
BLOCK_SCALED_MIN = 4096  # block-scaled candidates run on square shapes of this side and above (the target's)


# ----------------------------------------------------------------------------- the shape set
def fp8_ld(shape: MatmulShape) -> int | None:
    """A and B's row pitch in fp8 elements for a shape of the set whose operands are sliced views:
    the same bytes beyond K as the bf16 section's (its pitch of K + 8 bfloat16 is 16 bytes more than
    a row, so here K + 16), which keeps the class's point, a pitch a multiple of 16 bytes but not of
    128."""
    if shape.ld is None:
        return None
    return shape.k + 2 * (shape.ld - shape.k)


def fp8_shapes() -> list[MatmulShape]:
    """The bf16 section's 53 shapes of K-major operands (wgmma reads fp8 K-major only: not the
    weight gradients), their views' pitches in fp8 elements."""
    return [MatmulShape(s.m, s.n, s.k, s.shape_class, fp8_ld(s)) for s in matmul_shapes()
            if s.a_major == s.b_major == "k"]


def scaled_mm_refusal(m: int, n: int, k: int) -> str | None:
    """Why ``torch._scaled_mm`` refuses A [M, K] @ B [K, N], or None: it requires K and N to be
    multiples of 16 (mat1's trailing dimension and both of mat2's; PyTorch's
    aten/src/ATen/native/cuda/Blas.cpp, the TORCH_CHECKs of _scaled_mm_out_cuda). M is free."""
    bad = [f"{name} = {v}" for name, v in (("K", k), ("N", n)) if v % 16]
    if not bad:
        return None
    return f"torch._scaled_mm needs K and N multiples of 16 ({', '.join(bad)}): not padded here"


def tma_refusal(k: int, ld: int | None) -> str | None:
    """Why an fp8 operand of row pitch ``ld`` (K where contiguous) cannot be a TMA descriptor's tensor,
    or None: a global stride must be a multiple of 16 bytes (CUDA driver API, cuTensorMapEncodeTiled),
    and an fp8 element is one byte."""
    pitch = ld or k
    return None if pitch % 16 == 0 else f"a row pitch of {pitch} bytes is no multiple of 16 (TMA's global strides)"


def block_scaled(shape: MatmulShape) -> bool:
    """Whether the block-scaled candidate runs on the shape: square shapes of side 4096 and above,
    where its target (0.90 of tmagen's own per-tensor speed) is set."""
    return shape.m == shape.n == shape.k >= BLOCK_SCALED_MIN and shape.ld is None


# ----------------------------------------------------------------------------- the check
# The check's bound, per element of C, against R = (A sa)(B sb)^T summed in fp32 and the magnitude
# S = |A sa| |B sb|^T (the sum of the products' magnitudes):
#   |C - R| <= 2^-8 |R| + 2^-10 S
# * 2^-8 |R|: C is bfloat16, 8 significant bits, rounded to nearest: half a unit in the last place
#   is at most 2^-8 of the value.
# * 2^-10 S: the sums. Hopper's fp8 tensor-core accumulator keeps about 14 bits of each partial sum
#   (DeepSeek-V3 technical report, section 3.3.2: ~14 bits, not fp32's 24), so each wgmma of k = 32
#   adds at most 2^-13 of the running partial sum, itself at most the chunk's S; four of them in a
#   128-element chunk promoted to fp32 registers (tmagen's promote_every 128, cuBLASLt without
#   fast accumulation) add at most 2^-11 S. The fp32 sums of the chunks (K / 128 <= 512 additions:
#   at most 2^-15 S) and the reference's own fp32 rounding fit in a second 2^-11 S.
# A candidate that never promotes may exceed it in the worst case, not on random data (its error
# grows as a random walk, ~ 2^-13 K / 6 against the bound's 2^-10 x 0.64 K for normal inputs); a wrong
# scale, layout or tile is off by about |R| itself, which for normal inputs is ~sqrt(K) against
# the bound's ~K / 1600: a 20th of |R| at K = 16384, a 6th at K = 65536, so such errors fail.
OUTPUT_ROUNDING = 2.0 ** -8
ACCUMULATION = 2.0 ** -10


def fp8_tolerance(reference: Any, magnitude: Any) -> Any:
    """The bound on |C - R| per element (arrays of numpy or PyTorch alike; see above)."""
    return OUTPUT_ROUNDING * abs(reference) + ACCUMULATION * magnitude


def fp8_check(c: Any, reference: Any, magnitude: Any) -> str | None:
    """None when every element of ``c`` is within :func:`fp8_tolerance` of ``reference``, else the
    worst element's error and how many are outside; NaN (the poison of an unwritten C) fails."""
    err = abs(c.float() - reference)
    tol = fp8_tolerance(reference, magnitude)
    outside = ~(err <= tol)  # NaN is outside
    count = int(outside.sum().item())
    if count == 0:
        return None
    worst = float((err - tol).nan_to_num(float("inf")).max().item())
    return (f"{count} of {err.numel()} elements outside 2^-8 |R| + 2^-10 S (max |C - R| = "
            f"{float(err.max().item()):.3g}, the worst {worst:.3g} beyond its bound)")


# ----------------------------------------------------------------------------- how long each shape is timed
# Rough rates of an H200 for the budget: fp8's dense peak is about twice bf16's (issue 21 measured
# 1014 to 1399 TFLOP/s for cuBLASLt on the large shapes).
FP8_TFLOPS, FP8_GBPS = 1200.0, 3000.0
FP8_METHOD = Method()  # the suite's method (benchmarks/run.py passes its own, FULL or QUICK)
BIG_LAUNCH_MS, LONG_LAUNCH_MS = 1.0, 4.0
REFERENCE_TFLOPS = 45.0  # the fp32 products of the check (H200, no TF32)


def launch_ms(shape: MatmulShape) -> float:
    nbytes = shape.m * shape.k + shape.n * shape.k + 2 * shape.m * shape.n
    return max(shape.flops / (FP8_TFLOPS * 1e9), nbytes / (FP8_GBPS * 1e6), MIN_LAUNCH_MS)


def method_for(shape: MatmulShape, base: Method) -> Method:
    ms = launch_ms(shape)
    if ms >= LONG_LAUNCH_MS:
        return Method(rounds=max(3, base.rounds // 4), repetitions=3, warmup=1)
    if ms >= BIG_LAUNCH_MS:
        return Method(rounds=max(3, base.rounds // 2), repetitions=3, warmup=1)
    return base


def launches_per_sample(shape: MatmulShape) -> int:
    return max(1, math.ceil(MIN_SAMPLE_MS / launch_ms(shape)))


def buffer_sets(shape: MatmulShape, l2_bytes: int) -> int:
    """Sets of A, B and C rotated through so that A and B are not in L2 when read, within
    ROTATION_BYTES."""
    from lab.peers import rotation

    ld = shape.ld or shape.k
    inputs = (shape.m + shape.n) * ld
    return max(1, min(rotation(inputs, l2_bytes), ROTATION_BYTES // (inputs + 2 * shape.m * shape.n)))


def candidates_of(shape: MatmulShape, triton: bool = True) -> int:
    """Candidates timed on the shape (those that pass their check)."""
    three_ways = 3 * 2 if scaled_mm_refusal(shape.m, shape.n, shape.k) is None else 3  # tensor, row, fast
    blocks = 2 * block_scaled(shape)  # tmagen's and cuBLASLt's
    return three_ways + blocks + (triton and tma_refusal(shape.k, shape.ld) is None)


# Triton's fp8 matmul: configurations (lab.triton_peers.MATMUL_FP8_TILES; tests/test_triton_peers.py
# checks the count) and one compile each (the kernel does not specialise on M, N, K).
TRITON_FP8_CONFIGS = 12
# random data, scales, the references, the checks, freeing the pools: past its first two cases, the
# section of the H200 run of 2026-11-25 took 4.9 s a case, of which estimate()'s timing, reference and
# autotuning terms account for 1.4
CASE_OVERHEAD_S = 3.5
# tmagen.ops.matmul's first fp8 calls compile its families (three scale modes): that run's first two
# cases took 163 and 45 s, Triton's ~8 s of compiles among them. An upper bound: those cases were
# 256^3 and 512^3, whose rounds were then host-bound (HOST_LAUNCH_MS below); on 2026-11-29, with
# TMAGEN_CACHE warm, the four families' first calls took 8 s in all
OPS_FIRST_CALL_S = 190.0
# What Python takes to queue one launch, from the H200 run of 2026-11-29 whose small shapes were
# host-bound (matmul_bench.MIN_LAUNCH_MS): 512^3 took 57 s (7 candidates, 573 launches a sample, each
# round tried 4 times: ~0.035 ms a launch), 264^3 275 s (3 candidates, 2153 a sample: ~0.1 ms, the
# operands copied each call, K not being a multiple of 16); `round_seconds` says what a round costs.
HOST_LAUNCH_MS, SCRATCH_LAUNCH_MS = 0.035, 0.1


def estimate(shapes: Sequence[MatmulShape], base: Method = FP8_METHOD, triton: bool = True) -> tuple[float, str]:
    """Seconds the fp8 section should take on an H200, and its line of the plan."""
    timed = setup = tune = 0.0
    for s in shapes:
        m = method_for(s, base)
        ms = launch_ms(s)
        host_ms = SCRATCH_LAUNCH_MS if s.k % 16 or s.n % 16 else HOST_LAUNCH_MS
        launches = launches_per_sample(s) * candidates_of(s, triton)  # a round's
        timed += (m.rounds * m.repetitions + m.warmup) * round_seconds(launches * ms * 1e-3 * 1.1,
                                                                       launches * host_ms * 1e-3)
        references = 2 + 4 * block_scaled(s)  # R and S, and those of the block scales for each of two checks
        setup += CASE_OVERHEAD_S + references * s.flops / (REFERENCE_TFLOPS * 1e12)
        if triton and tma_refusal(s.k, s.ld) is None:
            with_clear = ms + CLEAR_L2_MS
            launches_ms = 5 * with_clear + max(1, 10 // with_clear) * ms + max(1, 40 // with_clear) * with_clear
            tune += TRITON_FP8_CONFIGS * (AUTOTUNE_OVERHEAD_S + launches_ms * 1e-3)
    compiles = TRITON_FP8_CONFIGS if triton and shapes else 0
    first = OPS_FIRST_CALL_S if shapes else 0.0
    total = timed + setup + tune + compiles * TRITON_COMPILE_S + first
    line = (f"fp8       {len(shapes):2d} shapes: timing ~{timed:.0f} s, set-up and checks ~{setup:.0f} s"
            + (f"; Triton fp8: {TRITON_FP8_CONFIGS} configs, ~{compiles} compiles "
               f"~{compiles * TRITON_COMPILE_S:.0f} s, autotuning ~{tune:.0f} s" if triton else "")
            + f"; tmagen.ops.matmul's first compiles ~{first:.0f} s")
    return total, line


# ----------------------------------------------------------------------------- the case
def _torch() -> Any:
    import torch

    return torch


def fp8_operand(rows: int, k: int, ld: int | None, gen: Any) -> tuple[Any, float]:
    """A random e4m3 [rows, K] operand and its per-tensor scale: normal values quantized with
    scale = amax / 448 (the usual recipe); with ``ld``, the first K columns of a [rows, ld] tensor
    whose other columns hold NaN (0x7F), so that a candidate reading past K fails its check."""
    torch = _torch()
    x = torch.randn(rows, k, device="cuda", generator=gen)
    scale = max(float(x.abs().max().item()), 1e-30) / E4M3_MAX
    q = (x / scale).to(torch.float8_e4m3fn)
    if ld is None:
        return q, scale
    base = torch.full((rows, ld), 0x7F, device="cuda", dtype=torch.uint8).view(torch.float8_e4m3fn)
    base[:, :k] = q
    return base[:, :k], scale


def _spread(shape: tuple[int, ...], scale: float, gen: Any) -> Any:
    """fp32 scales of ``shape``, each ``scale`` times a factor in [0.5, 2): per-row and per-block
    scales that differ, so that one applied to the wrong row or block fails the check."""
    torch = _torch()
    return (scale * 2.0 ** (2 * torch.rand(shape, device="cuda", generator=gen) - 1)).float().contiguous()


def expand_block_scales(sa: Any, sb: Any, m: int, n: int, k: int) -> tuple[Any, Any]:
    """Block scales as one per element: A's [M, ceil(K/128)] to [M, K], B's [ceil(N/128),
    ceil(K/128)] to [N, K]."""
    a_full = sa.repeat_interleave(SCALE_BLOCK, dim=1)[:, :k]
    b_full = sb.repeat_interleave(SCALE_BLOCK, dim=0).repeat_interleave(SCALE_BLOCK, dim=1)[:n, :k]
    return a_full, b_full


class _References:
    """The fp32 products the checks compare with: R = A B^T and S = |A| |B|^T of the fp8 values
    (exact products, fp32 sums, no TF32), scaled per tensor or per row on demand (a diagonal scale
    commutes with the sum); the block-scaled ones from the dequantized inputs themselves."""

    def __init__(self, a: Any, b: Any) -> None:
        torch = _torch()
        with _no_tf32(torch):
            af, bf = a.float(), b.float()
            self.r = af @ bf.T
            self.s = af.abs() @ bf.abs().T

    def scaled(self, sa: Any, sb: Any) -> tuple[Any, Any]:
        """R and S for scales sa ([] or [M, 1]) and sb ([] or [1, N])."""
        return self.r * sa * sb, self.s * sa * sb


def block_references(a: Any, b: Any, sa: Any, sb: Any) -> tuple[Any, Any]:
    """R and S of the block-scaled product, from the dequantized inputs (a.float() * sa) and
    (b.float() * sb), scales expanded to one per element."""
    torch = _torch()
    m, k = a.shape
    n = b.shape[0]
    a_full, b_full = expand_block_scales(sa, sb, m, n, k)
    with _no_tf32(torch):
        ad, bd = a.float() * a_full, b.float() * b_full
        return ad @ bd.T, ad.abs() @ bd.abs().T


class _no_tf32:
    """fp32 products in fp32 (PyTorch may be set to take TF32 for them)."""

    def __init__(self, torch: Any) -> None:
        self.torch = torch

    def __enter__(self) -> None:
        self.saved = self.torch.backends.cuda.matmul.allow_tf32
        self.torch.backends.cuda.matmul.allow_tf32 = False

    def __exit__(self, *exc: object) -> None:
        self.torch.backends.cuda.matmul.allow_tf32 = self.saved


Fp8Launch = Callable[[Any, Any, Any, Any, Any], object]  # (a [M,K], b [N,K], sa, sb, c [M,N]) -> queues c


def tmagen_ops(a: Any, b: Any, sa: Any, sb: Any, c: Any) -> None:
    """``tmagen.ops.matmul(a, b.t(), scale_a=sa, scale_b=sb, out=c)``."""
    import tmagen.ops

    matmul: Any = tmagen.ops.matmul  # scale_a and scale_b: issue 21's API
    matmul(a, b.t(), scale_a=sa, scale_b=sb, out=c)


def tmagen_ops_fast(a: Any, b: Any, sa: Any, sb: Any, c: Any) -> None:
    """``tmagen.ops.matmul(a, b.t(), scale_a=sa, scale_b=sb, out=c, use_fast_accum=True)``."""
    import tmagen.ops

    tmagen.ops.matmul(a, b.t(), scale_a=sa, scale_b=sb, out=c, use_fast_accum=True)


def scaled_mm(a: Any, b: Any, sa: Any, sb: Any, c: Any) -> None:
    """``torch._scaled_mm(a, b.t(), sa, sb, out_dtype=torch.bfloat16, out=c)``, use_fast_accum False."""
    torch = _torch()
    torch._scaled_mm(a, b.t(), sa, sb, out_dtype=torch.bfloat16, out=c)


def scaled_mm_fast(a: Any, b: Any, sa: Any, sb: Any, c: Any) -> None:
    """``torch._scaled_mm(a, b.t(), sa, sb, out_dtype=torch.bfloat16, out=c, use_fast_accum=True)``."""
    torch = _torch()
    torch._scaled_mm(a, b.t(), sa, sb, out_dtype=torch.bfloat16, out=c, use_fast_accum=True)


def fp8_case(shape: MatmulShape, base: Method = FP8_METHOD, seed: int = 0, triton: bool = True,
             tmagen: Fp8Launch | None = tmagen_ops, tmagen_fast: Fp8Launch | None = tmagen_ops_fast) -> dict[str, Any]:
    """C = (A sa)(B sb)^T for ``shape`` (its ``ld`` in fp8 elements, see :func:`fp8_ld`), bfloat16
    C: every candidate checked against the fp32 references, then those that pass timed on the same
    tensors, interleaved; TFLOP/s count 2 M N K. ``tmagen=None`` leaves tmagen's candidates out
    (``tmagen_fast``: its fast-accumulation one)."""
    from lab import peers

    peers.free_memory()
    torch = _torch()
    m, n, k = shape.m, shape.n, shape.k
    sets = buffer_sets(shape, peers.l2_bytes())
    gen = torch.Generator(device="cuda")
    gen.manual_seed(seed)
    a_s, b_s, scales_a, scales_b = [], [], [], []
    for _ in range(sets):
        a, sa = fp8_operand(m, k, shape.ld, gen)
        b, sb = fp8_operand(n, k, shape.ld, gen)
        a_s.append(a)
        b_s.append(b)
        scales_a.append(sa)
        scales_b.append(sb)
    c_s = [torch.empty(m, n, device="cuda", dtype=torch.bfloat16) for _ in range(sets)]
    # each set's scales in every form: per tensor ([] fp32), per row ([M, 1], [1, N]), per block
    tensor_a = [torch.tensor(s, device="cuda", dtype=torch.float32) for s in scales_a]
    tensor_b = [torch.tensor(s, device="cuda", dtype=torch.float32) for s in scales_b]
    row_a = [_spread((m, 1), s, gen) for s in scales_a]
    row_b = [_spread((1, n), s, gen) for s in scales_b]
    kb = -(-k // SCALE_BLOCK)
    block_a = [_spread((m, kb), s, gen) for s in scales_a]
    block_b = [_spread((-(-n // SCALE_BLOCK), kb), s, gen) for s in scales_b]  # B's [N/128, K/128]
    block_b_of_bt = [s.t() for s in block_b]  # as both libraries take them: blocked as b.t() [K, N] is
    # torch._scaled_mm's required layout, a copy made only where the block-scaled candidates run
    block_a_m_major = [s.t().contiguous().t() for s in block_a] if block_scaled(shape) else []
    refs = _References(a_s[0], b_s[0])
    num_sms = torch.cuda.get_device_properties(0).multi_processor_count

    def candidate(name: str, role: str, fn: Fp8Launch, sa_s: list, sb_s: list, reference: Callable[[], tuple],
                  note: Callable[[], str] = lambda: "", refusal: str | None = None) -> Candidate:
        def check() -> str | None:
            c_s[0].fill_(float("nan"))
            try:
                fn(a_s[0], b_s[0], sa_s[0], sb_s[0], c_s[0])
            except Exception as exc:  # noqa: BLE001 - a refusal the rules predicted is recorded as such
                if refusal is None:
                    raise
                first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
                return f"refused: {first}"
            r, s = reference()
            return fp8_check(c_s[0], r, s)

        return Candidate(name, role, lambda i: fn(a_s[i], b_s[i], sa_s[i], sb_s[i], c_s[i]), check, note)

    def per_tensor() -> tuple:
        return refs.scaled(tensor_a[0], tensor_b[0])

    def per_row() -> tuple:
        return refs.scaled(row_a[0], row_b[0])

    def per_block() -> tuple:
        return block_references(a_s[0], b_s[0], block_a[0], block_b[0])

    refused = scaled_mm_refusal(m, n, k)
    cands = []
    if tmagen is not None:
        cands.append(candidate(TMAGEN_TENSOR, "tmagen", tmagen, tensor_a, tensor_b, per_tensor))
        cands.append(candidate(TMAGEN_ROW, "tmagen", tmagen, row_a, row_b, per_row))
        if block_scaled(shape):
            cands.append(candidate(TMAGEN_BLOCK, "tmagen", tmagen, block_a, block_b_of_bt, per_block))
        if tmagen_fast is not None:
            cands.append(candidate(TMAGEN_FAST, "tmagen", tmagen_fast, tensor_a, tensor_b, per_tensor))
    cands.append(candidate(CUBLAS_TENSOR, "peer", scaled_mm, tensor_a, tensor_b, per_tensor, refusal=refused))
    cands.append(candidate(CUBLAS_ROW, "peer", scaled_mm, row_a, row_b, per_row, refusal=refused))
    cands.append(candidate(CUBLAS_FAST, "peer", scaled_mm_fast, tensor_a, tensor_b, per_tensor, refusal=refused))
    if block_scaled(shape):  # PyTorch before 2.10, or a shape its block scales do not take: recorded as refused
        cands.append(candidate(CUBLAS_BLOCK, "peer", scaled_mm, block_a_m_major, block_b_of_bt, per_block,
                               refusal=refused or "torch._scaled_mm's block scales"))
    tp = peers._triton(triton)
    if tp is not None:
        def triton_fp8(a: Any, b: Any, sa: Any, sb: Any, c: Any) -> None:
            tp.matmul_fp8(a, b, sa, sb, c, num_sms)

        cands.append(candidate(TRITON, "peer", triton_fp8, tensor_a, tensor_b, per_tensor,
                               note=lambda: tp.chosen_config(tp.matmul_fp8_kernel),
                               refusal=tma_refusal(k, shape.ld)))
    method = method_for(shape, base)
    ld = shape.ld or k
    record = time_case(cands, method, shape=(m, n, k), dtype="float8_e4m3", bytes_moved=(m + n) * ld + 2 * m * n,
                       flops=shape.flops, sets=sets, batch=launches_per_sample(shape))
    return {**record, "ld": shape.ld, "out_dtype": "bfloat16", "scaled_mm_refusal": refused,
            "method": {"rounds": method.rounds, "repetitions": method.repetitions, "warmup": method.warmup}}
