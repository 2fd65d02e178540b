"""The spec a user writes: tensors, their TMA boxes and swizzles, the target, the kernel (if any).

Shapes, strides, boxes and coordinates are written outermost first, as numpy and PyTorch
write them; only the emitted host code speaks the driver's innermost-first order.
`load_spec` reads JSON and validates the form (pydantic); `check_spec` applies every
hardware and driver rule of `tmagen.rules` and names each field by its path.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Any, Literal, Union, get_args

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator
from pydantic_core import PydanticCustomError

from tmagen import limits, plan, schema_errors
from tmagen.dtypes import DTYPES, UINT8_ELEMENT_TYPES, DType
from tmagen.enums import Interleave, L2Promotion, OobFill, Swizzle
from tmagen.errors import ModelError, RuleError, SpecError
from tmagen.jsonio import read_json
from tmagen.rules import FieldNames, MmaUse, TensorMapArgs, Violation, run_rules
from tmagen.mma import OperandTile
from tmagen.swizzle import PATTERNS, BoxLayout

CPP_KEYWORDS = frozenset("""
alignas alignof and and_eq asm auto bitand bitor bool break case catch char char8_t char16_t
char32_t class compl concept const consteval constexpr constinit const_cast continue co_await
co_return co_yield decltype default delete do double dynamic_cast else enum explicit export
extern false float for friend goto if inline int long mutable namespace new noexcept not not_eq
nullptr operator or or_eq private protected public register reinterpret_cast requires return
short signed sizeof static static_assert static_cast struct switch template this thread_local
throw true try typedef typeid typename union unsigned using virtual void volatile wchar_t while
xor xor_eq main
""".split())
IDENTIFIER = re.compile(r"[A-Za-z][A-Za-z0-9_]{0,62}")

SwizzleMode = Literal["none", "32B", "64B", "128B"]
Atomicity = Literal["16B", "32B", "32B_flip_8B", "64B"]
TargetName = Literal["sm_90a", "sm_100a"]
ElementType = Literal[tuple(UINT8_ELEMENT_TYPES)]  # type: ignore[valid-type]

_MODES, _ATOMICITIES = get_args(SwizzleMode), get_args(Atomicity)
_ATOM_SWIZZLE = {"16B": Swizzle.B128, "32B": Swizzle.B128_ATOM_32B,
                 "32B_flip_8B": Swizzle.B128_ATOM_32B_FLIP_8B, "64B": Swizzle.B128_ATOM_64B}


def _identifier(value: str, what: str) -> str:
    if not IDENTIFIER.fullmatch(value) or value in CPP_KEYWORDS or value.startswith("__"):
        raise ValueError(
            f"a {what} must be a C identifier of up to 63 letters, digits and underscores, starting "
            "with a letter and not a C++ keyword, since it names files, functions and types")
    return value


class _Model(BaseModel):
    # strict: JSON true is no extent, "32" and 32.0 are no integers
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


def _form_error(field: str, message: str) -> PydanticCustomError:
    """An error about ``field``, a path relative to the object whose validator raises it."""
    return PydanticCustomError("tmagen_form", "{field} {message}", {"field": field, "message": message})


class SwizzleSpec(_Model):
    """The shared-memory swizzle: a mode, and for 128B an atomicity (sm_100a for all but 16B)."""

    mode: SwizzleMode = Field("none", description="Swizzle span: none, 32B, 64B or 128B (bytes per row).")
    atomicity: Atomicity = Field(
        "16B", description="Bytes kept together while swizzling. Only 128B allows other than 16B, and only "
        "on sm_100a: 32B, 32B_flip_8B (loads only) or 64B.")

    @field_validator("mode", "atomicity", mode="before")
    @classmethod
    def _any_case(cls, v: object) -> object:
        """"128b" is "128B", as tmagen explain, diagnose and tensor_map take it."""
        if isinstance(v, str):
            return {c.lower(): c for c in (*_MODES, *_ATOMICITIES)}.get(v.lower(), v)
        return v

    @property
    def driver(self) -> Swizzle:
        """The CUtensorMapSwizzle; an atomicity the mode does not allow is reported by the rules."""
        if self.mode == "128B":
            return _ATOM_SWIZZLE[self.atomicity]
        return {"none": Swizzle.NONE, "32B": Swizzle.B32, "64B": Swizzle.B64}[self.mode]


class MmaSpec(_Model):
    """Marks a tensor's box as a tensor-core operand: the device header then builds its wgmma
    (and, for sm_100a, tcgen05) shared-memory matrix descriptors (tmagen.mma)."""

    operand: Literal["a", "b"] = Field(description="The wgmma operand the box feeds: a (M x K) or b (N x K).")
    major: Literal["k", "mn"] = Field("k", description="Which dimension is contiguous in the tensor: k (A [M,K], "
                                      "B [N,K]) or mn (A [K,M], B [K,N]; 16-bit types only).")
    mn_boxes: int = Field(1, ge=1, le=64, description="Boxes of this map side by side along M (a) or N (b) in one "
                          "operand tile, each starting a pattern-aligned stride after the previous one.")


class TensorSpec(_Model):
    """One tensor in global memory and the TMA box that moves it."""

    name: str = Field(description="C identifier naming the tensor in generated code.")
    dtype: Literal[tuple(DTYPES)] = Field(  # type: ignore[valid-type]
        description="Element type: one of the 16 CUtensorMapDataType values (int8 and fp8 data travel as uint8: "
        "see element_type).")
    element_type: ElementType | None = Field(  # type: ignore[valid-type]
        None, description="What the bytes of a uint8 tensor hold, for the accessors: int8 (at() gives int8_t&), "
        "fp8_e4m3 (__nv_fp8_e4m3&) or fp8_e5m2 (__nv_fp8_e5m2&). The map still moves UINT8. Default: the dtype's "
        "own type.")
    shape: list[Annotated[int, Field(ge=1)]] = Field(
        min_length=1, max_length=limits.MAX_RANK,
        description="Extent of each dimension in elements, outermost first (numpy order).")
    strides: list[Annotated[int, Field(ge=1)]] | None = Field(
        None, description="Stride of each dimension in elements, outermost first (as torch.Tensor.stride()); "
        "the innermost must be 1. Default: contiguous.")
    alignment: int = Field(
        16, ge=1, le=1 << 32, description="Bytes to which the caller promises the tensor's base pointer is aligned "
        "(at most 2^32); the generated host code checks it at run time.")
    box: list[Annotated[int, Field(ge=1)]] = Field(
        min_length=1, max_length=limits.MAX_RANK,
        description="The TMA box in elements, outermost first; box[-1] is the contiguous row.")
    element_strides: list[Annotated[int, Field(ge=1)]] | None = Field(
        None, description="Traversal step per dimension, outermost first (1 to 8; the innermost is ignored "
        "without interleave). Default: all 1.")
    swizzle: SwizzleSpec = Field(default_factory=SwizzleSpec, description="How TMA arranges the box in "
                                 "shared memory; the mode alone (\"64B\") is short for {\"mode\": \"64B\"}.")
    interleave: Literal["none", "16B", "32B"] = Field("none", description="Interleaved layouts (NC/8HWC8, "
                                                      "NC/16HWC16) for rank 3 and up.")
    l2_promotion: Literal["none", "64B", "128B", "256B"] = Field("none", description="L2 fetch size.")
    oob_fill: Literal["zero", "nan"] = Field("zero", description="Fill for elements outside the tensor; nan "
                                             "only for floating-point types.")
    smem_offset: int = Field(
        0, description="Where the box lands in shared memory: bytes past a 1024-byte boundary, a multiple of "
        "128 below 1024. Non-zero starts the swizzle pattern in its middle (the PTX base offset).")
    mma: MmaSpec | None = Field(None, description="The box is a wgmma operand: emit its matrix descriptors.")

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        return _identifier(v, "tensor name")

    @field_validator("swizzle", mode="before")
    @classmethod
    def _swizzle_shorthand(cls, v: object) -> object:
        """``"swizzle": "64B"`` is short for ``{"mode": "64B"}``."""
        return {"mode": v} if isinstance(v, str) else v

    @model_validator(mode="after")
    def _ranks_agree(self) -> "TensorSpec":
        rank = len(self.shape)
        for fld in ("strides", "box", "element_strides"):
            value = getattr(self, fld)
            if value is not None and len(value) != rank:
                raise _form_error(fld, f"has {len(value)} entries but shape has {rank}: give one per dimension")
        if self.element_type is not None and self.dtype != "uint8":
            raise _form_error("element_type", f"= {self.element_type!r}, but only uint8 data holds another type "
                              f"(TMA has no 8-bit signed or fp8 type); a {self.dtype} tensor's elements are "
                              f"{self.dt.cpp}: drop element_type, or use dtype uint8")
        if self.strides is not None and self.strides[-1] != 1:
            raise _form_error("strides[-1]", f"= {self.strides[-1]}, but TMA reads rows contiguously: the innermost "
                              "stride must be 1 (transpose the tensor, or reorder its dimensions)")
        return self

    @property
    def dt(self) -> DType:
        return DTYPES[self.dtype]

    @property
    def rank(self) -> int:
        return len(self.shape)

    @property
    def cpp_type(self) -> str:
        """The CUDA C++ type of one element, as the accessors give it."""
        return UINT8_ELEMENT_TYPES[self.element_type] if self.element_type else self.dt.cpp

    @property
    def element_strides_or_default(self) -> list[int]:
        return self.element_strides or [1] * self.rank

    @property
    def strides_or_default(self) -> list[int]:
        """Strides in elements, outermost first."""
        if self.strides is not None:
            return list(self.strides)
        out, run = [], 1
        for n in reversed(self.shape):
            out.append(run)
            run *= n
        return out[::-1]

    def driver_strides(self) -> tuple[int, ...]:
        """globalStrides in bytes for dimensions 1..rank-1, innermost first."""
        size = self.dt.size
        return tuple(int(s * size) for s in self.strides_or_default[::-1][1:])


class InspectKernel(_Model):
    """One TMA load of each tensor's box at ``coords``, then the raw shared memory copied out."""

    kind: Literal["inspect"]
    coords: list[Annotated[int, Field(ge=-(1 << 31), le=(1 << 31) - 1)]] | None = Field(
        None, description="Start coordinates of the box, outermost first, 32-bit signed integers as TMA takes them "
        "(a box may start outside the tensor). Default: the origin.")


