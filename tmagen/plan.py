"""How each kernel kind uses a block: threads, shared-memory buffers, tiles per stage, registers.

One module below both `tmagen.spec` (whose rules need a kernel's shared-memory budget) and
`tmagen.render` (whose templates print the same numbers), so that the two cannot disagree and
neither imports the other. It reads box layouts (`tmagen.swizzle.BoxLayout`, at the box's
``smem_offset``) and a kernel's knobs, never a spec.

Shared memory of every kernel is one dynamic buffer, rounded up at run time to the 1024-byte
boundary on which every swizzle pattern repeats (hence ``PATTERN_ALIGN`` of slack in each
size); each box then starts ``smem_offset`` bytes past a boundary of its own.
"""

from __future__ import annotations

from dataclasses import dataclass

from typing import TYPE_CHECKING

from tmagen.swizzle import BoxLayout

if TYPE_CHECKING:
    from tmagen.mma import OperandTile

PATTERN_ALIGN = 1024  # the longest swizzle period: buffers start on it, boxes at smem_offset past it
INSPECT_THREADS = 128
COPY_THREADS = 32  # one thread issues; the copy engine moves every byte
TRANSPOSE_THREADS_PER_STAGE = 256  # the transpose fills a stage with as many tiles as this many threads take
MAX_TRANSPOSE_TILES_PER_STAGE = 8
MBARRIER_BYTES = 8
MAX_THREADS_PER_BLOCK = 1024


