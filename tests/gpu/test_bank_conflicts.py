"""Bank conflicts measured by Nsight Compute against tmagen.banks' prediction, for generated kernels:
the example specs, and transposes generated with their swizzle and with none."""

from __future__ import annotations

import csv
import io
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tmagen.conflicts import kernel_conflicts
from tmagen.plan import resolve
from tmagen.spec import parse_spec

from conftest import REPO, pythonpath_with_repo

pytestmark = pytest.mark.gpu

METRICS = {"ld": "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum",
           "st": "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum"}


def _specs() -> list[dict]:
    examples = [json.loads((REPO / "specs" / f"{n}.json").read_text())
                for n in ("transpose_int4_8x8", "copy_f32_3d", "nhwc_128b_fp16")]
    out = list(examples)
    seed = examples[0]
    out.append({**seed, "name": "transpose_int4_8x8_noswizzle",
                "tensors": [{**seed["tensors"][0], "swizzle": {"mode": "none"}}]})
    for dtype, side in (("float32", 32), ("uint8", 128), ("bfloat16", 64)):
        for mode in ("128B", "none"):
            out.append({"name": f"transpose_{dtype}_{mode.lower()}", "tensors": [{
                "name": "m", "dtype": dtype, "shape": [side * 4, side * 6], "box": [side, side],
                "swizzle": {"mode": mode}}], "kernel": {"kind": "transpose"}})
    return out


@pytest.mark.skipif(shutil.which("ncu") is None, reason="no Nsight Compute (ncu) on PATH")
def test_predicted_conflicts_equal_measured(device, tmp_path: Path, report) -> None:
    env = {**os.environ, "PYTHONPATH": pythonpath_with_repo()}
    rows = []
    for raw in _specs():
        spec = parse_spec(raw)
        path = tmp_path / f"{spec.name}.json"
        path.write_text(json.dumps(raw))
        run = subprocess.run(
            ["ncu", "--clock-control", "none", "--csv", "--metrics", ",".join(METRICS.values()),
             "--kernel-name", f"regex:^{spec.name}_", "--launch-count", "1",
             sys.executable, "-m", "tmagen", "verify", "--seed", "9", str(path)],
            capture_output=True, text=True, env=env, cwd=REPO, timeout=600)
        assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
        measured = {}
        lines = [line for line in run.stdout.splitlines() if line.startswith('"')]
        for rec in csv.DictReader(io.StringIO("\n".join(lines))):
            for key, metric in METRICS.items():
                if rec.get("Metric Name") == metric:
                    measured[key] = int(float(rec["Metric Value"].replace(",", "")))
        predicted = kernel_conflicts(resolve(spec))
        rows.append({"spec": spec.name, "measured": measured, "predicted": predicted})
    report("bank_conflicts", rows)
    for r in rows:
        assert set(r["measured"]) == {"ld", "st"}, r
        assert r["measured"] == r["predicted"], r
    by_name = {r["spec"]: r for r in rows}
    assert by_name["transpose_int4_8x8"]["measured"] == {"ld": 0, "st": 0}
    assert by_name["transpose_int4_8x8_noswizzle"]["measured"]["st"] > 0
