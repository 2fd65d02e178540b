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
    # the data measured the kernels but the twins in pairs (taken where rows straddle sectors; scored
    # by test_pairs_are_taken_where_rows_straddle), on every shape, its ragged rows too
    alone = family.candidates(straddle=False)
    assert [family.kernels[i].shape.key for i in alone] == data["kernels"], "the family the data was measured on"
    assert family.dispatch is DISPATCH
    slowdowns = []
    for row in data["rows"]:
        c = family.choose(row["m"], row["n"], row["k"], data["sms"], straddle=False)
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
        twins = [(128, 192, 2), (64, 256, 1), (64, 128, 1), (192, 192, 3)]  # their twins in pairs, last
        assert [(p.bm, p.bn, p.consumers) for p in load(REPO / name).kernel.detail.kernels] == [*FAMILY_TILES, *twins]


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


PAIRS = json.loads((REPO / "tests" / "data" / "hw_h100" / "matmul_pairs.json").read_text())


@pytest.mark.parametrize(("spec", "kind"), [(REPO / "specs" / "matmul_bf16_tn.json", "bf16"),
                                            (REPO / "tmagen" / "ops_specs" / "bench_matmul_fp8.json", "fp8")])
def test_pairs_are_taken_where_rows_straddle(spec: Path, kind: str) -> None:
    """The whole family with its twins in pairs, timed on an H100 in one process: where dense rows
    straddle 32-byte sectors, the launch chosen among the twins (where they pay) must have measured
    no slower than the one chosen among the kernels alone, and faster by a tenth somewhere."""
    family = load(spec).kernel.detail
    data = PAIRS["family"][kind]
    assert [p.shape.key for p in family.kernels] == data["kernels"]
    ratios = []
    for row in data["rows"]:
        m, n, k = row["m"], row["n"], row["k"]
        if not family.dense_rows_straddle(n, k):
            assert family.choose(m, n, k, 132) == family.choose(m, n, k, 132, straddle=False)
            continue
        took_pairs = _measured(row, family.choose(m, n, k, 132))
        took_alone = _measured(row, family.choose(m, n, k, 132, straddle=False))
        assert took_pairs <= took_alone, (m, n, k, took_pairs, took_alone)
        ratios.append(took_pairs / took_alone)
    assert len(ratios) >= 8 and min(ratios) < 0.9


@pytest.mark.parametrize("kind", ["bf16", "fp8"])
def test_tiles_that_run_alone_gain_in_pairs_on_large_straddling_shapes(kind: str) -> None:
    """128 x 192 (and, bf16, 192 x 192) timed alone in one process and in pairs in another on large
    shapes: on straddling rows each tile in pairs within 2% of alone or faster, and a fifth faster
    on one shape at least (fp8 10000^3, bf16 4104^3)."""
    from tmagen.kinds.matmul.plan import rows_straddle

    data = PAIRS["large"][kind]
    ratios = []
    for alone_row, pairs_row in zip(data["alone"]["rows"], data["pairs"]["rows"], strict=True):
        if not rows_straddle(0, alone_row["k"] * (1 if kind == "fp8" else 2)):
            continue
        for tile, key in enumerate(data["alone"]["kernels"]):
            if key.removeprefix("fp8:") not in ("128x192", "192x192"):
                continue
            assert data["pairs"]["kernels"][tile] == key + "c2"
            alone, pairs = (min(t for v, t in row["us"].items() if v.split("/")[0] == str(tile))
                            for row in (alone_row, pairs_row))
            assert pairs <= 1.02 * alone, (alone_row["m"], alone_row["n"], alone_row["k"], key)
            ratios.append(pairs / alone)
    assert ratios and min(ratios) < 0.8


def test_rows_straddle_by_pointer_or_pitch() -> None:
    """The probe behind ROW_SECTOR: pitch 16 mod 128 bytes, or the pointer 16 bytes in, slowed the
    tiles alone by a third; pitch 32 or 64 mod 128 did not (tests/data/hw_h100/matmul_pairs.json)."""
    from tmagen.kinds.matmul.plan import rows_straddle

    assert not rows_straddle(0, 8192) and not rows_straddle(256, 8224) and not rows_straddle(64, 8256)
    assert rows_straddle(16, 8192) and rows_straddle(0, 8208) and rows_straddle(0, 2000)
    probe = PAIRS["probe"]
    for key, row in probe.items():
        pitch, pointer = (int(part.split("=")[1]) for part in key.split()[2:4])
        twins = ((1, 7), (6, 8)) if key.startswith("matmul_bf16") else ((1, 4),)  # 128 x 192 first
        for i, (tile, twin) in enumerate(twins):
            alone, pairs = min(row["us"][str(tile)]), min(row["us"][str(twin)])
            if rows_straddle(pointer, pitch):  # the pairs gain, 128 x 192's a fifth or more
                assert pairs < alone and (i > 0 or alone > 1.2 * pairs), (key, tile)
            else:  # nothing to gain beyond 2%
                assert pairs > 0.98 * alone, (key, tile)


@pytest.mark.parametrize("kind", ["bf16", "fp8"])
def test_the_tuner_scores_a_family_with_twins_as_launches_choose(kind: str) -> None:
    """lab.tune_matmul fits on data of a family with twins: its score takes each shape's launch
    among the family's candidates (twins in pairs where the measured dense rows straddle), as
    `MatmulFamily.choose` does, not among every kernel."""
    from lab.tune_matmul import _candidates, _score
    from tmagen.kinds.matmul.dispatch import TileShape

    data = PAIRS["family"][kind]
    family = load(REPO / data["spec"]).kernel.detail
    candidates = _candidates(data)
    assert candidates is not None and _candidates(DATA if kind == "bf16" else FP8_DATA) is None
    shapes = [TileShape.from_key(key, data["bk"]) for key in data["kernels"]]
    _, lines = _score(DISPATCH, data, shapes, candidates)
    for row, line in zip(data["rows"], lines, strict=True):
        c = family.choose(row["m"], row["n"], row["k"], data["sms"], max_splits=16)
        assert line[3] == f"{c.variant}/{c.splits}/{c.split_from}"
