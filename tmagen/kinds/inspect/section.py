"""The spec section of an inspect kernel."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from tmagen.form import Section


class InspectKernel(Section):
    """One TMA load of each tensor's box at ``coords``, then the raw shared memory copied out."""

    kind: Literal["inspect"]
    coords: list[Annotated[int, Field(ge=-(1 << 31), le=(1 << 31) - 1)]] | None = Field(
        None, description="Start coordinates of the box, outermost first, 32-bit signed integers as TMA takes them "
        "(a box may start outside the tensor). Default: the origin.")
