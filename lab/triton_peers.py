"""The Triton kernels tmagen's benchmark measures itself against, written as a Triton user would
write them: a pointer-tile transpose (``tl.load``, ``tl.trans``, ``tl.store`` on a 2-D grid, a
third grid axis for batches), a transpose on TMA tensor descriptors, a plain copy, a
persistent matmul on TMA descriptors in the manner of Triton's tutorial 09, and a plain matmul on
pointer tiles (``tl.load`` with masks) in the manner of its tutorial 03, for small M. Each is
``@triton.autotune``d over a set of configurations a user would try.

This module imports Triton (and so needs it and PyTorch); tmagen imports it only when a
benchmark asks for Triton peers (``lab.peers``).
"""

from __future__ import annotations

import itertools
from typing import Any

import torch
import triton
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor

# Autotuning measures each configuration with triton.testing.do_bench: shorter than its defaults
# (25 ms warm-up, 100 ms of runs) so that ~18 configurations of ~30 cases fit the suite's budget;
# the candidates it picks are then timed properly by tmagen.bench.interleave.
AUTOTUNE_WARMUP_MS = 10
AUTOTUNE_REP_MS = 40


def _bench(kernel_call: Any, quantiles: Any) -> Any:
    return triton.testing.do_bench(kernel_call, warmup=AUTOTUNE_WARMUP_MS, rep=AUTOTUNE_REP_MS, quantiles=quantiles)


def tile_configs() -> list[triton.Config]:
    """18 tile shapes and warp counts for the transposes (a transpose has no loop to pipeline, so
    num_stages does not matter)."""
    return [triton.Config({"BLOCK_M": bm, "BLOCK_N": bn}, num_warps=w)
            for bm, bn in itertools.product((32, 64, 128), repeat=2) for w in (4, 8)]


def copy_configs() -> list[triton.Config]:
    """18 block sizes and warp counts for the copy."""
    return [triton.Config({"BLOCK": b}, num_warps=w)
            for b in (512, 1024, 2048, 4096, 8192, 16384) for w in (4, 8, 16)]


# ----------------------------------------------------------------------------- copy
@triton.autotune(configs=copy_configs(), key=["n"], do_bench=_bench)
@triton.jit
def copy_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    inside = offsets < n
    tl.store(y_ptr + offsets, tl.load(x_ptr + offsets, mask=inside), mask=inside)


