"""The spec a user writes: tensors, their TMA boxes and swizzles, the target, the kernel (if any).

Shapes, strides, boxes and coordinates are written outermost first, as numpy and PyTorch
write them; only the emitted host code speaks the driver's innermost-first order.
This module is the schema and its reading (JSON, validated in form by pydantic); each kernel
kind's section comes from its folder, `tmagen/kinds/<kind>/section.py`. The hardware rules and
the kinds' rules are checked all at once by `tmagen.plan.check`, which names each field by its path.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal, Union, get_args

from pydantic import Field, ValidationError, field_validator, model_validator

from tmagen import limits, schema_errors
from tmagen.dtypes import DTYPES, UINT8_ELEMENT_TYPES, DType
from tmagen.enums import Swizzle
from tmagen.errors import SpecError
from tmagen.form import Section, form_error, identifier
from tmagen.jsonio import read_json
from tmagen.kinds.copy.section import CopyKernel
from tmagen.kinds.inspect.section import InspectKernel
from tmagen.kinds.matmul.section import MatmulKernel
from tmagen.kinds.sections import SECTIONS
from tmagen.kinds.transpose.section import TransposeKernel
from tmagen.strides import contiguous
from tmagen.toolbox import REDUCE_OPS

SwizzleMode = Literal["none", "32B", "64B", "128B"]
Atomicity = Literal["16B", "32B", "32B_flip_8B", "64B"]
TargetName = Literal["sm_90a", "sm_100a"]
ElementType = Literal[tuple(UINT8_ELEMENT_TYPES)]  # type: ignore[valid-type]

_MODES, _ATOMICITIES = get_args(SwizzleMode), get_args(Atomicity)
_ATOM_SWIZZLE = {"16B": Swizzle.B128, "32B": Swizzle.B128_ATOM_32B,
                 "32B_flip_8B": Swizzle.B128_ATOM_32B_FLIP_8B, "64B": Swizzle.B128_ATOM_64B}


class SwizzleSpec(Section):
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


class MmaSpec(Section):
    """Marks a tensor's box as a tensor-core operand: the device header then builds its wgmma
    (and, for sm_100a, tcgen05) shared-memory matrix descriptors (tmagen.mma)."""

    operand: Literal["a", "b"] = Field(description="The wgmma operand the box feeds: a (M x K) or b (N x K).")
    major: Literal["k", "mn"] = Field("k", description="Which dimension is contiguous in the tensor: k (A [M,K], "
                                      "B [N,K]) or mn (A [K,M], B [K,N]; 16-bit types only).")
    mn_boxes: int = Field(1, ge=1, le=64, description="Boxes of this map side by side along M (a) or N (b) in one "
                          "operand tile, each starting a pattern-aligned stride after the previous one.")


class TensorSpec(Section):
    """One tensor in global memory and the TMA box that moves it."""

    name: str = Field(description="C identifier naming the tensor in generated code.")
    dtype: Literal[tuple(DTYPES)] = Field(  # type: ignore[valid-type]
        description="Element type: one of the 16 CUtensorMapDataType values, or float8_e4m3 / float8_e5m2 (fp8, "
        "moved by a UINT8 map; the tensor cores read them). int8 data travels as uint8: see element_type.")
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
    l2_promotion: Literal["none", "64B", "128B", "256B"] = Field(
        "none", description="L2 fetch size: what the L2 reads from DRAM on a miss. A matmul's A and B "
        "that leave it out take 128B (rows that start off whole 32-byte sectors read about a third less "
        "from DRAM; tmagen/kinds/matmul/plan.py), every other map none.")
    l2_hint: Literal["normal", "evict_first", "evict_last"] = Field(
        "normal", description="L2 eviction priority of the bytes TMA reads and writes through the map "
        "(createpolicy with .L2::cache_hint): evict_first for data used once, evict_last for data read again "
        "soon. The copy, transpose and inspect kernels pass it to their loads and stores; a spec without a "
        "kernel prints it in the box (<map>_box::l2_hint) for tma::policy().")
    reduce: Literal[tuple(REDUCE_OPS)] | None = Field(  # type: ignore[valid-type]
        None, description="The map writes by reduction (cp.reduce.async.bulk.tensor: dst = dst op src, per "
        "element): add, min, max, inc, dec, and, or or xor, each for the element types the PTX ISA lists (rule "
        "reduce-op-for-type). For a spec without a kernel, whose own kernel calls tma::reduce_Nd with the box's "
        "reduce constant; the store rules apply to the map.")
    oob_fill: Literal["zero", "nan"] = Field("zero", description="Fill for elements outside the tensor; nan "
                                             "only for floating-point types.")
    smem_offset: int = Field(
        0, description="Where the box lands in shared memory: bytes past a 1024-byte boundary, a multiple of "
        "128 below 1024. Non-zero starts the swizzle pattern in its middle (the PTX base offset).")
    mma: MmaSpec | None = Field(None, description="The box is a wgmma operand: emit its matrix descriptors.")

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        return identifier(v, "tensor name")

    @field_validator("swizzle", mode="before")
    @classmethod
    def _swizzle_shorthand(cls, v: object) -> object:
        """``"swizzle": "64B"`` is short for ``{"mode": "64B"}``."""
        return {"mode": v} if isinstance(v, str) else v

    @model_validator(mode="after")
    def _ranks_agree(self) -> TensorSpec:
        rank = len(self.shape)
        for fld in ("strides", "box", "element_strides"):
            value = getattr(self, fld)
            if value is not None and len(value) != rank:
                raise form_error(fld, f"has {len(value)} entries but shape has {rank}: give one per dimension")
        if self.element_type is not None and self.dtype != "uint8":
            raise form_error("element_type", f"= {self.element_type!r}, but only uint8 data holds another type "
                              f"(TMA has no 8-bit signed or fp8 type); a {self.dtype} tensor's elements are "
                              f"{self.dt.cpp}: drop element_type, or use dtype uint8")
        if self.strides is not None and self.strides[-1] != 1:
            raise form_error("strides[-1]", f"= {self.strides[-1]}, but TMA reads rows contiguously: the innermost "
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
        return list(self.strides) if self.strides is not None else list(contiguous(self.shape))

    def driver_strides(self) -> tuple[int, ...]:
        """globalStrides in bytes for dimensions 1..rank-1, innermost first."""
        size = self.dt.size
        return tuple(int(s * size) for s in self.strides_or_default[::-1][1:])



# Each kind's section, told apart by "kind" (tmagen/kinds/sections.py lists them).
Kernel = Annotated[Union[SECTIONS], Field(discriminator="kind")]  # type: ignore[valid-type]  # noqa: UP007 - a union of a tuple


class Spec(Section):
    """A tmagen spec: what to generate, for which GPU."""

    name: str = Field(description="C identifier naming the generated folder and its symbols.")
    description: str = Field("", description="What the spec is for, in words.")
    target: TargetName = Field("sm_90a", description="sm_90a (Hopper) or sm_100a (Blackwell-only modes and "
                               "types; compiled but not run on Hopper).")
    tensors: list[TensorSpec] = Field(min_length=1, max_length=limits.MAX_TENSORS_PER_SPEC,
                                      description="The tensors, one tensor map each. A copy or "
                                      "transpose kernel moves one; inspect makes one kernel per tensor.")
    kernel: Kernel | None = Field(None, description="The kernel to generate, chosen by its kind. Leave it out "
                                  "for maps only: the device header (primitives, layouts, accessors), the host "
                                  "encode API and CMake, for kernels of your own.")
    allow_spills: bool = Field(False, description="Accept kernels that spill registers to local memory "
                               "(the compile report fails the build otherwise).")

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        return identifier(v, "spec name")

    @model_validator(mode="after")
    def _consistent(self) -> Spec:
        seen: set[str] = set()
        for i, t in enumerate(self.tensors):
            if t.name in seen:
                raise form_error(f"tensors[{i}].name", f"= {t.name!r}, but an earlier tensor has this name: "
                                 "names must be unique")
            seen.add(t.name)
        for i, t in enumerate(self.tensors):
            if t.dt.packed:
                raise form_error(f"tensors[{i}].dtype", f"= {t.dtype!r}: tmagen checks tensor maps of the packed "
                                 "sub-byte types (tmagen diagnose) but generates no kernels for them yet")
        return self

    @property
    def kind(self) -> str | None:
        """The kernel's kind, None for a spec of maps only."""
        return self.kernel.kind if self.kernel is not None else None

    def tensor(self, name: str) -> tuple[int, TensorSpec]:
        """The index and the tensor named ``name``."""
        for i, t in enumerate(self.tensors):
            if t.name == name:
                return i, t
        raise KeyError(name)


def loaded_box(t: TensorSpec) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """Elements one load brings per dimension and the step between them, outermost first:
    ceil(box / elementStride) at that stride, except the innermost without interleave, which TMA
    traverses whole (DRV). The loaded elements lie in shared memory as a dense box of that shape."""
    steps = list(t.element_strides_or_default)
    if t.interleave == "none":
        steps[-1] = 1
    return tuple(-(-b // e) for b, e in zip(t.box, steps)), tuple(steps)


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
        why = exc.strerror if isinstance(exc, OSError) else exc
        raise SpecError(str(p), [f"cannot read the file: {why}"]) from None
    return parse_spec(read_json(text, str(p)), str(p))


def schema() -> dict[str, Any]:
    return Spec.model_json_schema()


__all__ = ["Spec", "TensorSpec", "SwizzleSpec", "MmaSpec", "InspectKernel", "CopyKernel", "TransposeKernel",
           "MatmulKernel", "Kernel", "load_spec", "parse_spec", "read_json", "schema", "loaded_box"]