TILES_PER_BLOCK = ("Tiles (boxes) each block takes, consecutive in the walk, in whole stages; the grid then has "
                   "one block per that many tiles and the hardware's block scheduler balances the "
                   "multiprocessors (on an H200 this beat a persistent grid by 3 to 10%: a static share "
                   "waits for the slowest multiprocessor). null: a persistent grid of blocks_per_sm blocks "
                   "per multiprocessor, each taking every grid-th stage of tiles.")


class CopyKernel(_Model):
    """Global -> shared -> global through TMA load and store, a few boxes per block."""

    kind: Literal["copy"]
    stages: int = Field(4, ge=2, le=16, description="Shared-memory buffers in flight per block (at least 2: "
                        "a buffer is refilled while the next one's store is in flight).")
    blocks_per_sm: int = Field(1, ge=1, le=32, description="Blocks per multiprocessor the kernel is "
                               "compiled for (its launch bounds cap registers to fit them), and the size of a "
                               "persistent grid.")
    boxes_per_stage: int = Field(1, ge=1, le=32, description="Boxes each stage loads and stores at once, under "
                                 "one mbarrier: more bytes per round trip where boxes are small (rank 1).")
    tiles_per_block: int | None = Field(2, ge=1, le=1024, description=TILES_PER_BLOCK)


