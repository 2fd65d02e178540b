"""Every rule a TMA tensor map must meet, each a named check with a stable id.

A check reads normalized arguments (`TensorMapArgs`, the driver's innermost-first order)
and reports `Violation`s: the field, the value found, the limit, the fix and the source.
Fields are named through a `FieldNames`: the driver's names (``boxDim[0]``) for
`check_encode_tiled`, spec paths (``tensors[0].box[-1]``) for specs. Checking never
encodes: `tmagen.render` builds the `CUtensorMap` arguments only from a spec that passed.

Sources, as cited in messages:
  DRV   CUDA Driver API, cuTensorMapEncodeTiled (cuda.h 13.0)
  PTX   PTX ISA 9.x: 5.5.7 "Swizzling Modes", 9.7.9.27 cp.async.bulk.tensor restrictions
  CPG   CUDA Programming Guide: TMA swizzle section, compute-capability tables
  HW    measured by tmagen on an H200 (sm_90, driver 580.159, CUDA 13.0), 2026-11-21;
        the raw observations are in tests/data/hw_h200 and are replayed by the tests
  MMA   PTX ISA 9.7.15.5.1, wgmma shared-memory matrix layouts and descriptor (tmagen.mma)

Errors and warnings. Each rule says whether ``cuTensorMapEncodeTiled`` itself refuses what it
forbids (``driver_refuses``). `check_encode_tiled` reports as errors only the rules the driver
enforces, so that its errors are empty exactly when the driver encodes the arguments (replayed
from tests/data/hw_h200/encode.jsonl.gz); the rest (a box no block's shared memory holds,
INTERLEAVE_32B without SWIZZLE_32B, a null address) are warnings from `diagnose_encode_tiled`:
the map encodes, and a kernel using it cannot run. Specs and `tmagen.tensor_map` describe maps
a kernel uses, so every rule is an error there.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace

from tmagen import limits, toolbox
from tmagen.dtypes import FP8_NAMES, DType
from tmagen.dtypes import lookup as lookup_dtype
from tmagen.enums import E, Interleave, L2Promotion, OobFill, Swizzle
from tmagen.errors import Violation as Violation  # re-exported: rules.Violation is public
from tmagen.limits import TARGETS, Target
from tmagen.swizzle import PATTERNS

DRV = "CUDA Driver API, cuTensorMapEncodeTiled (cuda.h 13.0)"
PTX_SWZ = "PTX ISA 5.5.7, Swizzling Modes"
PTX_TC = "PTX ISA 9.7.9.27, restrictions on cp.async.bulk.tensor"
CPG = "CUDA Programming Guide, TMA swizzle and compute-capability tables"
HW = "measured on an H200 (sm_90, driver 580.159), see tests/data/hw_h200"
MMA = "PTX ISA 9.7.15.5.1, wgmma shared-memory matrix layouts and descriptor"


@dataclass(frozen=True)
class Rule:
    id: str
    summary: str
    source: str
    documented: bool  # False: found by experiment, in no NVIDIA document
    check: Callable[[TensorMapArgs, FieldNames], Iterator[Violation]] = field(repr=False, compare=False)
    # False: cuTensorMapEncodeTiled encodes such arguments, and a kernel using the map meets the
    # problem; `check_encode_tiled` makes it a warning, not an error.
    driver_refuses: bool = True
    # False: what the driver does was not replayed from the oracle data but inferred (see the rule)
    driver_measured: bool = True

    @property
    def encode_severity(self) -> str:
        """How `check_encode_tiled` / `tmagen diagnose` report it: "error" where the driver refuses."""
        return "error" if self.driver_refuses else "warning"


RULES: dict[str, Rule] = {}


Check = Callable[["TensorMapArgs", "FieldNames"], Iterator[Violation]]  # one rule's check


def rule(rule_id: str, summary: str, source: str, *, documented: bool = True, driver_refuses: bool = True,
         driver_measured: bool = True) -> Callable[[Check], Check]:
    def register(fn: Check) -> Check:
        RULES[rule_id] = Rule(rule_id, summary, source, documented, fn, driver_refuses, driver_measured)
        return fn
    return register


# ----------------------------------------------------------------------------- arguments
@dataclass(frozen=True)
class TensorMapArgs:
    """The arguments of cuTensorMapEncodeTiled, innermost first, plus what a spec adds."""

    dtype: DType
    rank: int
    global_address: int
    global_dim: tuple[int, ...]
    global_strides: tuple[int, ...]  # bytes, rank - 1 entries: dims 1..rank-1
    box_dim: tuple[int, ...]
    element_strides: tuple[int, ...]
    interleave: Interleave
    swizzle: Swizzle
    l2_promotion: L2Promotion
    oob_fill: OobFill
    target: Target
    # Known only to a spec: the kernel's use of the map and where the box lands.
    smem_offset: int | None = None
    stores: bool = False  # a kernel copies shared -> global through this map
    loads: bool = True
    start_coords: tuple[tuple[int, ...], ...] = ()  # innermost first, as the kernel issues them
    requested_swizzle: tuple[str, str] | None = None  # a spec's (mode, atomicity), before mapping
    kernel_smem_bytes: int | None = None  # shared memory (dynamic and static) of the kernel using the map
    kernel_threads: int | None = None  # threads per block of that kernel
    kernel_kind: str | None = None  # that kernel's kind (inspect, copy, ...), for fixes naming its fields
    mma: MmaUse | None = None  # the box is a tensor-core operand
    l2_hint: str = "normal"  # the spec's L2 eviction priority for the map's copies
    reduce: str | None = None  # the map writes by this reduction (tmagen.toolbox.REDUCE_OPS)
    kernel_l2_hints: bool = True  # the kernel using the map passes its l2_hint to its copies
    kernel_reduces: bool = True  # the kernel using the map reduces through it where it says so, or never writes it

    @property
    def elem_bytes(self) -> float:
        return float(self.dtype.size)

    @property
    def inner_box_bytes(self) -> float:
        return self.box_dim[0] * self.elem_bytes if self.box_dim else 0.0

    @property
    def wide_alignment(self) -> bool:
        return self.interleave is Interleave.B32 or self.dtype.name in ("u4x16_align16", "u6x16_align16")

    @property
    def loaded_elements(self) -> tuple[int, ...]:
        """Elements TMA loads per dimension: ceil(box / elementStride); dimension 0 takes no
        stride without interleave (DRV)."""
        per = [math.ceil(b / max(e, 1)) for b, e in zip(self.box_dim, self.element_strides)]
        if self.interleave is Interleave.NONE and per:
            per[0] = self.box_dim[0]
        return tuple(per)

    @property
    def smem_footprint(self) -> int:
        """Shared-memory bytes the box occupies: rows at the swizzle span's pitch (HW)."""
        per = self.loaded_elements
        if not per:
            return 0
        inner = math.ceil(per[0] * self.elem_bytes)
        return math.prod(per[1:]) * PATTERNS[self.swizzle].row_pitch(inner)


