"""How a copy is launched: the input's layout for both maps, or both flat (`flat_copy_shape`)."""

from __future__ import annotations

from tmagen.kinds.base import Operand, Plan
from tmagen.kinds.copy.plan import flat_copy_shape
from tmagen.kinds.tile_launch import TileLauncher
from tmagen.strides import contiguous


class CopyLauncher(TileLauncher):
    def flat_shape(self, plan: Plan, x: Operand, out: Operand) -> list[int] | None:
        """The flat view a copy of contiguous arrays takes, as the generated C API decides it."""
        whole = contiguous(x.shape)
        src = plan.map("src")
        return flat_copy_shape(list(x.shape), src.box, src.elem_bytes,
                               tuple(x.strides) == whole and tuple(out.strides) == whole)
