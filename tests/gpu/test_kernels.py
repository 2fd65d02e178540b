"""Generated copy and transpose kernels on the GPU, checked element for element against numpy on
fresh random data with poisoned outputs."""

from __future__ import annotations

import pytest

from tmagen.plan import resolve
from tmagen.verify import Verifier

pytestmark = pytest.mark.gpu

DTYPES = {1: "uint8", 2: "float16", 4: "float32", 8: "int64"}


def copy_spec(rank: int, es: int, swizzle: str) -> dict:
    span = {"none": 128, "64B": 64, "128B": 128}[swizzle]
    inner = span // es
    box = [2, 3, 4, 5][: rank - 1][::-1] + [inner] if rank > 1 else [min(inner * 2, 256)]
    # extents that are no multiple of the box: partial tiles at every edge
    shape = [b * 3 + 1 for b in box[:-1]] + [box[-1] * 5 + 16 // es]
    return {"name": f"copy_r{rank}_{es}_{swizzle.lower()}", "tensors": [{
        "name": "data", "dtype": DTYPES[es], "shape": shape, "box": box, "swizzle": {"mode": swizzle}}],
        "kernel": {"kind": "copy", "stages": 3}}


COPIES = [copy_spec(rank, es, swz) for rank in range(1, 6) for es in DTYPES for swz in ("none", "64B", "128B")
          if not (rank == 1 and swz != "none")]
# several boxes per stage, under one mbarrier, with partial stages at the end
COPIES += [{**c, "name": c["name"] + "_x5", "kernel": {**c["kernel"], "boxes_per_stage": 5}}
           for c in COPIES if c["name"] in ("copy_r1_4_none", "copy_r3_2_64b", "copy_r5_1_128b")]


def test_copy_ranks_dtypes_swizzles_and_edges(device, compiler, report) -> None:
    compiled = compiler(COPIES)
    outcomes = []
    for _name, (spec, cubin) in sorted(compiled.items()):
        checker = Verifier(resolve(spec), cubin, device, seed=7)
        try:
            outcomes.append(checker.copy())
            big = [n * 2 + 3 for n in spec.tensors[0].shape[:-1]] + [spec.tensors[0].shape[-1] * 2]
            outcomes.append(checker.copy(shape=big))  # any shape, not only the spec's
        finally:
            checker.close()
    report("copy", [o.__dict__ for o in outcomes])
    assert len(outcomes) == 2 * len(COPIES)
    assert [o for o in outcomes if not o.ok] == []


def transpose_spec(es: int, batched: bool, swizzle: str = "128B") -> dict:
    span = 128
    box_cols = span // es  # one swizzle span of src per row
    box_rows = box_cols if es <= 4 else 16  # dst rows: box_rows * es bytes <= 128
    box_rows = min(box_rows, span // es)
    box = [box_rows, box_cols]
    shape = [box_rows * 8, box_cols * 8]
    if batched:
        box, shape = [1, *box], [3, *shape]
    return {"name": f"transpose_{es}{'_batched' if batched else ''}", "tensors": [{
        "name": "matrix", "dtype": DTYPES[es], "shape": shape, "box": box, "swizzle": {"mode": swizzle}}],
        "kernel": {"kind": "transpose"}}


TRANSPOSES = [transpose_spec(es, batched) for es in DTYPES for batched in (False, True)]


def test_transpose_square_ragged_batched(device, compiler, report) -> None:
    compiled = compiler(TRANSPOSES)
    outcomes = []
    for _name, (spec, cubin) in sorted(compiled.items()):
        t = spec.tensors[0]
        es = t.dt.nbytes
        checker = Verifier(resolve(spec), cubin, device, seed=11)
        try:
            outcomes.append(checker.transpose())  # square, a multiple of the tile
            ragged = [*t.shape[:-2], t.shape[-2] * 3 + 5 * (16 // es), t.shape[-1] * 2 + 16 // es]
            outcomes.append(checker.transpose(shape=ragged))
        finally:
            checker.close()
    report("transpose", [o.__dict__ for o in outcomes])
    assert len(outcomes) == 2 * len(TRANSPOSES)
    assert [o for o in outcomes if not o.ok] == []


def test_example_specs_verify(device, compiler) -> None:
    """The seed's 8x8 int4 transpose and the other runnable examples, as `tmagen verify` runs them."""
    import json

    from conftest import REPO  # type: ignore[import-not-found]

    raw = [json.loads(p.read_text()) for p in sorted((REPO / "specs").glob("*.json"))]
    # a spec without a kernel is proven as tmagen verify proves it: an inspect kernel per map
    raw = [s if "kernel" in s else {**s, "kernel": {"kind": "inspect"}} for s in raw]
    compiled = compiler([s for s in raw if s.get("target", "sm_90a") == "sm_90a"])
    assert "maps_only_bf16_f32" in compiled and "matmul_bf16_tn" in compiled
    assert "transpose_int4_8x8" in compiled
    for name, (spec, cubin) in compiled.items():
        checker = Verifier(resolve(spec), cubin, device, seed=3)
        try:
            for o in checker.run_all(timed=False):
                assert o.ok, (name, o)
        finally:
            checker.close()
