"""The inspect kind's plan: one kernel per map, loading one box into a window of shared memory."""

from __future__ import annotations

from dataclasses import dataclass

from tmagen.planning import PATTERN_ALIGN, KernelPlan, MapSpec, box_layout
from tmagen.spec import InspectKernel, Spec

INSPECT_THREADS = 128


@dataclass(frozen=True)
class InspectPlan:
    """Where the kernel loads its box: the start coordinates, outermost first."""

    coords: tuple[int, ...]


def maps(spec: Spec) -> list[MapSpec]:
    """One map per tensor, named by the tensor (as a spec without a kernel has them)."""
    return [MapSpec(role=t.name, tensor=t, index=i, mma=t.mma) for i, t in enumerate(spec.tensors)]


def plan(spec: Spec, maps: list[MapSpec]) -> tuple[KernelPlan, ...]:
    """One kernel per map: a box window at the map's smem_offset, plus the alignment slack."""
    k = spec.kernel
    assert isinstance(k, InspectKernel)
    out = []
    for m in maps:
        layout = box_layout(m)
        coords = tuple(k.coords) if k.coords is not None else (0,) * m.tensor.rank
        out.append(KernelPlan(f"{spec.name}_inspect_{m.role}", (m.role,), INSPECT_THREADS,
                              layout.base_address + layout.footprint + PATTERN_ALIGN, detail=InspectPlan(coords)))
    return tuple(out)