@dataclass(frozen=True)
class MmaUse:
    """A box that a wgmma reads as operand A or B, K-major or MN-major (tmagen.mma)."""

    operand: str  # "a" or "b"
    major: str  # "k" or "mn"
    mn_boxes: int = 1  # boxes side by side along M/N in one operand tile


class FieldNames:
    """How messages name fields: the driver's names, innermost first."""

    def dim(self, i: int) -> str:
        return f"globalDim[{i}]"

    def stride(self, i: int) -> str:  # i indexes globalStrides (dimension i + 1)
        return f"globalStrides[{i}]"

    def box(self, i: int) -> str:
        return f"boxDim[{i}]"

    def estride(self, i: int) -> str:
        return f"elementStrides[{i}]"

    def __init__(self) -> None:
        self.dtype = "tensorDataType"
        self.rank = "tensorRank"
        self.address = "globalAddress"
        self.interleave = "interleave"
        self.swizzle = "swizzle"
        self.l2 = "l2Promotion"
        self.oob = "oobFill"
        self.target = "arch"
        self.smem_offset = "smem_offset"
        self.coords = "coords"
        self.atomicity = "swizzle"
        self.kernel = "kernel"
        self.mma = "mma"
        self.l2_hint = "l2_hint"
        self.reduce = "reduce"

    def coord(self, k: int) -> str:
        """The innermost start coordinate of copy k."""
        return f"{self.coords}[{k}][0]"

    def enum(self, value: Interleave | Swizzle | L2Promotion | OobFill) -> str:
        return value.driver_name

    def dtype_name(self, dtype: DType) -> str:
        return f"CU_TENSOR_MAP_DATA_TYPE_{dtype.driver_name}"


def _fail(rule_id: str, fld: str, value: object, why: str, fix: str) -> Violation:
    return Violation(rule_id, fld, str(value), why, fix, RULES[rule_id].source)


def _bytes(n: float) -> str:
    return f"{int(n)}" if float(n).is_integer() else f"{n:g}"


# ----------------------------------------------------------------------------- rules
@rule("rank-range", "tensorRank is 1 to 5", DRV)
def _rank_range(a: TensorMapArgs, n: FieldNames) -> Iterator[Violation]:
    if not 1 <= a.rank <= limits.MAX_RANK:
        yield _fail("rank-range", n.rank, a.rank, f"TMA handles 1 to {limits.MAX_RANK} dimensions",
                    "merge contiguous dimensions, or split the copy")


@rule("interleave-rank", "an interleaved layout has rank 3 or more", DRV)
def _interleave_rank(a: TensorMapArgs, n: FieldNames) -> Iterator[Violation]:
    if a.interleave is not Interleave.NONE and a.rank < limits.MIN_INTERLEAVED_RANK:
        yield _fail("interleave-rank", n.interleave, n.enum(a.interleave),
                    f"interleaved layouts need rank >= {limits.MIN_INTERLEAVED_RANK} (rank is {a.rank})",
                    f"use {n.enum(Interleave.NONE)}, or describe the tensor with its NC/xHWCx dimensions")


@rule("global-address-alignment",
      "globalAddress is 16-byte aligned; 32 with INTERLEAVE_32B or the ALIGN16B packed types", DRV)
def _address_alignment(a: TensorMapArgs, n: FieldNames) -> Iterator[Violation]:
    need = limits.GLOBAL_ALIGN_BYTES_WIDE if a.wide_alignment else limits.GLOBAL_ALIGN_BYTES
    if a.global_address % need:
        if n.address.endswith(".alignment"):  # a spec's promise, not an address: nothing lies "past" anything
            yield _fail("global-address-alignment", n.address, a.global_address,
                        f"the tensor must start on a {need}-byte boundary, which a pointer aligned to "
                        f"{a.global_address} bytes need not", f"promise an alignment that is a multiple of {need} "
                        "(and allocate so that it holds)")
            return
        yield _fail("global-address-alignment", n.address, _addr(a.global_address),
                    f"the tensor must start on a {need}-byte boundary (it is {a.global_address % need} past one)",
                    f"allocate or offset the tensor so that its address is a multiple of {need}")


def _addr(x: int) -> str:
    return hex(x) if x >= 4096 else str(x)


@rule("global-address-not-null",
      "globalAddress is not null (the driver encodes a null address: a warning for it)",
      f"{DRV}; a kernel's copy through address 0 faults. Measured on an H100 (driver 580.159, 2026-11-24, "
      "tests/data/hw_h100/null_address.json): the driver encodes address 0 (CUTLASS's grouped and ptr-array "
      "GEMMs rely on it, replacing the address later)", driver_refuses=False)
def _address_not_null(a: TensorMapArgs, n: FieldNames) -> Iterator[Violation]:
    if a.global_address == 0:
        yield _fail("global-address-not-null", n.address, "0 (null)",
                    "a copy through the map reads or writes address 0 and faults",
                    "pass the tensor's device pointer, or replace the address (cuTensorMapReplaceAddress) "
                    "before any kernel uses the map")


@rule("global-dim-range", "each globalDim is 1 to 2^32", DRV)
def _dim_range(a: TensorMapArgs, n: FieldNames) -> Iterator[Violation]:
    for i, d in enumerate(a.global_dim):
        if not 1 <= d <= limits.MAX_GLOBAL_DIM:
            fix = ("split the tensor along this dimension" if d > 0 else "drop empty tensors before the copy"
                   if d == 0 else "an extent counts elements: pass the tensor's real extent (a negative one is "
                   "usually a size computed the wrong way round)")
            yield _fail("global-dim-range", n.dim(i), d, "each dimension holds 1 to 2^32 elements", fix)


