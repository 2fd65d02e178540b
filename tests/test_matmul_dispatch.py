"""The matmul family's per-shape choice against the H200 measurements it was fitted to
(tests/data/hw_h200/matmul_tune.json: every kernel and split of the family timed on 49 shapes):
the shipped model must pick, shape by shape, a launch that was measured fast, and the C API's
arithmetic is the same (tests/gpu/test_matmul_family.py compares the two on the GPU)."""

from __future__ import annotations

import json
import math

from tmagen.kinds.matmul.dispatch import DISPATCH, Choice
from tmagen.plan import load

from conftest import REPO

DATA = json.loads((REPO / "tests" / "data" / "hw_h200" / "matmul_tune.json").read_text())


def _measured(row: dict, c: Choice) -> float:
    key = f"{c.variant}/{c.splits}/{c.split_from if c.splits > 1 else 0}"
    return float(row["us"][key])


def test_the_model_picks_measured_fast_launches_on_the_h200() -> None:
    family = load(REPO / "specs" / "matmul_bf16_tn.json").kernel.detail
    assert [f"{p.bm}x{p.bn}" for p in family.kernels] == DATA["kernels"], "the family the data was measured on"
    assert family.dispatch is DISPATCH
    slowdowns = []
    for row in DATA["rows"]:
        c = family.choose(row["m"], row["n"], row["k"], DATA["sms"])
        slowdowns.append(_measured(row, c) / min(row["us"].values()))
    geomean = math.exp(sum(math.log(s) for s in slowdowns) / len(slowdowns))
    assert geomean <= 1.04, f"the model's choices are {geomean:.3f} of the best measured launch (geometric mean)"
    assert max(slowdowns) <= 1.40, f"one choice is {max(slowdowns):.2f} of its shape's best"


def test_every_choice_is_a_launch_the_family_can_make() -> None:
    family = load(REPO / "specs" / "matmul_bf16_tn.json").kernel.detail
    for m, n, k in [(1, 1, 1), (1, 8, 100000), (100000, 8, 1), (3000, 3000, 3000), (65536, 65536, 64)]:
        c = family.choose(m, n, k, 132)
        p = family.kernels[c.variant]
        tiles = -(-m // p.bm) * -(-n // p.bn)
        assert 1 <= c.splits <= min(family.max_splits, max(1, -(-k // p.bk)))
        assert c.split_from == 0 if c.splits == 1 else 0 <= c.split_from < tiles
        counters, partials = family.workspace_bytes(c, m, n)
        assert (counters > 0) == (c.splits > 1) and partials == (tiles - c.split_from) * c.splits * p.bm * p.bn * 4 * (
            c.splits > 1)


def test_the_tuner_scores_the_shipped_model_as_the_test_does() -> None:
    """lab.tune_matmul's score (what its fit minimises) of the shipped constants on the recorded data."""
    from lab.tune_matmul import _score
    from tmagen.kinds.matmul.dispatch import TileShape

    shapes = [TileShape(int(key.split("x")[0]), int(key.split("x")[1]), DATA["bk"]) for key in DATA["kernels"]]
    score, lines = _score(DISPATCH, DATA, shapes)
    assert len(lines) == len(DATA["rows"])
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
    for name in ("specs/matmul_bf16_tn.json", "specs/matmul_f16_nn_f32.json"):
        assert len(load(REPO / name).kernel.detail.kernels) == 6
