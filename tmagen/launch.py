"""Encoding a plan's tensor maps over real arrays, and the parameters of one launch.

The one model of the driver's encode arguments is `tmagen.rules.TensorMapArgs`: the rules check
it, the host template prints the spec's (`MapPlan.args`), and here it is completed with an
array's address, extents and strides and handed to the driver. How each kind binds arrays to
its maps is its launcher (`tmagen/kinds/<kind>/launch.py`); `tmagen verify`, `tmagen bench` and
`tmagen.load` all launch through `launch_parameters`.

Shapes and strides are outermost first, strides in elements (as ``torch.Tensor.stride()``);
``None`` strides mean contiguous.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from tmagen import runtime
from tmagen.kinds.base import Array, Call, MapBinding, Operand
from tmagen.plan import Plan
from tmagen.planning import MapPlan
from tmagen.rules import TensorMapArgs
from tmagen.strides import contiguous

__all__ = ["Array", "Call", "Workspaces", "contiguous", "array_args", "driver_arguments", "encode", "encode_binding",
           "launch_parameters"]


def array_args(m: MapPlan, address: int, shape: Sequence[int], strides: Sequence[int] | None = None) -> TensorMapArgs:
    """Map ``m`` (its box, swizzle, dtype) over a tensor of ``shape`` and element ``strides``
    (None: contiguous) at ``address``."""
    es = m.elem_bytes
    strides = contiguous(shape) if strides is None else strides
    return replace(m.args, global_address=int(address), global_dim=tuple(int(n) for n in shape[::-1]),
                   global_strides=tuple(int(s) * es for s in strides[::-1][1:]))


def driver_arguments(a: TensorMapArgs) -> dict[str, Any]:
    """``a`` as cuTensorMapEncodeTiled takes it: integers, innermost first."""
    return {"dtype": a.dtype.driver, "rank": a.rank, "global_address": a.global_address,
            "global_dim": a.global_dim, "global_strides": a.global_strides, "box_dim": a.box_dim,
            "element_strides": a.element_strides, "interleave": int(a.interleave), "swizzle": int(a.swizzle),
            "l2_promotion": int(a.l2_promotion), "oob_fill": int(a.oob_fill)}


def encode(a: TensorMapArgs, into: runtime.TensorMap | None = None) -> runtime.TensorMap:
    """The CUtensorMap of ``a`` (in a current context)."""
    return runtime.encode_tiled(**driver_arguments(a), into=into)


def encode_binding(plan: Plan, b: MapBinding, into: runtime.TensorMap | None = None) -> runtime.TensorMap:
    return encode(array_args(plan.map(b.role), b.ptr, b.shape, b.strides), into)


class Workspaces:
    """The ``workspace`` of `launch_parameters` for launches made by hand (verify, the benchmarks):
    a new counter buffer, zeroed, and a partial buffer per call, freed together by `free`."""

    def __init__(self) -> None:
        self.buffers: list[runtime.Buffer] = []

    def __call__(self, counter_bytes: int, partial_bytes: int) -> tuple[int, int]:
        counters, partials = runtime.Buffer(counter_bytes), runtime.Buffer(partial_bytes)
        counters.fill(0)
        self.buffers += [counters, partials]
        return counters.ptr, partials.ptr

    def free(self) -> None:
        for buffer in self.buffers:
            buffer.free()
        self.buffers.clear()


def launch_parameters(plan: Plan, inputs: Sequence[Operand], out: Operand, multiprocessors: int,
                      workspace: Callable[[int, int], tuple[int, int]] | None = None, memory_bytes_per_us: int = 0,
                      **params: Any) -> tuple[Call, list[Any]]:
    """The launcher's call on ``inputs`` into ``out``, and the kernel's parameters: each map
    encoded, then the kind's own values. ``workspace`` ((counter bytes, partial bytes) -> (zeroed
    counters, partials): a matmul's split of K), ``memory_bytes_per_us`` (the GPU's DRAM peak, by
    which a matmul picks its dispatch table; 0: the first) and
    ``params`` go to a launcher that takes them (the matmul's split of K and epilogue);
    ``call.kernel`` says which kernel of the family (`KernelPlan.family`) to launch."""
    launcher = plan.launcher
    if launcher is None:
        raise TypeError(f"{plan.name}: {plan.description} has no launcher")
    if getattr(launcher, "parameters", ()):
        call = launcher.bind(plan, inputs, out, multiprocessors, workspace=workspace,  # type: ignore[call-arg]
                             memory_bytes_per_us=memory_bytes_per_us, **params)
    else:
        call = launcher.bind(plan, inputs, out, multiprocessors)
    return call, [*encode_each(call.maps, lambda b: encode_binding(plan, b)), *call.extra]


def encode_each(maps: Sequence[MapBinding],
                encode: Callable[[MapBinding], runtime.TensorMap]) -> list[runtime.TensorMap]:
    """``encode`` of each binding, in order, a binding passed twice encoded once (the matmul passes A's
    map again in place of its edge rows' where M has no edge)."""
    encoded: dict[MapBinding, runtime.TensorMap] = {}
    for b in maps:
        if b not in encoded:
            encoded[b] = encode(b)
    return [encoded[b] for b in maps]
