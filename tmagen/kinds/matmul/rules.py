"""The matmul kind's rules: the three tensors it names, and what wgmma and the kernel's
warpgroups need of the tile and the boxes."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from tmagen.errors import Violation
from tmagen.kinds.base import RuleBook
from tmagen.kinds.matmul.plan import (
    FP8_TYPES,
    SCALE_BLOCK,
    is_fp8,
    promote_every,
    register_shortfall,
)
from tmagen.planning import PATTERN_ALIGN
from tmagen.spec import MatmulKernel, Spec, TensorSpec

RULES = RuleBook()
KERNEL = "tmagen's matmul kernel (templates/matmul/kernels.cuh.j2)"
WGMMA = "PTX ISA 9.7.15, wgmma.mma_async shapes (M 64, N 8 to 256 by 8, K 16 for 16-bit types, 32 for fp8)"
WGMMA_FP8 = "PTX ISA 9.7.15.5, wgmma.mma_async (imm-trans-a and imm-trans-b exist for .f16 and .bf16 only)"
AB_TYPES = ("bfloat16", "float16")
C_TYPES = ("bfloat16", "float16", "float32")
@dataclass(frozen=True)
class Operands:
    """A, B and C with their spec indices, once the names resolve."""

    kernel: MatmulKernel
    a: TensorSpec
    b: TensorSpec
    c: TensorSpec
    ia: int
    ib: int
    ic: int


def operands(spec: Spec) -> Operands | None:
    """A, B and C, or None while the names do not pick three distinct tensors (rule matmul-tensors)."""
    k = spec.kernel
    assert isinstance(k, MatmulKernel)
    names = {t.name: i for i, t in enumerate(spec.tensors)}
    if any(n not in names for n in (k.a, k.b, k.c)) or len({k.a, k.b, k.c}) != 3 or len(spec.tensors) != 3:
        return None
    ia, ib, ic = names[k.a], names[k.b], names[k.c]
    return Operands(k, spec.tensors[ia], spec.tensors[ib], spec.tensors[ic], ia, ib, ic)


def _matrices(spec: Spec) -> Operands | None:
    ops = operands(spec)
    return ops if ops is not None and all(t.rank == 2 for t in (ops.a, ops.b, ops.c)) else None


@RULES.rule("matmul-tensors", "kernel.a, kernel.b and kernel.c name the spec's three tensors, each once", KERNEL)
def _tensors(spec: Spec) -> Iterator[Violation]:
    k = spec.kernel
    assert isinstance(k, MatmulKernel)
    names = sorted(t.name for t in spec.tensors)
    for fld in ("a", "b", "c"):
        if getattr(k, fld) not in names:
            yield Violation("matmul-tensors", f"kernel.{fld}", repr(getattr(k, fld)), "no tensor has this name",
                            f"name one of {names}", KERNEL)
    if len({k.a, k.b, k.c}) != 3 or len(spec.tensors) != 3:
        yield Violation("matmul-tensors", "tensors", f"{len(spec.tensors)} tensors, named {names}",
                        "a matmul takes the three tensors A, B and C, each named once by kernel.a, kernel.b and "
                        "kernel.c", "give three tensors and name each once", KERNEL)


@RULES.rule("matmul-matrices", "A, B and C are matrices, with no mma field (the kernel decides how it reads them)",
            KERNEL)
def _matrix_rank(spec: Spec) -> Iterator[Violation]:
    ops = operands(spec)
    if ops is None:
        return
    for i, t in ((ops.ia, ops.a), (ops.ib, ops.b), (ops.ic, ops.c)):
        if t.rank != 2:
            yield Violation("matmul-matrices", f"tensors[{i}].shape", f"{t.shape} ({t.rank} dimensions)",
                            "a matmul operand is a matrix", "give 2 dimensions", KERNEL)
        if t.mma is not None:
            yield Violation("matmul-matrices", f"tensors[{i}].mma", "set",
                            "the matmul kernel decides how it reads its operands", "remove it", KERNEL)


@RULES.rule("matmul-zero-fill", "A and B fill with zeros outside the tensor", KERNEL)
def _zero_fill(spec: Spec) -> Iterator[Violation]:
    ops = operands(spec)
    if ops is None:
        return
    for i, t in ((ops.ia, ops.a), (ops.ib, ops.b)):
        if t.oob_fill != "zero":
            yield Violation("matmul-zero-fill", f"tensors[{i}].oob_fill", repr(t.oob_fill),
                            "the matmul finishes partial tiles with the zeros TMA loads outside A and B",
                            "use 'zero'", KERNEL)


@RULES.rule("matmul-types", "A and B are both bfloat16, both float16, or both fp8 (float8_e4m3 or float8_e5m2, "
            "either); C is bfloat16, float16 or float32", f"{WGMMA}; {KERNEL}")
def _types(spec: Spec) -> Iterator[Violation]:
    ops = operands(spec)
    if ops is None:
        return
    src = f"{WGMMA}; {KERNEL}"
    if ops.a.dtype not in AB_TYPES + FP8_TYPES:
        yield Violation("matmul-types", f"tensors[{ops.ia}].dtype", repr(ops.a.dtype),
                        "the matmul takes bfloat16, float16, float8_e4m3 or float8_e5m2 A and B",
                        "use one of those", src)
    elif ops.a.dtype in FP8_TYPES:
        if ops.b.dtype not in FP8_TYPES:
            yield Violation("matmul-types", f"tensors[{ops.ib}].dtype", repr(ops.b.dtype),
                            "an fp8 A multiplies an fp8 B", "use float8_e4m3 or float8_e5m2", src)
    elif ops.b.dtype != ops.a.dtype:
        yield Violation("matmul-types", f"tensors[{ops.ib}].dtype", repr(ops.b.dtype),
                        f"B must have A's type ({ops.a.dtype!r})", f"use {ops.a.dtype!r}", src)
    if ops.c.dtype not in C_TYPES:
        yield Violation("matmul-types", f"tensors[{ops.ic}].dtype", repr(ops.c.dtype),
                        "C is bfloat16, float16 or float32", "use one of those", src)


@RULES.rule("matmul-shapes", "A [M, K] (a_major k) or [K, M] (a_major mn), B [N, K] (b_major k) or [K, N] (b_major "
            "mn) and C [M, N] agree", KERNEL)
def _shapes(spec: Spec) -> Iterator[Violation]:
    ops = _matrices(spec)
    if ops is None:
        return
    k = ops.kernel
    m, kk = ops.a.shape if k.a_major == "k" else ops.a.shape[::-1]
    n, kb = ops.b.shape if k.b_major == "k" else ops.b.shape[::-1]
    if kb != kk:
        layout = "[N, K] with b_major k" if k.b_major == "k" else "[K, N] with b_major mn"
        yield Violation("matmul-shapes", f"tensors[{ops.ib}].shape", str(ops.b.shape),
                        f"A (tensors[{ops.ia}].shape, {k.a_major}-major) is {ops.a.shape}: B needs K = {kk}",
                        f"give B as {layout}", KERNEL)
    elif ops.c.shape != [m, n]:
        yield Violation("matmul-shapes", f"tensors[{ops.ic}].shape", str(ops.c.shape),
                        f"C of A (tensors[{ops.ia}].shape, {k.a_major}-major) {ops.a.shape} and B (tensors[{ops.ib}]."
                        f"shape, {k.b_major}-major) {ops.b.shape} is [{m}, {n}]", f"use [{m}, {n}]", KERNEL)


@RULES.rule("matmul-tile", "BM is 64 rows per consumer warpgroup, BN a multiple of 8 up to 256, BK of 16",
            WGMMA)
def _tile(spec: Spec) -> Iterator[Violation]:
    k = spec.kernel
    assert isinstance(k, MatmulKernel)
    bm, bn, bk = k.tile
    rows = bm // k.consumers
    if bm % k.consumers or rows % 64:
        yield Violation("matmul-tile", "kernel.tile[0]", str(bm), f"each of the {k.consumers} consumer warpgroups "
                        "takes a multiple of 64 rows (the wgmma M)", f"use a multiple of {64 * k.consumers}", WGMMA)
    if bn % 8 or bn > 256:
        yield Violation("matmul-tile", "kernel.tile[1]", str(bn), "the wgmma N is a multiple of 8 up to 256",
                        "use one of 8, 16, ..., 256", WGMMA)
    instruction_k = 32 if is_fp8(k, spec) else 16
    if bk % instruction_k:
        yield Violation("matmul-tile", "kernel.tile[2]", str(bk),
                        f"the wgmma K of {'fp8' if instruction_k == 32 else '16-bit'} types is {instruction_k}",
                        f"use a multiple of {instruction_k}", WGMMA)


@RULES.rule("matmul-fp8", "fp8 A and B are both K-major (a_major and b_major k); promote_every is a multiple of "
            "tile[2] (0: never); block scales promote every 128 of K; neither field is for 16-bit types",
            f"{WGMMA_FP8}; {KERNEL}")
def _fp8(spec: Spec) -> Iterator[Violation]:
    k = spec.kernel
    assert isinstance(k, MatmulKernel)
    src = f"{WGMMA_FP8}; {KERNEL}"
    if not is_fp8(k, spec):
        if k.promote_every is not None:
            yield Violation("matmul-fp8", "kernel.promote_every", str(k.promote_every), "only fp8 sums are "
                            "promoted: a 16-bit type's wgmma accumulates in fp32 already", "remove it", KERNEL)
        if k.block_scales:
            yield Violation("matmul-fp8", "kernel.block_scales", "true", "block scales are for fp8 operands",
                            "remove it, or use float8_e4m3 / float8_e5m2 A and B", KERNEL)
        return
    if k.a_major != "k":
        yield Violation("matmul-fp8", "kernel.a_major", repr(k.a_major), "wgmma reads fp8 operands K-major only: "
                        "A must be [M, K]", "use 'k', and give A as [M, K] (tmagen.ops.transpose makes it)", src)
    if k.b_major != "k":
        yield Violation("matmul-fp8", "kernel.b_major", repr(k.b_major), "wgmma reads fp8 operands K-major only: "
                        "B must be [N, K]", "use 'k', and give B as [N, K] (tmagen.ops.transpose makes it)", src)
    every, bk = promote_every(k, spec), k.tile[2]
    if every % bk:
        yield Violation("matmul-fp8", "kernel.promote_every", str(every), f"promotions fall between stages of "
                        f"tile[2] = {bk} of K", f"use a multiple of {bk}, or 0 (never)", KERNEL)
    if k.block_scales and every != SCALE_BLOCK:
        yield Violation("matmul-fp8", "kernel.promote_every", str(every), f"block scales change every "
                        f"{SCALE_BLOCK} of K, where each block's sum is scaled as it is promoted",
                        f"use {SCALE_BLOCK} (and a tile[2] dividing it)", KERNEL)


@RULES.rule("matmul-registers", "the accumulators and the kernel's own state fit a consumer thread's registers",
            f"{KERNEL}; ptxas (setmaxnreg and the launch bounds)")
def _registers(spec: Spec) -> Iterator[Violation]:
    k = spec.kernel
    assert isinstance(k, MatmulKernel)
    bm, bn, _ = k.tile
    if bm % k.consumers:
        return
    why = register_shortfall(bm, bn, k.consumers, 2 if promote_every(k, spec) else 1)
    if why is not None:
        yield Violation("matmul-registers", "kernel.tile", f"{k.tile} with {k.consumers} consumer warpgroup(s)",
                        why, "use a smaller tile, or more consumers",
                        f"{KERNEL}; ptxas (setmaxnreg and the launch bounds)")


@RULES.rule("matmul-boxes", "the tile is whole boxes; a wgmma reads 64 rows of A and all BN rows of a K-major B "
            "from back-to-back boxes; C boxes are [64, n], n whole groups of 8 dividing BN", KERNEL)
def _boxes(spec: Spec) -> Iterator[Violation]:
    ops = _matrices(spec)
    if ops is None:
        return
    k = ops.kernel
    bm, bn, bk = k.tile
    a_box, b_box, c_box = ops.a.box, ops.b.box, ops.c.box
    a_mn, a_k = (a_box[0], a_box[1]) if k.a_major == "k" else (a_box[1], a_box[0])
    a_mn_field, a_k_field = ("box[0]", "box[1]") if k.a_major == "k" else ("box[1]", "box[0]")
    b_mn, b_k = (b_box[0], b_box[1]) if k.b_major == "k" else (b_box[1], b_box[0])
    b_mn_field, b_k_field = ("box[0]", "box[1]") if k.b_major == "k" else ("box[1]", "box[0]")
    for i, fld, value, whole, what in ((ops.ia, a_mn_field, a_mn, bm, "BM"), (ops.ia, a_k_field, a_k, bk, "BK"),
                                       (ops.ib, b_mn_field, b_mn, bn, "BN"), (ops.ib, b_k_field, b_k, bk, "BK")):
        if whole % value:
            yield Violation("matmul-boxes", f"tensors[{i}].{fld}", str(value),
                            f"the tile's {what} = {whole} must be a whole number of boxes",
                            f"use a divisor of {whole}", KERNEL)
    if k.a_major == "k" and a_mn % 64:
        yield Violation("matmul-boxes", f"tensors[{ops.ia}].box[0]", str(a_mn),
                        "each wgmma reads 64 rows of A from one box", "use a multiple of 64", KERNEL)
    if k.a_major == "mn" and 64 % a_mn:
        yield Violation("matmul-boxes", f"tensors[{ops.ia}].box[1]", str(a_mn),
                        "each wgmma reads 64 columns of an MN-major A from whole boxes side by side along M",
                        "use a divisor of 64", KERNEL)
    if k.b_major == "k" and b_box[0] != bn and (b_box[0] * ops.b.box[1] * ops.b.dt.nbytes) % PATTERN_ALIGN:
        yield Violation("matmul-boxes", f"tensors[{ops.ib}].box[0]", str(b_box[0]),
                        f"each wgmma reads all BN = {bn} rows of a K-major B as one operand, so its boxes along N "
                        f"must lie back to back: a box of {b_box[0]} rows of {ops.b.box[1] * ops.b.dt.nbytes} bytes is "
                        f"not a whole number of {PATTERN_ALIGN}-byte swizzle patterns",
                        f"use {bn}, or 64 rows of 128 bytes", KERNEL)
    if c_box[0] != 64 or bn % c_box[1] or c_box[1] % 8:
        yield Violation("matmul-boxes", f"tensors[{ops.ic}].box", str(c_box),
                        f"the epilogue stores 64-row pieces of the {bm} x {bn} tile, whole groups of 8 columns of "
                        "the wgmma's accumulators", f"use [64, n] with n a multiple of 8 dividing {bn}", KERNEL)


CLUSTER_SOURCE = (f"{KERNEL}: a pair's CTAs take turns multicasting a stage's B boxes; PTX ISA 9.7.10.28.5.3 "
                  "cp.async.bulk.tensor (.multicast::cluster)")


@RULES.rule("matmul-cluster", "a tile in clusters of 2 has at least 2 B boxes per stage (the pair's CTAs take turns "
            "loading them for both; with one box there is nothing to share)", CLUSTER_SOURCE)
def _cluster(spec: Spec) -> Iterator[Violation]:
    ops = _matrices(spec)
    if ops is None or ops.kernel.cluster is None or ops.kernel.cluster == 1:
        return
    k, cluster = ops.kernel, ops.kernel.cluster
    _, bn, bk = k.tile
    b_mn, b_k = (ops.b.box[0], ops.b.box[1]) if k.b_major == "k" else (ops.b.box[1], ops.b.box[0])
    if bn % b_mn or bk % b_k:
        return  # rule matmul-boxes
    loads = bn // b_mn * (bk // b_k)
    if loads < cluster:
        yield Violation("matmul-cluster", "kernel.cluster", str(cluster),
                        f"the tile's stage is {loads} B box ({bn // b_mn} along N x {bk // b_k} along K), fewer than "
                        f"the {cluster} CTAs of a cluster: one would load no B and the cluster would share nothing",
                        "use boxes of half as many rows of B, or cluster 1", CLUSTER_SOURCE)
