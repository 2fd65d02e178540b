"""The vocabulary of a plan: the maps a kernel uses, where their boxes land in shared memory, and
the kernels with their threads, buffers and stages. `tmagen.plan.resolve` fills it in once per
spec; each kind's planning (`tmagen/kinds/<kind>/plan.py`) decides its own part.

Shared memory of every kernel is one dynamic buffer, rounded up at run time to the 1024-byte
boundary on which every swizzle pattern repeats (hence ``PATTERN_ALIGN`` of slack in each
size); each box then starts ``smem_offset`` bytes past a boundary of its own.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from tmagen.dtypes import CUDA_TYPE_HEADERS, RAW_TYPES
from tmagen.enums import Interleave, L2Promotion, OobFill
from tmagen.kinds.tiled import TileWalk
from tmagen.limits import SMEM_PATTERN_BYTES
from tmagen.mma import OperandTile
from tmagen.rules import TensorMapArgs
from tmagen.spec import MmaSpec, TensorSpec, loaded_box
from tmagen.swizzle import PATTERNS, BoxLayout
from tmagen.toolbox import REDUCE_OPS, ReduceOp

PATTERN_ALIGN = SMEM_PATTERN_BYTES  # buffers start on the longest swizzle period, boxes at smem_offset past it
MBARRIER_BYTES = 8  # an mbarrier is one 64-bit word of shared memory (PTX ISA 9.7.13.15)


def round_up(n: int, to: int) -> int:
    return -(-n // to) * to


def box_stride(layout: BoxLayout) -> int:
    """Bytes between consecutive boxes of one buffer, so that each keeps its phase of the pattern."""
    return round_up(layout.base_address + layout.footprint, PATTERN_ALIGN)


@dataclass(frozen=True)
class MapSpec:
    """One tensor map a kernel uses: its role in the kernel, and the tensor it describes."""

    role: str
    tensor: TensorSpec
    index: int  # the spec tensor it comes from
    derived: str = ""  # how tmagen built it from that tensor, where it did (`tmagen explain` says it)
    transposed: bool = False  # a derived map over the tensor's last two dimensions swapped
    stores: bool = False
    unit_bytes: int = 0  # bytes the kernel moves as one unit (0: one element)
    mma: MmaSpec | None = None  # the kernel (or the spec) reads the box with the tensor cores

    @property
    def unit(self) -> int:
        return self.unit_bytes or self.tensor.dt.nbytes


def box_layout(m: MapSpec) -> BoxLayout:
    """Where TMA puts the box of map ``m`` in shared memory, from its smem_offset on: the elements
    one load brings (fewer than the box with element strides), as a dense box."""
    t = m.tensor
    return BoxLayout(loaded_box(t)[0], t.dt.nbytes, PATTERNS[t.swizzle.driver], t.smem_offset)


def operand_tile(m: MapSpec, layout: BoxLayout) -> OperandTile | None:
    """The tensor-core operand tile of map ``m``, if a wgmma reads it."""
    if m.mma is None:
        return None
    return OperandTile(layout, m.mma.major, m.mma.mn_boxes, box_stride(layout))


@dataclass(frozen=True)
class MapPlan:
    """One CUtensorMap the generated code builds, and its box in shared memory: every number the
    device header, the host code and the Python launch print or pass."""

    name: str  # C identifier: the role of the map in the kernel (src, dst, a, ...)
    spec: MapSpec
    args: TensorMapArgs  # the driver's arguments as the spec gives them (address: its alignment)
    layout: BoxLayout
    operand: OperandTile | None  # a wgmma reads the box: its descriptors go in the header
    dtype_name: str  # tmagen's name of the element type
    cpp_type: str  # the element's CUDA type, what at() gives
    raw_type: str  # the unsigned integer of the element's size, what raw_at() gives
    unit_type: str  # type the kernel reads and writes shared memory with
    dtype_enum: str
    elem_bytes: int
    unit_bytes: int
    rank: int
    shape: tuple[int, ...]  # the spec's shape, outermost first
    box: tuple[int, ...]  # outermost first
    smem_shape: tuple[int, ...]  # the elements one load brings, outermost first: the box in shared memory
    box_driver: tuple[int, ...]  # innermost first
    element_strides_driver: tuple[int, ...]
    interleave: str
    swizzle: str
    l2_promotion: str
    oob_fill: str
    alignment: int
    swizzle_bits: int
    swizzle_base: int
    swizzle_shift: int
    flip_8b: bool
    span: int
    period: int
    rows: int
    row_bytes: int
    row_pitch: int
    footprint: int
    tx_bytes: int
    smem_offset: int
    buffer_stride: int  # from the box's pattern boundary to the first boundary after the box
    stores: bool  # the kernel stores through the map
    mma_operand: str  # "a", "b" or ""
    cuda_header: str | None  # the CUDA header that defines cpp_type, if any
    l2_hint: str = "normal"  # the L2 eviction priority of the map's copies: normal, evict_first, evict_last
    reduce: ReduceOp | None = None  # the reduction a kernel writes through the map with (a spec without a kernel)

    @property
    def tensor(self) -> TensorSpec:
        return self.spec.tensor

    @property
    def role(self) -> str:
        return self.name

    @property
    def mma(self) -> OperandTile | None:
        return self.operand

    @property
    def pattern_lines(self) -> int:
        """128-byte lines in one period of the pattern: what the descriptor's base offset counts."""
        return max(self.period // 128, 1)

    @property
    def buffer_align(self) -> int:
        """The alignment whose boundary smem_offset counts from: the longest period."""
        return PATTERN_ALIGN


def map_plan(m: MapSpec, args: TensorMapArgs) -> MapPlan:
    """Everything the generated code and the launches need of map ``m``."""
    t = m.tensor
    pat = PATTERNS[t.swizzle.driver]
    es = t.dt.nbytes
    layout = box_layout(m)
    smem_shape = layout.shape
    rows = math.prod(smem_shape[:-1])
    row_bytes = smem_shape[-1] * es
    pitch = pat.row_pitch(row_bytes)
    return MapPlan(
        name=m.role, spec=m, args=args, layout=layout, operand=operand_tile(m, layout), dtype_name=t.dtype,
        cpp_type=t.cpp_type, raw_type=RAW_TYPES[es], unit_type=RAW_TYPES[m.unit],
        dtype_enum=f"CU_TENSOR_MAP_DATA_TYPE_{t.dt.driver_name}", elem_bytes=es, unit_bytes=m.unit,
        rank=t.rank, shape=tuple(t.shape), box=tuple(t.box), smem_shape=smem_shape, box_driver=tuple(t.box[::-1]),
        element_strides_driver=tuple(t.element_strides_or_default[::-1]),
        interleave=Interleave.parse(t.interleave).driver_name, swizzle=t.swizzle.driver.driver_name,
        l2_promotion=L2Promotion.parse(t.l2_promotion).driver_name, oob_fill=OobFill.parse(t.oob_fill).driver_name,
        alignment=max(t.alignment, 16), swizzle_bits=pat.bits, swizzle_base=pat.base, swizzle_shift=pat.shift,
        flip_8b=pat.flip_8b, span=pat.span, period=pat.period, rows=rows, row_bytes=row_bytes, row_pitch=pitch,
        footprint=rows * pitch, tx_bytes=rows * row_bytes, smem_offset=t.smem_offset,
        buffer_stride=box_stride(layout), stores=m.stores, mma_operand=m.mma.operand if m.mma else "",
        cuda_header=CUDA_TYPE_HEADERS.get(t.cpp_type), l2_hint=t.l2_hint,
        reduce=REDUCE_OPS[t.reduce] if t.reduce is not None else None)


@dataclass(frozen=True)
class RegisterBudget:
    """The registers per thread a kernel that moves registers between its warpgroups with setmaxnreg
    must be launched with: each warp is allotted ptxas's count rounded up to ``unit`` (the hardware
    allocates 256 registers per warp), and the allotment must lie in ``least`` .. ``most``. Below
    ``least`` the registers the ``setmaxnreg.dec`` warps give up do not cover what the ``.inc`` warps
    ask for, and the increase waits forever; above ``most`` the increase would be a decrease (or the
    launch bounds cannot be met). ``split`` says the arithmetic in words."""

    least: int
    most: int
    unit: int
    split: str

    def allotted(self, reported: int) -> int:
        """Registers per thread a kernel of ``reported`` registers (ptxas's count) is launched with."""
        return -(-reported // self.unit) * self.unit

    def problem(self, symbol: str, reported: int) -> str | None:
        """Why ``symbol`` compiled to ``reported`` registers breaks the split, or None."""
        got = self.allotted(reported)
        if self.least <= got <= self.most:
            return None
        side = ("fewer than the setmaxnreg increase needs: it would wait forever for registers no warp gives up"
                if got < self.least else "more than the setmaxnreg budget: the consumers' increase would lower them")
        span = f"exactly {self.least}" if self.least == self.most else f"{self.least} to {self.most}"
        return (f"{symbol}: ptxas compiled it to {reported} registers per thread ({got} allotted), {side} "
                f"({self.split}, so the launch needs {span}); change the plan's register split with the kernel")


@dataclass(frozen=True)
class WgmmaInstruction:
    """The ``wgmma.mma_async`` m64nNkK the device header wraps, as inline PTX: its accumulators are
    N / 2 fp32 registers a thread holds, written as asm operands 0 .. N/2 - 1 eight to a line, then
    the a and b descriptors, the accumulate flag and (16-bit types) the two transpose immediates.
    K is 32 bytes of each operand: 16 of a 16-bit type, 32 of an 8-bit one (PTX ISA 9.7.15.2)."""

    n: int  # N of the instruction: the B tile's N
    ptx_type: str  # A's PTX type: bf16, f16, e4m3 or e5m2
    b_ptx_type: str = ""  # B's, where it differs (fp8: e4m3 x e5m2 is an instruction too); "" = A's

    @property
    def b_type(self) -> str:
        return self.b_ptx_type or self.ptx_type

    @property
    def k(self) -> int:
        return 32 if self.ptx_type in ("e4m3", "e5m2") else 16

    @property
    def transposable(self) -> bool:
        """Only 16-bit operands may be MN-major: the instruction has transpose immediates for them alone."""
        return self.k == 16

    @property
    def accumulators(self) -> int:
        return self.n // 2

    def _rows(self) -> list[range]:
        return [range(row, min(row + 8, self.accumulators)) for row in range(0, self.accumulators, 8)]

    @property
    def operand_rows(self) -> list[str]:
        """The accumulator list of the PTX instruction, line by line: ``{%0,%1,...`` to ``...},``."""
        last = self.accumulators - 1
        return [("{" if row.start == 0 else " ") + "".join(f"%{i}" + ("}," if i == last else ",") for i in row)
                for row in self._rows()]

    @property
    def constraint_rows(self) -> list[str]:
        """The asm output constraints, line by line: ``: "+f"(d[0]), ...`` (no comma after the last)."""
        last = self.accumulators - 1
        return [(":" if row.start == 0 else " ") + "".join(f' "+f"(d[{i}])' + ("" if i == last else ",") for i in row)
                for row in self._rows()]

    def operand(self, k: int) -> int:
        """The asm operand number of the k-th input after the accumulators: a, b, accumulate[, TransA, TransB]."""
        return self.accumulators + k


@dataclass(frozen=True)
class KernelPlan:
    """One extern "C" kernel: its symbol, the maps it takes in order, and how to launch it.
    ``detail`` is the kind's own plan (`TransposePlan`, `MatmulPlan`), for its template."""

    symbol: str
    maps: tuple[str, ...]
    threads: int
    smem_bytes: int  # dynamic shared memory, including the slack to reach a 1024-byte boundary
    buffer_stride: int = 0  # copy: bytes between stage buffers; transpose: bytes before the dst buffer
    stages: int = 1
    blocks_per_sm: int = 1
    boxes_per_stage: int = 1  # tiles each stage takes (copy: boxes; transpose: tiles)
    persistent: bool = False  # takes a tiles argument and loops over tiles
    units_per_block: int = 0  # stage units (boxes_per_stage tiles) each block takes; 0: a persistent grid
    detail: Any = None
    barriers: int = 1  # 8-byte mbarriers in static shared memory
    tile_walk: TileWalk | None = None  # a kernel over a tensor's tiles (copy, transpose): what its walk holds
    registers: RegisterBudget | None = None  # a kernel that splits its registers with setmaxnreg (matmul)
    variants: tuple[KernelPlan, ...] = ()  # further kernels of the family a launch picks among (matmul)
    wgmma_n: tuple[int, ...] = ()  # the wgmma N each of its kernels multiplies with (matmul)
    # It waits (griddepcontrol.wait) for the kernel before it in its stream before it touches global
    # memory, so it is launched as a programmatic dependent launch (runtime.launch_dependent): its
    # launch and set-up overlap the end of that kernel.
    dependent_launch: bool = False

    @property
    def family(self) -> tuple[KernelPlan, ...]:
        """This kernel and its variants: every extern "C" kernel the spec makes, in launch-choice order."""
        return (self, *self.variants)

    @property
    def static_smem_bytes(self) -> int:
        return MBARRIER_BYTES * self.barriers

    @property
    def total_smem_bytes(self) -> int:
        """What the block holds: the dynamic buffer and the static mbarriers (the limit covers both)."""
        return self.smem_bytes + self.static_smem_bytes
