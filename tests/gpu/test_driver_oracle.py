"""tmagen.rules.check_encode_tiled against cuTensorMapEncodeTiled itself, on 100,000 fresh random
argument sets per run, biased toward the rule boundaries: tmagen's errors must be empty exactly
when the driver encodes the set (what a kernel would still meet is a warning, not an error). The seed is
new each run (TMAGEN_ORACLE_SEED replays one) and lands in the report with the rates."""

from __future__ import annotations

import pytest

from lab.oracle import compare, fresh_seed
from tmagen.rules import RULES

pytestmark = pytest.mark.gpu

N = 100_000


def test_validator_agrees_with_the_driver(device, report) -> None:
    figures = compare(N, fresh_seed())
    report("driver_oracle", figures)
    looser = figures["tmagen_accepts_driver_refuses"]
    assert figures["sets"] == N
    assert figures["both_accept"] + figures["both_refuse"] + len(looser) + figures["tmagen_refuses_driver_accepts"] == N
    assert looser == [], (f"seed {figures['seed']}: {len(looser)} sets tmagen accepts and the driver refuses, "
                          f"e.g. {looser[:3]}")
    # a rule the driver does not enforce is a warning (`diagnose_encode_tiled`), never an error
    examples = figures["stricter_examples"][:3]
    assert figures["tmagen_refuses_driver_accepts"] == 0, (f"seed {figures['seed']}: the driver encodes what "
                                                          f"tmagen calls an error, e.g. {examples}")
    # the sampler reaches both sides of the rules, not one
    assert figures["both_accept"] > N // 5 and figures["both_refuse"] > N // 5, figures
    for rule_id in figures["stricter_by_rule"]:
        assert rule_id in RULES and RULES[rule_id].documented, \
            f"{rule_id} refuses sets the driver accepts, and no document states it"
    assert figures["stricter_by_undocumented_rule"] == []
