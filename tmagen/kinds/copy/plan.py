"""The copy kind's plan: a ring of stages of boxes per block, and the flat view under which a
contiguous tensor is copied as its bytes."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from tmagen.kinds.tiled import TILE_WALK, TileWalk, ring_stages, units_per_block
from tmagen.planning import PATTERN_ALIGN, KernelPlan, MapSpec, box_layout, box_stride
from tmagen.spec import CopyKernel, Spec

COPY_THREADS = 32  # one thread issues; the copy engine moves every byte
FLAT_COPY_ROW_ALIGN = 128  # bytes: a row pitch off the 128-byte lines splits sectors between boxes
FLAT_COPY_NARROW_ROW = 512  # bytes: boxes with rows narrower than this go flat even over aligned rows


@dataclass(frozen=True)
class FlatCopy:
    """When a copy views a contiguous tensor as its flat bytes (`flat_copy_shape`), as the
    generated C API decides it too: ``possible`` under this box's shape (rank 2 and up, outer box
    dimensions 1); ``whole_lines`` the box's rows are whole 128-byte lines (else never flat);
    ``always`` whatever the tensor's rows (box rows narrower than 512 bytes), else only for rows
    that are not whole lines; ``max_rows`` the most flat rows whose tiles the kernel's walk can
    address (`TileWalk`): a tensor of more is copied in its own shape, or refused there."""

    possible: bool
    whole_lines: bool
    always: bool
    width: int  # elements per flat row: the box's
    elem_bytes: int
    rank: int
    max_rows: int
    row_align: int = FLAT_COPY_ROW_ALIGN


def flat_rule(box: Sequence[int], elem_bytes: int, walk: TileWalk = TILE_WALK) -> FlatCopy:
    width = box[-1]
    rows = box[-2] if len(box) >= 2 else 1
    return FlatCopy(len(box) >= 2 and all(b == 1 for b in box[:-2]), (width * elem_bytes) % FLAT_COPY_ROW_ALIGN == 0,
                    width * elem_bytes < FLAT_COPY_NARROW_ROW, width, elem_bytes, len(box),
                    max_rows=walk.max_coordinate // rows * rows)


def flat_copy_shape(shape: Sequence[int], box: Sequence[int], elem_bytes: int, contiguous: bool) -> list[int] | None:
    """The view under which a copy moves its bytes, when it differs from ``shape``.

    A contiguous tensor, under a box whose outer dimensions (all but the last two) are 1, is copied
    as its flat bytes, [1, ..., 1, total / width, width] with the box's width, when its rows are not
    whole 128-byte lines or the box's rows are narrower than 512 bytes, and the width divides it.
    The boxes then start on lines and hold contiguous bytes. Measured on an H200: odd-stride copies
    went from 0.71-0.86 of cudaMemcpy to 0.98, and uint8 boxes of 256-byte rows over a ragged tensor
    from 0.954 to 0.982; 1 KiB box rows over aligned tensors did better strided (0.987 against
    0.973), so those stay. A narrower width that divides the tensor is no help: a float32 view 64
    wide under a 256-wide box left three quarters of every box empty and ran at 0.686. None: copy
    ``shape`` as it is. The generated C API prints the same rule from `FlatCopy`."""
    rule = flat_rule(box, elem_bytes)
    total = 1
    for n in shape:
        total *= n
    if (not contiguous or not rule.possible or not rule.whole_lines or len(shape) != rule.rank or total == 0
            or total % rule.width
            or total // rule.width > rule.max_rows):
        return None
    if not rule.always and (shape[-1] * elem_bytes) % FLAT_COPY_ROW_ALIGN == 0:
        return None
    return [1] * (len(shape) - 2) + [total // rule.width, rule.width]


def maps(spec: Spec) -> list[MapSpec]:
    t = spec.tensors[0]
    return [MapSpec(role="src", tensor=t, index=0), MapSpec(role="dst", tensor=t, index=0, stores=True)]


def plan(spec: Spec, maps: list[MapSpec]) -> tuple[KernelPlan, ...]:
    k = spec.kernel
    assert isinstance(k, CopyKernel)
    src = box_layout(maps[0])
    stride = box_stride(src)
    units = units_per_block(k.tiles_per_block, k.boxes_per_stage)
    stages = ring_stages(k.stages, units)
    t = maps[0].tensor
    return (KernelPlan(f"{spec.name}_copy", ("src", "dst"), COPY_THREADS,
                       stride * k.boxes_per_stage * stages + PATTERN_ALIGN, stride, stages, k.blocks_per_sm,
                       k.boxes_per_stage, persistent=True, units_per_block=units, barriers=stages,
                       detail=flat_rule(t.box, t.dt.nbytes), tile_walk=TILE_WALK, dependent_launch=True),)
