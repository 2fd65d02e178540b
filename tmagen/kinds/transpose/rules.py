"""The transpose kind's rules: what its micro-tiles of 16-byte rows need of the tensor and the box."""

from __future__ import annotations

from collections.abc import Iterator

from tmagen.errors import Violation
from tmagen.kinds.base import RuleBook, unit_element_strides
from tmagen.spec import Spec, TransposeKernel

RULES = RuleBook()
KERNEL = "tmagen's transpose kernel (templates/transpose/kernels.cuh.j2)"
UNIT_SIZES = (1, 2, 4, 8, 16)


def unit_bytes(spec: Spec) -> int:
    """Bytes of one transposed unit: the kernel's, or one element."""
    k = spec.kernel
    assert isinstance(k, TransposeKernel)
    return k.unit_bytes if k.unit_bytes is not None else spec.tensors[0].dt.nbytes


def _unit_ok(spec: Spec) -> bool:
    unit = unit_bytes(spec)
    return unit % spec.tensors[0].dt.nbytes == 0 and unit in UNIT_SIZES


@RULES.rule("transpose-one-tensor", "a transpose moves one tensor", KERNEL)
def _one_tensor(spec: Spec) -> Iterator[Violation]:
    if len(spec.tensors) != 1:
        yield Violation("transpose-one-tensor", "tensors", f"{len(spec.tensors)} tensors",
                        "a transpose kernel moves one", "give one tensor (a spec per tensor)", KERNEL)


@RULES.rule("transpose-rank", "a transpose takes a 2-D tensor or one batched over up to 3 leading dimensions", KERNEL)
def _rank(spec: Spec) -> Iterator[Violation]:
    t = spec.tensors[0]
    if t.rank < 2:
        yield Violation("transpose-rank", "tensors[0].shape", f"{t.shape} ({t.rank} dimension)",
                        "transpose exchanges the last two dimensions of a 2-D to 5-D tensor",
                        "give 2 to 5 dimensions", KERNEL)


@RULES.rule("transpose-unit-bytes", "a transposed unit is 1, 2, 4, 8 or 16 bytes, whole elements", KERNEL)
def _unit(spec: Spec) -> Iterator[Violation]:
    if not _unit_ok(spec):
        t = spec.tensors[0]
        yield Violation("transpose-unit-bytes", "kernel.unit_bytes", str(unit_bytes(spec)),
                        f"a transposed unit is 1, 2, 4, 8 or 16 bytes and a whole number of {t.dtype} elements",
                        f"use one of {', '.join(str(u) for u in UNIT_SIZES if u % t.dt.nbytes == 0)}", KERNEL)


@RULES.rule("transpose-whole-units", "shape[-1] and box[-1] hold whole units", KERNEL)
def _whole_units(spec: Spec) -> Iterator[Violation]:
    if not _unit_ok(spec):
        return
    t = spec.tensors[0]
    unit = unit_bytes(spec)
    per = unit // t.dt.nbytes
    for fld, value in (("shape[-1]", t.shape[-1]), ("box[-1]", t.box[-1])):
        if value % per:
            yield Violation("transpose-whole-units", f"tensors[0].{fld}", str(value),
                            f"it must hold whole {unit}-byte units", f"use a multiple of {per}", KERNEL)


@RULES.rule("transpose-row-blocks", "box[-2] is a whole number of 16-byte blocks' rows (16 / unit)", KERNEL)
def _row_blocks(spec: Spec) -> Iterator[Violation]:
    t = spec.tensors[0]
    if not _unit_ok(spec) or t.rank < 2:
        return
    rows_per_block = 16 // unit_bytes(spec)
    if t.box[-2] % rows_per_block:
        yield Violation("transpose-row-blocks", "tensors[0].box[-2]", str(t.box[-2]),
                        f"the transpose works on blocks of {rows_per_block} rows x 16 bytes",
                        f"use a multiple of {rows_per_block}", KERNEL)


@RULES.rule("transpose-one-matrix-per-box", "a batched transpose moves one matrix per box (box[:-2] all 1)", KERNEL)
def _one_matrix(spec: Spec) -> Iterator[Violation]:
    t = spec.tensors[0]
    for d in range(t.rank - 2):
        if t.box[d] != 1:
            yield Violation("transpose-one-matrix-per-box", f"tensors[0].box[{d}]", str(t.box[d]),
                            "a batched transpose moves one matrix per box", "use 1", KERNEL)


@RULES.rule("transpose-unit-element-strides", "a transpose's box has element strides of 1", KERNEL)
def _unit_strides(spec: Spec) -> Iterator[Violation]:
    return unit_element_strides(spec, "transpose-unit-element-strides", "a transpose moves every element of its box",
                                KERNEL)
