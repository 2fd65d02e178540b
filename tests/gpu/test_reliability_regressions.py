"""The specs the reliability campaign found failing (tests/data/reliability/), replayed on the GPU: each
case's runs with its data seed, compiled on its own as `tmagen build --compile` does. Every byte must
match (a spec a rule refuses now has nothing to run). Findings not fixed yet (known.json) are
expected to fail, strictly."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lab.campaign import refused_at_run_time, replay
from tmagen.plan import check
from tmagen.runtime import GpuError
from tmagen.spec import parse_spec
from tmagen.toolchain import ToolchainError

from conftest import REPO

pytestmark = pytest.mark.gpu

FOLDER = REPO / "tests" / "data" / "reliability"
KNOWN = json.loads((FOLDER / "known.json").read_text())


def _param(path: Path) -> object:
    """A known finding fails as it was found: nvcc refuses it, or its runs do not match."""
    name = path.name.removesuffix(".case.json")
    known = KNOWN.get(name)
    marks = []
    if known and known["gpu"]:
        found = json.loads(path.read_text())["failure"]["status"]
        raises = ToolchainError if found == "compile" else (AssertionError, GpuError)
        marks = [pytest.mark.xfail(reason=known["reason"], strict=True, raises=raises)]
    return pytest.param(path, id=name, marks=marks)


@pytest.mark.parametrize("path", [_param(p) for p in sorted(FOLDER.glob("*.case.json"))])
def test_finding_replays_clean(path: Path, device, report) -> None:
    record = json.loads(path.read_text())
    if check(parse_spec(record["spec"])):
        return  # refused by a rule now
    outcomes = replay(record, device)
    report(f"reliability_regression_{path.name.removesuffix('.case.json')}", [o.__dict__ for o in outcomes])
    spec = parse_spec(record["spec"])
    assert len(outcomes) == sum(not refused_at_run_time(spec, run) for run in record["runs"])
    assert [o for o in outcomes if not o.ok] == []
