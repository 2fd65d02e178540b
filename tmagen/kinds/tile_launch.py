"""How the tiled kinds (copy, transpose) are launched on arrays: one input ``x``, one output, the
input's tiles walked by a few consecutive tiles per block or a persistent grid."""

from __future__ import annotations

from collections.abc import Sequence

from tmagen.errors import Violation
from tmagen.kinds.base import Array, Call, MapBinding, Operand, Plan
from tmagen.kinds.tiled import grid_size, tile_overflow, tiles
from tmagen.strides import contiguous


class TileLauncher:
    """copy and transpose: the output's shape, and the tiles of the input's box."""

    inputs: tuple[str, ...] = ("x",)

    def roles(self, plan: Plan) -> tuple[tuple[str, ...], str | None]:
        return ("src",), "dst"

    def output_shape(self, plan: Plan, shapes: Sequence[tuple[int, ...]]) -> tuple[int, ...]:
        return tuple(shapes[0])

    def problems(self, plan: Plan, inputs: Sequence[Operand], out: Operand | None = None) -> list[Violation]:
        """The kind's own problems with ``inputs`` (and ``out``; None: a new contiguous output)."""
        return self.walk_problems(plan, inputs, out)

    def walk_problems(self, plan: Plan, inputs: Sequence[Operand], out: Operand | None) -> list[Violation]:
        """A tensor whose tiles the kernel cannot walk: too many for its 32-bit tile indices, or one
        whose last tile ends past TMA's signed 32-bit coordinates (`TileWalk`). Both maps are checked
        in the shapes the launch gives them (a copy's flat view included)."""
        walk = plan.kernel.tile_walk
        x = inputs[0]
        if walk is None or 0 in x.shape:
            return []
        shape = self.output_shape(plan, [tuple(x.shape)])
        if out is None or tuple(out.shape) != shape:  # a wrong output is the output's problem, said apart
            out = Array(0, shape, contiguous(shape))
        found: list[Violation] = []
        src, dst = self.bindings(plan, x, out)
        for b, name in ((src, "x"), (dst, "out")):
            m = plan.map(b.role)
            if b is dst and (dst.shape, m.box) == (src.shape, plan.map("src").box):
                break  # a copy's output is walked as its input: one problem, said once
            over = tile_overflow(b.shape, m.box, walk)
            if over is None or (b is dst and over.dim is None):  # dst has src's tiles: their count is said once
                continue
            if over.dim is None:
                field, value = f"{name}.shape", f"{tuple(b.shape)} ({over.extent} tiles of {tuple(m.box)})"
            else:
                field, value = f"{name}.shape[{over.dim}]", str(over.extent)
            found.append(Violation("array-tile-walk", field, value, over.why, over.fix, f"spec {plan.name}"))
        return found

    def flat_shape(self, plan: Plan, x: Operand, out: Operand) -> list[int] | None:
        """The shape both maps take instead of the arrays' own (contiguous), or None."""
        return None

    def bindings(self, plan: Plan, x: Operand, out: Operand) -> tuple[MapBinding, MapBinding]:
        """The src and dst maps of a launch on ``x`` into ``out``: their own shapes, or a flat view."""
        flat = self.flat_shape(plan, x, out)
        if flat is not None:
            return MapBinding("src", x.ptr, tuple(flat), None), MapBinding("dst", out.ptr, tuple(flat), None)
        return (MapBinding("src", x.ptr, tuple(x.shape), _or_none(x)),
                MapBinding("dst", out.ptr, tuple(out.shape), _or_none(out)))

    def bind(self, plan: Plan, inputs: Sequence[Operand], out: Operand, multiprocessors: int) -> Call:
        x = inputs[0]
        if 0 in x.shape:
            return Call((), skip=True)
        src, dst = self.bindings(plan, x, out)
        kernel = plan.kernel
        tl = tiles(src.shape, plan.map("src").box)
        grid = grid_size(tl.total, kernel.boxes_per_stage, kernel.units_per_block, kernel.blocks_per_sm,
                         multiprocessors)
        return Call((src, dst), (tl,), grid)


def _or_none(a: Operand) -> tuple[int, ...] | None:
    """The array's strides, None where contiguous."""
    strides = tuple(a.strides)
    return None if strides == contiguous(a.shape) else strides
