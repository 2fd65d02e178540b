"""Messages a new user meets (issue 20), each pinned: said in tmagen's voice (the field, the value,
the limit, a fix that is true for the case), never pydantic's or Python's, and never a traceback."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import tmagen
import tmagen.ops
from conftest import REPO
from tmagen.cli import main
from tmagen.errors import ArgumentError, RuleError, SpecError


def _cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    return code, out + err


def _write(tmp_path: Path, content: str | bytes | dict, name: str = "spec.json") -> str:
    path = tmp_path / name
    if isinstance(content, dict):
        content = json.dumps(content)
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    return str(path)


MAPS_ONLY = json.loads((REPO / "specs" / "maps_only_bf16_f32.json").read_text())


# ----------------------------------------------------------------------------- the Python calls
def test_load_of_a_spec_without_a_kernel_says_so() -> None:
    """tmagen.load raised AttributeError: 'NoneType' object has no attribute 'kind'."""
    with pytest.raises(SpecError) as info:
        tmagen.load(MAPS_ONLY)
    text = str(info.value)
    assert "kernel is not given" in text and "tmagen.tensor_map" in text and "tmagen build" in text


def test_load_of_a_spec_without_a_kernel_reports_its_rules_first() -> None:
    """...even for an invalid spec, whose rule violation was then never reported."""
    bad = json.loads(json.dumps(MAPS_ONLY))
    bad["tensors"][0]["swizzle"] = {"mode": "32B"}
    with pytest.raises(RuleError, match="box-inner-within-swizzle-span"):
        tmagen.load(bad)


def test_an_ops_call_on_a_cpu_array_says_it_is_on_the_cpu() -> None:
    """tmagen.ops.transpose(numpy_array) said "pass out=" (no output helps a CPU input)."""
    for op in (tmagen.ops.transpose, tmagen.ops.copy):
        with pytest.raises(ArgumentError) as info:
            op(np.zeros((64, 64), np.float32))
        assert [(v.rule, v.field) for v in info.value.violations] == [("array-device", "x.device")]
        assert "pass out=" not in str(info.value) and "GPU" in str(info.value)
