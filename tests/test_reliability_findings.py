"""The specs the reliability campaign found failing (tests/data/reliability/), on the CPU: each is now
refused by a rule, or builds (compiles with nvcc, without spills). The findings not fixed yet are
listed in known.json and expected to fail, strictly: a fix shows up as an unexpected pass."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tmagen import toolchain
from tmagen.plan import check, resolve
from tmagen.render import render
from tmagen.spec import parse_spec

from conftest import REPO

FOLDER = REPO / "tests" / "data" / "reliability"
CASES = sorted(FOLDER.glob("*.case.json"))
KNOWN = json.loads((FOLDER / "known.json").read_text())


def _param(path: Path) -> object:
    """A known finding fails as it was found: nvcc refuses it, or it spills."""
    name = path.name.removesuffix(".case.json")
    known = KNOWN.get(name)
    marks = []
    if known and known["cpu"]:
        found = json.loads(path.read_text())["failure"]["status"]
        raises = toolchain.ToolchainError if found == "compile" else AssertionError
        marks = [pytest.mark.xfail(reason=known["reason"], strict=True, raises=raises)]
    return pytest.param(path, id=name, marks=marks)


def test_every_finding_has_its_spec_beside_it() -> None:
    for path in CASES:
        record = json.loads(path.read_text())
        spec = json.loads(path.with_name(path.name.replace(".case.json", ".json")).read_text())
        assert {k: v for k, v in spec.items() if k != "description"} == record["spec"]
        assert record["runs"] and isinstance(record["data_seed"], int)
    assert set(KNOWN) <= {p.name.removesuffix(".case.json") for p in CASES}


@pytest.mark.parametrize("path", [_param(p) for p in CASES])
def test_finding_is_refused_or_builds(path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    spec = parse_spec(json.loads(path.read_text())["spec"])
    if check(spec):
        return  # fixed by a rule: tmagen refuses it now, with a message
    try:
        tc = toolchain.find_toolchain()
    except toolchain.ToolchainError as exc:
        if os.environ.get("CI") == "true":
            raise
        pytest.skip(f"no CUDA compiler: {exc}")
    monkeypatch.setenv("TMAGEN_CACHE", str(tmp_path))
    result = toolchain.compile_folder(resolve(spec), render(resolve(spec), f"{spec.name}.json"), tc, cubin_only=True)
    assert toolchain.spill_violations(resolve(spec), result) == []