@rule("packed-dim-multiple",
      "packed types: globalDim[0] a multiple of 128 (ALIGN16B) or 2 (16U4_ALIGN8B)", DRV)
def _packed_dim(a: TensorMapArgs, n: FieldNames) -> Iterator[Violation]:
    need = {"u4x16_align16": limits.PACKED_ALIGN16_DIM_MULTIPLE, "u6x16_align16": limits.PACKED_ALIGN16_DIM_MULTIPLE,
            "u4x16_align8": limits.PACKED_ALIGN8_DIM_MULTIPLE}.get(a.dtype.name)
    if need and a.global_dim and a.global_dim[0] % need:
        yield _fail("packed-dim-multiple", n.dim(0), a.global_dim[0],
                    f"{a.dtype.name} needs the innermost extent to be a multiple of {need} values",
                    f"pad the innermost dimension to {-(-a.global_dim[0] // need) * need}")


@rule("global-stride-multiple",
      "each globalStride is a multiple of 16 bytes; 32 with INTERLEAVE_32B or the ALIGN16B packed types", DRV)
def _stride_multiple(a: TensorMapArgs, n: FieldNames) -> Iterator[Violation]:
    need = limits.GLOBAL_ALIGN_BYTES_WIDE if a.wide_alignment else limits.GLOBAL_ALIGN_BYTES
    for i, s in enumerate(a.global_strides):
        if s % need:
            yield _fail("global-stride-multiple", n.stride(i), f"{s} bytes",
                        f"strides must be multiples of {need} bytes",
                        f"pad each row to {-(-s // need) * need} bytes")


@rule("global-stride-limit", "each globalStride is below 2^40 bytes (a negative one is far above, as the driver "
      "reads it)", DRV)
def _stride_limit(a: TensorMapArgs, n: FieldNames) -> Iterator[Violation]:
    for i, s in enumerate(a.global_strides):
        if not 0 <= s < limits.STRIDE_LIMIT_BYTES:
            fix = ("use a smaller tensor, or split it into several tensor maps" if s > 0 else
                   "TMA walks each dimension forwards through distinct rows: pass a copy with positive strides "
                   "(a flipped view made contiguous)")
            yield _fail("global-stride-limit", n.stride(i), f"{s} bytes", "strides are 0 to 2^40 - 1 bytes", fix)


@rule("global-stride-nonzero", "each globalStride is above 0: a zero stride repeats one row along its dimension",
      f"{DRV} (0 is a multiple of 16); measured on an H100 (driver 580.159, 2026-11-24, "
      "tests/data/hw_h100/oracle_wide_strides.json): the driver encodes a zero stride", driver_refuses=False)
def _stride_nonzero(a: TensorMapArgs, n: FieldNames) -> Iterator[Violation]:
    for i, s in enumerate(a.global_strides):
        if s == 0:
            yield _fail("global-stride-nonzero", n.stride(i), "0 bytes",
                        "a zero stride repeats one row for every index of the dimension: loads broadcast it, and a "
                        "store through the map writes the same bytes from several box rows",
                        "pass a contiguous copy (a broadcast view made contiguous)")


@rule("box-dim-range", "each boxDim is 1 to 256", DRV)
def _box_range(a: TensorMapArgs, n: FieldNames) -> Iterator[Violation]:
    for i, b in enumerate(a.box_dim):
        if not 1 <= b <= limits.MAX_BOX_DIM:
            yield _fail("box-dim-range", n.box(i), b, f"a box is 1 to {limits.MAX_BOX_DIM} elements per dimension",
                        f"use {n.box(i)} <= {limits.MAX_BOX_DIM} and issue several copies")


@rule("box-inner-bytes-multiple-of-16",
      "boxDim[0] x element size is a multiple of 16 bytes, with and without interleave",
      f"{DRV} (interleave none); {HW} (every interleave)")
def _box_inner_multiple(a: TensorMapArgs, n: FieldNames) -> Iterator[Violation]:
    inner = a.inner_box_bytes
    if a.box_dim and inner % limits.BOX_INNER_MULTIPLE_BYTES:
        per = limits.BOX_INNER_MULTIPLE_BYTES / a.elem_bytes
        yield _fail("box-inner-bytes-multiple-of-16", n.box(0),
                    f"{a.box_dim[0]} {a.dtype.name} = {_bytes(inner)} bytes",
                    "the innermost box row must be a multiple of 16 bytes",
                    f"use {n.box(0)} a multiple of {_bytes(per)}")


@rule("packed-box-inner", "ALIGN16B packed types: boxDim[0] is 128", DRV)
def _packed_box(a: TensorMapArgs, n: FieldNames) -> Iterator[Violation]:
    if (a.dtype.name in ("u4x16_align16", "u6x16_align16") and a.box_dim
            and a.box_dim[0] != limits.PACKED_ALIGN16_BOX_INNER):
        yield _fail("packed-box-inner", n.box(0), a.box_dim[0], f"{a.dtype.name} moves rows of exactly 128 values",
                    f"use {n.box(0)} = 128")


@rule("element-stride-range", "each elementStride is 1 to 8", DRV)
def _estride_range(a: TensorMapArgs, n: FieldNames) -> Iterator[Violation]:
    for i, e in enumerate(a.element_strides):
        if not 1 <= e <= limits.MAX_ELEMENT_STRIDE:
            yield _fail("element-stride-range", n.estride(i), e,
                        f"element strides are 1 to {limits.MAX_ELEMENT_STRIDE}", "use 1 for a dense box")


@rule("interleave-32b-needs-swizzle-32b",
      "INTERLEAVE_32B requires SWIZZLE_32B (documented; the driver encodes other swizzles: a warning for it)", DRV,
      driver_refuses=False)
