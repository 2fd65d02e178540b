"""The benchmark report (pure: from the JSON a GPU run wrote) and tmagen bench without a GPU."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

from tmagen import bench
from tmagen.cli import main

from conftest import REPO

RESULTS = sorted((REPO / "benchmarks" / "results").glob("*.json"))


def _data() -> dict:
    return json.loads(RESULTS[-1].read_text())


def test_report_is_current() -> None:
    """BENCHMARKS.md and its plot are what the newest committed results render."""
    data = _data()
    assert (REPO / "BENCHMARKS.md").read_text() == bench.markdown_report(data, "benchmarks/bandwidth.svg")
    assert (REPO / "benchmarks" / "bandwidth.svg").read_text() == bench.plot_svg(data)


def test_report_ratios_are_to_the_median_memcpy() -> None:
    data = _data()
    ref, low, high = bench.reference_gbps(data)
    assert low <= ref <= high
    text = bench.markdown_report(data)
    copy = next(r for r in data["records"] if r["spec"] == "bench_copy_float32" and r.get("shape_kind") == "full")
    assert f"| {copy['gbps']:.0f} | {copy['gbps'] / ref:.3f} | 0.95 |" in text
    for spec in ("bench_transpose_float32", "bench_transpose_bfloat16", "bench_transpose_uint8"):
        assert f"`{spec}`" in text
    assert "torch .transpose(-2,-1).contiguous()" in text


def test_plot_has_one_line_per_series() -> None:
    data = _data()
    root = ET.fromstring(bench.plot_svg(data))
    lines = root.findall("{http://www.w3.org/2000/svg}polyline")
    series = {r["spec"] for r in data["records"] if "size_mib" in r and r["kind"] != "memcpy"}
    assert len(lines) == len(series) + 1  # and memcpy
    assert all(len(line.get("points").split()) == 5 for line in lines)  # 16 MiB .. 2 GiB


def test_bench_without_gpu_says_so(capsys) -> None:
    from tmagen import runtime

    if runtime.no_gpu_reason() is None:
        import pytest

        pytest.skip("a GPU is here: benchmarks/run.py times things")
    assert main(["bench", str(REPO / "benchmarks" / "specs" / "bench_copy_float32.json")]) == 3
    err = capsys.readouterr().err
    assert err.startswith("tmagen bench: nothing run") and len(err.strip().splitlines()) == 1
