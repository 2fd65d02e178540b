"""The copy kind's rules."""

from __future__ import annotations

from collections.abc import Iterator

from tmagen.errors import Violation
from tmagen.kinds.base import RuleBook, unit_element_strides
from tmagen.spec import Spec

RULES = RuleBook()
KERNEL = "tmagen's copy kernel (templates/copy/kernels.cuh.j2)"


@RULES.rule("copy-one-tensor", "a copy moves one tensor", KERNEL)
def _one_tensor(spec: Spec) -> Iterator[Violation]:
    if len(spec.tensors) != 1:
        yield Violation("copy-one-tensor", "tensors", f"{len(spec.tensors)} tensors", "a copy kernel moves one",
                        "give one tensor (a spec per tensor to copy several)", KERNEL)


@RULES.rule("copy-unit-element-strides", "a copy's box has element strides of 1", KERNEL)
def _unit_strides(spec: Spec) -> Iterator[Violation]:
    return unit_element_strides(spec, "copy-unit-element-strides",
                                "a strided box skips elements, so the copy would not be one", KERNEL)


@RULES.rule("copy-plain-layout", "a copy moves plain (non-interleaved) layouts", KERNEL)
def _plain(spec: Spec) -> Iterator[Violation]:
    t = spec.tensors[0]
    if t.interleave != "none":
        yield Violation("copy-plain-layout", "tensors[0].interleave", repr(t.interleave),
                        "the copy kernel moves plain (non-interleaved) layouts", "use 'none'", KERNEL)
