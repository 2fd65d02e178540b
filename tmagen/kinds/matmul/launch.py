"""How a matmul is launched on arrays: A [M, K], B [N, K] or [K, N] as the spec's b_major says,
rows of each at their own leading dimension (strides[0]), into C [M, N]."""

from __future__ import annotations

import ctypes
import math
from collections.abc import Sequence

from tmagen.errors import Violation
from tmagen.kinds.base import Call, MapBinding, Operand, Plan

COORDINATE_LIMIT = 1 << 31  # TMA coordinates are signed 32-bit


class MatmulLauncher:
    inputs: tuple[str, ...] = ("a", "b")

    def roles(self, plan: Plan) -> tuple[tuple[str, ...], str | None]:
        return ("a", "b"), "c"

    @staticmethod
    def _mnk(plan: Plan, shapes: Sequence[tuple[int, ...]]) -> tuple[int, int, int, int]:
        """M, N, K, and B's K (which must equal A's)."""
        (m, k), b = shapes[0], shapes[1]
        n, kb = b if plan.kernel.detail.b_major == "k" else b[::-1]
        return m, n, k, kb

    def output_shape(self, plan: Plan, shapes: Sequence[tuple[int, ...]]) -> tuple[int, ...]:
        m, n, _, _ = self._mnk(plan, shapes)
        return (m, n)

    def problems(self, plan: Plan, inputs: Sequence[Operand], out: Operand | None = None) -> list[Violation]:
        source = f"spec {plan.name}"
        found = [Violation("array-rank", f"{name}.ndim", str(len(a.shape)), "a matmul operand is a matrix",
                           "pass a 2-D array", source) for name, a in zip(self.inputs, inputs) if len(a.shape) != 2]
        if found:
            return found
        m, n, k, kb = self._mnk(plan, [tuple(a.shape) for a in inputs])
        if kb != k:
            layout = "[N, K]" if plan.kernel.detail.b_major == "k" else "[K, N]"
            found.append(Violation("array-shape", "b.shape", str(tuple(inputs[1].shape)),
                                   f"A is {tuple(inputs[0].shape)}, so B needs K = {k} ({layout} for this spec)",
                                   f"pass B as {layout}", source))
        for what, value in (("M", m), ("N", n), ("K", k)):
            if value >= COORDINATE_LIMIT:
                found.append(Violation("array-shape", what, str(value), "TMA addresses tiles with signed 32-bit "
                                       "coordinates: each extent is below 2^31", "split the product", source))
        return found

    def bind(self, plan: Plan, inputs: Sequence[Operand], out: Operand, multiprocessors: int) -> Call:
        a, b = inputs
        m, n, k, _ = self._mnk(plan, [tuple(a.shape), tuple(b.shape)])
        if m == 0 or n == 0:
            return Call((), skip=True)
        c = MapBinding("c", out.ptr, (m, n), tuple(out.strides))
        if k == 0:  # an empty sum: TMA cannot describe an extent of 0
            return Call((c,), clear_output=True)
        p = plan.kernel.detail
        tiles = math.ceil(m / p.bm) * math.ceil(n / p.bn)
        return Call((MapBinding("a", a.ptr, tuple(a.shape), tuple(a.strides)),
                     MapBinding("b", b.ptr, tuple(b.shape), tuple(b.strides)), c),
                    (ctypes.c_uint32(m), ctypes.c_uint32(n), ctypes.c_uint32(k)), max(1, min(tiles, multiprocessors)))
