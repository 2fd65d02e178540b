"""tmagen.rules.check_encode_tiled against cuTensorMapEncodeTiled itself, on random argument sets
biased toward the rule boundaries: tmagen must accept nothing the driver refuses, and every set it
refuses that the driver accepts must break a documented rule."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from tmagen import runtime
from tmagen.rules import RULES, check_encode_tiled

from argument_sampler import sample

pytestmark = pytest.mark.gpu

N = 12000


def test_validator_agrees_with_the_driver(device, report) -> None:
    rng = np.random.default_rng(20261121)
    base = runtime.Buffer(1 << 20)
    table: Counter[tuple[bool, bool]] = Counter()
    stricter: list[dict] = []
    looser: list[dict] = []
    by_rule: Counter[str] = Counter()
    try:
        for _ in range(N):
            args = sample(rng, base.ptr)
            violations = check_encode_tiled(**args)
            result, _ = runtime.encode_tiled_raw(**{k: v for k, v in args.items() if k != "arch"})
            ours, theirs = not violations, result == 0
            table[(ours, theirs)] += 1
            if ours and not theirs:
                looser.append({**args, "driver": result})
            elif theirs and not ours:
                rules = sorted({v.rule for v in violations})
                by_rule.update(rules)
                stricter.append({**args, "rules": rules})
    finally:
        base.free()
    report("driver_oracle", {
        "sets": N, "both_accept": table[(True, True)], "both_refuse": table[(False, False)],
        "tmagen_accepts_driver_refuses": looser, "tmagen_refuses_driver_accepts": len(stricter),
        "stricter_by_rule": dict(by_rule), "stricter_examples": stricter[:50]})
    assert sum(table.values()) == N >= 10000
    assert looser == [], f"{len(looser)} sets tmagen accepts and the driver refuses, e.g. {looser[:3]}"
    assert table[(True, True)] > N // 5 and table[(False, False)] > N // 5, table
    for rule_id in by_rule:
        assert RULES[rule_id].documented, f"{rule_id} refuses sets the driver accepts, and no document states it"