def _interleave32(a: TensorMapArgs, n: FieldNames) -> Iterator[Violation]:
    if a.interleave is Interleave.B32 and a.swizzle is not Swizzle.B32:
        yield _fail("interleave-32b-needs-swizzle-32b", n.swizzle, n.enum(a.swizzle),
                    "an INTERLEAVE_32B layout is documented only with SWIZZLE_32B", f"use {n.enum(Swizzle.B32)}")


def _wider_swizzle(a: TensorMapArgs, n: FieldNames) -> str:
    """", or the 128B swizzle" where a wider swizzle holds the row; nothing where none does."""
    for wider in (Swizzle.B64, Swizzle.B128):
        if PATTERNS[wider].span > PATTERNS[a.swizzle].span and a.inner_box_bytes <= PATTERNS[wider].span:
            return f", or {n.enum(wider)}"
    return ""


# What makes a kernel's shared memory or block smaller, by its kind: the fields it has.
_KERNEL_SMEM_FIX = {
    "inspect": "use a smaller box (the kernel holds one box)",
    "copy": "use fewer stages (kernel.stages), fewer boxes per stage (kernel.boxes_per_stage), or a smaller box",
    "transpose": "use fewer stages (kernel.stages), fewer tiles per stage (kernel.tiles_per_stage), or a smaller box",
    "matmul": "use fewer stages (kernel.stages) or a smaller tile (kernel.tile)",
}
_KERNEL_THREADS_FIX = {
    "transpose": "use fewer tiles per stage (kernel.tiles_per_stage) or a smaller box (fewer micro-tiles per tile)",
    "matmul": "use fewer consumer warpgroups (kernel.consumers)",
}


@rule("box-inner-within-swizzle-span",
      "without interleave, boxDim[0] x element size fits the swizzle span (32, 64 or 128 bytes)", DRV)
def _span(a: TensorMapArgs, n: FieldNames) -> Iterator[Violation]:
    span = PATTERNS[a.swizzle].span
    if a.interleave is Interleave.NONE and span and a.box_dim and a.inner_box_bytes > span:
        most = int(span / a.elem_bytes)
        yield _fail("box-inner-within-swizzle-span", n.box(0),
                    f"{a.box_dim[0]} {a.dtype.name} = {_bytes(a.inner_box_bytes)} bytes",
                    f"the {a.swizzle.spec_name} swizzle holds at most {span} bytes per row",
                    f"use {n.box(0)} <= {most} (and several boxes side by side)" + _wider_swizzle(a, n))


@rule("u6-no-interleave", "16U6_ALIGN16B requires interleave none", DRV)
def _u6_interleave(a: TensorMapArgs, n: FieldNames) -> Iterator[Violation]:
    if a.dtype.name == "u6x16_align16" and a.interleave is not Interleave.NONE:
        yield _fail("u6-no-interleave", n.interleave, n.enum(a.interleave),
                    "u6x16_align16 cannot be interleaved", f"use {n.enum(Interleave.NONE)}")


_PACKED_SWIZZLES = {  # swizzle -> directions, from DRV
    "u6x16_align16": {Swizzle.NONE: "load, store", Swizzle.B128: "load, store",
                      Swizzle.B128_ATOM_32B: "load, store", Swizzle.B128_ATOM_64B: "store"},
    "u4x16_align16": {Swizzle.NONE: "load", Swizzle.B128: "load", Swizzle.B128_ATOM_32B: "load"},
}


@rule("packed-swizzle", "the ALIGN16B packed types allow only some swizzles, some only to load or to store",
      f"{DRV}; {PTX_TC}")
def _packed_swizzle(a: TensorMapArgs, n: FieldNames) -> Iterator[Violation]:
    allowed = _PACKED_SWIZZLES.get(a.dtype.name)
    if allowed is None:
        return
    directions = allowed.get(a.swizzle)
    used = [d for d, on in (("load", a.loads), ("store", a.stores)) if on]
    if directions is None or any(d not in directions for d in used):
        choices = ", ".join(f"{s.spec_name} ({d})" for s, d in allowed.items())
        yield _fail("packed-swizzle", n.swizzle, n.enum(a.swizzle),
                    f"{a.dtype.name} allows {choices}"
                    + (f" and this map is used to {' and '.join(used)}" if used else ""),
                    "pick a swizzle from that list")


@rule("oob-nan-float-only", "NaN out-of-bounds fill needs a floating-point, non-packed type", DRV)
def _oob_nan(a: TensorMapArgs, n: FieldNames) -> Iterator[Violation]:
    if a.oob_fill is OobFill.NAN_REQUEST_ZERO_FMA and (not a.dtype.is_float or a.dtype.packed):
        yield _fail("oob-nan-float-only", n.oob, n.enum(a.oob_fill),
                    f"{a.dtype.name} is not a floating-point type", f"use {n.enum(OobFill.NONE)} (zero fill)")


@rule("target-atom-swizzle", "the 128B atom swizzles need sm_100a",
      f"{PTX_SWZ}; {HW}: the driver refuses them on sm_90")
def _target_atom(a: TensorMapArgs, n: FieldNames) -> Iterator[Violation]:
    if a.swizzle >= Swizzle.B128_ATOM_32B and not a.target.atom_swizzles:
        yield _fail("target-atom-swizzle", n.swizzle, n.enum(a.swizzle),
                    f"{a.target.name} has no 128B atom swizzles (Hopper returns CUDA_ERROR_INVALID_VALUE)",
                    "use 128B with 16B atomicity, or target sm_100a (which cannot run on Hopper)")


@rule("target-packed-dtype", "the packed 16U4/16U6 types need sm_100a",
      f"{PTX_TC}; {HW}: the driver refuses them on sm_90")
def _target_packed(a: TensorMapArgs, n: FieldNames) -> Iterator[Violation]:
    if a.dtype.packed and not a.target.packed_types:
        yield _fail("target-packed-dtype", n.dtype, n.dtype_name(a.dtype),
                    f"{a.target.name} has no packed sub-byte types",
                    "carry the data as uint8, or target sm_100a (which cannot run on Hopper)")


@rule("box-bytes-driver-limit",
      "prod(floor(boxDim[i] / elementStrides[i])) x element size is at most 228 KiB (233472 bytes)",
      f"{HW}: in no document; the driver counts with floor, not ceil", documented=False)
