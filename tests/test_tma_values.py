"""What TMA does to the values it moves, replayed from the H200 (tests/data/hw_h200/tf32_probe.json,
written by scripts/probe/tf32_probe.py): bits pass unchanged, except through the TF32 types, which
round each float32 to 10 mantissa bits, to nearest even, and make their own NaNs."""

from __future__ import annotations

import json

import numpy as np
import pytest

from tmagen.verify import through_tma

from conftest import HW_DATA

PROBE = json.loads((HW_DATA / "tf32_probe.json").read_text())


def _bits(values: list[int]) -> np.ndarray:
    return np.array(values, dtype=np.uint32).view(np.uint8).reshape(-1, 4)


@pytest.mark.parametrize("dtype", ["tfloat32", "tfloat32_ftz", "float32", "float32_ftz"])
def test_the_model_gives_what_the_gpu_gave(dtype: str) -> None:
    pairs = [(int(a, 16), int(b, 16)) for a, b in PROBE[dtype]["first_16"]]
    sent, seen = [a for a, _ in pairs], [b for _, b in pairs]
    moved, nan = through_tma(_bits(sent), dtype)
    model = moved.view(np.uint32)[:, 0]
    for i, (a, b) in enumerate(pairs):
        if nan is not None and nan[i]:
            assert (b >> 23) & 0xFF == 0xFF and b & 0x7FFFFF, f"{a:#x} -> {b:#x}: a NaN stays a NaN"
        else:
            assert int(model[i]) == b, (f"{dtype}: {a:#010x} went to {b:#010x} on the GPU, "
                                        f"the model says {int(model[i]):#010x}")
    assert len(pairs) == 16 and (dtype.startswith("tfloat") == (sent != seen))


def test_ties_round_to_even_and_carry_into_the_exponent() -> None:
    moved, _ = through_tma(_bits([0x3F801000, 0x3F803000, 0x3F7FFFFF, 0x7F7FFFFF, 0x00000001]), "tfloat32")
    assert [int(x) for x in moved.view(np.uint32)[:, 0]] == [0x3F800000, 0x3F804000, 0x3F800000, 0x7F800000, 0]


def test_every_model_agrees_with_the_probe_on_its_random_data() -> None:
    """The probe's verdicts over 2,048 random float32 patterns per type: only NaNs differ from the
    round-to-nearest-even model in the TF32 types, nothing from identity in the others."""
    for dtype in ("tfloat32", "tfloat32_ftz"):
        verdict = PROBE[dtype]["mismatches_by_model"]
        assert verdict["rne"] == min(verdict.values()) < 30 and verdict["rz"] > 1000
    for dtype in ("float32", "float32_ftz"):
        assert PROBE[dtype]["mismatches_by_model"]["identity"] == 0
