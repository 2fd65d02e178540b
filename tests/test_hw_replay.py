"""Replays what the GPU said (tests/data/hw_h200, recorded by scripts/probe/probe_hw.py on an
H200, driver 580.159): the model must reproduce every recorded shared-memory dump byte for
byte, and the validator's errors must agree with the driver's verdict on every recorded set.
The reductions' record (reduce_ops.json, from tests/gpu/test_toolbox.py on an H200) holds rule
reduce-op-for-type to what ran: it refuses exactly the op/type pairs that faulted."""

from __future__ import annotations

import gzip
import json
from collections import Counter

import numpy as np
import pytest

from tmagen.rules import RULES, check_encode_tiled, diagnose_encode_tiled
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


U64 = 1 << 64


def _as_passed(values: list[int]) -> list[int]:
    """What the driver received: probe_hw.py passed the values through ctypes ``c_uint64`` arrays,
    which keep the low 64 bits of a larger Python int (no ``cuuint64_t`` holds 2^64 or more)."""
    return [v % U64 for v in values]


def _findings(a: dict, passed: bool = True):
    wrap = _as_passed if passed else list
    return diagnose_encode_tiled(
        dtype=a["dtype"], rank=a["rank"], global_address=a["addr"], global_dim=wrap(a["dim"]),
        global_strides=wrap(a["stride"]), box_dim=a["box"], element_strides=a["estride"],
        interleave=a["interleave"], swizzle=a["swizzle"], l2_promotion=a["l2"], oob_fill=a["oob"])


def test_errors_agree_with_the_driver_on_every_recorded_set() -> None:
    """`check_encode_tiled`'s errors are empty exactly when the driver encoded the set: 0 sets
    either way. The rules the driver lets pass are warnings, and they account for every set
    tmagen refused before while the driver accepted it (box-fits-shared-memory,
    interleave-32b-needs-swizzle-32b), each a documented rule."""
    rows = _encode_rows()
    assert len(rows) == 60000
    outcome: Counter[tuple[bool, bool]] = Counter()
    warned: Counter[str] = Counter()
    warned_sets = 0
    for a in rows:
        found = _findings(a)
        driver_ok = a["result"] == 0
        outcome[(not found.errors, driver_ok)] += 1
        assert check_encode_tiled(**_kwargs(a)) == found.errors
        if found.warnings and driver_ok:
            warned_sets += 1
            warned.update({v.rule for v in found.warnings})
    assert outcome[(True, False)] == 0, "tmagen finds no error in sets the driver refused"
    assert outcome[(False, True)] == 0, "tmagen reports errors in sets the driver encoded"
    assert outcome[(True, True)] == 19470 and outcome[(False, False)] == 40530
    # Before the warnings, these 1000 accepted sets were refused (898 + 10 box, 92 + 10 interleave).
    assert warned_sets == 1000
    assert dict(warned) == {"box-fits-shared-memory": 908, "interleave-32b-needs-swizzle-32b": 102}
    for rule_id in warned:
        assert RULES[rule_id].documented and not RULES[rule_id].driver_refuses, rule_id


def _kwargs(a: dict) -> dict:
    return dict(dtype=a["dtype"], rank=a["rank"], global_address=a["addr"], global_dim=_as_passed(a["dim"]),
                global_strides=_as_passed(a["stride"]), box_dim=a["box"], element_strides=a["estride"],
                interleave=a["interleave"], swizzle=a["swizzle"], l2_promotion=a["l2"], oob_fill=a["oob"])


def test_a_null_address_is_a_warning_as_the_driver_encodes_it() -> None:
    """The driver encoded a map at address 0 and at 16 and refused one at 8 (an H100, replayed)."""
    from tmagen.rules import RULES, diagnose_encode_tiled

    data = json.loads((HW_DATA.parent / "hw_h100" / "null_address.json").read_text())
    args = {"dtype": 7, "rank": 2, "global_dim": [64, 64], "global_strides": [256], "box_dim": [32, 8],
            "element_strides": [1, 1], "interleave": 0, "swizzle": 3, "l2_promotion": 0, "oob_fill": 0}
    for address, result in data["results"].items():
        found = diagnose_encode_tiled(global_address=int(address), **args)
        assert (found.errors == []) == (result == 0), (address, found.errors)
    warned = diagnose_encode_tiled(global_address=0, **args).warnings
    assert [v.rule for v in warned] == ["global-address-not-null"]
    assert RULES["global-address-not-null"].driver_measured and not RULES["global-address-not-null"].driver_refuses


