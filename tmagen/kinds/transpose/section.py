"""The spec section of a transpose kernel."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from tmagen.form import Section
from tmagen.kinds.tiled import BLOCKS_PER_SM, TILES_PER_BLOCK


class TransposeKernel(Section):
    """out = in.T (the last two dimensions), read out of swizzled shared memory without bank conflicts."""

    kind: Literal["transpose"]
    stages: int = Field(3, ge=1, le=8, description="Stages of src tiles in flight per block.")
    tiles_per_stage: int | None = Field(None, ge=1, le=8, description="Tiles each stage loads and the block "
                                        "transposes at once (default: as many as 256 threads hold).")
    unit_bytes: int | None = Field(
        None, description="Bytes of one transposed unit, a multiple of the dtype's size (default: one element). "
        "The seed example transposes int4 (16-byte) units carried as int32.")
    blocks_per_sm: int = Field(1, ge=1, le=32, description=BLOCKS_PER_SM)
    raster_group: int = Field(1024, ge=1, le=1024, description="Tile rows walked together, column by column: 1 "
                              "walks along rows of tiles (reads contiguous, writes strided); the number of tile "
                              "rows or more walks down columns of tiles (writes contiguous; 3 to 8% faster on "
                              "an H200).")
    tiles_per_block: int | None = Field(1, ge=1, le=1024, description=TILES_PER_BLOCK)
