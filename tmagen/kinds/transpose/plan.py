"""The transpose kind's plan: micro-tiles of k rows x 16 bytes, one per thread, transposed in
registers between two swizzled boxes, and the thread order that keeps the banks apart."""

from __future__ import annotations

from dataclasses import dataclass

from tmagen.kinds.tiled import TILE_WALK, ring_stages, units_per_block
from tmagen.kinds.transpose.rules import unit_bytes
from tmagen.limits import TARGETS
from tmagen.planning import PATTERN_ALIGN, KernelPlan, MapSpec, box_layout, box_stride, round_up
from tmagen.spec import Spec, TransposeKernel
from tmagen.swizzle import BoxLayout

TRANSPOSE_THREADS_PER_STAGE = 256  # the transpose fills a stage with as many tiles as this many threads take
MAX_TRANSPOSE_TILES_PER_STAGE = 8


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
        per_slot = self.stages * self.in_stride + self.out_buffers * self.out_stride
        return per_slot * self.tiles_per_stage + PATTERN_ALIGN

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


def maps(spec: Spec) -> list[MapSpec]:
    """src, the user's tensor; dst, its transpose (the last two dimensions turned, in units)."""
    t = spec.tensors[0]
    unit = unit_bytes(spec)
    per_unit = unit // t.dt.nbytes
    rows, cols = t.shape[-2], t.shape[-1] // per_unit
    box_rows, box_cols = t.box[-2], t.box[-1] // per_unit
    out = t.model_copy(update={
        "shape": [*t.shape[:-2], cols, rows * per_unit],
        "box": [*t.box[:-2], box_cols, box_rows * per_unit],
        "strides": None, "element_strides": None})
    return [MapSpec(role="src", tensor=t, index=0, unit_bytes=unit),
            MapSpec(role="dst", tensor=out, index=0, derived="the transposed output", transposed=True, stores=True,
                    unit_bytes=unit)]


def _as_rows(m: MapSpec) -> BoxLayout:
    """The transpose sees each box as rows of bytes."""
    layout = box_layout(m)
    return BoxLayout((layout.rows, layout.inner_bytes), 1, layout.pattern, layout.base_address)


def detail(spec: Spec, maps: list[MapSpec]) -> TransposePlan:
    k = spec.kernel
    assert isinstance(k, TransposeKernel)
    return transpose_plan(_as_rows(maps[0]), _as_rows(maps[1]), maps[0].unit, k.stages, k.tiles_per_stage,
                          TARGETS[spec.target].smem_per_block_optin, k.raster_group, k.tiles_per_block)


def plan(spec: Spec, maps: list[MapSpec]) -> tuple[KernelPlan, ...]:
    k = spec.kernel
    assert isinstance(k, TransposeKernel)
    p = detail(spec, maps)
    return (KernelPlan(f"{spec.name}_transpose", ("src", "dst"), p.threads_per_tile * p.tiles_per_stage,
                       p.smem_bytes, p.in_stride, p.stages, k.blocks_per_sm, p.tiles_per_stage,
                       persistent=True, units_per_block=units_per_block(k.tiles_per_block, p.tiles_per_stage),
                       detail=p, barriers=p.stages, tile_walk=TILE_WALK, dependent_launch=True),)
