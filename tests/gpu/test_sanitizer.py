"""compute-sanitizer's memcheck, racecheck and synccheck on every generated kernel of the example
specs that run on Hopper, through `tmagen verify`: zero errors."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

from conftest import REPO

pytestmark = pytest.mark.gpu

EXAMPLES = [p for p in sorted((REPO / "specs").glob("*.json"))
            if json.loads(p.read_text()).get("target", "sm_90a") == "sm_90a"]


@pytest.mark.skipif(shutil.which("compute-sanitizer") is None, reason="no compute-sanitizer on PATH")
@pytest.mark.parametrize("tool", ["memcheck", "racecheck", "synccheck"])
def test_sanitizer_finds_nothing(tool: str, device, report) -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    runs = {}
    for spec in EXAMPLES:
        run = subprocess.run(["compute-sanitizer", "--tool", tool, "--error-exitcode", "99",
                              sys.executable, "-m", "tmagen", "verify", "--seed", "5", str(spec)],
                             capture_output=True, text=True, env=env, cwd=REPO, timeout=300)
        summary = [line for line in run.stdout.splitlines() if "ERROR SUMMARY" in line or "RACECHECK SUMMARY" in line]
        runs[spec.name] = {"returncode": run.returncode, "summary": summary,
                           "tail": run.stdout[-1500:] + run.stderr[-1500:]}
    report(f"sanitizer_{tool}", runs)
    for name, r in runs.items():
        assert r["returncode"] == 0, f"{tool} on {name}: {r['tail']}"
        assert r["summary"] and all(" 0 error" in line or " 0 hazard" in line for line in r["summary"]), r