def copy(x: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    """``out`` = ``x``, both contiguous, as one flat array."""
    n = x.numel()
    copy_kernel[lambda meta: (triton.cdiv(n, meta["BLOCK"]),)](x, out, n)
    return out


# ----------------------------------------------------------------------------- transpose, pointer tiles
@triton.autotune(configs=tile_configs(), key=["M", "N"], do_bench=_bench)
@triton.jit
def transpose_kernel(x_ptr, y_ptr, M, N, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    batch = tl.program_id(2).to(tl.int64) * M * N
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    inside = (rows[:, None] < M) & (cols[None, :] < N)
    tile = tl.load(x_ptr + batch + rows[:, None] * N + cols[None, :], mask=inside)
    tl.store(y_ptr + batch + cols[:, None] * M + rows[None, :], tl.trans(tile), mask=tl.trans(inside))


def _batched(x: torch.Tensor) -> tuple[int, int, int]:
    m, n = x.shape[-2:]
    return x.numel() // (m * n), m, n


def transpose(x: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    """``out`` = ``x.transpose(-2, -1)``, both contiguous."""
    b, m, n = _batched(x)
    grid = lambda meta: (triton.cdiv(m, meta["BLOCK_M"]), triton.cdiv(n, meta["BLOCK_N"]), b)  # noqa: E731
    transpose_kernel[grid](x, out, m, n)
    return out


# ----------------------------------------------------------------------------- transpose, TMA descriptors
def _transpose_blocks(nargs: dict[str, Any]) -> None:
    """Each configuration's tile as the descriptors' block shape (host descriptors, set per config)."""
    bm, bn = nargs["BLOCK_M"], nargs["BLOCK_N"]
    nargs["x_desc"].block_shape = [1, bm, bn]
    nargs["y_desc"].block_shape = [1, bn, bm]


@triton.autotune(configs=[triton.Config(c.kwargs, num_warps=c.num_warps, pre_hook=_transpose_blocks)
                          for c in tile_configs()],
                 key=["M", "N", "ELEMENT_BYTES"], do_bench=_bench)
@triton.jit(do_not_specialize=["M", "N"])
def transpose_tma_kernel(x_desc, y_desc, M, N, ELEMENT_BYTES: tl.constexpr,
                         BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    # M, N and ELEMENT_BYTES only key the autotuning: the descriptors know the shape.
    batch = tl.program_id(2)
    row = tl.program_id(0) * BLOCK_M
    col = tl.program_id(1) * BLOCK_N
    tile = tl.reshape(x_desc.load([batch, row, col]), (BLOCK_M, BLOCK_N))
    y_desc.store([batch, col, row], tl.reshape(tl.trans(tile), (1, BLOCK_N, BLOCK_M)))


def transpose_tma(x: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    """``out`` = ``x.transpose(-2, -1)`` through TMA tensor descriptors (rows must be 16-byte multiples)."""
    b, m, n = _batched(x)
    # The block shapes are placeholders that each configuration's pre_hook replaces.
    x_desc = TensorDescriptor(x, [b, m, n], [m * n, n, 1], [1, 32, 32])
    y_desc = TensorDescriptor(out, [b, n, m], [m * n, m, 1], [1, 32, 32])
    grid = lambda meta: (triton.cdiv(m, meta["BLOCK_M"]), triton.cdiv(n, meta["BLOCK_N"]), b)  # noqa: E731
    transpose_tma_kernel[grid](x_desc, y_desc, m, n, ELEMENT_BYTES=x.element_size())
    return out


# ----------------------------------------------------------------------------- matmul, TMA, persistent
MATMUL_SMEM_BYTES = 227 * 1024  # a Hopper block's shared memory


# (BLOCK_M, BLOCK_N, BLOCK_K, num_warps, num_stages, GROUP_M): the tiles of Triton's tutorials and
# their neighbours, from 64 x 128 for short problems to 128 x 256 (and 256 x 128) for large ones,
# BLOCK_K = 128 where the tiles are small enough to hold it; groups of 8 rows of tiles, and of 16
# for the large tiles (more reuse of B in L2 on wide problems).
MATMUL_TMA_TILES = [(128, 256, 64, 8, 3, 8), (256, 128, 64, 8, 3, 8),
                    (128, 256, 64, 8, 3, 16), (256, 128, 64, 8, 3, 16),
                    (128, 128, 64, 4, 3, 8), (128, 128, 64, 4, 4, 8), (128, 128, 64, 8, 3, 8), (128, 128, 64, 8, 4, 8),
                    (128, 128, 128, 4, 3, 8), (128, 128, 128, 8, 3, 8),
                    (64, 256, 64, 4, 3, 8), (64, 256, 64, 4, 4, 8),
                    (64, 128, 128, 4, 3, 8), (64, 128, 128, 4, 4, 8),
                    (128, 64, 64, 4, 3, 8), (128, 64, 64, 4, 4, 8)]


def matmul_configs() -> list[triton.Config]:
    """The 16 configurations of MATMUL_TMA_TILES; :func:`fitting_matmul_configs` keeps those a
    Hopper SM can hold for the operands' element size (all 16 for 2-byte elements)."""
    return [triton.Config({"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "GROUP_M": g}, num_warps=w, num_stages=s,
                          pre_hook=_matmul_blocks)
            for bm, bn, bk, w, s, g in MATMUL_TMA_TILES]


def fitting_matmul_configs(configs: list[triton.Config], named_args: dict[str, Any],
                           **kwargs: Any) -> list[triton.Config]:
    """Keeps the configurations a Hopper SM can hold: an fp32 accumulator of at most 128 registers a
    thread, and the pipeline's stages of A and B tiles plus the output tile within shared memory.
    The others cannot be fast, and compiling them would cost the budget."""
    element = named_args["a_desc"].base.element_size()
    kept = []
    for c in configs:
        bm, bn, bk = c.kwargs["BLOCK_M"], c.kwargs["BLOCK_N"], c.kwargs["BLOCK_K"]
        registers = bm * bn // (32 * c.num_warps)
        smem = (c.num_stages * (bm + bn) * bk + bm * bn) * element
        if registers <= 128 and smem <= MATMUL_SMEM_BYTES:
            kept.append(c)
    return kept


def _matmul_blocks(nargs: dict[str, Any]) -> None:
    bm, bn, bk = nargs["BLOCK_M"], nargs["BLOCK_N"], nargs["BLOCK_K"]
    nargs["a_desc"].block_shape = [bm, bk]
    nargs["b_desc"].block_shape = [bn, bk]
    nargs["c_desc"].block_shape = [bm, bn]


@triton.jit
def _tile_of(tile_id, num_pid_m, num_pid_n, GROUP_M: tl.constexpr):
    """Tiles in groups of GROUP_M rows of tiles, column by column inside a group, for L2 reuse."""
    in_group = GROUP_M * num_pid_n
    first_m = (tile_id // in_group) * GROUP_M
    group_m = min(num_pid_m - first_m, GROUP_M)
    return first_m + (tile_id % in_group) % group_m, (tile_id % in_group) // group_m


@triton.autotune(configs=matmul_configs(), key=["M", "N", "K"], do_bench=_bench,
                 prune_configs_by={"early_config_prune": fitting_matmul_configs})
@triton.jit(do_not_specialize=["M", "N", "K"])  # the descriptors carry the shape: one compile per configuration
def matmul_kernel(a_desc, b_desc, c_desc, M, N, K, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                  BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr, NUM_SMS: tl.constexpr):
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    k_tiles = tl.cdiv(K, BLOCK_K)
    # a second counter for the epilogue, so that the flattened loop's prologue and epilogue do not
    # share a value (as the tutorial does)
    epilogue_tile = tl.program_id(0) - NUM_SMS
    for tile_id in tl.range(tl.program_id(0), num_pid_m * num_pid_n, NUM_SMS, flatten=True):
        pid_m, pid_n = _tile_of(tile_id, num_pid_m, num_pid_n, GROUP_M)
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for k in range(k_tiles):
            a = a_desc.load([pid_m * BLOCK_M, k * BLOCK_K])
            b = b_desc.load([pid_n * BLOCK_N, k * BLOCK_K])
            acc = tl.dot(a, b.T, acc)
        epilogue_tile += NUM_SMS
        pid_m, pid_n = _tile_of(epilogue_tile, num_pid_m, num_pid_n, GROUP_M)
        c_desc.store([pid_m * BLOCK_M, pid_n * BLOCK_N], acc.to(c_desc.dtype))


def matmul(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor, num_sms: int) -> torch.Tensor:
    """``c`` = ``a @ b.T`` for ``a`` [M, K], ``b`` [N, K] (K-major) and ``c`` [M, N], fp32 accumulation."""
    m, k = a.shape
    n = b.shape[0]
    # Block shapes are placeholders that each configuration's pre_hook replaces.
    a_desc = TensorDescriptor.from_tensor(a, [128, 64])
    b_desc = TensorDescriptor.from_tensor(b, [128, 64])
    c_desc = TensorDescriptor.from_tensor(c, [128, 128])
    grid = lambda meta: (min(num_sms, triton.cdiv(m, meta["BLOCK_M"]) * triton.cdiv(n, meta["BLOCK_N"])),)  # noqa: E731
    matmul_kernel[grid](a_desc, b_desc, c_desc, m, n, k, NUM_SMS=num_sms)
    return c


# ----------------------------------------------------------------------------- matmul, transposed operands
# The same persistent kernel and configurations for operands given as transposed views, each
# descriptor over the memory as it lies: A as x.T of an x [K, M] (a weight gradient's x^T dy), B as
# [K, N] (dy) or [N, K]; each tile loaded as it lies and transposed for the dot, which Triton
# lowers to wgmma's MN-major operands (16-bit types).
def _matmul_mn_blocks(nargs: dict[str, Any]) -> None:
    bm, bn, bk = nargs["BLOCK_M"], nargs["BLOCK_N"], nargs["BLOCK_K"]
    nargs["a_desc"].block_shape = [bk, bm] if nargs["A_MN"] else [bm, bk]
    nargs["b_desc"].block_shape = [bk, bn] if nargs["B_MN"] else [bn, bk]
    nargs["c_desc"].block_shape = [bm, bn]


def matmul_mn_configs() -> list[triton.Config]:
    """MATMUL_TMA_TILES again, their blocks laid as each operand lies."""
    return [triton.Config({"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "GROUP_M": g}, num_warps=w, num_stages=s,
                          pre_hook=_matmul_mn_blocks)
            for bm, bn, bk, w, s, g in MATMUL_TMA_TILES]


@triton.autotune(configs=matmul_mn_configs(), key=["M", "N", "K", "A_MN", "B_MN"], do_bench=_bench,
                 prune_configs_by={"early_config_prune": fitting_matmul_configs})
@triton.jit(do_not_specialize=["M", "N", "K"])
def matmul_mn_kernel(a_desc, b_desc, c_desc, M, N, K, A_MN: tl.constexpr, B_MN: tl.constexpr,
                     BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
                     NUM_SMS: tl.constexpr):
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    k_tiles = tl.cdiv(K, BLOCK_K)
    epilogue_tile = tl.program_id(0) - NUM_SMS
    for tile_id in tl.range(tl.program_id(0), num_pid_m * num_pid_n, NUM_SMS, flatten=True):
        pid_m, pid_n = _tile_of(tile_id, num_pid_m, num_pid_n, GROUP_M)
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for k in range(k_tiles):
            if A_MN:
                a = a_desc.load([k * BLOCK_K, pid_m * BLOCK_M]).T
            else:
                a = a_desc.load([pid_m * BLOCK_M, k * BLOCK_K])
            if B_MN:
                b = b_desc.load([k * BLOCK_K, pid_n * BLOCK_N])
            else:
                b = b_desc.load([pid_n * BLOCK_N, k * BLOCK_K]).T
            acc = tl.dot(a, b, acc)
        epilogue_tile += NUM_SMS
        pid_m, pid_n = _tile_of(epilogue_tile, num_pid_m, num_pid_n, GROUP_M)
        c_desc.store([pid_m * BLOCK_M, pid_n * BLOCK_N], acc.to(c_desc.dtype))


def matmul_mn(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor, num_sms: int) -> torch.Tensor:
    """``c`` = ``a @ b.T`` for ``a`` [M, K] and ``b`` [N, K], each either K-major or a transposed view
    (M or N contiguous: x.T of an x [K, M], dy.T of a dy [K, N]), and ``c`` [M, N]."""
    m, k = a.shape
    n = b.shape[0]
    a_mn, b_mn = a.stride(1) != 1, b.stride(1) != 1
    a_desc = TensorDescriptor.from_tensor(a.T if a_mn else a, [64, 64])  # placeholders: the pre_hook sets them
    b_desc = TensorDescriptor.from_tensor(b.T if b_mn else b, [64, 64])
    c_desc = TensorDescriptor.from_tensor(c, [128, 128])
    grid = lambda meta: (min(num_sms, triton.cdiv(m, meta["BLOCK_M"]) * triton.cdiv(n, meta["BLOCK_N"])),)  # noqa: E731
    matmul_mn_kernel[grid](a_desc, b_desc, c_desc, m, n, k, A_MN=a_mn, B_MN=b_mn, NUM_SMS=num_sms)
    return c


# ----------------------------------------------------------------------------- matmul, pointer tiles
# (BLOCK_M, BLOCK_N, BLOCK_K, num_warps, num_stages): small row tiles for few rows (M of 1 to 256),
# narrow column tiles so that a small M still spreads over the SMs, long K steps to keep loads in flight.
MATMUL_POINTER_TILES = [(16, 32, 256, 4, 4), (16, 64, 128, 4, 4), (16, 64, 256, 4, 3), (16, 128, 128, 4, 4),
                        (32, 64, 128, 4, 4), (32, 128, 64, 4, 4), (64, 64, 128, 4, 4), (64, 128, 64, 4, 4),
                        (64, 128, 128, 8, 3), (128, 128, 64, 8, 4)]


def matmul_pointer_configs() -> list[triton.Config]:
    """The 10 configurations of MATMUL_POINTER_TILES, GROUP_M 8."""
    return [triton.Config({"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "GROUP_M": 8}, num_warps=w, num_stages=s)
            for bm, bn, bk, w, s in MATMUL_POINTER_TILES]


@triton.autotune(configs=matmul_pointer_configs(), key=["M", "N", "K"], do_bench=_bench)
@triton.jit
def matmul_pointer_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_bn, stride_cm,
                          BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr):
    # rows of A, B and C at their own pitches, the last dimension of each contiguous
    pid_m, pid_n = _tile_of(tl.program_id(0), tl.cdiv(M, BLOCK_M), tl.cdiv(N, BLOCK_N), GROUP_M)
    rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    ks = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + rows[:, None].to(tl.int64) * stride_am + ks[None, :]
    b_ptrs = b_ptr + cols[None, :].to(tl.int64) * stride_bn + ks[:, None]  # a [BLOCK_K, BLOCK_N] tile of B^T
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        left = K - k * BLOCK_K
        a = tl.load(a_ptrs, mask=(rows[:, None] < M) & (ks[None, :] < left), other=0.0)
        b = tl.load(b_ptrs, mask=(ks[:, None] < left) & (cols[None, :] < N), other=0.0)
        acc = tl.dot(a, b, acc)
        a_ptrs += BLOCK_K
        b_ptrs += BLOCK_K
    c_ptrs = c_ptr + rows[:, None].to(tl.int64) * stride_cm + cols[None, :]
    tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=(rows[:, None] < M) & (cols[None, :] < N))


def matmul_pointer(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
    """``c`` = ``a @ b.T`` for ``a`` [M, K], ``b`` [N, K] and ``c`` [M, N], each row-contiguous at
    its own pitch, fp32 accumulation."""
    m, k = a.shape
    n = b.shape[0]
    grid = lambda meta: (triton.cdiv(m, meta["BLOCK_M"]) * triton.cdiv(n, meta["BLOCK_N"]),)  # noqa: E731
    matmul_pointer_kernel[grid](a, b, c, m, n, k, a.stride(0), b.stride(0), c.stride(0))
    return c


# ----------------------------------------------------------------------------- matmul, fp8, TMA, persistent (issue 21)
# (BLOCK_M, BLOCK_N, BLOCK_K, num_warps, num_stages, GROUP_M): BLOCK_K 128 (one 128-byte line of fp8
# along K, what a swizzled TMA box of e4m3 holds), the bf16 kernel's tiles from 64 x 128 to 128 x 256
# and 256 x 128, with as many stages as shared memory holds at one byte an element; groups of 8 rows
# of tiles, and of 16 for the large tiles.
MATMUL_FP8_TILES = [(128, 256, 128, 8, 3, 8), (128, 256, 128, 8, 3, 16),
                    (256, 128, 128, 8, 3, 8), (256, 128, 128, 8, 3, 16),
                    (128, 128, 128, 4, 4, 8), (128, 128, 128, 4, 5, 8),
                    (128, 128, 128, 8, 4, 8), (128, 128, 128, 8, 5, 8),
                    (64, 256, 128, 4, 4, 8), (64, 128, 128, 4, 4, 8), (64, 128, 128, 4, 6, 8),
                    (128, 64, 128, 4, 4, 8)]


def matmul_fp8_configs() -> list[triton.Config]:
    """The 12 configurations of MATMUL_FP8_TILES (all of which a Hopper SM holds: see
    :func:`fitting_fp8_configs`)."""
    return [triton.Config({"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "GROUP_M": g}, num_warps=w, num_stages=s,
                          pre_hook=_matmul_blocks)
            for bm, bn, bk, w, s, g in MATMUL_FP8_TILES]


def fitting_fp8_configs(configs: list[triton.Config], named_args: dict[str, Any],
                        **kwargs: Any) -> list[triton.Config]:
    """The configurations a Hopper SM holds for one-byte operands and a C of ``c_desc``'s element
    size: at most 128 accumulator registers a thread, stages plus the output tile within shared
    memory."""
    out = named_args["c_desc"].base.element_size()
    kept = []
    for c in configs:
        bm, bn, bk = c.kwargs["BLOCK_M"], c.kwargs["BLOCK_N"], c.kwargs["BLOCK_K"]
        if bm * bn // (32 * c.num_warps) <= 128 and c.num_stages * (bm + bn) * bk + bm * bn * out <= MATMUL_SMEM_BYTES:
            kept.append(c)
    return kept


@triton.autotune(configs=matmul_fp8_configs(), key=["M", "N", "K"], do_bench=_bench,
                 prune_configs_by={"early_config_prune": fitting_fp8_configs})
@triton.jit(do_not_specialize=["M", "N", "K"])
def matmul_fp8_kernel(a_desc, b_desc, c_desc, scale_a_ptr, scale_b_ptr, M, N, K, BLOCK_M: tl.constexpr,
                      BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr, NUM_SMS: tl.constexpr):
    # the bf16 kernel's loop on fp8 tiles, the per-tensor scales applied to the fp32 accumulator
    # before the cast. tl.dot's own fp8 accumulation, as a Triton user gets it: on sm_90 Triton 3.6's
    # max_num_imprecise_acc defaults to 2**30 (backends/nvidia/compiler.py), so the sums are never
    # promoted out of the tensor core's accumulator, where tmagen's and cuBLASLt's are every 128 of K
    scale = tl.load(scale_a_ptr) * tl.load(scale_b_ptr)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    k_tiles = tl.cdiv(K, BLOCK_K)
    epilogue_tile = tl.program_id(0) - NUM_SMS
    for tile_id in tl.range(tl.program_id(0), num_pid_m * num_pid_n, NUM_SMS, flatten=True):
        pid_m, pid_n = _tile_of(tile_id, num_pid_m, num_pid_n, GROUP_M)
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for k in range(k_tiles):
            a = a_desc.load([pid_m * BLOCK_M, k * BLOCK_K])
            b = b_desc.load([pid_n * BLOCK_N, k * BLOCK_K])
            acc = tl.dot(a, b.T, acc)
        epilogue_tile += NUM_SMS
        pid_m, pid_n = _tile_of(epilogue_tile, num_pid_m, num_pid_n, GROUP_M)
        c_desc.store([pid_m * BLOCK_M, pid_n * BLOCK_N], (acc * scale).to(c_desc.dtype))


def matmul_fp8(a: torch.Tensor, b: torch.Tensor, scale_a: torch.Tensor, scale_b: torch.Tensor, c: torch.Tensor,
               num_sms: int) -> torch.Tensor:
    """``c`` = ``(a * scale_a) @ (b * scale_b).T`` for fp8 ``a`` [M, K] and ``b`` [N, K] (K-major, rows
    16-byte multiples apart), one fp32 scale each, fp32 accumulation, ``c`` [M, N]."""
    m, k = a.shape
    n = b.shape[0]
    a_desc = TensorDescriptor.from_tensor(a, [128, 128])  # placeholders: each configuration's pre_hook sets them
    b_desc = TensorDescriptor.from_tensor(b, [128, 128])
    c_desc = TensorDescriptor.from_tensor(c, [128, 128])
    grid = lambda meta: (min(num_sms, triton.cdiv(m, meta["BLOCK_M"]) * triton.cdiv(n, meta["BLOCK_N"])),)  # noqa: E731
    matmul_fp8_kernel[grid](a_desc, b_desc, c_desc, scale_a, scale_b, m, n, k, NUM_SMS=num_sms)
    return c


def chosen_config(kernel: Any) -> str:
    """The configuration the autotuner chose at its last call, as text (for the report)."""
    config = getattr(kernel, "best_config", None)
    if config is None:
        return ""
    params = ", ".join(f"{k}={v}" for k, v in config.kwargs.items())
    return f"{params}, num_warps={config.num_warps}, num_stages={config.num_stages}"


# ----------------------------------------------------------------------------- permute, pointer gather (issue 19)
@triton.autotune(configs=copy_configs(), key=["n"], do_bench=_bench)
@triton.jit
def permute_kernel(x_ptr, y_ptr, n, e1, e2, e3, s0, s1, s2, s3, BLOCK: tl.constexpr):
    """y (contiguous, extents e0..e3) = x read at strides s0..s3 (x's strides in y's order)."""
    i = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    inside = i < n
    c3 = i % e3
    r = i // e3
    c2 = r % e2
    r = r // e2
    c1 = r % e1
    c0 = r // e1
    tl.store(y_ptr + i, tl.load(x_ptr + c0 * s0 + c1 * s1 + c2 * s2 + c3 * s3, mask=inside), mask=inside)


def permute(x: torch.Tensor, dims: list[int], out: torch.Tensor) -> torch.Tensor:
    """``out`` = ``x.permute(dims)`` (contiguous), for up to 4 dimensions, as a Triton user writes a
    gather: each output element reads its source through the permuted strides."""
    view = x.permute(dims)
    shape = [1] * (4 - view.dim()) + list(view.shape)
    strides = [0] * (4 - view.dim()) + list(view.stride())
    n = out.numel()
    permute_kernel[lambda meta: (triton.cdiv(n, meta["BLOCK"]),)](x, out, n, shape[1], shape[2], shape[3], *strides)
    return out


def gather(view: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    """``out`` = ``view`` (contiguous), for any strided view of up to 4 dimensions: the same gather,
    each output element read through the view's own strides (a copy of a sliced or transposed view,
    a permute)."""
    return permute(view, list(range(view.dim())), out)


# ----------------------------------------------------------------------------- permute of rows, 3-D grid (issue 19)
def row_configs() -> list[triton.Config]:
    """12 row-tile heights and warp counts for the row permute."""
    return [triton.Config({"BLOCK_S": s}, num_warps=w) for s in (4, 16, 32, 64, 128, 256) for w in (4, 8)]


@triton.autotune(configs=row_configs(), key=["S", "H", "D"], do_bench=_bench)
@triton.jit
def permute_rows_kernel(x_ptr, y_ptr, S, H, D, BLOCK_S: tl.constexpr, BLOCK_D: tl.constexpr):
    # y[p, h, s, :] = x[p, s, h, :] for x [P, S, H, D] and y [P, H, S, D], both contiguous: a 3-D
    # grid of (blocks of S, H, P), each program BLOCK_S rows of D elements
    p = tl.program_id(2).to(tl.int64) * S * H * D
    h = tl.program_id(1).to(tl.int64)
    s = tl.program_id(0) * BLOCK_S + tl.arange(0, BLOCK_S).to(tl.int64)
    d = tl.arange(0, BLOCK_D)
    inside = (s[:, None] < S) & (d[None, :] < D)
    rows = tl.load(x_ptr + p + (s[:, None] * H + h) * D + d[None, :], mask=inside)
    tl.store(y_ptr + p + (h * S + s[:, None]) * D + d[None, :], rows, mask=inside)


GRID_YZ_MAX = 65535  # a CUDA grid's second and third extents


def permute_rows(x: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    """``out`` [P, H, S, D] = ``x`` [P, S, H, D] ``.permute(0, 2, 1, 3)``, both contiguous (the
    attention layouts [B, S, H, D] <-> [B, H, S, D]; a transpose of 16-byte elements as pairs of 8)."""
    p, s, h, d = x.shape
    if h > GRID_YZ_MAX or p > GRID_YZ_MAX:
        raise ValueError(f"a grid of {h} x {p} programs in y and z: CUDA allows {GRID_YZ_MAX}")
    grid = lambda meta: (triton.cdiv(s, meta["BLOCK_S"]), h, p)  # noqa: E731
    permute_rows_kernel[grid](x, out, s, h, d, BLOCK_D=triton.next_power_of_2(d))
    return out