class TransposeKernel(_Model):
    """out = in.T (the last two dimensions), read out of swizzled shared memory without bank conflicts."""

    kind: Literal["transpose"]
    stages: int = Field(3, ge=1, le=8, description="Stages of src tiles in flight per block.")
    tiles_per_stage: int | None = Field(None, ge=1, le=8, description="Tiles each stage loads and the block "
                                        "transposes at once (default: as many as 256 threads hold).")
    unit_bytes: int | None = Field(
        None, description="Bytes of one transposed unit, a multiple of the dtype's size (default: one element). "
        "The seed example transposes int4 (16-byte) units carried as int32.")
    blocks_per_sm: int = Field(1, ge=1, le=32, description="Blocks per multiprocessor the kernel is "
                               "compiled for (its launch bounds cap registers to fit them), and the size of a "
                               "persistent grid.")
    raster_group: int = Field(1024, ge=1, le=1024, description="Tile rows walked together, column by column: 1 "
                              "walks along rows of tiles (reads contiguous, writes strided); the number of tile "
                              "rows or more walks down columns of tiles (writes contiguous; 3 to 8% faster on "
                              "an H200).")
    tiles_per_block: int | None = Field(1, ge=1, le=1024, description=TILES_PER_BLOCK)


class MatmulKernel(_Model):
    """C = A x B^T on the tensor cores (wgmma): A [M, K], B [N, K] (K-major) or [K, N] (MN-major),
    bfloat16 or float16 in, fp32 accumulation, C [M, N] bfloat16, float16 or float32 out. TMA feeds a
    ring of stages from one producer warpgroup; consumer warpgroups multiply; a persistent grid walks
    the tiles of C, and the epilogue stores through shared memory with TMA."""

    kind: Literal["matmul"]
    a: str = Field("a", description="The tensor holding A [M, K] (K contiguous).")
    b: str = Field("b", description="The tensor holding B: [N, K] with b_major k, [K, N] with b_major mn.")
    c: str = Field("c", description="The tensor receiving C [M, N].")
    b_major: Literal["k", "mn"] = Field("k", description="k: B is [N, K] (C = A B^T, both operands K-major); "
                                        "mn: B is [K, N] (C = A B).")
    tile: list[Annotated[int, Field(ge=8)]] = Field(
        [128, 256, 64], min_length=3, max_length=3,
        description="The tile of C a block computes and the K it takes per stage: [BM, BN, BK].")
    consumers: int = Field(2, ge=1, le=4, description="Consumer warpgroups; each multiplies BM / consumers rows "
                           "(a multiple of 64) of the tile.")
    stages: int = Field(4, ge=2, le=8, description="Stages of A and B tiles in flight per block.")
    raster_group: int = Field(8, ge=1, le=64, description="Tile rows walked together, column by column, so that "
                              "the blocks running at once share A and B in L2.")


