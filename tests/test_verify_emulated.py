"""The verifier and the campaign's worker on a GPU emulated in numpy (tests/emulated_gpu.py): every run
the generator draws goes through tmagen.verify's host side (layouts, padded strides, run-time shapes,
element strides, boxes partly or wholly outside the tensor) and the worker's protocol, and matches;
a wrong kernel is caught. This proves the campaign's own code before GPU time is spent on it, not
the silicon."""

from __future__ import annotations

from pathlib import Path

import pytest

from lab import campaign
from lab.campaign import data_seed, run_job
from lab.fuzz import draw_case
from tmagen.dtypes import BY_DRIVER, DTYPES
from tmagen.spec import SwizzleSpec
from tmagen.swizzle import PATTERNS

import emulated_gpu

CASES = 120


def _unplaceable(t: dict) -> bool:
    """An interleaved box whose row TMA would bring wider than its span, or in part of a 16-byte chunk:
    the finding of tests/data/reliability/ (nvcc refuses their headers; the model has no layout)."""
    if t.get("interleave", "none") == "none":
        return False
    es = DTYPES[t["dtype"]].nbytes
    stride = (t.get("element_strides") or [1] * len(t["box"]))[-1]
    inner = -(-t["box"][-1] // stride) * es
    span = PATTERNS[SwizzleSpec(**t["swizzle"]).driver].span
    return inner % 16 != 0 or bool(span and inner > span)


@pytest.fixture
def gpu(monkeypatch):
    device = emulated_gpu.install(monkeypatch)
    monkeypatch.setattr(campaign, "_context_healthy", lambda: True)
    return device


def _run(cases, device, tmp_path: Path) -> list[dict]:
    cubin = tmp_path / "batch.cubin"
    cubin.write_bytes(b"emulated")
    emulated_gpu.Module.smem_offsets = {f"{c.name}_inspect_{t['name']}": t.get("smem_offset", 0)
                                        for c in cases if c.kind == "inspect" for t in c.spec["tensors"]}
    emulated_gpu.Module.majors = {f"{c.name}_matmul": (c.spec["kernel"].get("a_major", "k"),
                                                       c.spec["kernel"].get("b_major", "k"))
                                  for c in cases if c.kind == "matmul"}
    emulated_gpu.Module.fp8_types = {f"{c.name}_matmul": (c.spec["tensors"][0]["dtype"], c.spec["tensors"][1]["dtype"])
                                     for c in cases if c.kind == "matmul" and "float8" in c.spec["tensors"][0]["dtype"]}
    job = {"job": "emulated", "cases": [{"name": c.name, "spec": c.spec, "runs": list(c.runs),
                                         "data_seed": data_seed(c), "cubin": str(cubin)} for c in cases]}
    records: list[dict] = []
    run_job(job, device, records.append)
    assert records[-1] == {"job": "emulated", "done": True}
    return [r for r in records if "status" in r]


def test_every_drawn_run_matches_on_the_emulated_gpu(gpu, tmp_path) -> None:
    cases = [c for c in (draw_case(21, i) for i in range(CASES)) if c.target == "sm_90a"]
    emulated_gpu.Kernel.launches.clear()
    results = _run(cases, gpu, tmp_path)
    # Matmul, copy and transpose kernels wait for the kernel before them (griddepcontrol.wait), so
    # they are launched as programmatic dependent launches; inspect kernels do not wait, so they may
    # not be launched so.
    launched = {("_inspect_" not in symbol, dependent) for symbol, dependent in emulated_gpu.Kernel.launches}
    assert launched == {(True, True), (False, False)}
    assert len(results) == sum(len(c.runs) for c in cases)
    by_name = {c.name: c for c in cases}
    wrong = []
    for r in results:
        c = by_name[r["name"]]
        run = c.runs[r["run"]]
        t = next((t for t in c.spec["tensors"] if t["name"] == run["args"].get("role")), c.spec["tensors"][0])
        expected = "error" if run["call"] == "inspect" and _unplaceable(t) else "match"
        if r["status"] != expected:
            wrong.append((r["name"], run, r["status"], r.get("detail")))
    assert wrong == []
    assert {r["status"] for r in results} >= {"match"}


@pytest.mark.parametrize("kind", ["copy", "transpose", "inspect", "matmul"])
def test_a_wrong_kernel_is_caught(gpu, tmp_path, monkeypatch, kind) -> None:
    """The same runs with a kernel that writes one byte wrong: each run is a mismatch."""
    # a NaN-filled element outside the tensor is the hardware's to fill, and not compared: zero fills only
    cases = [c for c in (draw_case(22, i) for i in range(80)) if c.target == "sm_90a" and c.kind == kind
             and not any(_unplaceable(t) or t.get("oob_fill") == "nan" for t in c.spec["tensors"])][:4]
    real = {"copy": emulated_gpu._copy, "transpose": emulated_gpu._transpose, "inspect": emulated_gpu._inspect,
            "matmul": emulated_gpu._matmul}[kind]

    def wrong(*args, **kwargs) -> None:
        real(*args, **kwargs)
        if kind == "matmul":  # C's first element a NaN: a rounding-sized change could pass the tolerance, and so
            # could a sign flipped where the sum is near 0 at a long K (its bound grows with |A||B|)
            c = args[2].args
            emulated_gpu.MEMORY[c["global_address"]][:BY_DRIVER[c["dtype"]].nbytes] = 0xFF
            return
        out = args[1].args["global_address"] if kind != "inspect" else args[3]
        emulated_gpu.MEMORY[out][0] ^= 0x01  # the first byte the kernel wrote (or should have left alone)

    monkeypatch.setattr(emulated_gpu, f"_{kind}", wrong)
    results = _run(cases, gpu, tmp_path)
    assert cases and results and all(r["status"] == "mismatch" for r in results), results
