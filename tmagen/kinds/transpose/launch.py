"""How a transpose is launched: the output is the input with its last two dimensions turned, in
the kernel's units."""

from __future__ import annotations

from collections.abc import Sequence

from tmagen.errors import Violation
from tmagen.kinds.base import Operand, Plan
from tmagen.kinds.tile_launch import TileLauncher


def elements_per_unit(plan: Plan) -> int:
    src = plan.map("src")
    return src.unit_bytes // src.elem_bytes


class TransposeLauncher(TileLauncher):
    def output_shape(self, plan: Plan, shapes: Sequence[tuple[int, ...]]) -> tuple[int, ...]:
        shape, per = shapes[0], elements_per_unit(plan)
        return (*shape[:-2], shape[-1] // per, shape[-2] * per)

    def problems(self, plan: Plan, inputs: Sequence[Operand], out: Operand | None = None) -> list[Violation]:
        per = elements_per_unit(plan)
        x = inputs[0]
        if x.shape and x.shape[-1] % per:
            src = plan.map("src")
            return [Violation("array-units", "x.shape[-1]", str(x.shape[-1]),
                              f"the kernel transposes units of {src.unit_bytes} bytes ({per} elements)",
                              f"use a multiple of {per}", f"spec {plan.name}")]
        return self.walk_problems(plan, inputs, out)
