"""The matmul family's per-shape choice against the H200 measurements it was fitted to
(tests/data/hw_h200/matmul_tune.json: every kernel and split of the family timed on 49 shapes):
the shipped model must pick, shape by shape, a launch that was measured fast, and the C API's
arithmetic is the same (tests/gpu/test_matmul_family.py compares the two on the GPU)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from tmagen.kinds.matmul.dispatch import DISPATCH, Choice
from tmagen.plan import load

from conftest import REPO

DATA = json.loads((REPO / "tests" / "data" / "hw_h200" / "matmul_tune.json").read_text())
# the fp8 family of tmagen.ops.matmul (tmagen/ops_specs/bench_matmul_fp8.json), timed the same way
FP8_DATA = json.loads((REPO / "tests" / "data" / "hw_h200" / "matmul_tune_fp8.json").read_text())
MEASURED = [(REPO / "specs" / "matmul_bf16_tn.json", DATA),
            (REPO / "tmagen" / "ops_specs" / "bench_matmul_fp8.json", FP8_DATA)]


def _measured(row: dict, c: Choice) -> float:
    """The measured time of the choice, or of the nearest split the measurement tried (it tries 1, 2,
    3, 4, 6, 8, 12 and 16 ways) of the same kernel on the same groups, as the tuner scores it."""
    key = f"{c.variant}/{c.splits}/{c.split_from if c.splits > 1 else 0}"
    if key in row["us"]:
        return float(row["us"][key])
    tail = c.splits > 1 and c.split_from > 0
    near = [k for k in row["us"] if k.split("/")[0] == str(c.variant) and (k.split("/")[2] != "0") == tail]
    assert near, f"no measured launch of kernel {c.variant} near {key}"
    return float(row["us"][min(near, key=lambda k: abs(int(k.split("/")[1]) - c.splits))])


@pytest.mark.parametrize(("spec", "data"), MEASURED, ids=["bf16", "fp8"])
def test_the_model_picks_measured_fast_launches_on_the_h200(spec: Path, data: dict) -> None:
    family = load(spec).kernel.detail
    assert [p.shape.key for p in family.kernels] == data["kernels"], "the family the data was measured on"
    assert family.dispatch is DISPATCH
    slowdowns = []
    for row in data["rows"]:
        c = family.choose(row["m"], row["n"], row["k"], data["sms"])
        slowdowns.append(_measured(row, c) / min(row["us"].values()))
    geomean = math.exp(sum(math.log(s) for s in slowdowns) / len(slowdowns))
    assert geomean <= 1.04, f"the model's choices are {geomean:.3f} of the best measured launch (geometric mean)"
    assert max(slowdowns) <= 1.40, f"one choice is {max(slowdowns):.2f} of its shape's best"


def test_every_choice_is_a_launch_the_family_can_make() -> None:
    family = load(REPO / "specs" / "matmul_bf16_tn.json").kernel.detail
    for m, n, k in [(1, 1, 1), (1, 8, 100000), (100000, 8, 1), (3000, 3000, 3000), (65536, 65536, 64)]:
        c = family.choose(m, n, k, 132)
        p = family.kernels[c.variant]
        tile_rows = -(-m // p.bm)
        groups = -(-tile_rows // p.cluster) * -(-n // p.bn)  # a cluster's tiles, one above the other
        assert 1 <= c.splits <= min(family.max_splits, max(1, -(-k // p.bk)))
        assert c.split_from == 0 if c.splits == 1 else 0 <= c.split_from < groups
        counters, partials = family.workspace_bytes(c, m, n)
        split_tiles = (groups - c.split_from) * p.cluster
        assert (counters > 0) == (c.splits > 1) and partials == split_tiles * c.splits * p.bm * p.bn * 4 * (
            c.splits > 1)
        grid = family.grid(c, m, n, 132)
        assert grid % p.cluster == 0 and p.cluster <= grid <= 132, "whole clusters, no more than the SMs hold"


@pytest.mark.parametrize("data", [DATA, FP8_DATA], ids=["bf16", "fp8"])
def test_the_tuner_scores_the_shipped_model_as_the_test_does(data: dict) -> None:
    """lab.tune_matmul's score (what its fit minimises) of the shipped constants on the recorded data."""
    from lab.tune_matmul import _score
    from tmagen.kinds.matmul.dispatch import TileShape

    shapes = [TileShape.from_key(key, data["bk"]) for key in data["kernels"]]
    score, lines = _score(DISPATCH, data, shapes)
    assert len(lines) == len(data["rows"])
    assert math.exp(score / len(lines)) == min(1.04, math.exp(score / len(lines)))  # within the bound above
    assert all(got >= best for _, _, _, _, got, best, _ in lines)


def test_boxes_the_family_failed_on_keep_their_own_tile() -> None:
    """The campaign's specs whose derived tiles gave wrong products on the H200 (their own tiles
    matched) now make one kernel, and tmagen's own specs keep the whole family."""
    from tmagen.plan import resolve
    from tmagen.spec import parse_spec

    failed = json.loads((REPO / "tests" / "data" / "hw_h200" / "matmul_family_failures.json").read_text())
    assert len(failed["specs"]) == 7
    for raw in failed["specs"]:
        assert raw["kernel"]["dispatch"] == "per_shape"
        family = resolve(parse_spec(raw)).kernel.detail
        assert [(p.bm, p.bn) for p in family.kernels] == [tuple(raw["kernel"]["tile"][:2])], raw["name"]
    from tmagen.kinds.matmul.plan import FAMILY_TILES

    for name in ("specs/matmul_bf16_tn.json", "specs/matmul_f16_nn_f32.json"):  # their own tile is the first
        assert [(p.bm, p.bn, p.consumers) for p in load(REPO / name).kernel.detail.kernels] == list(FAMILY_TILES)


def test_fp8_tiles_have_their_own_keys_and_fall_back_to_the_16_bit_ones() -> None:
    from tmagen.kinds.matmul.dispatch import Dispatch, TileCost, TileShape

    shape = TileShape(128, 192, 128, element_bytes=1, cluster=1)
    assert shape.key == "fp8:128x192" and TileShape.from_key(shape.key, 128) == shape
    paired = TileShape(128, 128, 128, element_bytes=1, cluster=2)
    assert paired.key == "fp8:128x128c2" and TileShape.from_key("fp8:128x128c2", 128) == paired
    assert TileShape.from_key("128x128c2", 64) == TileShape(128, 128, 64, 2, 2)
    d = Dispatch("gpu", "now", 1, 1, {"128x128": TileCost(1, 1), "128x128c2": TileCost(2, 2),
                                       "fp8:128x128": TileCost(3, 3)}, TileCost(700, 1500))
    assert d.cost(paired) == TileCost(3, 3)  # the fp8 tile alone before the 16-bit pair
    assert d.cost(TileShape(128, 128, 64, 2, 2)) == TileCost(2, 2)
    assert d.cost(TileShape(64, 64, 128, 1, 1)) == TileCost(700 * 64 * 64 // (128 * 256), 1500)
    d16 = Dispatch("gpu", "now", 1, 1, {"128x128c2": TileCost(2, 2)}, TileCost(700, 1500))
    assert d16.cost(paired) == TileCost(2, 2)  # no fp8 measurement: the 16-bit kernel's
