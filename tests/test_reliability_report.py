"""docs/reliability.md from a run's JSON (pure): what was tried, what failed, the oracle's rates and
the sanitizer's results, with the date and the GPU; a placeholder until a run is committed."""

from __future__ import annotations

import json
import subprocess
import sys

from lab.reliability import RUN_JSON, markdown_report, placeholder

from conftest import REPO

FIXTURE = REPO / "tests" / "data" / "reliability_run_fixture.json"


def _data() -> dict:
    return json.loads(FIXTURE.read_text())


def test_page_is_current() -> None:
    """The committed page is what the committed run renders, or the placeholder while there is none."""
    run = REPO / RUN_JSON
    page = (REPO / "docs" / "reliability.md").read_text()
    assert page == (markdown_report(json.loads(run.read_text())) if run.exists() else placeholder())


def test_page_says_what_was_tried_and_what_failed() -> None:
    data = _data()
    page = markdown_report(data)
    assert page.startswith("# Reliability\n")
    assert "NVIDIA H200 (sm_90, driver 13.0, 132 SMs)" in page and "2026-11-23T10:00:00Z" in page
    s = data["specs"]
    assert f"**{s['passed']} passed, {s['failed']} failed.**" in page
    for dim in ("kind", "dtype", "rank", "swizzle"):
        for value, cell in data["by"][dim].items():
            failed = f"**{cell['failed']}**" if cell["failed"] else "0"
            assert f"| {value} | {cell['specs']} | {failed} |" in page, (dim, value)
    assert "| `fz7_0` | copy | mismatch | copy 106x6 | 3 of 636 elements differ |" in page
    assert "### Failures (hang 1, mismatch 1)" in page
    assert "`fz7_21_transpose`" in page  # spills
    assert f"{s['compiled_not_run']} sm_100a specs were compiled only" in page


def test_page_gives_the_oracle_rates() -> None:
    page = markdown_report(_data())
    assert "100000 random `cuTensorMapEncodeTiled` argument sets (seed 12345" in page
    assert "| both accept | 38211 | 38.2% |" in page and "| both refuse | 58107 | 58.1% |" in page
    assert "| tmagen accepts, the driver refuses | **0** | 0.0% |" in page
    assert "| tmagen refuses, the driver accepts | 3682 | 3.7% |" in page
    assert "| `box-fits-shared-memory` | 3611 |" in page and "61.2 µs per set" in page


def test_page_gives_the_sanitizer_results() -> None:
    data = _data()
    page = markdown_report(data)
    s = data["sanitizer"]
    assert f"{s['kernels']} kernels of {len(s['specs'])} specs" in page
    assert "| memcheck | 0 |" in page and "| synccheck | 0 |" in page
    assert "| racecheck | 0 | 88 | 5 of 5 | 0 hazards, 0 warnings |" in page


def test_page_without_oracle_or_sanitizer() -> None:
    data = {**_data(), "oracle": None, "sanitizer": {"skipped": "no compute-sanitizer on PATH"}}
    page = markdown_report(data)
    assert "## The rules against the driver\n\nNot run." in page
    assert "Not run: no compute-sanitizer on PATH." in page


def test_script_writes_the_page(tmp_path) -> None:
    target = tmp_path / "reliability.md"
    proc = subprocess.run([sys.executable, str(REPO / "scripts" / "reliability.py"), "--report", str(FIXTURE),
                           "--markdown", str(target)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert target.read_text() == markdown_report(_data())
