"""Every rule of every kernel kind (`tmagen/kinds/<kind>/rules.py`) has a spec that breaks it and
hears it by its id, on its field; a spec that breaks several hears them all at once."""

from __future__ import annotations

import json
from typing import Any

import pytest
from spec_edit import edited

from tmagen import kinds
from tmagen.plan import check
from tmagen.spec import parse_spec

from conftest import REPO

MATMUL = json.loads((REPO / "specs" / "matmul_bf16_tn.json").read_text())


def tile(kind: dict[str, Any], shape: list[int] | None = None, box: list[int] | None = None,
         **tensor: Any) -> dict[str, Any]:
    """A one-tensor float32 spec of ``kind``."""
    t = {"name": "t", "dtype": "float32", "shape": shape or [256, 256], "box": box or [32, 32], **tensor}
    return {"name": "k", "tensors": [t], "kernel": kind}


def matmul(**changes: Any) -> dict[str, Any]:
    return edited(MATMUL, **changes)


TWO = {"name": "k", "kernel": {"kind": "copy"},
       "tensors": [{"name": "a", "dtype": "float32", "shape": [64, 64], "box": [32, 32]},
                   {"name": "b", "dtype": "float32", "shape": [64, 64], "box": [32, 32]}]}

BREAKS = [
    ("inspect-coords-rank", tile({"kind": "inspect", "coords": [0]}), "kernel.coords"),
    ("copy-one-tensor", TWO, "tensors"),
    ("copy-unit-element-strides", tile({"kind": "copy"}, element_strides=[2, 1]), "tensors[0].element_strides"),
    ("copy-plain-layout", tile({"kind": "copy"}, shape=[4, 64, 64], box=[1, 8, 4], interleave="16B"),
     "tensors[0].interleave"),
    ("transpose-one-tensor", {**TWO, "kernel": {"kind": "transpose"}}, "tensors"),
    ("transpose-rank", tile({"kind": "transpose"}, shape=[64], box=[32]), "tensors[0].shape"),
    ("transpose-unit-bytes", tile({"kind": "transpose", "unit_bytes": 12}), "kernel.unit_bytes"),
    ("transpose-whole-units", tile({"kind": "transpose", "unit_bytes": 16}, shape=[256, 258]), "tensors[0].shape[-1]"),
    ("transpose-row-blocks", tile({"kind": "transpose"}, box=[6, 32]), "tensors[0].box[-2]"),
    ("transpose-one-matrix-per-box", tile({"kind": "transpose"}, shape=[4, 64, 64], box=[2, 32, 32]),
     "tensors[0].box[0]"),
    ("transpose-unit-element-strides", tile({"kind": "transpose"}, element_strides=[2, 1]),
     "tensors[0].element_strides"),
    ("matmul-tensors", matmul(kernel__a="x"), "kernel.a"),
    ("matmul-matrices", matmul(tensors__0__mma={"operand": "a"}), "tensors[0].mma"),
    ("matmul-zero-fill", matmul(tensors__1__oob_fill="nan"), "tensors[1].oob_fill"),
    ("matmul-types", matmul(tensors__2__dtype="int32"), "tensors[2].dtype"),
    ("matmul-shapes", matmul(tensors__2__shape=[1000, 992]), "tensors[2].shape"),
    ("matmul-tile", matmul(kernel__tile=[128, 256, 40]), "kernel.tile[2]"),
    ("matmul-fp8", matmul(kernel__promote_every=128), "kernel.promote_every"),
    ("matmul-registers", matmul(kernel__tile=[256, 256, 64]), "kernel.tile"),
    ("matmul-boxes", matmul(tensors__2__box=[32, 64]), "tensors[2].box"),
    ("matmul-cluster", matmul(kernel__tile=[128, 64, 64], kernel__cluster=2), "kernel.cluster"),
]


def test_every_kind_rule_has_a_breaking_spec() -> None:
    assert {rule for rule, _, _ in BREAKS} == {r.id for k in kinds.all_kinds() for r in k.rules.rules}


@pytest.mark.parametrize("rule, data, field", BREAKS, ids=[b[0] for b in BREAKS])
def test_a_broken_kind_rule_is_heard_by_its_id_and_field(rule: str, data: dict[str, Any], field: str) -> None:
    found = check(parse_spec(data))
    assert (rule, field) in {(v.rule, v.field) for v in found}, [str(v) for v in found]
    hit = next(v for v in found if v.rule == rule)
    assert hit.fix and hit.source and hit.why, hit


def test_a_spec_hears_every_kind_rule_it_breaks_at_once() -> None:
    found = {v.rule for v in check(parse_spec(matmul(kernel__tile=[96, 264, 40], tensors__1__oob_fill="nan")))}
    assert {"matmul-tile", "matmul-zero-fill"} <= found
