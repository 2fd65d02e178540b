"""The inspect kind's rules."""

from __future__ import annotations

from collections.abc import Iterator

from tmagen.errors import Violation
from tmagen.kinds.base import RuleBook
from tmagen.spec import InspectKernel, Spec

RULES = RuleBook()
KERNEL = "tmagen's inspect kernel (templates/inspect/kernels.cuh.j2)"


@RULES.rule("inspect-coords-rank", "kernel.coords has one coordinate per dimension of every tensor", KERNEL)
def _coords_rank(spec: Spec) -> Iterator[Violation]:
    k = spec.kernel
    assert isinstance(k, InspectKernel)
    if k.coords is None:
        return
    for t in spec.tensors:
        if len(k.coords) != t.rank:
            yield Violation("inspect-coords-rank", "kernel.coords", f"{k.coords} ({len(k.coords)} entries)",
                            f"tensor {t.name!r} has {t.rank} dimensions", "give one coordinate per dimension", KERNEL)
