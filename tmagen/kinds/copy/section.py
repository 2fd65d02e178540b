"""The spec section of a copy kernel."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from tmagen.form import Section
from tmagen.kinds.tiled import BLOCKS_PER_SM, TILES_PER_BLOCK


class CopyKernel(Section):
    """Global -> shared -> global through TMA load and store, a few boxes per block."""

    kind: Literal["copy"]
    stages: int = Field(4, ge=2, le=16, description="Shared-memory buffers in flight per block (at least 2: "
                        "a buffer is refilled while the next one's store is in flight).")
    blocks_per_sm: int = Field(1, ge=1, le=32, description=BLOCKS_PER_SM)
    boxes_per_stage: int = Field(1, ge=1, le=32, description="Boxes each stage loads and stores at once, under "
                                 "one mbarrier: more bytes per round trip where boxes are small (rank 1).")
    tiles_per_block: int | None = Field(2, ge=1, le=1024, description=TILES_PER_BLOCK)