Kernel = Annotated[Union[InspectKernel, CopyKernel, TransposeKernel, MatmulKernel], Field(discriminator="kind")]


class Spec(_Model):
    """A tmagen spec: what to generate, for which GPU."""

    name: str = Field(description="C identifier naming the generated folder and its symbols.")
    description: str = Field("", description="What the spec is for, in words.")
    target: TargetName = Field("sm_90a", description="sm_90a (Hopper) or sm_100a (Blackwell-only modes and "
                               "types; compiled but not run on Hopper).")
    tensors: list[TensorSpec] = Field(min_length=1, max_length=limits.MAX_TENSORS_PER_SPEC, description="The tensors, one tensor map each. A copy or "
                                      "transpose kernel moves one; inspect makes one kernel per tensor.")
    kernel: Kernel | None = Field(None, description="The kernel to generate, chosen by its kind. Leave it out "
                                  "for maps only: the device header (primitives, layouts, accessors), the host "
                                  "encode API and CMake, for kernels of your own.")
    allow_spills: bool = Field(False, description="Accept kernels that spill registers to local memory "
                               "(the compile report fails the build otherwise).")

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        return _identifier(v, "spec name")

    @model_validator(mode="after")
    def _consistent(self) -> "Spec":
        seen: set[str] = set()
        for i, t in enumerate(self.tensors):
            if t.name in seen:
                raise _form_error(f"tensors[{i}].name", f"= {t.name!r}, but an earlier tensor has this name: "
                                  "names must be unique")
            seen.add(t.name)
        for i, t in enumerate(self.tensors):
            if t.dt.packed:
                raise _form_error(f"tensors[{i}].dtype", f"= {t.dtype!r}: tmagen checks tensor maps of the packed "
                                  "sub-byte types (tmagen diagnose) but generates no kernels for them yet")
        if self.kernel is None:
            return self
        if isinstance(self.kernel, MatmulKernel):
            self._check_matmul(self.kernel)
        elif self.kernel.kind != "inspect" and len(self.tensors) != 1:
            raise _form_error("tensors", f"has {len(self.tensors)} entries, but a {self.kernel.kind} kernel moves "
                              "one tensor")
        if isinstance(self.kernel, TransposeKernel):
            self._check_transpose(self.kernel, self.tensors[0])
        if isinstance(self.kernel, CopyKernel):
            t = self.tensors[0]
            if t.element_strides is not None and any(e != 1 for e in t.element_strides):
                raise _form_error("tensors[0].element_strides", "must be all 1 for a copy: a strided box skips "
                                  "elements, so the copy would not be one")
            if t.interleave != "none":
                raise _form_error("tensors[0].interleave", f"= {t.interleave!r}, but the copy kernel moves plain "
                                  "(non-interleaved) layouts")
        coords = getattr(self.kernel, "coords", None)
        for t in self.tensors:
            if coords is not None and len(coords) != t.rank:
                raise _form_error("kernel.coords", f"has {len(coords)} entries but tensor {t.name!r} has {t.rank} "
                                  "dimensions: give one coordinate per dimension")
        return self

    def _check_matmul(self, k: "MatmulKernel") -> None:
        names = {t.name: i for i, t in enumerate(self.tensors)}
        for fld in ("a", "b", "c"):
            if getattr(k, fld) not in names:
                raise _form_error(f"kernel.{fld}", f"= {getattr(k, fld)!r}, but no tensor has this name: name one of "
                                  f"{sorted(names)}")
        if len({k.a, k.b, k.c}) != 3 or len(self.tensors) != 3:
            raise _form_error("tensors", "must be the three tensors A, B and C of the matmul, each named once by "
                              "kernel.a, kernel.b and kernel.c")
        a, b, c = (self.tensors[names[n]] for n in (k.a, k.b, k.c))
        ia, ib, ic = (names[n] for n in (k.a, k.b, k.c))
        for i, t in ((ia, a), (ib, b), (ic, c)):
            if t.rank != 2:
                raise _form_error(f"tensors[{i}].shape", f"has {t.rank} dimensions, but a matmul operand is a matrix")
            if t.mma is not None:
                raise _form_error(f"tensors[{i}].mma", "is set, but the matmul kernel decides how it reads its "
                                  "operands: remove it")
        for i, t in ((ia, a), (ib, b)):
            if t.oob_fill != "zero":
                raise _form_error(f"tensors[{i}].oob_fill", f"= {t.oob_fill!r}, but the matmul finishes partial tiles "
                                  "with the zeros TMA loads outside A and B: use 'zero'")
        if a.dtype not in ("bfloat16", "float16"):
            raise _form_error(f"tensors[{ia}].dtype", f"= {a.dtype!r}, but the matmul takes bfloat16 or float16 A and B")
        if b.dtype != a.dtype:
            raise _form_error(f"tensors[{ib}].dtype", f"= {b.dtype!r}, but B must have A's type ({a.dtype!r})")
        if c.dtype not in ("bfloat16", "float16", "float32"):
            raise _form_error(f"tensors[{ic}].dtype", f"= {c.dtype!r}, but C is bfloat16, float16 or float32")
        m, kk = a.shape
        n, kb = (b.shape if k.b_major == "k" else b.shape[::-1])
        if kb != kk:
            raise _form_error(f"tensors[{ib}].shape", f"= {b.shape}, but A (tensors[{ia}].shape) is {a.shape}: B needs "
                              f"K = {kk} " + ("([N, K] with b_major k)" if k.b_major == "k" else "([K, N] with b_major mn)"))
        if c.shape != [m, n]:
            raise _form_error(f"tensors[{ic}].shape", f"= {c.shape}, but C of A (tensors[{ia}].shape) {a.shape} and B "
                              f"(tensors[{ib}].shape) {b.shape} is [{m}, {n}]")
        bm, bn, bk = k.tile
        rows = bm // k.consumers
        if bm % k.consumers or rows % 64:
            raise _form_error("kernel.tile[0]", f"= {bm}, but each of the {k.consumers} consumer warpgroups takes a "
                              "multiple of 64 rows (the wgmma M): use a multiple of " + str(64 * k.consumers))
        if bn % 8 or bn > 256:
            raise _form_error("kernel.tile[1]", f"= {bn}, but the wgmma N is a multiple of 8 up to 256")
        if bk % 16:
            raise _form_error("kernel.tile[2]", f"= {bk}, but the wgmma K of 16-bit types is 16: use a multiple of 16")
        need = plan.accumulators(bm, bn, k.consumers) + plan.REGISTERS_BESIDE_ACCUMULATORS
        have = plan.consumer_registers(k.consumers)
        if need > have:
            raise _form_error("kernel.tile", f"= {k.tile} with {k.consumers} consumer warpgroup(s) needs about {need} "
                              f"registers per consumer thread ({plan.accumulators(bm, bn, k.consumers)} accumulators), "
                              f"but {have} are left to each: use a smaller tile, or more consumers")
        a_box, b_box, c_box = a.box, b.box, c.box
        b_mn, b_k = (b_box[0], b_box[1]) if k.b_major == "k" else (b_box[1], b_box[0])
        for i, fld, value, whole, what in ((ia, "box[0]", a_box[0], bm, "BM"), (ia, "box[1]", a_box[1], bk, "BK"),
                                           (ib, "box[0]" if k.b_major == "k" else "box[1]", b_mn, bn, "BN"),
                                           (ib, "box[1]" if k.b_major == "k" else "box[0]", b_k, bk, "BK")):
            if whole % value:
                raise _form_error(f"tensors[{i}].{fld}", f"= {value}, but the tile's {what} = {whole} must be a whole "
                                  f"number of boxes: use a divisor of {whole}")
        if a_box[0] % 64:
            raise _form_error(f"tensors[{ia}].box[0]", f"= {a_box[0]}, but each wgmma reads 64 rows of A from one box: "
                              "use a multiple of 64")
        if k.b_major == "k" and b_box[0] != bn:
            raise _form_error(f"tensors[{ib}].box[0]", f"= {b_box[0]}, but each wgmma reads all BN = {bn} rows of a "
                              f"K-major B from one box: use {bn}")
        if c_box[0] != 64 or bn % c_box[1] or c_box[1] % 8:
            raise _form_error(f"tensors[{ic}].box", f"= {c_box}, but the epilogue stores 64-row pieces of the "
                              f"{bm} x {bn} tile, whole groups of 8 columns of the wgmma's accumulators: use [64, n] "
                              f"with n a multiple of 8 dividing {bn}")

    @staticmethod
    def _check_transpose(kernel: "TransposeKernel", t: TensorSpec) -> None:
        unit = kernel.unit_bytes if kernel.unit_bytes is not None else t.dt.nbytes
        if t.rank not in (2, 3):
            raise _form_error("tensors[0].shape", f"has {t.rank} dimensions, but transpose takes a 2-D or a batched "
                              "(3-D) tensor")
        if unit % t.dt.nbytes or unit not in (1, 2, 4, 8, 16):
            raise _form_error("kernel.unit_bytes", f"= {unit}, but a transposed unit is 1, 2, 4, 8 or 16 bytes and "
                              f"a whole number of {t.dtype} elements")
        per = unit // t.dt.nbytes
        for fld, value in (("shape[-1]", t.shape[-1]), ("box[-1]", t.box[-1])):
            if value % per:
                raise _form_error(f"tensors[0].{fld}", f"= {value}, but it must hold whole {unit}-byte units: "
                                  f"use a multiple of {per}")
        rows_per_block = 16 // unit
        if t.box[-2] % rows_per_block:
            raise _form_error("tensors[0].box[-2]", f"= {t.box[-2]}, but the transpose works on blocks of "
                              f"{rows_per_block} rows x 16 bytes: use a multiple of {rows_per_block}")
        if t.rank == 3 and t.box[0] != 1:
            raise _form_error("tensors[0].box[0]", f"= {t.box[0]}, but a batched transpose moves one matrix per box: "
                              "use 1")
        if t.element_strides is not None and any(e != 1 for e in t.element_strides):
            raise _form_error("tensors[0].element_strides", "must be all 1 for a transpose")


