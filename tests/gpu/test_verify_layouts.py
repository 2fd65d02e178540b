"""The verifier's layouts and the campaign's worker on the GPU: copies and loads through padded
strides (an output's padding must keep its poison), at shapes other than the spec's; and a batch of
random specs compiled in one nvcc call, run by `python -m lab.campaign worker`, every run matching."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from lab import fuzz
from lab.campaign import RESULT_PREFIX, Batch, compile_batch, data_seed
from tmagen import toolchain
from tmagen.plan import resolve
from tmagen.verify import Verifier

from conftest import REPO, pythonpath_with_repo

pytestmark = pytest.mark.gpu


def _example(name: str) -> dict:
    return json.loads((REPO / "specs" / f"{name}.json").read_text())


def test_copy_through_padded_strides(device, compiler, report) -> None:
    (spec, cubin), = compiler([_example("copy_f32_3d")]).values()
    checker = Verifier(resolve(spec), cubin, device, seed=13)
    try:
        outcomes = [checker.copy(shape=[6, 100, 120], strides=[100 * 136, 136, 1]),  # rows padded to 544 bytes
                    checker.copy(shape=[5, 33, 8], strides=[33 * 12, 12, 1]),  # rows of 32 bytes padded to 48
                    checker.copy(shape=[2, 3, 4])]
    finally:
        checker.close()
    report("verify_layouts_copy", [o.__dict__ for o in outcomes])
    assert [o for o in outcomes if not o.ok] == []
    assert "padding included" in outcomes[0].detail


def test_load_through_padded_strides(device, compiler, report) -> None:
    (spec, cubin), = compiler([_example("inspect_bf16_offset384")]).values()
    checker = Verifier(resolve(spec), cubin, device, seed=17)
    try:
        outcomes = [checker.inspect("tile", coords=[8, 24], shape=[64, 200], strides=[208, 1]),
                    checker.inspect("tile", coords=[-3, 192], shape=[20, 199], strides=[200, 1]),
                    checker.inspect("tile", coords=[60, -8], shape=[64, 200])]
    finally:
        checker.close()
    report("verify_layouts_inspect", [o.__dict__ for o in outcomes])
    assert [o for o in outcomes if not o.ok] == []


def test_campaign_worker_runs_a_batch(device, tmp_path: Path, report) -> None:
    """Plain random specs of every kind (no interleave, no element strides): one cubin, one worker."""
    plain = [c for c in (fuzz.draw_case(3, i) for i in range(200)) if c.target == "sm_90a" and all(
        t.get("interleave", "none") == "none" and not t.get("element_strides") for t in c.spec["tensors"])]
    sample = [c for kind in fuzz.KINDS for c in [c for c in plain if c.kind == kind][:5]]
    batch = compile_batch(Batch(0, "sm_90a", sample), tmp_path / "build", toolchain.find_toolchain())
    assert batch.refused == {}
    job = {"job": "test", "cases": [{"name": c.name, "spec": c.spec, "runs": list(c.runs), "data_seed": data_seed(c),
                                     "cubin": str(batch.cubin_of(c.name))} for c in sample]}
    (tmp_path / "job.json").write_text(json.dumps(job))
    proc = subprocess.run([sys.executable, "-m", "lab.campaign", "worker", "--job", str(tmp_path / "job.json")],
                          capture_output=True, text=True, timeout=300, cwd=REPO,
                          env={**os.environ, "PYTHONPATH": pythonpath_with_repo()})
    records = [json.loads(line[len(RESULT_PREFIX):]) for line in proc.stdout.splitlines()
               if line.startswith(RESULT_PREFIX)]
    results = [r for r in records if "status" in r]
    report("campaign_worker", results)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert records[0]["ready"] and records[-1] == {"job": "test", "done": True}
    assert len(results) == sum(len(c.runs) for c in sample)
    assert [r for r in results if r["status"] != "match"] == []
