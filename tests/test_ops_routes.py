"""The ops table's thresholds and the tile kernel's sides against their measurement (written by
lab.ops_routes): on every move measured on an H100 (tests/data/hw_h100/ops_routes.json, with the
narrow kernel), the route the shipped table plans is one that was timed, and within noise of the
fastest route timed; where a size has two tile sides, the side the planner picks is within noise of
the faster one measured on an H200 (tests/data/hw_h200/ops_routes.json, which predates the narrow
kernel)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from lab.ops_bench import OpsCase, contiguous_strides
from lab.ops_routes import VARIANTS, label, plan_with
from tmagen import ops
from tmagen.kinds.strided import plan as sp

DATA = json.loads((Path(__file__).parent / "data" / "hw_h200" / "ops_routes.json").read_text())
ROUTES = json.loads((Path(__file__).parent / "data" / "hw_h100" / "ops_routes.json").read_text())
NOISE = 1.10  # a route within 10% of the fastest measured is as good (repetitions spread up to ~5%)
SMS = 132  # the H200 and the H100 they were measured on


def _case(record: dict[str, Any]) -> OpsCase:
    return OpsCase(record["class"], record["op"], tuple(record["shape"]), record["dtype"], tuple(record["dims"]),
                   record["view"])


def _layout(case: OpsCase) -> tuple[Any, ...]:
    """plan_move's arguments for the case as tmagen.ops sees it (its input read in the output's order)."""
    shape, src, offset = case.source
    return shape, src, tuple(contiguous_strides(shape)), case.element_bytes, offset * case.element_bytes % 16, 0, SMS


def _time(record: dict[str, Any], route: str) -> float | None:
    """The fastest measured time of ``route`` (a label), None where it was not measured."""
    times = [record["us"][name] for name, timed in record["routes"].items() if timed == route and name in record["us"]]
    return min(times) if times else None


@pytest.mark.parametrize("record", ROUTES["runs"][0]["records"],
                         ids=lambda r: f"{r['op']}-{r['dtype']}-{'x'.join(map(str, r['shape']))}{r['view']}")
def test_the_shipped_route_of_every_measured_move_is_within_noise_of_the_fastest(record: dict[str, Any]) -> None:
    case = _case(record)
    route = label(ops.plan_move(*_layout(case)))
    took = _time(record, route)
    assert took is not None, f"{case.describe()} {case.dtype}: the shipped route {route} was never measured"
    fastest = min(record["us"][name] for name in record["routes"] if name in record["us"])
    assert took <= NOISE * fastest, (case.describe(), case.dtype, case.shape, route, took, record["us"])


def test_where_a_size_has_two_tile_sides_the_planner_picks_the_faster() -> None:
    shipped, probe = DATA["runs"]
    compared = 0
    for small, large in zip(shipped["records"], probe["records"]):
        case = _case(small)
        assert _case(large) == case
        if case.element_bytes not in sp.TILE_SIDE_LARGE:
            continue
        measured_small = str(sp.TILE_SIDE[case.element_bytes]) == str(shipped["tile_side"][str(case.element_bytes)])
        measured_large = probe["tile_side"][str(case.element_bytes)] == sp.TILE_SIDE_LARGE[case.element_bytes]
        assert measured_small and measured_large, "the measurement is of other sides than the planner's"
        times = {_time(small, "tile"), _time(large, "tile")}
        if None in times:
            continue  # a layout the tile kernel does not take
        move = plan_with(ops.table(), VARIANTS["tile"], *_layout(case))
        assert move.how == "tile"
        picked = _time(large, "tile") if move.strided.side == sp.TILE_SIDE_LARGE[case.element_bytes] \
            else _time(small, "tile")
        assert picked <= NOISE * min(times), (case.describe(), case.shape, move.strided.side, small["us"], large["us"])
        compared += 1
    assert compared >= 8, compared


L2_HINTS = json.loads((Path(__file__).parent / "data" / "hw_h100" / "movement_l2_hints.json").read_text())


@pytest.mark.parametrize("kind", ["copy", "transpose"])
def test_the_tuned_moves_carry_the_l2_hint_measured_fastest(kind: str) -> None:
    """Each l2_hint's speed over `normal`'s on the 1 GiB moves an H100 timed
    (tests/data/hw_h100/movement_l2_hints.json, scripts/probe/movement_sweep.py v4), as a geometric
    mean: every tuned spec of the kind marks its tensors with the fastest, which beat normal."""
    cases = [c["gbps"] for c in L2_HINTS["cases"] if c["kind"] == kind]
    assert len(cases) >= 6
    gain = {hint: math.exp(sum(math.log(c[f"tuned {hint}"] / c["tuned normal"]) for c in cases) / len(cases))
            for hint in ("normal", "evict_first", "evict_last")}
    fastest = max(gain, key=gain.__getitem__)
    assert gain[fastest] > 1.004, gain
    tuned = {name: raw for name, raw in ops.tuned_specs().items() if raw["kernel"]["kind"] == kind}
    assert tuned and all(t.get("l2_hint") == fastest for raw in tuned.values() for t in raw["tensors"]), tuned


NARROW = json.loads((Path(__file__).parent / "data" / "hw_h100" / "narrow_routes.json").read_text())
STRIDED = {"plane", "bytes"}  # the strided kernels' candidates of a narrow record, beside "words <tile bytes>"


def _narrow_time(record: dict[str, Any], move: Any, row_bytes: int) -> float | None:
    """The measured time of a planned move in a lab.narrow_routes record: the narrow kernel in words at
    the measured tile nearest the planned one, in bytes, the plane kernel, or the TMA route of that label."""
    if move.how == "narrow" and move.strided.src_words:
        tiles = [int(name.split()[1]) for name in record["us"] if name.startswith("words ")]
        planned = move.strided.tile_rows * row_bytes
        nearest = min(tiles, key=lambda t: abs(math.log2(t / planned)))
        return float(record["us"][f"words {nearest}"])
    name = "bytes" if move.how == "narrow" else None
    return record["us"].get(name) if name else _time(record, label(move))


@pytest.mark.parametrize("record", NARROW["records"],
                         ids=lambda r: f"{r['op']}-{r['dtype']}-{'x'.join(map(str, r['shape']))}")
def test_planes_of_short_rows_take_the_strided_kernel_measured_fastest(record: dict[str, Any]) -> None:
    """On the H100's lab.narrow_routes measurement (planes narrow along C: transposes of [R, C] and
    NHWC -> NCHW permutes), the planned route is within noise of the fastest of the strided kernels
    timed (the plane kernel, the narrow kernel in bytes and in words): the narrow kernel in words where
    it was faster, the plane kernel where it was, and TMA only where it beat them both."""
    case = OpsCase("narrow", record["op"], tuple(record["shape"]), record["dtype"], tuple(record["dims"]))
    layout = _layout(case)
    move = ops.plan_move(*layout)
    cols = move.shape[-1]
    took = _narrow_time(record, move, cols * move.itemsize)
    assert took is not None, (case.describe(), case.dtype, case.shape, label(move), "not measured")
    strided = [t for name, t in record["us"].items()
               if name.startswith("words ") or name in STRIDED or record["routes"].get(name) == "plane"]
    assert took <= NOISE * min(strided), (case.describe(), case.dtype, case.shape, label(move), took, record["us"])


def test_the_route_probes_time_each_route_once_beside_the_narrow_kernels_forms(monkeypatch: pytest.MonkeyPatch) -> None:
    """lab.narrow_routes and lab.ops_routes without a GPU (the tensors, views and timing faked): each
    route is timed once under the name that first reached it, the narrow kernel in words once per tile
    size and in bytes where it takes the rows, and a record names every candidate it timed."""
    import lab.narrow_routes as nr
    import lab.ops_bench as ob
    import lab.ops_routes as orr
    import lab.peers as peers
    import tmagen.bench as bench
    import tmagen.kernels as kernels
    from tmagen.arrays import ArrayView

    class Tensors:
        sets, nbytes, xs, ins, outs = 1, 0, [None], [None], [None]

        def writes(self, name: str, launch: Any) -> Any:
            return lambda: None

    def views(case: OpsCase, x: Any, out: Any) -> tuple[ArrayView, ArrayView]:
        shape, src, _ = case.source
        dst = tuple(contiguous_strides(shape))
        return (ArrayView(None, "torch", 0, shape, src, case.element_bytes, case.dtype, None, 0),
                ArrayView(None, "torch", 0, shape, dst, case.element_bytes, case.dtype, None, 0))

    timed: list[list[str]] = []

    def time_case(cands: list[Any], method: Any, **kw: Any) -> dict[str, Any]:
        timed.append([c.name for c in cands])
        return {"candidates": [{"name": c.name, "median_ms": 0.001} for c in cands], "failed": []}

    monkeypatch.setattr(ob, "case_tensors", lambda case: Tensors())
    monkeypatch.setattr(ob, "_memcpy", lambda *a: bench.Candidate("memcpy", "limit", lambda i: None))
    monkeypatch.setattr(orr, "_captured_views", views)
    monkeypatch.setattr(kernels, "multiprocessors", lambda device: SMS)
    monkeypatch.setattr(bench, "time_case", time_case)
    monkeypatch.setattr(peers, "_triton", lambda on: None)
    record = nr.measure(OpsCase("narrow", "transpose", (300000, 20), "uint8"), None)
    names = timed[-1]
    assert len(set(names)) == len(names) and set(record["us"]) == set(names)
    assert record["routes"]["default"] == "narrow(words)" and record["routes"]["plane"] == "plane"
    assert {"words 2048", "words 4096", "words 8192", "bytes"} <= set(names)
    assert len(set(record["routes"].values())) == len(record["routes"]), "a route timed twice"
    record = nr.measure(OpsCase("narrow", "transpose", (500000, 48), "float32"), None)
    assert "bytes" not in record["us"] and not any(n.startswith("words") for n in record["us"])  # 192-byte rows
    record = orr.measure(OpsCase("odd_rows", "transpose", (16385, 8), "bfloat16"), None)
    assert record["class"] == "odd_rows" and {"default", "plane", "torch"} <= set(record["us"])
    assert len(set(record["routes"].values())) == len(record["routes"])
