"""The reliability campaign's machinery on the CPU: real batches compiled by the pip nvcc, verified by
a stand-in worker (tests/fake_gpu_worker.py) that misbehaves as a GPU worker can (a wrong kernel, a
Python error, a kernel the worker's watchdog stops, one that nobody stops, a worker that dies), and a
stand-in compute-sanitizer. Every failure must be counted once, in its class, and saved reproducibly;
every other spec verified; the report written. And batches: many specs in one nvcc call, a refused
spec named by nvcc's message and set aside."""

from __future__ import annotations

import json
import os
import stat
import sys
from pathlib import Path

import pytest

from lab.campaign import (
    Batch,
    Campaign,
    Settings,
    _selected_runs,
    blame,
    compile_batch,
    kernels_of,
    sanitizer_summary,
    write_sources,
)
from lab.fuzz import KINDS, draw_case
from lab.reliability import markdown_report
from tmagen import toolchain
from tmagen.cli import main

from conftest import REPO

SEED, SPECS = 7, 24
FAKE_SANITIZER = """#!/usr/bin/env bash
# compute-sanitizer --tool T --error-exitcode 99 --print-limit N COMMAND...: runs COMMAND, finds nothing
shift 6
"$@"
status=$?
echo "========= ERROR SUMMARY: 0 errors"
exit $status
"""


@pytest.fixture(scope="module")
def campaign_run(tmp_path_factory) -> tuple[dict, Path, dict[str, str]]:
    try:
        toolchain.find_toolchain()
    except toolchain.ToolchainError as exc:
        if os.environ.get("CI") == "true":
            raise
        pytest.skip(f"no CUDA compiler: {exc}")
    out = tmp_path_factory.mktemp("campaign")
    sanitizer = out.parent / "fake-compute-sanitizer"
    sanitizer.write_text(FAKE_SANITIZER)
    sanitizer.chmod(sanitizer.stat().st_mode | stat.S_IEXEC)
    copies = [c.name for c in (draw_case(SEED, i) for i in range(SPECS)) if c.kind == "copy" and c.target == "sm_90a"]
    behaviours = dict(zip(copies, ["mismatch", "hang", "silent", "crash", "error"]))
    os.environ["FAKE_OUTCOMES"] = json.dumps(behaviours)
    try:
        settings = Settings(out=out, seconds=240, seed=SEED, batch_size=8, jobs=2, lanes=2, sanitize_kernels=5,
                            oracle_sets=0, worker_command=[sys.executable, str(REPO / "tests" / "fake_gpu_worker.py")],
                            first_cycle_s=3, margin_s=2, silence_s=3, max_specs=SPECS, sanitizer=str(sanitizer))
        report = Campaign(settings).run()
    finally:
        del os.environ["FAKE_OUTCOMES"]
    return report, out, behaviours


def test_every_spec_is_accounted_for(campaign_run) -> None:
    report, _, _ = campaign_run
    specs = report["specs"]
    assert specs["generated"] == SPECS
    assert specs["checked"] + specs["compiled_not_run"] + specs["not_reached"] == SPECS
    assert specs["not_reached"] == 0 and specs["checked"] >= 18
    assert specs["passed"] + specs["failed"] == specs["checked"]
    assert report["gpu"]["name"] == "Fake GPU"
    assert report["timings"]["nvcc_calls"] >= report["timings"]["batches"] >= 3
    assert sum(cell["specs"] for cell in report["by"]["kind"].values()) == specs["checked"]


def test_each_failure_once_in_its_class(campaign_run) -> None:
    report, _, behaviours = campaign_run
    classes = {"mismatch": "mismatch", "hang": "hang", "silent": "hang", "crash": "crash", "error": "error"}
    found = {f["name"]: f["status"] for f in report["failures"] if f["status"] != "compile"}
    assert found == {name: classes[b] for name, b in behaviours.items()}
    silent = next(f for f in report["failures"] if f["name"] == next(n for n, b in behaviours.items() if b == "silent"))
    assert "said nothing for 3 s" in silent["detail"]
    crashed = next(f for f in report["failures"] if f["status"] == "crash")
    assert "Segmentation fault (pretend)" in crashed["detail"]
    # a failure ends its spec's runs, and a new worker takes the specs after it
    assert report["timings"]["worker_restarts"] >= 3
    assert report["specs"]["failed"] == len({f["name"] for f in report["failures"] if f["target"] == "sm_90a"})


def test_failures_are_saved_reproducibly(campaign_run, capsys) -> None:
    report, out, _ = campaign_run
    for f in report["failures"]:
        spec_file = out / f["spec_file"]
        case = json.loads(spec_file.with_suffix(".case.json").read_text())
        assert case["spec"]["name"] == f["name"] and case["runs"] and case["data_seed"] == SEED * (1 << 32) + f["index"]
        assert case["spec"] == draw_case(SEED, f["index"]).spec
        assert main(["check", str(spec_file)]) == 0  # a valid spec: tmagen accepted what failed
        assert f["status"] in json.loads(spec_file.read_text())["description"]
    capsys.readouterr()


def test_sanitizer_sample(campaign_run) -> None:
    report, out, _ = campaign_run
    s = report["sanitizer"]
    assert s["kernels"] >= 5 and set(s["tools"]) == {"memcheck", "racecheck", "synccheck"}
    for tool, r in s["tools"].items():
        assert r["errors"] == 0 and r["returncode"] == 0 and not r["timed_out"], (tool, r)
        assert r["runs"] == {"match": s["kernels"]}  # once per kernel
    assert not set(s["specs"]) & {f["name"] for f in report["failures"]}


