"""How an inspect kernel is launched on an array: one load of the spec's box at the spec's start
coordinates into shared memory filled with `POISON`, and the box's raw footprint copied out, so
that a user sees byte for byte where TMA put each element (gaps and swizzle included)."""

from __future__ import annotations

import ctypes
from collections.abc import Sequence

from tmagen.errors import Violation
from tmagen.kinds.base import Call, MapBinding, Operand, Plan
from tmagen.kinds.inspect.plan import InspectPlan

POISON = 0x5A  # what the footprint holds where TMA writes nothing (the C API takes its own)


class InspectLauncher:
    inputs: tuple[str, ...] = ("x",)

    def roles(self, plan: Plan) -> tuple[tuple[str, ...], str | None]:
        return (plan.kernel.maps[0],), None

    def output_shape(self, plan: Plan, shapes: Sequence[tuple[int, ...]]) -> tuple[int, ...]:
        return (plan.map(plan.kernel.maps[0]).footprint,)

    def problems(self, plan: Plan, inputs: Sequence[Operand], out: Operand | None = None) -> list[Violation]:
        return []

    def bind(self, plan: Plan, inputs: Sequence[Operand], out: Operand, multiprocessors: int) -> Call:
        x, role = inputs[0], plan.kernel.maps[0]
        detail = plan.kernel.detail
        assert isinstance(detail, InspectPlan)
        coords = [ctypes.c_int32(c) for c in detail.coords[::-1]]  # the kernel takes them innermost first
        return Call((MapBinding(role, x.ptr, tuple(x.shape), tuple(x.strides)),),
                    (*coords, ctypes.c_uint8(POISON), ctypes.c_uint64(out.ptr)), 1)
