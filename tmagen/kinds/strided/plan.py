"""The strided kernels' plan: how one launch of ``gather`` or ``plane`` (templates/strided/) sees a
view, decided once per layout by `tmagen.ops` and printed into the kernel's one parameter.

These kernels address memory through pointers, not tensor maps, so they take every layout: rows or
strides that are not whole 16 bytes, pointers off 16 bytes, a view whose contiguous dimension is not
the innermost, elements of 16 bytes. They are not a spec kind (a spec describes tensor maps, and
these kernels have none); `tmagen.ops` reaches them where TMA cannot go (`tmagen/strided.py` compiles,
loads and launches them).

- ``gather``: ``dst[i] = src[i]`` over up to 5 dimensions; each thread takes one 16-byte vector of
  the output (one element of 16 bytes), loaded whole where the source holds it contiguously and
  aligned, in narrower words or element by element where not.
- ``plane``: the same where the output's innermost dimension (R) is not the source's (C): tiles of
  ``TILE x TILE`` elements through shared memory padded by one element per row (a warp reading a
  tile column meets 32 distinct banks for every element size), up to 3 batch dimensions.

Shapes and strides are outermost first, strides in elements.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

SIZES = (1, 2, 4, 8, 16)  # element bytes the kernels move
VECTOR_BYTES = 16  # bytes of output one gather thread moves
GATHER_THREADS = 256
TILE = 32  # plane: a tile of TILE x TILE elements, a block of TILE x TILE_ROWS threads
TILE_ROWS = 8
MAX_RANK = 5
U32_LIMIT = 1 << 31  # an index below this (and its offsets) runs the 32-bit variant
BLOCKS_PER_SM = 16  # grid-stride kernels: at most this many blocks per multiprocessor (the default)


@dataclass(frozen=True)
class StridedCall:
    """One launch of a strided kernel: its symbol, grid and block, and the layout parameter (extents,
    strides outermost first padded to 5, the element or tile count, the plane's tile counts)."""

    kernel: str  # "gather" or "plane"
    elem_bytes: int
    extent: tuple[int, ...]
    src: tuple[int, ...]
    dst: tuple[int, ...]
    count: int
    tiles_c: int = 0
    tiles_r: int = 0
    dst_linear: bool = False
    wide: bool = False  # an index needs 64 bits
    grid: int = 1
    block: int = GATHER_THREADS

    @property
    def symbol(self) -> str:
        return f"tmagen_strided_{self.kernel}_e{self.elem_bytes}_{'u64' if self.wide else 'u32'}"


def _pad(values: Sequence[int], fill: int) -> tuple[int, ...]:
    if len(values) > MAX_RANK:
        raise ValueError(f"{len(values)} dimensions: the strided kernels take at most {MAX_RANK}")
    return tuple([fill] * (MAX_RANK - len(values)) + [int(v) for v in values])


def _span(shape: Sequence[int], strides: Sequence[int]) -> int:
    """The largest element offset a view reaches (for the index width)."""
    return sum((n - 1) * abs(s) for n, s in zip(shape, strides))


def _contiguous(shape: Sequence[int], strides: Sequence[int]) -> bool:
    expect = 1
    for n, s in zip(reversed(shape), reversed(strides)):
        if n != 1 and s != expect:
            return False
        expect *= n
    return True


def gather(shape: Sequence[int], src: Sequence[int], dst: Sequence[int], elem_bytes: int,
           multiprocessors: int, blocks_per_sm: int = BLOCKS_PER_SM) -> StridedCall:
    """``dst = src`` elementwise over ``shape`` (at most 5 dimensions, none empty)."""
    count = math.prod(shape)
    per = max(1, VECTOR_BYTES // elem_bytes)
    vectors = -(-count // per)
    wide = max(count + per, _span(shape, src), _span(shape, dst)) >= U32_LIMIT
    grid = max(1, min(-(-vectors // GATHER_THREADS), multiprocessors * blocks_per_sm))
    return StridedCall("gather", elem_bytes, _pad(shape, 1), _pad(src, 0), _pad(dst, 0), count,
                       dst_linear=_contiguous(shape, dst), wide=wide, grid=grid, block=GATHER_THREADS)


def plane(batch: Sequence[int], rows: int, cols: int, src: Sequence[int], dst: Sequence[int], elem_bytes: int,
          multiprocessors: int, blocks_per_sm: int = BLOCKS_PER_SM) -> StridedCall:
    """``dst = src`` over ``[*batch, rows, cols]`` (batch of at most 3 dimensions) where the output's
    innermost dimension is ``rows`` (its stride ``dst[-2]``) and the source's is ``cols``: tiled
    through shared memory. ``src`` and ``dst`` are strides of that shape."""
    tiles_c, tiles_r = -(-cols // TILE), -(-rows // TILE)
    count = tiles_c * tiles_r * math.prod(batch)
    shape = [*batch, rows, cols]
    wide = max(count, _span(shape, src), _span(shape, dst), rows + TILE, cols + TILE) >= U32_LIMIT
    grid = max(1, min(count, multiprocessors * blocks_per_sm))
    return StridedCall("plane", elem_bytes, _pad(shape, 1), _pad(src, 0), _pad(dst, 0), count, tiles_c, tiles_r,
                       wide=wide, grid=grid, block=TILE * TILE_ROWS)