def _driver_box_limit(a: TensorMapArgs, n: FieldNames) -> Iterator[Violation]:
    counted = a.elem_bytes * math.prod(b // max(e, 1) for b, e in zip(a.box_dim, a.element_strides))
    if counted > a.target.driver_box_limit:
        yield _fail("box-bytes-driver-limit", "boxDim",
                    f"{list(a.box_dim)} = {_bytes(counted)} bytes as the driver counts",
                    f"cuTensorMapEncodeTiled refuses boxes over {a.target.driver_box_limit} bytes",
                    "use a smaller box and issue several copies")


@rule("box-fits-shared-memory",
      "the box's shared-memory footprint (rows at the swizzle pitch) fits a block's shared memory "
      "(the driver encodes larger boxes: a warning for it)",
      f"{CPG}: 227 KB per block on 9.0 and 10.0; {HW}: narrow rows take the full span", driver_refuses=False)
def _box_fits(a: TensorMapArgs, n: FieldNames) -> Iterator[Violation]:
    offset = a.smem_offset or 0
    need = a.smem_footprint + offset
    if need > a.target.smem_per_block_optin:
        yield _fail("box-fits-shared-memory", "boxDim", f"{list(a.box_dim)} = {need} bytes of shared memory"
                    + (f" (with smem_offset {offset})" if offset else ""),
                    f"a block of {a.target.name} has at most {a.target.smem_per_block_optin} bytes",
                    "use a smaller box and issue several copies")


@rule("atomicity-needs-128B", "an atomicity other than 16B needs the 128B mode", "PTX ISA 5.5.7, Table 14")
def _atomicity_mode(a: TensorMapArgs, n: FieldNames) -> Iterator[Violation]:
    if a.requested_swizzle and a.requested_swizzle[1] != "16B" and a.requested_swizzle[0] != "128B":
        mode, atom = a.requested_swizzle
        yield _fail("atomicity-needs-128B", n.atomicity, atom,
                    f"only the 128B mode has atomicities other than 16B (mode is {mode})",
                    'use atomicity "16B", or mode "128B"')


# --- rules only a spec can break: where the box lands, and how a kernel uses the map
@rule("interleave-unmeasured",
      "the spec's boxes are not interleaved: tmagen's layout model and kernels do not cover interleaved boxes",
      "measured on an H200 by the reliability campaign: every interleaved box it drew (16B and 32B, rows of one "
      "chunk and wider, about 80 specs) faulted, hung or mismatched the model; tmagen diagnose still checks them")
def _interleave_unmeasured(a: TensorMapArgs, n: FieldNames) -> Iterator[Violation]:
    if a.interleave is not Interleave.NONE:
        yield _fail("interleave-unmeasured", n.interleave, n.enum(a.interleave),
                    "where TMA puts an interleaved box in shared memory is not what tmagen's model says (measured: "
                    "the kernels built on it fault, hang or mismatch)",
                    f"use {n.enum(Interleave.NONE)} with the NC/xHWCx dimensions as plain ones, or check the map "
                    "alone with tmagen diagnose")


@rule("smem-offset-alignment", "the box's shared-memory address is a multiple of 128 bytes",
      f"{CPG} (alignment table); {HW}: 16 or 64 bytes past a 128-byte boundary faults with cudaErrorMisalignedAddress")
def _smem_align(a: TensorMapArgs, n: FieldNames) -> Iterator[Violation]:
    align = limits.TMA_SMEM_ALIGN_BYTES
    if a.smem_offset is not None and a.smem_offset % align:
        yield _fail("smem-offset-alignment", n.smem_offset, a.smem_offset,
                    f"a TMA copy to or from shared memory off a {align}-byte boundary faults",
                    f"use a multiple of {align}, e.g. {a.smem_offset // align * align}")


@rule("smem-offset-in-pattern", "smem_offset lies inside the 1024-byte swizzle pattern", PTX_SWZ)
def _smem_in_pattern(a: TensorMapArgs, n: FieldNames) -> Iterator[Violation]:
    if a.smem_offset is not None and not 0 <= a.smem_offset < limits.SMEM_PATTERN_BYTES:
        yield _fail("smem-offset-in-pattern", n.smem_offset, a.smem_offset,
                    f"the offset is taken within the {limits.SMEM_PATTERN_BYTES}-byte pattern (0 to "
                    f"{limits.SMEM_PATTERN_BYTES - limits.TMA_SMEM_ALIGN_BYTES} in steps of "
                    f"{limits.TMA_SMEM_ALIGN_BYTES})",
                    f"use {a.smem_offset % limits.SMEM_PATTERN_BYTES}, its place in the pattern")


@rule("kernel-fits-shared-memory", "the kernel's shared-memory buffers (all its stages) fit a block",
      f"{CPG}: 227 KB per block on 9.0 and 10.0")
def _kernel_fits(a: TensorMapArgs, n: FieldNames) -> Iterator[Violation]:
    if a.kernel_smem_bytes is not None and a.kernel_smem_bytes > a.target.smem_per_block_optin:
        yield _fail("kernel-fits-shared-memory", n.kernel, f"{a.kernel_smem_bytes} bytes of shared memory",
                    f"a block of {a.target.name} has at most {a.target.smem_per_block_optin} bytes",
                    _KERNEL_SMEM_FIX.get(a.kernel_kind or "", "use a smaller box"))


@rule("store-inner-extent-16-bytes",
      "a map the kernel stores through has rows (globalDim[0] x element size) of whole 16 bytes",
      f"{HW}: a TMA store writes a row's last 16-byte chunk whole, past the row's end (the reliability "
      "campaign found the padding of strided outputs overwritten)", driver_refuses=False)
def _store_inner(a: TensorMapArgs, n: FieldNames) -> Iterator[Violation]:
    chunk = limits.CHUNK_BYTES
    if a.stores and a.global_dim and (a.global_dim[0] * a.elem_bytes) % chunk:
        row = a.global_dim[0] * a.elem_bytes
        per = _bytes(chunk / math.gcd(chunk, int(a.elem_bytes)) if a.elem_bytes >= 1 else chunk)
        yield _fail("store-inner-extent-16-bytes", n.dim(0), f"{a.global_dim[0]} {a.dtype.name} = {_bytes(row)} bytes",
                    f"a TMA store writes whole {chunk}-byte chunks, so the bytes after the row's end, up to the next "
                    f"multiple of {chunk}, would be overwritten",
                    f"make the rows a multiple of {chunk} bytes ({per} elements), padding the tensor")


@rule("kernel-threads-per-block", "the kernel's block has at most 1024 threads",
      f"{CPG}: maximum threads per block; the launch fails with CUDA_ERROR_INVALID_VALUE beyond")
def _kernel_threads(a: TensorMapArgs, n: FieldNames) -> Iterator[Violation]:
    if a.kernel_threads is not None and a.kernel_threads > limits.MAX_THREADS_PER_BLOCK:
        yield _fail("kernel-threads-per-block", n.kernel, f"{a.kernel_threads} threads",
                    f"a block has at most {limits.MAX_THREADS_PER_BLOCK} threads",
                    _KERNEL_THREADS_FIX.get(a.kernel_kind or "", "use a smaller box"))


@rule("flip-8b-load-only", "128B_ATOM_32B_FLIP_8B is for loads only", PTX_TC)
def _flip_load_only(a: TensorMapArgs, n: FieldNames) -> Iterator[Violation]:
    if a.swizzle is Swizzle.B128_ATOM_32B_FLIP_8B and a.stores:
        yield _fail("flip-8b-load-only", n.swizzle, n.enum(a.swizzle),
                    "the 8-byte flip exists only for global-to-shared copies, and this kernel stores through the map",
                    "use 128B_atom_32B for maps the kernel stores through")


@rule("start-coordinate-16-bytes", "a copy's innermost start coordinate x element size is a multiple of 16 bytes",
      f"{HW}: otherwise the copy stops the context with cudaErrorIllegalInstruction")
def _start_coord(a: TensorMapArgs, n: FieldNames) -> Iterator[Violation]:
    for k, c in enumerate(a.start_coords):
        if c and (c[0] * a.elem_bytes) % limits.CHUNK_BYTES:
            per = _bytes(limits.CHUNK_BYTES / a.elem_bytes)
            yield _fail("start-coordinate-16-bytes", n.coord(k), c[0],
                        f"{c[0]} {a.dtype.name} = {_bytes(c[0] * a.elem_bytes)} bytes is not a multiple of "
                        f"{limits.CHUNK_BYTES}",
                        f"start the innermost coordinate at a multiple of {per}")


# --- rules of a box that the tensor cores read (wgmma)
MMA_DTYPES = ("bfloat16", "float16", "float8_e4m3", "float8_e5m2")
MMA_8BIT = FP8_NAMES


def _mma_rows(a: TensorMapArgs) -> int:
    return math.prod(a.box_dim[1:]) if a.box_dim else 0


@rule("mma-dtype", "a wgmma operand box holds bfloat16, float16 or an fp8 type (float8_e4m3, float8_e5m2); "
      "fp8 operands are K-major (the instruction transposes 16-bit types only: PTX ISA 9.7.15.5, imm-trans-a/b)",
      MMA)
def _mma_dtype(a: TensorMapArgs, n: FieldNames) -> Iterator[Violation]:
    if not a.mma:
        return
    if a.dtype.name not in MMA_DTYPES:
        yield _fail("mma-dtype", n.dtype, n.dtype_name(a.dtype),
                    f"tmagen builds wgmma descriptors for {', '.join(MMA_DTYPES)} operands (tf32 and the integer "
                    "types are not generated)", "use one of those, or drop the mma marking")
    elif a.dtype.name in MMA_8BIT and a.mma.major != "k":
        yield _fail("mma-dtype", n.mma + ".major", repr(a.mma.major),
                    f"wgmma reads {a.dtype.name} operands K-major only: its transpose immediates exist for .f16 and "
                    ".bf16 alone", "store the operand K-major (transpose it first: tmagen.ops.transpose)")


@rule("mma-layout-for-target", "the box's swizzle is a shared-memory layout of the target's tensor cores "
      "(wgmma on sm_90a: none, 32B, 64B, 128B; tcgen05 on sm_100a also 128B with 32-byte atoms)",
      f"{MMA}; PTX ISA 9.7.16.4.1, tcgen05 shared-memory descriptor")
def _mma_layout(a: TensorMapArgs, n: FieldNames) -> Iterator[Violation]:
    if not a.mma:
        return
    pattern = PATTERNS[a.swizzle]
    hopper = a.target.name == "sm_90a"
    code = pattern.wgmma_layout_type if hopper else pattern.tcgen05_layout_type
    if code is None:
        yield _fail("mma-layout-for-target", n.swizzle, n.enum(a.swizzle),
                    f"the {'wgmma' if hopper else 'tcgen05'} descriptor of {a.target.name} has no such layout",
                    "use 128B" + ("" if hopper else " or 128B with 32B atomicity"))


@rule("mma-plain-layout", "a wgmma operand box has no interleave and element strides of 1", MMA)
def _mma_plain(a: TensorMapArgs, n: FieldNames) -> Iterator[Violation]:
    if not a.mma:
        return
    if a.interleave is not Interleave.NONE:
        yield _fail("mma-plain-layout", n.interleave, n.enum(a.interleave),
                    "the tensor cores read rows of a plain (non-interleaved) box", f"use {n.enum(Interleave.NONE)}")
    for i, e in enumerate(a.element_strides):
        if e != 1:
            yield _fail("mma-plain-layout", n.estride(i), e, "a strided box leaves gaps the tensor cores would read",
                        "use element strides of 1")


@rule("mma-core-matrix-width",
      "a wgmma operand box without swizzle is 16 bytes wide; an MN-major swizzled one is one span wide", MMA)
def _mma_width(a: TensorMapArgs, n: FieldNames) -> Iterator[Violation]:
    if not a.mma or not a.box_dim:
        return
    span = PATTERNS[a.swizzle].span
    inner = a.inner_box_bytes
    if not span and inner != 16:
        yield _fail("mma-core-matrix-width", n.box(0), f"{a.box_dim[0]} {a.dtype.name} = {_bytes(inner)} bytes",
                    "without a swizzle a core matrix is 8 rows of 16 packed bytes, so a box must be one 16-byte "
                    "column of them", f"use {n.box(0)} = {_bytes(16 / a.elem_bytes)} and several boxes, or a swizzle")
    elif span and a.mma.major == "mn" and inner != span:
        yield _fail("mma-core-matrix-width", n.box(0), f"{a.box_dim[0]} {a.dtype.name} = {_bytes(inner)} bytes",
                    f"an MN-major {a.swizzle.spec_name} atom is {span} bytes of M/N wide, and a narrower box leaves "
                    "a gap in it", f"use {n.box(0)} = {_bytes(span / a.elem_bytes)}")


@rule("mma-instruction-k", "a wgmma operand box holds whole K steps of one instruction (32 bytes of K)", MMA)
def _mma_k(a: TensorMapArgs, n: FieldNames) -> Iterator[Violation]:
    if not a.mma or not a.box_dim:
        return
    k_elems = 32 / a.elem_bytes
    if a.mma.major == "k" and PATTERNS[a.swizzle].span and a.inner_box_bytes % 32:
        yield _fail("mma-instruction-k", n.box(0), f"{a.box_dim[0]} {a.dtype.name} = {_bytes(a.inner_box_bytes)} bytes",
                    "one wgmma reads K in steps of 32 bytes, which must not straddle two boxes",
                    f"use a multiple of {_bytes(k_elems)} elements")
    if a.mma.major == "mn" and _mma_rows(a) % k_elems:
        yield _fail("mma-instruction-k", n.box(1), f"{_mma_rows(a)} rows of K",
                    f"one wgmma reads {_bytes(k_elems)} rows of K, which must not straddle two boxes",
                    f"use a multiple of {_bytes(k_elems)} rows")


@rule("mma-core-matrix-rows", "a K-major wgmma operand box has whole core matrices of 8 rows", MMA)
def _mma_rows_rule(a: TensorMapArgs, n: FieldNames) -> Iterator[Violation]:
    if a.mma and a.mma.major == "k" and a.box_dim and _mma_rows(a) % 8:
        yield _fail("mma-core-matrix-rows", n.box(1), f"{_mma_rows(a)} rows of M/N",
                    "the tensor cores read M/N in core matrices of 8 rows", "use a multiple of 8 rows")



@rule("mma-k-major-boxes-contiguous",
      "K-major wgmma operand boxes side by side along M/N continue each other's rows (no gap between boxes)", MMA)
def _mma_contiguous(a: TensorMapArgs, n: FieldNames) -> Iterator[Violation]:
    if not a.mma or a.mma.major != "k" or a.mma.mn_boxes == 1 or not a.box_dim:
        return
    gap = (-(a.smem_footprint + (a.smem_offset or 0))) % limits.SMEM_PATTERN_BYTES
    if gap or a.smem_offset:
        yield _fail("mma-k-major-boxes-contiguous", n.mma, f"{{mn_boxes: {a.mma.mn_boxes}}} with boxes of "
                    f"{a.smem_footprint} bytes at smem_offset {a.smem_offset or 0}",
                    "the descriptor steps 8 rows at a time (SBO) across the boxes, and boxes that do not fill whole "
                    "1024-byte patterns from offset 0 leave gaps between them",
                    "use one box along M/N (more rows per box), or boxes of a multiple of 8 rows at smem_offset 0")


# --- rules of the toolbox's copies: reductions and L2 hints (tmagen.toolbox)
@rule("reduce-op-for-type", "a map's reduction is one its element type has (add: u32 s32 u64 f32 f16 bf16; min, max: "
      "u32 s32 u64 s64 f16 bf16; inc, dec: u32; and, or, xor: u32 s32 u64, not s64, which faults on the GPU)",
      f"{toolbox.PTX_RED}; and, or, xor on s64: {toolbox.HW_RED}")
def _reduce_type(a: TensorMapArgs, n: FieldNames) -> Iterator[Violation]:
    if a.reduce is None:
        return
    problem = toolbox.reduce_problem(a.reduce, a.dtype.name)
    if problem:
        yield _fail("reduce-op-for-type", n.reduce, repr(a.reduce), *problem)


@rule("reduce-in-kernel", "a tensor that reduces belongs to a spec without a kernel (or an inspect one): tmagen's "
      "copy, transpose and matmul kernels store plainly",
      "tmagen's kernels (templates/<kind>/kernels.cuh.j2); a user's kernel reduces with tma::reduce_Nd")
def _reduce_kernel(a: TensorMapArgs, n: FieldNames) -> Iterator[Violation]:
    if a.reduce is not None and a.kernel_kind is not None and not a.kernel_reduces:
        yield _fail("reduce-in-kernel", n.reduce, repr(a.reduce),
                    f"the {a.kernel_kind} kernel writes with plain TMA stores, so the reduction would not happen",
                    "drop kernel (the header's tma::reduce_Nd does it in a kernel of your own), or drop reduce")


@rule("l2-hint-in-kernel", "a tensor's l2_hint is one its kernel passes to its copies (copy, transpose and inspect "
      "do; the matmul does not yet)", "tmagen's kernels (templates/<kind>/kernels.cuh.j2)")
def _hint_kernel(a: TensorMapArgs, n: FieldNames) -> Iterator[Violation]:
    if a.l2_hint != "normal" and a.kernel_kind is not None and not a.kernel_l2_hints:
        yield _fail("l2-hint-in-kernel", n.l2_hint, repr(a.l2_hint),
                    f"the {a.kernel_kind} kernel issues its copies without a cache policy, so the hint would be "
                    "ignored", 'use "normal", or a spec without a kernel and tma::policy() in your own')


# ----------------------------------------------------------------------------- entry points
# Rules only a spec can break (where the box lands, the kernel that uses it, the tensor cores'
# use of it): check_encode_tiled and the Python path's checks of arrays leave them out.
SPEC_ONLY_RULES = frozenset({"interleave-unmeasured", "kernel-threads-per-block", "atomicity-needs-128B",
                             "kernel-fits-shared-memory", "smem-offset-alignment", "smem-offset-in-pattern",
                             "flip-8b-load-only", "start-coordinate-16-bytes", "reduce-op-for-type",
                             "reduce-in-kernel", "l2-hint-in-kernel"}
                            | {r for r in RULES if r.startswith("mma-")})
ENCODE_RULES = [r for r in RULES.values() if r.id not in SPEC_ONLY_RULES]


def run_rules(args: TensorMapArgs, names: FieldNames, rules: Sequence[Rule] | None = None) -> list[Violation]:
    """Every violation of ``rules`` (all of them by default), in rule order."""
    found: list[Violation] = []
    for r in (rules if rules is not None else list(RULES.values())):
        found.extend(r.check(args, names))
    return found


@dataclass(frozen=True)
class EncodeFindings:
    """What `diagnose_encode_tiled` finds: ``errors``, why ``cuTensorMapEncodeTiled`` refuses the
    arguments (empty exactly when it encodes them), and ``warnings``, rules the driver lets pass
    that a kernel using the map still meets (severity "warning")."""

    errors: list[Violation]
    warnings: list[Violation]


def check_encode_tiled(*, dtype: int | str, rank: int, global_address: int,
                       global_dim: Sequence[int], global_strides: Sequence[int],
                       box_dim: Sequence[int], element_strides: Sequence[int],
                       interleave: int | str, swizzle: int | str, l2_promotion: int | str,
                       oob_fill: int | str, arch: str = "sm_90a") -> list[Violation]:
    """Why ``cuTensorMapEncodeTiled`` would refuse these arguments; empty means it encodes them.

    Only rules the driver enforces: `diagnose_encode_tiled` adds the warnings (a box no block
    holds, INTERLEAVE_32B without SWIZZLE_32B, a null address). Arguments are the driver's,
    innermost first: ``global_strides`` has ``rank - 1`` byte strides, enums are their
    ``CU_TENSOR_MAP_*`` integers or names. Never raises for bad values: each becomes a violation.
    """
    return diagnose_encode_tiled(
        dtype=dtype, rank=rank, global_address=global_address, global_dim=global_dim,
        global_strides=global_strides, box_dim=box_dim, element_strides=element_strides, interleave=interleave,
        swizzle=swizzle, l2_promotion=l2_promotion, oob_fill=oob_fill, arch=arch).errors


def diagnose_encode_tiled(*, dtype: int | str, rank: int, global_address: int,
                          global_dim: Sequence[int], global_strides: Sequence[int],
                          box_dim: Sequence[int], element_strides: Sequence[int],
                          interleave: int | str, swizzle: int | str, l2_promotion: int | str,
                          oob_fill: int | str, arch: str = "sm_90a") -> EncodeFindings:
    """The errors of `check_encode_tiled` and the warnings: every encode rule, each reported with
    its rule's `Rule.encode_severity`."""
    names = FieldNames()
    problems: list[Violation] = []

    def bad(fld: str, value: object, why: str, fix: str) -> None:
        problems.append(Violation("argument-form", fld, repr(value), why, fix, DRV))

    def parse_enum(cls: type[E], value: object, fld: str) -> E | None:
        try:
            return cls.parse(value)
        except (ValueError, TypeError) as exc:
            bad(fld, value, str(exc).split("; ")[0], "; ".join(str(exc).split("; ")[1:]) or "use a listed value")
            return None

    try:
        dt = lookup_dtype(dtype) if isinstance(dtype, (int, str)) and not isinstance(dtype, bool) else None
    except KeyError:
        dt = None
    if dt is None:
        bad(names.dtype, dtype, "it is not a CUtensorMapDataType", "use 0 to 15 or a CU_TENSOR_MAP_DATA_TYPE_* name")
    il, sw = parse_enum(Interleave, interleave, names.interleave), parse_enum(Swizzle, swizzle, names.swizzle)
    l2, oob = parse_enum(L2Promotion, l2_promotion, names.l2), parse_enum(OobFill, oob_fill, names.oob)
    target = TARGETS.get(arch) if isinstance(arch, str) else None
    if target is None:
        bad(names.target, arch, "tmagen knows no such target", f"use one of {', '.join(TARGETS)}")
    if not _is_int(rank):
        bad(names.rank, rank, "it is not an integer", "pass the number of dimensions")
    if not _is_int(global_address) or global_address < 0:
        bad(names.address, global_address, "it is not an address", "pass the tensor's device pointer as an integer")
    arrays: dict[str, tuple[int, ...]] = {}
    for fld, value, length in (("globalDim", global_dim, rank),
                               ("globalStrides", global_strides, rank - 1 if _is_int(rank) else None),
                               ("boxDim", box_dim, rank), ("elementStrides", element_strides, rank)):
        seq = list(value) if isinstance(value, (list, tuple)) else None
        if seq is None or not all(_is_int(x) for x in seq):
            bad(fld, value, "it is not a list of integers", "pass one integer per dimension, innermost first")
        elif _is_int(length) and 1 <= rank <= limits.MAX_RANK and len(seq) != length:
            bad(fld, value, f"it has {len(seq)} entries and tensorRank = {rank} needs {length}",
                "pass one entry per dimension" + (" after the innermost" if fld == "globalStrides" else ""))
        else:
            arrays[fld] = tuple(int(x) for x in seq)
    # every None here has added a problem
    if problems or dt is None or target is None or il is None or sw is None or l2 is None or oob is None:
        # A malformed call: say so, and also what the rules say of what could be read.
        if dt is not None and _is_int(rank) and not (1 <= rank <= limits.MAX_RANK):
            problems.extend(_rank_range(_stub(rank), names))
        return EncodeFindings(problems, [])
    args = TensorMapArgs(dt, int(rank), int(global_address), arrays["globalDim"], arrays["globalStrides"],
                         arrays["boxDim"], arrays["elementStrides"], il, sw, l2, oob, target)
    found = run_rules(args, names, ENCODE_RULES)
    return EncodeFindings([v for v in found if RULES[v.rule].driver_refuses],
                          [replace(v, severity="warning") for v in found if not RULES[v.rule].driver_refuses])


def _is_int(x: object) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def _stub(rank: int) -> TensorMapArgs:
    return TensorMapArgs(lookup_dtype(0), rank, 0, (), (), (), (), Interleave.NONE, Swizzle.NONE,
                         L2Promotion.NONE, OobFill.NONE, TARGETS[limits.DEFAULT_TARGET])
