"""What the two tiled kinds, copy and transpose, share: a walk over the tiles (boxes) of one
tensor, a few consecutive tiles per block or a persistent grid, and the ``<name>_tiles`` argument
that tells the kernel how many there are."""

from __future__ import annotations

import ctypes
import math
from collections.abc import Sequence

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


def tiles(shape: Sequence[int], box: Sequence[int], into: Tiles | None = None) -> Tiles:
    """Tiles of a tensor of ``shape`` by ``box`` (both outermost first)."""
    counts = [math.ceil(n / b) for n, b in zip(shape[::-1], box[::-1])] + [1] * (5 - len(shape))
    t = into if into is not None else Tiles()
    for i, c in enumerate(counts):
        t.count[i] = c
    t.total = math.prod(counts)
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