def test_the_stride_limit_is_the_documents_2_to_the_40() -> None:
    """The one set the driver encoded with a stride tmagen calls over the limit had a stride of
    2^65 + 16 bytes, passed to the driver as 16: the driver never saw it. Read as passed, every
    stride from 2^40 up to 2^64 was refused and every one below 2^40 accepted, when nothing else
    was wrong: the document's "< 2^40" is right."""
    rows = _encode_rows()
    beyond = [a for a in rows if any(s >= U64 for s in a["stride"])]
    disagree = [a for a in beyond if (not _findings(a, passed=False).errors) != (a["result"] == 0)]
    assert len(beyond) == 1006 and len(disagree) == 1
    assert disagree[0]["stride"][-1] == (1 << 65) + 16 and disagree[0]["result"] == 0
    alone = Counter()
    for a in rows:
        rules = {v.rule for v in _findings(a).errors} - {"global-stride-limit"}
        big = [s for s in _as_passed(a["stride"]) if s >= 1 << 39]
        if big and not rules:
            alone[(max(big) >= 1 << 40, a["result"] == 0)] += 1
    assert alone[(True, True)] == 0 and alone[(False, False)] == 0
    assert alone[(True, False)] > 1000 and alone[(False, True)] > 500


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


def test_the_driver_is_judged_on_what_it_receives() -> None:
    """The 8 sets an H100 encoded that tmagen refused (a 100,000-set oracle run) all had a stride of
    2^64 or more, which reached the driver as its low 64 bits: judged on the values sent, tmagen
    accepts every one of them too, and the stride limit still refuses the values as written."""
    from lab.oracle import as_sent
    from tmagen.rules import check_encode_tiled

    data = json.loads((HW_DATA.parent / "hw_h100" / "oracle_wide_strides.json").read_text())
    assert len(data["accepted_by_the_driver"]) == 8
    for args in data["accepted_by_the_driver"]:
        assert any(s >= 1 << 64 for s in args["global_strides"])
        assert {v.rule for v in check_encode_tiled(**args)} == {"global-stride-limit"}
        assert check_encode_tiled(**as_sent(args)) == [], args


# ----------------------------------------------------------------------------- reductions
def _reduce_record() -> dict:
    return json.loads((HW_DATA / "reduce_ops.json").read_text())


def test_the_reduction_record_covers_the_ptx_isa_s_table() -> None:
    """Every op/type pair the PTX ISA's table allows ran once on the H200, and nothing else."""
    from tmagen.toolbox import PTX_REDUCE_TYPES

    record = _reduce_record()
    assert (record["gpu"], record["driver"], record["date"]) == ("NVIDIA H200", "580.159", "2026-11-24")
    ran = [(c["op"], c["dtype"]) for c in record["cases"]]
    assert len(ran) == len(set(ran))
    assert set(ran) == {(op, d) for op, types in PTX_REDUCE_TYPES.items() for d in types}
    assert {c["outcome"] for c in record["cases"]} == {"exact", "illegal_instruction"}


def _reduce_case_ids() -> list[str]:
    return [f"{c['op']}-{c['dtype']}" for c in _reduce_record()["cases"]]


@pytest.mark.parametrize("case", _reduce_record()["cases"], ids=_reduce_case_ids())
def test_the_reduction_rule_agrees_with_the_h200(case: dict) -> None:
    """A spec reducing by the recorded op on the recorded type: refused by reduce-op-for-type (and
    only by it) exactly where the H200 faulted, and the message names the value, the fix and the
    measurement."""
    from tmagen.dtypes import DTYPES
    from tmagen.plan import check
    from tmagen.spec import parse_spec

    op, dtype = case["op"], case["dtype"]
    size = DTYPES[dtype].nbytes
    spec = {"name": "r", "tensors": [{"name": "t", "dtype": dtype, "shape": [64, 64], "box": [8, 64 // size],
                                      "reduce": op}]}
    found = check(parse_spec(spec))
    if case["outcome"] == "exact":
        assert found == [], [v.message for v in found]
        return
    assert [v.rule for v in found] == ["reduce-op-for-type"]
    message = found[0].message
    assert f"= '{op}'" in message and dtype in message and "illegal instruction" in message
    assert "two uint32 halves" in message  # the fix
    assert "H200" in message and "580.159" in message and "PTX ISA" in message  # the sources
