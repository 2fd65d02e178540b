"""How the tiled kinds (copy, transpose) are launched on arrays: one input ``x``, one output, the
input's tiles walked by a few consecutive tiles per block or a persistent grid."""

from __future__ import annotations

from collections.abc import Sequence

from tmagen.errors import Violation
from tmagen.kinds.base import Call, MapBinding, Operand, Plan
from tmagen.kinds.tiled import grid_size, tiles
from tmagen.strides import contiguous


class TileLauncher:
    """copy and transpose: the output's shape, and the tiles of the input's box."""

    inputs: tuple[str, ...] = ("x",)

    def roles(self, plan: Plan) -> tuple[tuple[str, ...], str | None]:
        return ("src",), "dst"

    def output_shape(self, plan: Plan, shapes: Sequence[tuple[int, ...]]) -> tuple[int, ...]:
        return tuple(shapes[0])

    def problems(self, plan: Plan, inputs: Sequence[Operand]) -> list[Violation]:
        return []

    def flat_shape(self, plan: Plan, x: Operand, out: Operand) -> list[int] | None:
        """The shape both maps take instead of the arrays' own (contiguous), or None."""
        return None

    def bind(self, plan: Plan, inputs: Sequence[Operand], out: Operand, multiprocessors: int) -> Call:
        x = inputs[0]
        if 0 in x.shape:
            return Call((), skip=True)
        flat = self.flat_shape(plan, x, out)
        if flat is not None:
            src = MapBinding("src", x.ptr, tuple(flat), None)
            dst = MapBinding("dst", out.ptr, tuple(flat), None)
        else:
            src = MapBinding("src", x.ptr, tuple(x.shape), _or_none(x))
            dst = MapBinding("dst", out.ptr, tuple(out.shape), _or_none(out))
        kernel = plan.kernel
        tl = tiles(src.shape, plan.map("src").box)
        grid = grid_size(tl.total, kernel.boxes_per_stage, kernel.units_per_block, kernel.blocks_per_sm,
                         multiprocessors)
        return Call((src, dst), (tl,), grid)


def _or_none(a: Operand) -> tuple[int, ...] | None:
    """The array's strides, None where contiguous."""
    strides = tuple(a.strides)
    return None if strides == contiguous(a.shape) else strides