def round_up(n: int, to: int) -> int:
    return -(-n // to) * to


def box_stride(layout: BoxLayout) -> int:
    """Bytes between consecutive boxes of one buffer, so that each keeps its phase of the pattern."""
    return round_up(layout.base_address + layout.footprint, PATTERN_ALIGN)


def _power_of_two(n: int) -> bool:
    return n > 0 and n & (n - 1) == 0


@dataclass(frozen=True)
class TransposePlan:
    """How the transpose kernel splits its tiles: micro-tiles of k rows x 16 bytes, one per thread."""

    unit: int  # bytes of one transposed unit
    k: int  # units per 16-byte chunk, and rows per micro-tile
    micro_rows: int  # micro-tiles down a tile
    tile_chunks: int  # micro-tiles across a tile (16-byte chunks per row)
    threads_per_tile: int
    tiles_per_stage: int
    stages: int
    in_stride: int
    out_stride: int
    mapping: str  # "natural" or "xor"
    raster_group: int = 1  # tile rows walked together, column by column
    out_buffers: int = 2  # dst buffers per tile slot: one is transposed into while TMA stores the other

    @property
    def microtiles(self) -> int:
        return self.micro_rows * self.tile_chunks

    @property
    def smem_bytes(self) -> int:
        """A ring of src stages and the dst buffers per tile slot, plus the alignment slack."""
        return (self.stages * self.in_stride + self.out_buffers * self.out_stride) * self.tiles_per_stage + PATTERN_ALIGN

    @property
    def mapping_doc(self) -> str:
        return ("a = m / chunks, c = m % chunks (16-byte units: the swizzle keeps the writes down a column "
                "apart)" if self.mapping == "natural" else
                "a = m % rows, c = (a ^ m / rows) % chunks (the XOR keeps each phase's lanes on distinct "
                "chunks for reads and writes)")

    def microtile(self, m: int) -> tuple[int, int]:
        """(a, c) of thread m: rows k*a .. k*a+k-1, 16-byte chunk c (the kernel's formula)."""
        if self.mapping == "xor":
            a = m % self.micro_rows
            return a, (a ^ (m // self.micro_rows)) % self.tile_chunks
        return m // self.tile_chunks, m % self.tile_chunks


def transpose_plan(src: BoxLayout, dst: BoxLayout, unit: int, stages: int, tiles_per_stage: int | None,
                   smem_limit: int, raster_group: int = 1, tiles_per_block: int | None = None) -> TransposePlan:
    """The plan of a transpose from boxes laid out as ``src`` into boxes laid out as ``dst``, both
    seen as rows of bytes; ``tiles_per_stage`` None: as many tiles as 256 threads take, while the
    buffers fit ``smem_limit``; ``tiles_per_block`` None: a persistent grid."""
    per_chunk = 16 // unit
    row_bytes = src.inner_bytes
    micro_rows = max(src.rows // per_chunk, 1)
    chunks = max(row_bytes // 16, 1)
    # With one unit per chunk the natural order reads along rows and writes down a column, which
    # the swizzle spreads over the banks; with several, an XOR order does it for any swizzle.
    xor = per_chunk > 1 and _power_of_two(chunks)
    threads = round_up(micro_rows * chunks, 32)
    in_stride, out_stride = box_stride(src), box_stride(dst)
    group = tiles_per_stage
    if group is None:
        group = max(1, min(MAX_TRANSPOSE_TILES_PER_STAGE, TRANSPOSE_THREADS_PER_STAGE // threads))
        if tiles_per_block is not None:
            group = min(group, tiles_per_block)
        while group > 1 and (stages * in_stride + 2 * out_stride) * group + PATTERN_ALIGN > smem_limit:
            group -= 1
    units = units_per_block(tiles_per_block, group)
    stages = ring_stages(stages, units)
    out_buffers = 1 if units == 1 else 2
    return TransposePlan(unit, per_chunk, micro_rows, chunks, threads, group, stages, in_stride, out_stride,
                         "xor" if xor else "natural", raster_group, out_buffers)


@dataclass(frozen=True)
class KernelPlan:
    """One extern "C" kernel: its symbol, the maps it takes in order, and how to launch it."""

    symbol: str
    maps: tuple[str, ...]
    threads: int
    smem_bytes: int  # dynamic shared memory, including the slack to reach a 1024-byte boundary
    buffer_stride: int = 0  # copy: bytes between stage buffers; transpose: bytes before the dst buffer
    stages: int = 1
    blocks_per_sm: int = 1
    boxes_per_stage: int = 1
    persistent: bool = False  # takes a tiles argument and loops over tiles
    units_per_block: int = 0  # stage units (boxes_per_stage tiles) each block takes; 0: a persistent grid
    transpose: TransposePlan | None = None
    matmul: "MatmulPlan | None" = None
    barriers: int = 1  # 8-byte mbarriers in static shared memory

    @property
    def static_smem_bytes(self) -> int:
        return MBARRIER_BYTES * self.barriers

    @property
    def total_smem_bytes(self) -> int:
        """What the block holds: the dynamic buffer and the static mbarriers (the limit covers both)."""
        return self.smem_bytes + self.static_smem_bytes


def inspect_kernels(spec_name: str, layouts: dict[str, BoxLayout]) -> list[KernelPlan]:
    """One kernel per map: a box window at the map's smem_offset, plus the alignment slack."""
    return [KernelPlan(f"{spec_name}_inspect_{role}", (role,), INSPECT_THREADS,
                       layout.base_address + layout.footprint + PATTERN_ALIGN) for role, layout in layouts.items()]


def units_per_block(tiles_per_block: int | None, tiles_per_stage: int) -> int:
    """Stage units a block of a per-block grid takes (``tiles_per_block`` rounded up to whole
    stages), or 0 for a persistent grid."""
    return 0 if tiles_per_block is None else -(-tiles_per_block // tiles_per_stage)


def ring_stages(stages: int, units: int) -> int:
    """A block never holds more stages than it has units to load."""
    return min(stages, units) if units else stages


FLAT_COPY_ROW_ALIGN = 128  # bytes: a row pitch off the 128-byte lines splits sectors between boxes
FLAT_COPY_NARROW_ROW = 512  # bytes: boxes with rows narrower than this go flat even over aligned rows


def flat_copy_shape(shape: tuple[int, ...] | list[int], box: tuple[int, ...] | list[int], elem_bytes: int,
                    contiguous: bool) -> list[int] | None:
    """The view under which a copy moves its bytes, when it differs from ``shape``.

    A contiguous tensor, under a box whose outer dimensions (all but the last two) are 1, is copied
    as its flat bytes, [1, ..., 1, total / width, width] with the box's width, when its rows are not
    whole 128-byte lines or the box's rows are narrower than 512 bytes, and the width divides it.
    The boxes then start on lines and hold contiguous bytes. Measured on an H200: odd-stride copies
    went from 0.71-0.86 of cudaMemcpy to 0.98, and uint8 boxes of 256-byte rows over a ragged tensor
    from 0.954 to 0.982; 1 KiB box rows over aligned tensors did better strided (0.987 against
    0.973), so those stay. A narrower width that divides the tensor is no help: a float32 view 64
    wide under a 256-wide box left three quarters of every box empty and ran at 0.686. None: copy
    ``shape`` as it is."""
    rank = len(shape)
    total = 1
    for n in shape:
        total *= n
    width = box[-1]
    if (not contiguous or rank < 2 or any(b != 1 for b in box[:-2]) or total == 0 or total % width
            or (width * elem_bytes) % FLAT_COPY_ROW_ALIGN or total // width >= 1 << 32):
        return None
    if (shape[-1] * elem_bytes) % FLAT_COPY_ROW_ALIGN == 0 and width * elem_bytes >= FLAT_COPY_NARROW_ROW:
        return None
    return [1] * (rank - 2) + [total // width, width]


def copy_kernel(spec_name: str, src: BoxLayout, stages: int, boxes_per_stage: int, blocks_per_sm: int,
                tiles_per_block: int | None = None) -> KernelPlan:
    stride = box_stride(src)
    units = units_per_block(tiles_per_block, boxes_per_stage)
    stages = ring_stages(stages, units)
    return KernelPlan(f"{spec_name}_copy", ("src", "dst"), COPY_THREADS,
                      stride * boxes_per_stage * stages + PATTERN_ALIGN, stride, stages, blocks_per_sm,
                      boxes_per_stage, persistent=True, units_per_block=units, barriers=stages)


def transpose_kernel(spec_name: str, plan: TransposePlan, blocks_per_sm: int,
                     tiles_per_block: int | None = None) -> KernelPlan:
    return KernelPlan(f"{spec_name}_transpose", ("src", "dst"), plan.threads_per_tile * plan.tiles_per_stage,
                      plan.smem_bytes, plan.in_stride, plan.stages, blocks_per_sm, plan.tiles_per_stage,
                      persistent=True, units_per_block=units_per_block(tiles_per_block, plan.tiles_per_stage),
                      transpose=plan, barriers=plan.stages)


# ----------------------------------------------------------------------------- matmul
REGISTERS_PER_SM = 65536
PRODUCER_REGISTERS = 56  # the producer warpgroup only issues copies (40 made ptxas spill its loop state): setmaxnreg gives the rest away
MAX_CONSUMER_REGISTERS = 240
MAX_THREAD_REGISTERS = 255
REGISTERS_BESIDE_ACCUMULATORS = 32  # addresses, descriptors, loop state, the epilogue (128 + 32 fit in 168: ptxas)
C_STAGING_BUFFERS = 2  # per consumer: one being filled while TMA stores the other


@dataclass(frozen=True)
class MatmulPlan:
    """The blocks of the matmul: one producer warpgroup, ``consumers`` warpgroups of 64-row wgmmas."""

    bm: int
    bn: int
    bk: int
    consumers: int
    stages: int
    raster_group: int
    a_stage_bytes: int  # the A boxes of one stage, box stride apart
    b_stage_bytes: int
    c_stride: int  # bytes between the epilogue's C staging buffers
    accumulators: int  # fp32 registers of accumulators per consumer thread

    @property
    def threads(self) -> int:
        return 128 * (self.consumers + 1)

    @property
    def rows_per_consumer(self) -> int:
        return self.bm // self.consumers

    @property
    def m_blocks(self) -> int:
        """64-row wgmmas each consumer issues per K step."""
        return self.rows_per_consumer // 64

    @property
    def stage_bytes(self) -> int:
        return self.a_stage_bytes + self.b_stage_bytes

    @property
    def smem_bytes(self) -> int:
        return self.stages * self.stage_bytes + self.consumers * self.c_buffers * self.c_stride + PATTERN_ALIGN

    @property
    def consumer_registers(self) -> int:
        return consumer_registers(self.consumers)

    @property
    def setmaxnreg_consumers(self) -> int:
        """What the consumers ask setmaxnreg for: the register file the producer gives up."""
        return setmaxnreg_consumers(self.consumers)

    @property
    def producer_registers(self) -> int:
        return PRODUCER_REGISTERS

    @property
    def c_buffers(self) -> int:
        """C staging buffers per consumer."""
        return C_STAGING_BUFFERS


def setmaxnreg_consumers(consumers: int) -> int:
    """The rest of the register file after the producer's, per consumer thread, in steps of 8."""
    free = (REGISTERS_PER_SM - 128 * PRODUCER_REGISTERS) // (128 * consumers)
    return min(MAX_CONSUMER_REGISTERS, free // 8 * 8)


def consumer_registers(consumers: int) -> int:
    """Registers a consumer thread can count on: what setmaxnreg gives it (the rest of the register
    file, in steps of 8), but no more than ptxas allots every thread of the block under its launch
    bounds, since it compiles the wgmmas within that (a 3-consumer block of 512 threads gets 128:
    'Insufficient registers' for a 64 x 256 accumulator, seen in the reliability campaign)."""
    launch_cap = min(MAX_THREAD_REGISTERS, REGISTERS_PER_SM // (128 * (consumers + 1)) // 8 * 8)
    return min(setmaxnreg_consumers(consumers), launch_cap)


def accumulators(bm: int, bn: int, consumers: int) -> int:
    """fp32 accumulator registers per consumer thread: its rows x BN over 128 threads."""
    return bm // consumers * bn // 128


def matmul_kernel(spec_name: str, a: "OperandTile", b: "OperandTile", c: BoxLayout, tile: tuple[int, ...],
                  consumers: int, stages: int, raster_group: int) -> KernelPlan:
    bm, bn, bk = tile
    plan = MatmulPlan(bm, bn, bk, consumers, stages, raster_group,
                      a_stage_bytes=a.stride * a.mn_boxes * (bk // a.k_per_box),
                      b_stage_bytes=b.stride * b.mn_boxes * (bk // b.k_per_box),
                      c_stride=box_stride(c), accumulators=accumulators(bm, bn, consumers))
    return KernelPlan(f"{spec_name}_matmul", ("a", "b", "c"), plan.threads, plan.smem_bytes, plan.stage_bytes, stages,
                      persistent=True, matmul=plan, barriers=2 * stages)  # full and empty
