"""TMA's toolbox beyond the plain load and store, as the device header offers it (namespace ``tma``):
reductions into global memory, L2 cache hints, prefetches, and multicast to the CTAs of a cluster.
Each with the facts it rests on and its named rules, sources cited.

The reductions (``tma::reduce_Nd<op>``, ``cp.reduce.async.bulk.tensor``) exist for some element
types only: `REDUCE_TYPES`, the PTX ISA's table (`PTX_REDUCE_TYPES`) less the cases that fault on
the GPU (`HW_REDUCE_FAULTS`: and, or, xor on int64). The cluster rules (`CLUSTER_RULES`) check a
cluster launch and a multicast's CTA mask, for kernels of the user's own (the header's primitives)
and for the kinds that launch clusters; `check_cluster` runs them all.

Sources, as cited in messages:
  PTX_RED   PTX ISA 9.4, 9.7.10.28.5.4 cp.reduce.async.bulk.tensor (valid .redOp and element types)
  PTX_TC    PTX ISA 9.4, 9.7.10.28.5.3 cp.async.bulk.tensor (.multicast::cluster, ctaMask, targets)
  PTX_POL   PTX ISA 9.4, 9.7.10.21 createpolicy (fractional L2 eviction priorities)
  HW_RED    measured on an H200: and, or, xor through an int64 map are illegal instructions
  CPG_CL    CUDA Programming Guide, Thread Block Clusters: 8 CTAs portable, 16 on sm_90 with
            cudaFuncAttributeNonPortableClusterSizeAllowed; the grid a multiple of the cluster
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

from tmagen.errors import Violation

PTX_RED = "PTX ISA 9.4, 9.7.10.28.5.4 cp.reduce.async.bulk.tensor (table of .redOp and element types)"
PTX_TC = "PTX ISA 9.4, 9.7.10.28.5.3 cp.async.bulk.tensor (.multicast::cluster and ctaMask)"
PTX_POL = "PTX ISA 9.4, 9.7.10.21 createpolicy"
CPG_CL = ("CUDA Programming Guide, Thread Block Clusters (cluster size limits, "
          "cudaFuncAttributeNonPortableClusterSizeAllowed)")


# ----------------------------------------------------------------------------- reductions
@dataclass(frozen=True)
class ReduceOp:
    """One reduction of ``cp.reduce.async.bulk.tensor``: its spec name, the C++ enumerator of
    ``tma::reduce_op`` (``and`` is a C++ keyword's alternative token, hence ``bit_and``) and the PTX
    qualifier."""

    name: str
    cpp: str
    ptx: str


REDUCE_OPS: dict[str, ReduceOp] = {o.name: o for o in (
    ReduceOp("add", "add", "add"), ReduceOp("min", "min", "min"), ReduceOp("max", "max", "max"),
    ReduceOp("inc", "inc", "inc"), ReduceOp("dec", "dec", "dec"), ReduceOp("and", "bit_and", "and"),
    ReduceOp("or", "bit_or", "or"), ReduceOp("xor", "bit_xor", "xor"))}

# The element types (tmagen's dtype names) each reduction takes, from PTX_RED's table:
#   .add            .u32 .s32 .u64 .f32 .f16 .bf16
#   .min .max       .u32 .s32 .u64 .s64 .f16 .bf16
#   .inc .dec       .u32
#   .and .or .xor   .b32 .b64 (tmagen allows the integer maps of those sizes: a float's bits are no integer)
# No reduction takes 8-bit data, uint16, float64, or the FTZ and TF32 float32 variants (the table
# names .f32 alone), nor the packed types.
_BITS = ("uint32", "int32", "uint64", "int64")
PTX_REDUCE_TYPES: dict[str, tuple[str, ...]] = {
    "add": ("uint32", "int32", "uint64", "float32", "float16", "bfloat16"),
    "min": ("uint32", "int32", "uint64", "int64", "float16", "bfloat16"),
    "max": ("uint32", "int32", "uint64", "int64", "float16", "bfloat16"),
    "inc": ("uint32",),
    "dec": ("uint32",),
    "and": _BITS,
    "or": _BITS,
    "xor": _BITS,
}

# What the hardware says of the table (HW_RED): every op on every type above ran on an H200 and
# matched numpy, except .and, .or and .xor through an int64 map, which the PTX ISA allows (.b64) and
# ptxas assembles but which fault with CUDA_ERROR_ILLEGAL_INSTRUCTION; through a uint64 map the same
# ops are exact. tests/data/hw_h200/reduce_ops.json holds every case; tests/test_hw_replay.py replays it.
HW_RED = ("measured on an NVIDIA H200 (driver 580.159, CUDA 13.0, 2026-11-24): illegal instruction; "
          "tests/data/hw_h200/reduce_ops.json")
HW_REDUCE_FAULTS: frozenset[tuple[str, str]] = frozenset({("and", "int64"), ("or", "int64"), ("xor", "int64")})

# The element types tmagen lets each reduction take: the PTX ISA's table less what faults on the GPU.
REDUCE_TYPES: dict[str, tuple[str, ...]] = {
    op: tuple(d for d in types if (op, d) not in HW_REDUCE_FAULTS) for op, types in PTX_REDUCE_TYPES.items()}


def reduce_ops_for(dtype: str) -> tuple[str, ...]:
    """The reductions an element type of ``dtype`` allows, in `REDUCE_OPS` order."""
    return tuple(op for op in REDUCE_OPS if dtype in REDUCE_TYPES[op])


def reduce_problem(op: str, dtype: str) -> tuple[str, str] | None:
    """Why reduction ``op`` cannot run on ``dtype`` data and what to do, or None where it can."""
    if dtype in REDUCE_TYPES[op]:
        return None
    ptx = REDUCE_OPS[op].ptx
    if (op, dtype) in HW_REDUCE_FAULTS:
        why = (f"cp.reduce.async.bulk.tensor .{ptx} on {dtype} elements faults on the GPU (illegal instruction), "
               f"although the PTX ISA's table allows .{ptx} on .b64 and ptxas assembles it")
        fix = (f"use a 32-bit type: split the 64-bit values into two uint32 halves, which .{ptx} treats "
               f"independently (or a uint64 map over the same memory: .{ptx} on uint64 was measured exact)")
        return why, fix
    allowed = reduce_ops_for(dtype)
    why = f"cp.reduce.async.bulk.tensor has no .{ptx} on {dtype} elements (it takes " \
          f"{', '.join(PTX_REDUCE_TYPES[op])})"
    fix = (f"use one of {', '.join(allowed)} on {dtype}" if allowed else
           f"no reduction takes {dtype}: reduce in a type that has one (float32, int32, uint32, ...)")
    return why, fix


# ----------------------------------------------------------------------------- L2 cache hints
# A spec's l2_hint -> the createpolicy priority (PTX_POL: .L2::evict_first, .L2::evict_last,
# .L2::evict_normal; fraction 1.0) and the header's policy maker.
L2_HINTS: dict[str, str] = {"normal": "policy_evict_normal", "evict_first": "policy_evict_first",
                            "evict_last": "policy_evict_last"}


# ----------------------------------------------------------------------------- clusters and multicast
MAX_CLUSTER_PORTABLE = 8  # CTAs of a cluster on every GPU that has clusters (CPG_CL)
MAX_CLUSTER_NON_PORTABLE = 16  # sm_90 with cudaFuncAttributeNonPortableClusterSizeAllowed (CPG_CL)
CTA_MASK_BITS = 16  # ctaMask of .multicast::cluster (its ::16b default width, PTX_TC)
MULTICAST_TARGETS = ("sm_90a", "sm_100a")  # PTX_TC: advised for the arch-specific targets only


@dataclass(frozen=True)
class ClusterUse:
    """A cluster launch and, where the kernel multicasts, the CTA masks it uses. Dimensions are
    (x, y, z), as CUDA writes a cluster; ``grid`` the launch's grid (None: not known yet)."""

    dims: tuple[int, ...]
    non_portable: bool = False  # the kernel sets cudaFuncAttributeNonPortableClusterSizeAllowed
    cta_masks: tuple[int, ...] = ()
    target: str = "sm_90a"
    grid: tuple[int, ...] | None = None

    @property
    def size(self) -> int:
        return math.prod(self.dims)


ClusterCheck = Callable[[ClusterUse], Iterator[Violation]]


@dataclass(frozen=True)
class ClusterRule:
    id: str
    summary: str
    source: str
    check: ClusterCheck = field(repr=False, compare=False)


CLUSTER_RULES: dict[str, ClusterRule] = {}


def _rule(rule_id: str, summary: str, source: str) -> Callable[[ClusterCheck], ClusterCheck]:
    def register(fn: ClusterCheck) -> ClusterCheck:
        CLUSTER_RULES[rule_id] = ClusterRule(rule_id, summary, source, fn)
        return fn
    return register


def _fail(rule_id: str, fld: str, value: object, why: str, fix: str) -> Violation:
    return Violation(rule_id, fld, str(value), why, fix, CLUSTER_RULES[rule_id].source)


@_rule("cluster-dims-positive", "a cluster has 1 to 3 dimensions, each at least 1", CPG_CL)
def _dims(c: ClusterUse) -> Iterator[Violation]:
    if not 1 <= len(c.dims) <= 3 or any(d < 1 for d in c.dims):
        yield _fail("cluster-dims-positive", "cluster", list(c.dims), "a cluster is (x, y, z) CTAs, each at least 1",
                    "give 1 to 3 positive dimensions, e.g. [2, 1, 1]")


@_rule("cluster-size", "a cluster holds at most 8 CTAs (16 on sm_90 with the non-portable attribute)", CPG_CL)
def _size(c: ClusterUse) -> Iterator[Violation]:
    if any(d < 1 for d in c.dims):
        return
    most = MAX_CLUSTER_NON_PORTABLE if c.non_portable and c.target == "sm_90a" else MAX_CLUSTER_PORTABLE
    if c.size > most:
        fix = (f"use at most {MAX_CLUSTER_NON_PORTABLE} CTAs" if c.size > MAX_CLUSTER_NON_PORTABLE or c.non_portable
               else f"use at most {MAX_CLUSTER_PORTABLE} CTAs, or allow up to {MAX_CLUSTER_NON_PORTABLE} on sm_90 with "
               "cudaFuncSetAttribute(kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1)")
        yield _fail("cluster-size", "cluster", f"{list(c.dims)} = {c.size} CTAs",
                    f"a cluster launch of more than {most} CTAs fails"
                    + ("" if c.non_portable else " (8 is the portable size)"), fix)


@_rule("cluster-grid-multiple", "each grid dimension is a multiple of the cluster's", CPG_CL)
def _grid(c: ClusterUse) -> Iterator[Violation]:
    if c.grid is None or any(d < 1 for d in c.dims):
        return
    for axis, (g, d) in enumerate(zip(c.grid, c.dims)):
        if g % d:
            yield _fail("cluster-grid-multiple", f"grid[{axis}]", g,
                        f"the grid is tiled by clusters of {d} CTAs along {'xyz'[axis]}, and {g} is no multiple",
                        f"launch {-(-g // d) * d} CTAs along {'xyz'[axis]} (the extra ones doing nothing)")


@_rule("multicast-mask-in-cluster", "a multicast's CTA mask is not empty and names only CTAs of the cluster "
       "(bit i is %cluster_ctarank i)", PTX_TC)
def _mask(c: ClusterUse) -> Iterator[Violation]:
    for k, mask in enumerate(c.cta_masks):
        limit = min(c.size, CTA_MASK_BITS) if all(d >= 1 for d in c.dims) else CTA_MASK_BITS
        if mask <= 0 or mask >> limit:
            why = ("an empty mask sends the box nowhere, and no mbarrier completes" if mask == 0 else
                   f"bits at and above {limit} name no CTA of a cluster of {c.size}" if mask > 0 else
                   "a mask is a 16-bit set of CTA ranks")
            yield _fail("multicast-mask-in-cluster", f"cta_masks[{k}]", hex(mask) if mask > 0 else mask, why,
                        f"use a mask within {hex((1 << limit) - 1)} with at least one bit set")


@_rule("multicast-target", "multicast is for the arch-specific Hopper and Blackwell targets (sm_90a, sm_100a)",
       f"{PTX_TC}: Target ISA notes")
def _target(c: ClusterUse) -> Iterator[Violation]:
    if c.cta_masks and c.target not in MULTICAST_TARGETS:
        yield _fail("multicast-target", "target", c.target,
                    ".multicast::cluster is advised only for sm_90a and sm_100a (other targets may run it much slower)",
                    f"compile for {' or '.join(MULTICAST_TARGETS)}")


def check_cluster(dims: Sequence[int], *, cta_masks: Sequence[int] = (), non_portable: bool = False,
                  target: str = "sm_90a", grid: Sequence[int] | None = None) -> list[Violation]:
    """Every violation of the cluster rules by a launch of clusters of ``dims`` (x, y, z) that
    multicasts with ``cta_masks``, on a ``grid`` (x, y, z) where given."""
    use = ClusterUse(tuple(int(d) for d in dims), non_portable, tuple(int(m) for m in cta_masks), target,
                     tuple(int(g) for g in grid) if grid is not None else None)
    found: list[Violation] = []
    for r in CLUSTER_RULES.values():
        found.extend(r.check(use))
    return found


__all__ = ["REDUCE_OPS", "REDUCE_TYPES", "PTX_REDUCE_TYPES", "HW_REDUCE_FAULTS", "HW_RED", "ReduceOp", "reduce_ops_for",
           "reduce_problem", "L2_HINTS",
           "ClusterUse", "ClusterRule", "CLUSTER_RULES", "check_cluster", "MAX_CLUSTER_PORTABLE",
           "MAX_CLUSTER_NON_PORTABLE", "CTA_MASK_BITS"]