def test_report_files(campaign_run) -> None:
    report, out, _ = campaign_run
    assert json.loads((out / "reliability.json").read_text())["specs"] == report["specs"]
    page = markdown_report(report)
    assert f"**{report['specs']['passed']} passed, {report['specs']['failed']} failed.**" in page


def test_selected_runs_once_per_kernel() -> None:
    runs = [{"call": "inspect", "args": {"role": "a", "shape": [64, 64]}},
            {"call": "inspect", "args": {"role": "b", "shape": [8, 8]}},
            {"call": "inspect", "args": {"role": "a", "shape": [16, 16]}},
            {"call": "inspect", "args": {"role": "b", "shape": [9, 9]}}]
    assert _selected_runs(runs, "all") == [0, 1, 2, 3]
    assert _selected_runs(runs, "smallest") == [1, 2]


def test_sanitizer_summaries_are_read() -> None:
    assert sanitizer_summary("========= COMPUTE-SANITIZER\n========= ERROR SUMMARY: 0 errors\n")["errors"] == 0
    assert sanitizer_summary("========= ERROR SUMMARY: 3 errors\n")["errors"] == 3
    race = sanitizer_summary("========= RACECHECK SUMMARY: 2 hazards displayed (1 error, 1 warning)\n")
    assert race["errors"] == 1 and race["hazards"] == 2 and race["warnings"] == 1
    assert sanitizer_summary("Segmentation fault")["errors"] is None


# ----------------------------------------------------------------------------- compiling batches
def _toolchain_or_skip() -> toolchain.Toolchain:
    try:
        return toolchain.find_toolchain()
    except toolchain.ToolchainError as exc:
        if os.environ.get("CI") == "true":
            raise
        pytest.skip(f"no CUDA compiler: {exc}")


def test_a_batch_compiles_in_one_call(tmp_path: Path) -> None:
    """Specs of every kind in one translation unit: one nvcc call, one cubin holding every kernel."""
    tc = _toolchain_or_skip()
    drawn = [draw_case(5, i) for i in range(120)]
    plain = [c for c in drawn if c.target == "sm_90a" and all(t.get("interleave", "none") == "none"
                                                                for t in c.spec["tensors"])]
    sample = [next(c for c in plain if c.kind == kind) for kind in KINDS]
    sample += [c for c in plain if c.kind == "inspect" and len(c.spec["tensors"]) == 3][:1]
    batch = compile_batch(Batch(0, "sm_90a", sample), tmp_path, tc)
    assert batch.refused == {} and batch.nvcc_calls == 1 and len(batch.builds) == 1
    expected = {k for c in sample for k in kernels_of(c.spec)}
    assert {k.name for k in batch.builds[0].kernels} == expected
    assert batch.builds[0].cubin.stat().st_size > 0


def test_a_refused_spec_is_named_and_the_rest_compile(tmp_path: Path, monkeypatch) -> None:
    """nvcc's error names the spec's header: it is set aside with the message, the others compile."""
    tc = _toolchain_or_skip()
    sample = [c for c in (draw_case(5, i) for i in range(40)) if c.target == "sm_90a" and c.kind == "copy"][:3]
    bad = sample[1].name

    def sources(cases, folder: Path) -> dict[str, str]:
        failed = write_sources(cases, folder)
        header = folder / f"{bad}.cuh"
        header.write_text(header.read_text().replace("#pragma once", '#pragma once\n#error "broken on purpose"'))
        return failed

    monkeypatch.setattr("lab.campaign.write_sources", sources)
    batch = compile_batch(Batch(0, "sm_90a", sample), tmp_path, tc)
    assert list(batch.refused) == [bad] and "broken on purpose" in batch.refused[bad]
    assert batch.nvcc_calls == 2 and [b.names for b in batch.builds] == [[c.name for c in sample if c.name != bad]]


def test_blame_reads_nvcc_and_ptxas_messages() -> None:
    names = ["fz1_1", "fz1_15", "fz1_150"]
    assert blame('/tmp/x/fz1_15.cuh(66): error: static assertion failed', names) == {"fz1_15"}
    assert blame('/tmp/x/fz1_1_kernels.cuh(3): error: x', names) == {"fz1_1"}
    assert blame('/tmp/x/fz1_150.cuh:8:2: error: #error "x"', names) == {"fz1_150"}  # the host compiler's form
    assert blame("ptxas error   : Entry function 'fz1_150_copy' uses too much shared data", names) == {"fz1_150"}
    assert blame("nvcc fatal   : something else", names) == set()


def test_a_case_cut_off_by_the_budget_is_no_finding(tmp_path: Path, monkeypatch) -> None:
    """At the deadline the worker is stopped: the cases it finished count, the one it was running
    does not (neither checked nor failed)."""
    from lab.campaign import Lane

    cubin = tmp_path / "x.cubin"
    cubin.write_bytes(b"x")
    cases = [c for c in (draw_case(SEED, i) for i in range(12)) if c.kind == "copy"][:3]
    monkeypatch.setenv("FAKE_OUTCOMES", json.dumps({cases[1].name: "silent"}))
    lane = Lane([sys.executable, str(REPO / "tests" / "fake_gpu_worker.py")], dict(os.environ),
                tmp_path / "worker.log", silence_s=30)
    job = {"job": "j", "cases": [{"name": c.name, "spec": c.spec, "runs": list(c.runs), "data_seed": 1,
                                  "cubin": str(cubin)} for c in cases]}
    try:
        import time

        results = lane.verify(job, time.monotonic() + 2.5)
    finally:
        lane.stop(spare=True)
    assert list(results) == [cases[0].name]
    assert [r["status"] for r in results[cases[0].name]] == ["match"] * len(cases[0].runs)
