"""Replays what the GPU said (tests/data/hw_h200, recorded by scripts/probe/probe_hw.py on an
H200, driver 580.159): the model must reproduce every recorded shared-memory dump byte for
byte, and the validator must never accept an argument set the driver refused."""

from __future__ import annotations

import gzip
import json
from collections import Counter

import numpy as np
import pytest

from tmagen.rules import RULES, check_encode_tiled
from tmagen.swizzle import smem_offsets

from conftest import HW_DATA

POISON = 0xDEADBEEF


def _dumps() -> tuple[np.ndarray, list[dict]]:
    return np.load(HW_DATA / "inspect.npz")["dumps"], json.loads((HW_DATA / "inspect_meta.json").read_text())


def test_recorded_inspect_covers_the_promised_space() -> None:
    _, meta = _dumps()
    ran = [m for m in meta if m.get("sync") == 0]
    assert len(ran) == len(meta) == 1472
    assert {m["swizzle"] for m in ran} == {0, 1, 2, 3}
    assert {m["esize"] for m in ran} == {1, 2, 4, 8}
    assert {m["offset"] for m in ran} == set(range(0, 1024, 128))
    assert {len(m["box"]) for m in ran} == {2, 3}
    assert {m["inner_bytes"] for m in ran if m["swizzle"] == 3} == set(range(16, 129, 16))
    assert any(c != 0 for m in ran for c in m["coords"])


def test_model_reproduces_every_recorded_dump() -> None:
    """Global memory held uint32 word ids 1, 2, 3, ...; shared memory was poisoned first. The
    expected image is built only from tmagen.swizzle.smem_offsets."""
    dumps, meta = _dumps()
    names = {0: "none", 1: "32B", 2: "64B", 3: "128B"}
    mismatched = []
    for dump, m in zip(dumps, meta):
        es, box, coords, strides = m["esize"], m["box"], m["coords"], m["strides"]
        shape = tuple(box[::-1])  # outermost first
        off = smem_offsets(shape, es, names[m["swizzle"]], base_address=m["offset"]) + m["offset"]
        # global byte address of every element of the box
        idx = np.indices(shape).reshape(len(shape), -1)  # outermost first
        gaddr = (coords[0] + idx[-1]) * es
        for k, stride in enumerate(strides):  # driver dims 1.. are numpy axes -2, -3, ...
            gaddr = gaddr + (coords[k + 1] + idx[-2 - k]) * stride
        expected = np.full(dump.size * 4, 0xEF, np.uint8)
        expected.view(np.uint32)[:] = POISON
        flat_off = off.reshape(-1)
        for b in range(es):
            g = gaddr + b
            word = g // 4 + 1  # the recorded ids are 1-based word indices
            expected[flat_off + b] = ((word >> (8 * (g % 4))) & 0xFF).astype(np.uint8)
        if not np.array_equal(expected, dump.view(np.uint8)):
            mismatched.append((m["swizzle"], m["inner_bytes"], es, m["offset"], box))
    assert mismatched == []


def _encode_rows() -> list[dict]:
    with gzip.open(HW_DATA / "encode.jsonl.gz", "rt") as f:
        return [json.loads(line) for line in f]


def test_validator_never_accepts_what_the_driver_refused() -> None:
    rows = _encode_rows()
    assert len(rows) == 60000
    outcome: Counter[tuple[bool, bool]] = Counter()
    extra_rules: Counter[str] = Counter()
    for a in rows:
        violations = check_encode_tiled(
            dtype=a["dtype"], rank=a["rank"], global_address=a["addr"], global_dim=a["dim"],
            global_strides=a["stride"], box_dim=a["box"], element_strides=a["estride"],
            interleave=a["interleave"], swizzle=a["swizzle"], l2_promotion=a["l2"], oob_fill=a["oob"])
        driver_ok = a["result"] == 0
        outcome[(not violations, driver_ok)] += 1
        if violations and driver_ok:
            extra_rules.update(v.rule for v in violations)
    assert outcome[(True, False)] == 0, "tmagen accepted argument sets the driver refused"
    assert outcome[(True, True)] > 15000 and outcome[(False, False)] > 30000
    # Where tmagen is stricter than the driver it cites a documented rule.
    assert extra_rules, "the recorded sample holds sets only the documents forbid"
    for rule_id in extra_rules:
        assert RULES[rule_id].documented, rule_id


@pytest.mark.parametrize("dims,box,estride,dtype,accepted", [
    # Recorded sets on either side of the measured 228 KiB limit (floor counting).
    ([289, 250, 65535], [34, 32, 27], [1, 1, 1], 8, False),
])
def test_recorded_driver_limit_example(dims, box, estride, dtype, accepted) -> None:
    rows = [a for a in _encode_rows() if a["dim"] == dims and a["box"] == box]
    assert rows and all((a["result"] == 0) == accepted for a in rows)
    v = check_encode_tiled(dtype=dtype, rank=3, global_address=1 << 40, global_dim=dims,
                           global_strides=rows[0]["stride"], box_dim=box, element_strides=estride,
                           interleave=0, swizzle=0, l2_promotion=0, oob_fill=0)
    assert "box-bytes-driver-limit" in {x.rule for x in v}
