"""The fp8 accumulator probe on the CPU: its experiments (every cell's terms exist in its types, and the
e it asks for are covered), its verdict against model accumulators of known width, and the committed
H200 record (tests/data/hw_h200/fp8_accumulator.json, when there is one) replayed: consistent with the
probe's layout and verdict, and stated by docs/fp8-accumulator.md as lab.fp8_accumulator renders it."""

from __future__ import annotations

import json
import sys

import numpy as np
import pytest

from lab import fp8_accumulator as page

from conftest import REPO

sys.path.insert(0, str(REPO / "tests" / "gpu"))
import fp8_accumulator_probe as probe  # noqa: E402  (the GPU probe's experiments, pure Python)

RECORD = REPO / page.RUN_JSON


def test_every_cell_is_exact_in_its_types_and_the_e_are_covered() -> None:
    for c in probe.CASES:
        for mode in probe.MODES:
            lay = probe.layout(c, mode)
            probe.operand_bytes(lay.a, c.a_dtype)  # raises where a value is not exact
            probe.operand_bytes(lay.b, c.b_dtype)
            assert (lay.d_in.astype(np.float32) == lay.d_in).all()
            for sign in (1, -1):
                covered = set(lay.e[lay.valid & (lay.sign == sign)].tolist())
                top = (23 if sign > 0 else 24) if mode == "passthrough" else \
                    (28 if c.a_dtype == c.b_dtype == "float8_e4m3" else 32)
                assert covered == set(range(1, top + 1)), (c.label, mode, sign)
            # every valid cell's terms are 2^X and +-2^(X-e), and the others add nothing
            exact = lay.a @ lay.b.T + lay.d_in
            want = lay.big + lay.sign * lay.big * 2.0 ** -lay.e.astype(np.float64)
            assert (exact[lay.valid] == want[lay.valid]).all() and (exact[~lay.valid] == 0).all(), (c.label, mode)


def test_both_orders_and_two_magnitudes_meet_each_e() -> None:
    lay = probe.layout(probe.CASES[0], "one_instruction")
    for ee in range(1, 13):
        cols = np.flatnonzero(lay.valid[ee - 1])
        assert {c % 2 for c in cols} == {0, 1} and set(lay.big[ee - 1, cols]) == {1.0, 2.0 ** 16}, ee


@pytest.mark.parametrize("bits, rounding, plus, minus", [
    (None, "rne", (23, 23), (24, 24)),  # float32: 1 + 2^-24 is not one, 1 - 2^-24 is
    (14, "rz", (13, 13), (13, None)),  # cut toward zero: a lost negative addend still takes one ulp off
    (14, "rne", (13, 13), (13, 13)),  # fixed point at 2^X: 1 - 2^-14 is a tie, rounded to even (1)
])
def test_the_verdict_reads_a_model_accumulator(bits: int | None, rounding: str, plus: tuple, minus: tuple) -> None:
    for c in probe.CASES:
        for mode in ("one_instruction", "carried"):
            lay = probe.layout(c, mode)
            result = probe.summarize(lay, probe.model(lay, bits, rounding))
            top = max(int(e) for e in result["-"]["outcomes"])
            assert (result["+"]["largest_exact"], result["+"]["largest_changed"]) == plus, (c.label, mode)
            assert (result["-"]["largest_exact"], result["-"]["largest_changed"]) == \
                (minus[0], minus[1] or top), (c.label, mode)


def _record(bits: int | None) -> dict:
    """A record as the GPU test writes it, from a model accumulator of ``bits`` for fp8 and float32 for the
    controls."""
    cases = {}
    for c in probe.CASES:
        modes = {}
        for mode in probe.MODES:
            lay = probe.layout(c, mode)
            modes[mode] = probe.summarize(lay, probe.model(lay, bits if c.fp8 else None, "rz"))
        cases[c.label] = {"instruction": c.instruction, "modes": modes}
    return {"what": "model", "gpu": "model GPU", "date": "2026-11-24", "cases": cases}


def check_record(data: dict) -> None:
    """What the GPU run's JSON must be: the probe's cases and modes, each e's cells as many as the probe's
    layout has, and the recorded verdict the one the outcomes give."""
    assert list(data["cases"]) == [c.label for c in probe.CASES]
    for c in probe.CASES:
        case = data["cases"][c.label]
        assert case["instruction"] == c.instruction and list(case["modes"]) == list(probe.MODES)
        for mode, result in case["modes"].items():
            lay = probe.layout(c, mode)
            for sym, sign in (("+", 1), ("-", -1)):
                per_e = result[sym]["outcomes"]
                counts = {str(e): int(np.count_nonzero(lay.valid & (lay.e == e) & (lay.sign == sign)))
                          for e in range(1, probe.E_MAX + 1)}
                assert {e: sum(n for _, n in cells) for e, cells in per_e.items()} == \
                    {e: n for e, n in counts.items() if n}, (c.label, mode, sym)
                assert {k: result[sym][k] for k in ("largest_exact", "largest_changed")} == \
                    probe.verdict(per_e, sign), (c.label, mode, sym)


def test_a_model_record_is_consistent_and_the_page_states_its_figures() -> None:
    data = _record(14)
    check_record(data)
    text = page.markdown_report(json.loads(json.dumps(data)))  # through JSON, as committed
    assert "is 13 (14 significant bits); the bfloat16 and float16 controls kept 23" in text
    assert "| e4m3 x e4m3 | `wgmma.mma_async m64n16k32.f32.e4m3.e4m3` | carried | 13 | 13 | 13 | 28 |" in text
    assert "e = 14: 0 (" in text and "e = 14: -2^-13 (" in text  # + dropped, - one ulp down (cut toward zero)
    broken = _record(14)
    broken["cases"]["e4m3 x e4m3"]["modes"]["carried"]["+"]["largest_exact"] = 14
    with pytest.raises(AssertionError):
        check_record(broken)


def test_page_is_current() -> None:
    """docs/fp8-accumulator.md is what the committed record renders (its statement included), or the
    placeholder while none is committed."""
    assert (REPO / page.PAGE).read_text() == page.render(REPO)


@pytest.mark.skipif(not RECORD.exists(), reason="no H200 run of the accumulator probe committed yet "
                    "(tests/gpu/test_fp8_accumulator.py writes it under TMAGEN_REPORT_DIR)")
def test_the_committed_record_is_consistent_and_stated() -> None:
    data = json.loads(RECORD.read_text())
    check_record(data)
    text = (REPO / page.PAGE).read_text()
    assert page.statement(data) in text
    for label, case in data["cases"].items():
        for mode, r in case["modes"].items():
            assert f"| {label} | `{case['instruction']}` | {mode} | {r['+']['largest_exact']} |" in text
