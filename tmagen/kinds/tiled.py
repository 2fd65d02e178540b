"""What the two tiled kinds, copy and transpose, share: a walk over the tiles (boxes) of one
tensor, a few consecutive tiles per block or a persistent grid, and the ``<name>_tiles`` argument
that tells the kernel how many there are."""

from __future__ import annotations

import ctypes
import math
from collections.abc import Sequence
from dataclasses import dataclass

from tmagen.limits import MAX_TILE_COORDINATE, MAX_TILES

TILES_PER_BLOCK = ("Tiles (boxes) each block takes, consecutive in the walk, in whole stages; the grid then has "
                   "one block per that many tiles and the hardware's block scheduler balances the "
                   "multiprocessors (on an H200 this beat a persistent grid by 3 to 10%: a static share "
                   "waits for the slowest multiprocessor). null: a persistent grid of blocks_per_sm blocks "
                   "per multiprocessor, each taking every grid-th stage of tiles.")
BLOCKS_PER_SM = ("Blocks per multiprocessor the kernel is compiled for (its launch bounds cap registers to fit "
                 "them), and the size of a persistent grid.")


class Tiles(ctypes.Structure):
    """The kernels' ``<name>_tiles``: tile counts per dimension, innermost first, and their total."""

    _fields_ = [("count", ctypes.c_uint32 * 5), ("total", ctypes.c_uint32)]


@dataclass(frozen=True)
class TileWalk:
    """What a kernel that walks a tensor's tiles can address: at most ``max_tiles`` tiles (its tile
    arithmetic is uint32), each tile's end along every dimension at most ``max_coordinate`` (TMA's
    coordinates are signed 32-bit). The plan carries it; the launchers and the C API refuse past it."""

    max_tiles: int = MAX_TILES
    max_coordinate: int = MAX_TILE_COORDINATE


TILE_WALK = TileWalk()  # the copy and transpose kernels' walk


@dataclass(frozen=True)
class TileOverflow:
    """A tensor the walk cannot cover: ``dim`` (outermost first) of ``extent`` elements, or ``dim`` None
    where the tiles together are too many; ``why`` says the limit, ``fix`` what to do."""

    dim: int | None
    extent: int
    why: str
    fix: str


def tile_counts(shape: Sequence[int], box: Sequence[int]) -> list[int]:
    """Tiles along each dimension of a tensor of ``shape`` by ``box`` (both outermost first),
    innermost first and padded with 1 to rank 5, as the kernels' ``count``."""
    return [math.ceil(n / b) for n, b in zip(shape[::-1], box[::-1])] + [1] * (5 - len(shape))


def tile_overflow(shape: Sequence[int], box: Sequence[int], walk: TileWalk) -> TileOverflow | None:
    """Where the kernels' tile walk over ``shape`` by ``box`` would wrap, or None where it holds.
    The generated C API's tiles_of is the same test."""
    for d, (n, b) in enumerate(zip(shape, box)):
        end = math.ceil(n / b) * b  # where the last tile along d ends: its origin plus the box
        if end > walk.max_coordinate:
            return TileOverflow(d, n, f"its last tile of {b} would end at coordinate {end}, and TMA's coordinates "
                                f"are signed 32-bit (at most {walk.max_coordinate})",
                                f"split the tensor along dimension {d} into parts of at most "
                                f"{walk.max_coordinate // b * b} elements")
    total = math.prod(tile_counts(shape, box))
    if total > walk.max_tiles:
        return TileOverflow(None, total, f"the kernel walks its tiles with 32-bit indices and takes at most "
                            f"{walk.max_tiles} tiles in one launch",
                            f"split the tensor into parts of at most {walk.max_tiles} tiles of {list(box)}")
    return None


def tiles(shape: Sequence[int], box: Sequence[int], into: Tiles | None = None) -> Tiles:
    """Tiles of a tensor of ``shape`` by ``box`` (both outermost first). A count that the kernel's
    32-bit fields cannot hold raises OverflowError rather than wrapping (`tile_overflow` is the
    launchers' check, with the limits the kernels keep)."""
    counts = tile_counts(shape, box)
    total = math.prod(counts)
    if total > 0xFFFFFFFF or any(c > 0xFFFFFFFF for c in counts):
        raise OverflowError(f"{total} tiles of {list(box)} over a tensor of {list(shape)}: more than the "
                            "kernel's 32-bit tile counts hold")
    t = into if into is not None else Tiles()
    for i, c in enumerate(counts):
        t.count[i] = c
    t.total = total
    return t


def units_per_block(tiles_per_block: int | None, tiles_per_stage: int) -> int:
    """Stage units a block of a per-block grid takes (``tiles_per_block`` rounded up to whole
    stages), or 0 for a persistent grid."""
    return 0 if tiles_per_block is None else -(-tiles_per_block // tiles_per_stage)


def ring_stages(stages: int, units: int) -> int:
    """A block never holds more stages than it has units to load."""
    return min(stages, units) if units else stages


def grid_size(total_tiles: int, tiles_per_stage: int, units_per_block: int, blocks_per_sm: int,
              multiprocessors: int) -> int:
    """Blocks of the grid: one per ``units_per_block`` stage units; for a persistent grid (0) as
    many as are resident, at most one per stage unit. The generated C API's ``grid_for`` is the
    same arithmetic."""
    units = -(-total_tiles // tiles_per_stage)
    if units_per_block:
        return max(1, -(-units // units_per_block))
    return max(1, min(units, multiprocessors * blocks_per_sm))