class MapSpec(_Model):
    """One tensor map a kernel uses: its role in the kernel, and the tensor it describes."""

    role: str
    tensor: TensorSpec
    index: int  # the spec tensor it comes from
    derived: bool = False  # built by tmagen from that tensor (the transpose's output)
    stores: bool = False
    unit_bytes: int
    mma: MmaSpec | None = None  # the kernel (or the spec) reads the box with the tensor cores


def kernel_maps(spec: Spec) -> list[MapSpec]:
    """The tensor maps the spec generates, in kernel-parameter order: those its kernel uses, or for a
    spec without a kernel one per tensor, named by the tensor."""
    k = spec.kernel
    if k is None or isinstance(k, InspectKernel):
        return [MapSpec(role=t.name, tensor=t, index=i, unit_bytes=t.dt.nbytes, mma=t.mma)
                for i, t in enumerate(spec.tensors)]
    if isinstance(k, MatmulKernel):
        index = {t.name: i for i, t in enumerate(spec.tensors)}
        a, b, c = (spec.tensors[index[n]] for n in (k.a, k.b, k.c))
        b_mn = b.box[0] if k.b_major == "k" else b.box[1]
        return [MapSpec(role="a", tensor=a, index=index[k.a], unit_bytes=a.dt.nbytes,
                        mma=MmaSpec(operand="a", major="k", mn_boxes=k.tile[0] // a.box[0])),
                MapSpec(role="b", tensor=b, index=index[k.b], unit_bytes=b.dt.nbytes,
                        mma=MmaSpec(operand="b", major=k.b_major, mn_boxes=k.tile[1] // b_mn)),
                MapSpec(role="c", tensor=c, index=index[k.c], stores=True, unit_bytes=c.dt.nbytes)]
    t = spec.tensors[0]
    if isinstance(k, CopyKernel):
        return [MapSpec(role="src", tensor=t, index=0, unit_bytes=t.dt.nbytes),
                MapSpec(role="dst", tensor=t, index=0, stores=True, unit_bytes=t.dt.nbytes)]
    unit = k.unit_bytes if k.unit_bytes is not None else t.dt.nbytes
    per_unit = unit // t.dt.nbytes
    rows, cols = t.shape[-2], t.shape[-1] // per_unit
    box_rows, box_cols = t.box[-2], t.box[-1] // per_unit
    out = t.model_copy(update={
        "shape": [*t.shape[:-2], cols, rows * per_unit],
        "box": [*t.box[:-2], box_cols, box_rows * per_unit],
        "strides": None, "element_strides": None})
    return [MapSpec(role="src", tensor=t, index=0, unit_bytes=unit),
            MapSpec(role="dst", tensor=out, index=0, derived=True, stores=True, unit_bytes=unit)]


# ----------------------------------------------------------------------------- reading
def parse_spec(data: object, source: str = "spec") -> Spec:
    try:
        return Spec.model_validate(data)
    except ValidationError as exc:
        raise SpecError(source, schema_errors.problems(exc)) from None


def load_spec(path: str | Path) -> Spec:
    """Read and validate the form of a spec file (not yet its hardware rules)."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, ValueError) as exc:  # ValueError: undecodable bytes, or a NUL in the path
        raise SpecError(str(p), [f"cannot read the file: {exc.strerror if isinstance(exc, OSError) else exc}"]) from None
    return parse_spec(read_json(text, str(p)), str(p))


def schema() -> dict[str, Any]:
    return Spec.model_json_schema()


# ----------------------------------------------------------------------------- rules
class SpecFieldNames(FieldNames):
    """Names fields by spec path, outermost-first indices; the innermost is written [-1]."""

    def __init__(self, index: int, rank: int, derived: str | None = None, explicit_strides: bool = True) -> None:
        super().__init__()
        self.tensor_rank = rank
        # The transpose's output map swaps the last two dimensions of the user's tensor: name them as
        # the user wrote them.
        self.transposed = derived is not None
        self.explicit_strides = explicit_strides
        prefix = f"tensors[{index}]" + (f" (transposed, as the kernel's {derived} map)" if derived else "")
        self.prefix = prefix
        self.dtype = f"{prefix}.dtype"
        self.address = f"{prefix}.alignment"
        self.interleave = f"{prefix}.interleave"
        self.swizzle = f"{prefix}.swizzle"
        self.l2 = f"{prefix}.l2_promotion"
        self.oob = f"{prefix}.oob_fill"
        self.smem_offset = f"{prefix}.smem_offset"
        self.rank = f"{prefix}.shape"
        self.target = "target"
        self.coords = "kernel.coords"
        self.atomicity = f"{prefix}.swizzle.atomicity"
        self.mma = f"{prefix}.mma"

    def coord(self, k: int) -> str:
        return f"{self.coords}[-1]"

    def _ix(self, driver_index: int) -> str:
        if self.transposed and driver_index in (0, 1):
            driver_index = 1 - driver_index
        return "-1" if driver_index == 0 else str(self.tensor_rank - 1 - driver_index)

    def dim(self, i: int) -> str:
        return f"{self.prefix}.shape[{self._ix(i)}]"

    def stride(self, i: int) -> str:
        name = f"{self.prefix}.strides[{self._ix(i + 1)}]"
        return name if self.explicit_strides else f"{name} (contiguous, from shape)"

    def box(self, i: int) -> str:
        return f"{self.prefix}.box[{self._ix(i)}]"

    def estride(self, i: int) -> str:
        return f"{self.prefix}.element_strides[{self._ix(i)}]"

    def enum(self, value: Interleave | Swizzle | L2Promotion | OobFill) -> str:
        if isinstance(value, Swizzle):
            if value >= Swizzle.B128_ATOM_32B:
                return '{"mode": "128B", "atomicity": "%s"}' % {4: "32B", 5: "32B_flip_8B", 6: "64B"}[int(value)]
            return '{"mode": "%s"}' % value.spec_name
        return value.spec_name

    def dtype_name(self, dtype: DType) -> str:
        return dtype.name


def tensor_map_args(spec: Spec, m: MapSpec) -> TensorMapArgs:
    """The driver's arguments of map ``m`` (innermost first), plus its use by the kernel."""
    t = m.tensor
    smem, threads = _kernel_use(spec, m)
    kernel = spec.kernel
    coords: tuple[tuple[int, ...], ...] = ()
    if isinstance(kernel, InspectKernel) and kernel.coords is not None:
        coords = (tuple(kernel.coords[::-1]),)
    return TensorMapArgs(
        dtype=t.dt, rank=t.rank, global_address=t.alignment,
        global_dim=tuple(t.shape[::-1]), global_strides=t.driver_strides(),
        box_dim=tuple(t.box[::-1]), element_strides=tuple(t.element_strides_or_default[::-1]),
        interleave=Interleave.parse(t.interleave), swizzle=t.swizzle.driver,
        l2_promotion=L2Promotion.parse(t.l2_promotion), oob_fill=OobFill.parse(t.oob_fill),
        target=limits.TARGETS[spec.target], smem_offset=t.smem_offset,
        stores=m.stores, loads=not m.stores, start_coords=coords,
        requested_swizzle=(t.swizzle.mode, t.swizzle.atomicity), kernel_smem_bytes=smem, kernel_threads=threads,
        kernel_kind=kernel.kind if kernel is not None else None,
        mma=MmaUse(m.mma.operand, m.mma.major, m.mma.mn_boxes) if m.mma else None)


def _kernel_use(spec: Spec, m: MapSpec) -> tuple[int | None, int | None]:
    """Shared memory (dynamic and static) and threads of the kernel that uses map ``m``; (0, 0) while
    a box cannot be laid out at all (the rules that it breaks are reported instead), (None, None)
    without a kernel: the box itself is then the budget (rule box-fits-shared-memory), the user's
    kernel adds what it adds."""
    if spec.kernel is None:
        return None, None
    try:
        mine = [k for k in kernel_plans(spec) if m.role in k.maps]
    except ModelError:
        return 0, 0
    return max((k.total_smem_bytes for k in mine), default=0), max((k.threads for k in mine), default=0)


def loaded_box(t: TensorSpec) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """Elements one load brings per dimension and the step between them, outermost first:
    ceil(box / elementStride) at that stride, except the innermost without interleave, which TMA
    traverses whole (DRV). The loaded elements lie in shared memory as a dense box of that shape."""
    steps = list(t.element_strides_or_default)
    if Interleave.parse(t.interleave) is Interleave.NONE:
        steps[-1] = 1
    return tuple(-(-b // e) for b, e in zip(t.box, steps)), tuple(steps)


def box_layout(m: MapSpec) -> BoxLayout:
    """Where TMA puts the box of map ``m`` in shared memory, from its smem_offset on: the elements
    one load brings (fewer than the box with element strides), as a dense box."""
    t = m.tensor
    return BoxLayout(loaded_box(t)[0], t.dt.nbytes, PATTERNS[t.swizzle.driver], t.smem_offset)


def operand_tile(m: MapSpec) -> OperandTile | None:
    """The tensor-core operand tile of map ``m``, if a wgmma reads it."""
    if m.mma is None:
        return None
    layout = box_layout(m)
    return OperandTile(layout, m.mma.major, m.mma.mn_boxes, plan.box_stride(layout))


def transpose_plan(spec: Spec) -> plan.TransposePlan:
    k = spec.kernel
    if not isinstance(k, TransposeKernel):
        raise TypeError(f"{spec.name}: {kernel_kind(spec)}, not a transpose")
    maps = {m.role: m for m in kernel_maps(spec)}
    unit = maps["src"].unit_bytes

    def as_rows(m: MapSpec) -> BoxLayout:  # the transpose sees each box as rows of bytes
        layout = box_layout(m)
        return BoxLayout((layout.rows, layout.inner_bytes), 1, layout.pattern, layout.base_address)

    return plan.transpose_plan(as_rows(maps["src"]), as_rows(maps["dst"]), unit, k.stages, k.tiles_per_stage,
                               limits.TARGETS[spec.target].smem_per_block_optin, k.raster_group, k.tiles_per_block)


def kernel_plans(spec: Spec) -> list[plan.KernelPlan]:
    """The kernels the spec generates, with their threads and shared memory (tmagen.plan); none for a
    spec without a kernel."""
    k = spec.kernel
    if k is None:
        return []
    maps = kernel_maps(spec)
    if isinstance(k, InspectKernel):
        return plan.inspect_kernels(spec.name, {m.role: box_layout(m) for m in maps})
    if isinstance(k, CopyKernel):
        return [plan.copy_kernel(spec.name, box_layout(maps[0]), k.stages, k.boxes_per_stage, k.blocks_per_sm,
                                 k.tiles_per_block)]
    if isinstance(k, MatmulKernel):
        a, b, c = maps
        return [plan.matmul_kernel(spec.name, operand_tile(a), operand_tile(b), box_layout(c),  # type: ignore[arg-type]
                                   tuple(k.tile), k.consumers, k.stages, k.raster_group)]
    return [plan.transpose_kernel(spec.name, transpose_plan(spec), k.blocks_per_sm, k.tiles_per_block)]


def kernel_kind(spec: Spec) -> str:
    """The spec's kernel in words: "copy kernel", or "no kernel" (maps only)."""
    return f"{spec.kernel.kind} kernel" if spec.kernel is not None else "no kernel"


def check_spec(spec: Spec) -> list[Violation]:
    """Every rule violation of ``spec``, fields named by their spec paths."""
    found: list[Violation] = []
    for m in kernel_maps(spec):
        names = SpecFieldNames(m.index, m.tensor.rank, derived=m.role if m.derived else None,
                               explicit_strides=m.tensor.strides is not None)
        found.extend(v for v in run_rules(tensor_map_args(spec, m), names) if v not in found)
    return found


def load_checked_spec(path: str | Path) -> Spec:
    """Read a spec and apply every rule; raises SpecError or RuleError."""
    spec = load_spec(path)
    violations = check_spec(spec)
    if violations:
        raise RuleError(str(path), violations)
    return spec


__all__ = ["Spec", "TensorSpec", "SwizzleSpec", "MmaSpec", "operand_tile", "InspectKernel", "CopyKernel",
           "TransposeKernel", "MatmulKernel",
           "MapSpec", "load_spec", "parse_spec", "check_spec", "load_checked_spec", "schema",
           "tensor_map_args", "kernel_maps", "kernel_plans", "kernel_kind", "transpose_plan", "box_layout"]
