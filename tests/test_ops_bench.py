"""The ops section of the benchmark without a GPU (issue 19): its case list, the Triton layouts it
gives each case (checked on NumPy arrays against the op itself), its budget and place in
benchmarks/run.py, the merge of a part of it, and its page rendered from a made-up run."""

from __future__ import annotations

import dataclasses
import json
import math

import numpy as np
import pytest

from lab import bench_report, ops_bench
from lab.ops_bench import OpsCase
from tmagen import bench
from tmagen.plan import load as load_plan

from conftest import REPO
from test_bench import _cand, _flat, _row, _run_module

MIB, GIB = 1 << 20, 1 << 30


def _input_bytes(c: OpsCase) -> int:
    return c.elements * c.element_bytes


# ----------------------------------------------------------------------------- the case list
def test_case_list_covers_every_class_and_element_size() -> None:
    cases = ops_bench.ops_cases()
    assert len(set(cases)) == len(cases)
    assert {c.shape_class for c in cases} == set(ops_bench.CLASSES)
    assert {c.element_bytes for c in cases} == {1, 2, 4, 8, 16}
    assert {"bool", "complex128", "uint8", "bfloat16", "float16", "float32", "float64"} <= {c.dtype for c in cases}
    for cls in ("small", "large"):  # each size of element where it matters most
        assert {c.element_bytes for c in cases if c.shape_class == cls and c.op == "transpose"} == {1, 2, 4, 8, 16}
    assert {c.op for c in cases} == {"copy", "transpose", "permute"}


def test_each_class_is_what_its_name_says() -> None:
    by = {cls: [c for c in ops_bench.ops_cases() if c.shape_class == cls] for cls in ops_bench.CLASSES}
    assert all(16 * 1024 <= _input_bytes(c) <= 4 * MIB for c in by["small"])
    assert {_input_bytes(c) for c in by["small"]} >= {16 * 1024, 4 * MIB}  # both ends of the range
    assert all(_input_bytes(c) >= GIB - 16 * MIB for c in by["large"]) and any(_input_bytes(c) >= GIB
                                                                                for c in by["large"])
    for c in by["odd_rows"]:  # rows of the input or of the output not whole 128 bytes, most not whole 16
        rows = {c.shape[-1] * c.element_bytes, c.source[0][-1] * c.element_bytes}
        assert any(r % 128 for r in rows), c
    assert sum(any(r % 16 for r in (c.shape[-1] * c.element_bytes, c.source[0][-1] * c.element_bytes))
               for c in by["odd_rows"]) >= 3
    assert all(c.op == "transpose" and c.shape[-1] * c.element_bytes <= 128 for c in by["narrow"])  # short rows
    assert all(any(n % 64 for n in c.shape[-2:]) for c in by["ragged"])
    assert all(len(c.shape) >= 3 for c in by["batched"]) and any(c.op == "permute" for c in by["batched"])
    assert all(c.op == "permute" for c in by["permute"])
    assert all(c.view for c in by["views"])
    assert not any(c.view for cls, cs in by.items() if cls != "views" for c in cs)


def test_the_cases_the_issue_names_are_there() -> None:
    cases = ops_bench.ops_cases()
    calls = {(c.shape_class, c.describe(), c.shape, c.dtype) for c in cases}
    assert ("views", "copy(x.mT)", (8192, 8192), "float32") in calls
    assert any(c.view == "[:, 1:]" and c.op == "copy" for c in cases)
    assert ("odd_rows", "transpose(x)", (777, 1032), "float16") in calls  # the issue's refused shapes
    assert ("odd_rows", "transpose(x)", (16385, 8), "bfloat16") in calls
    assert ("batched", "transpose(x)", (8, 4096, 4096), "bfloat16") in calls
    assert ("ragged", "transpose(x)", (16352, 16352), "float32") in calls
    bshd = [c for c in cases if c.op == "permute" and c.dims == (0, 2, 1, 3)]  # [B,S,H,D] -> [B,H,S,D]
    assert {c.shape_class for c in bshd} == {"small", "permute"}
    assert {(0, 2, 3, 1), (0, 3, 1, 2)} <= {c.dims for c in cases}  # NCHW <-> NHWC


def test_a_case_describes_its_view_and_output() -> None:
    c = OpsCase("views", "copy", (4, 6), "float32", view="[:, 1:]")
    assert c.input_layout == ((4, 5), (6, 1), 1) and c.source == ((4, 5), (6, 1), 1)
    assert c.elements == 20 and c.bytes_moved == 160 and c.describe() == "copy(x[:, 1:])"
    t = OpsCase("views", "copy", (2, 4, 6), "bfloat16", view="mT")
    assert t.input_layout == ((2, 6, 4), (24, 1, 6), 0)
    p = OpsCase("permute", "permute", (2, 3, 4, 5), "uint8", (0, 2, 3, 1))
    assert p.source == ((2, 4, 5, 3), (60, 5, 1, 20), 0) and p.describe() == "permute(x, [0, 2, 3, 1])"


# ----------------------------------------------------------------------------- the Triton layouts
def _kernels(case: OpsCase) -> list[str]:
    return [t.kernel for t in ops_bench.triton_layouts(case)]


def test_triton_layouts_of_the_common_cases() -> None:
    c = OpsCase
    assert _kernels(c("small", "transpose", (64, 64), "float32")) == ["tiles", "tma"]
    assert _kernels(c("odd_rows", "transpose", (16385, 8), "bfloat16")) == ["tiles"]  # rows of 16385 x 2 bytes
    assert _kernels(c("large", "copy", (64, 64), "float32")) == ["copy"]
    nchw = ops_bench.triton_layouts(c("permute", "permute", (32, 256, 64, 64), "bfloat16", (0, 2, 3, 1)))
    assert [(t.kernel, t.shape) for t in nchw][:2] == [("tiles", (32, 256, 4096)), ("tma", (32, 256, 4096))]
    assert _kernels(c("permute", "permute", (16, 2048, 32, 128), "bfloat16", (0, 2, 1, 3))) == ["rows", "gather"]
    assert _kernels(c("views", "copy", (64, 64), "float32", view="mT")) == ["tiles", "tma", "gather"]
    assert _kernels(c("views", "copy", (64, 65), "float32", view="[:, 1:]")) == ["gather"]
    complex_t = ops_bench.triton_layouts(c("large", "transpose", (8, 6), "complex128"))
    assert [(t.kernel, t.shape, t.element_bytes) for t in complex_t] == [("rows", (1, 8, 6, 2), 8),
                                                                         ("gather", (6, 8, 2), 8)]


def _numpy_op(case: OpsCase, x: np.ndarray) -> np.ndarray:
    """The op on ``x`` of the case's shape (with a trailing pair for 16-byte elements), flat."""
    pair = case.element_bytes == 16
    rank = len(case.shape)
    if case.view == "mT":
        x = x.swapaxes(rank - 2, rank - 1)
    elif case.view == "[:, 1:]":
        x = x[:, 1:]
    order = list(case.order) + ([rank] if pair else [])
    return np.ascontiguousarray(x.transpose(order)).ravel()


def _numpy_layout(layout: ops_bench.TritonLayout, flat: np.ndarray) -> np.ndarray:
    """What the layout's Triton kernel writes, from the contiguous tensor's elements ``flat``."""
    if layout.kernel == "copy":
        return flat.copy()
    if layout.kernel in ("tiles", "tma"):
        return np.ascontiguousarray(flat.reshape(layout.shape).transpose(0, 2, 1)).ravel()
    if layout.kernel == "rows":
        return np.ascontiguousarray(flat.reshape(layout.shape).transpose(0, 2, 1, 3)).ravel()
    strided = np.lib.stride_tricks.as_strided(flat[layout.offset:], layout.shape,
                                              [s * flat.itemsize for s in layout.strides])
    return np.ascontiguousarray(strided).ravel()


def _shrunk(case: OpsCase) -> OpsCase:
    """The case on small extents of the same structure (2 to 6 each, the sliced one at least 3)."""
    return dataclasses.replace(case, shape=tuple(2 + (n % 5) + (i == 1 and case.view == "[:, 1:]")
                                                 for i, n in enumerate(case.shape)))


@pytest.mark.parametrize("case", ops_bench.ops_cases(), ids=lambda c: f"{c.shape_class}-{c.describe()}-{c.dtype}")
def test_every_triton_layout_computes_the_op(case: OpsCase) -> None:
    """Each Triton peer's layout, applied to the case's tensor (on small extents of the same
    structure), gives the op's result: no peer is timed on a layout other than the case's."""
    small = _shrunk(case)
    layouts = ops_bench.triton_layouts(small)
    pairs = 2 if small.element_bytes == 16 else 1
    x = np.arange(math.prod(small.shape) * pairs, dtype=np.int64).reshape(*small.shape, *([2] * (pairs == 2)))
    want = _numpy_op(small, x)
    assert layouts
    for layout in layouts:
        assert np.array_equal(_numpy_layout(layout, x.ravel()), want), layout


def test_triton_layouts_keep_their_kernels_on_the_real_shapes() -> None:
    """The shrunk shapes of the test above give the real cases' kernels (TMA's 16-byte rule aside)."""
    for case in ops_bench.ops_cases():
        real = [k for k in _kernels(case) if k != "tma"]
        assert [k for k in _kernels(_shrunk(case)) if k != "tma"] == real, case


# ----------------------------------------------------------------------------- in benchmarks/run.py
def test_the_suite_plans_the_ops_group_apart() -> None:
    run = _run_module()
    specs = [load_plan(p).spec for p in sorted((REPO / "tmagen" / "ops_specs").glob("*.json"))]
    ops = run.plan(specs, {"ops"})
    assert ops[0].shape_kind == ops_bench.HOST and ops[0].ops is None
    assert [c.ops for c in ops[1:]] == ops_bench.ops_cases()
    assert all(c.group == "ops" and c.shape_kind == c.ops.shape_class for c in ops[1:])
    assert "ops" in run.GROUPS and "ops" not in run.DEFAULT_GROUPS
    # the section alone fits one 10-minute GPU call; with the default groups it would not
    seconds, lines = run.estimate(ops, run.FULL)
    assert 0 < seconds < 450 and any(line.startswith(f"ops       {len(ops) - 1} cases") for line in lines)
    default, _ = run.estimate(run.plan(specs, set(run.DEFAULT_GROUPS)), run.FULL)
    assert default + seconds > 540
    small = run.plan(specs, {"ops"}, ops_classes={"small"})
    assert small and {c.shape_kind for c in small} == {"small"}
    assert [c.shape_kind for c in run.plan(specs, {"ops"}, ops_classes={"host"})] == [ops_bench.HOST]
    quick, _ = run.estimate(small, run.QUICK, triton=False)
    assert quick < seconds


def test_the_suite_estimates_the_ops_group(capsys) -> None:
    run = _run_module()
    assert run.main(["--estimate", "--only", "ops"]) == 0
    out = capsys.readouterr().out
    n = len(ops_bench.ops_cases())
    assert out.startswith(f"plan: {n + 1} cases") and f"ops       {n} cases" in out and "Triton: ~" in out
    assert run.main(["--estimate", "--only", "ops", "--no-triton", "--ops-class", "views"]) == 0
    out = capsys.readouterr().out
    assert "Triton" not in out and "host time ~0 s" in out
    with pytest.raises(SystemExit) as exc:
        run.main(["--estimate", "--only", "ops", "--ops-class", "small,tiny"])
    assert exc.value.code == 2 and "--ops-class takes small" in capsys.readouterr().err


def test_merging_part_of_the_ops_section_replaces_only_that_part() -> None:
    run = _run_module()
    old = {"format": 2, "gpu": "A", "date": "1", "cases": [
        {"group": "copy", "shape_kind": "full", "n": 1}, {"group": "ops", "shape_kind": "small", "n": 2},
        {"group": "ops", "shape_kind": "large", "n": 3}, {"group": "ops", "shape_kind": "host", "n": 4}]}
    new = {"gpu": "B", "date": "2", "cases": [{"group": "ops", "shape_kind": "small", "n": 5}]}
    got = run.merged(old, new, {"ops"}, {"small"})
    # the new case takes the old one's place (the report's rows keep their order)
    assert [c["n"] for c in got["cases"]] == [1, 5, 3, 4] and got["sections"]["ops"]["gpu"] == "B"
    assert got["gpu"] == "A"  # the run's own machine stays the other sections'
    whole = run.merged(old, new, {"ops"})
    assert [c["n"] for c in whole["cases"]] == [1, 5]


def test_budget_counts_what_the_peers_autotune() -> None:
    """The estimate's configurations per Triton kernel are lab.triton_peers' (where Triton is here)."""
    pytest.importorskip("torch", reason="the Triton peers need PyTorch")
    pytest.importorskip("triton", reason="the Triton peers need Triton")
    from lab import triton_peers as tp

    assert ops_bench.TRITON_CONFIGS == {"copy": len(tp.copy_kernel.configs), "tiles": len(tp.transpose_kernel.configs),
                                        "tma": len(tp.transpose_tma_kernel.configs),
                                        "rows": len(tp.permute_rows_kernel.configs),
                                        "gather": len(tp.permute_kernel.configs)}


# ----------------------------------------------------------------------------- the page, from a made-up run
COPY, TILES, GATHER = (ops_bench.TRITON_NAMES[k] for k in ("copy", "tiles", "gather"))
MEMCPY = "cudaMemcpyAsync D2D"


def _ops_case(cls: str, call: str, op: str, shape: list[int], dtype: str, cands: list[dict], dims: list[int] = (),
              view: str = "", failed: list[dict] | None = None) -> dict:
    return {"group": "ops", "spec": "", "shape_kind": cls, "size_mib": None, "shape": shape, "dtype": dtype,
            "candidates": cands, "failed": failed or [], "retried_rounds": 0, "sets": 1, "batch": 1, "op": op,
            "dims": list(dims), "view": view, "call": call, "element_bytes": 4, "seconds": 1.0}


def _ops_fixture() -> dict:
    """A made-up run of the ops section alone (not measurements): each case's verdicts are known."""
    small = _ops_case("small", "transpose(x)", "transpose", [64, 64], "float32", [
        _cand("tmagen.ops.transpose", "tmagen", _flat(0.0020)),
        _cand(MEMCPY, "limit", _flat(0.0018)),
        _cand("torch .transpose(-2,-1).contiguous()", "peer", _flat(0.0021)),  # behind tmagen: met
        _cand(TILES, "peer", _flat(0.0030), note="BLOCK_M=32, BLOCK_N=32, num_warps=4, num_stages=3"),
    ])
    large = _ops_case("large", "transpose(x)", "transpose", [16384, 16384], "float32", [
        _cand("tmagen.ops.transpose", "tmagen", _flat(0.540)),
        _cand(MEMCPY, "limit", _flat(0.500)),  # 0.926 of memcpy: missed
        _cand(TILES, "peer", [[0.540 * f] * 3 for f in (0.99, 1.0, 1.01)]),  # within noise
    ], failed=[{"name": "Triton tl.trans, TMA descriptors (autotuned)", "role": "peer",
                "why": "Triton tl.trans, TMA descriptors (autotuned)'s output differs from PyTorch's"}])
    copy = _ops_case("large", "copy(x)", "copy", [16384, 16384], "float32", [
        _cand("tmagen.ops.copy", "tmagen", _flat(0.510)),  # 0.980 of memcpy: met
        _cand(MEMCPY, "limit", _flat(0.500)),
        _cand("torch clone()", "peer", _flat(0.505)),  # ahead of tmagen: missed
        _cand(COPY, "peer", _flat(0.520)),  # behind tmagen: met
    ])
    view = _ops_case("views", "copy(x[:, 1:])", "copy", [8192, 8193], "float32", [
        _cand("tmagen.ops.copy", "tmagen", _flat(0.150)),
        _cand(MEMCPY, "limit", _flat(0.130)),
        _cand("torch .contiguous()", "peer", _flat(0.160)),
        _cand(GATHER, "peer", _flat(0.140)),  # Triton's copy of a view: its gather, ahead: missed
    ])
    permute = _ops_case("permute", "permute(x, [0, 2, 3, 1])", "permute", [32, 256, 64, 64], "bfloat16", [],
                        dims=[0, 2, 3, 1], failed=[{"name": "tmagen.ops.permute", "role": "tmagen",
                                                    "why": "tmagen.ops.permute's output differs | from PyTorch's"}])
    host = {"group": "ops", "spec": "", "shape_kind": "host", "size_mib": None, "shape": [64, 64],
            "dtype": "float32", "candidates": [], "failed": [], "calls": 2000, "seconds": 9.0,
            "pairs": [list(p) for p in ops_bench.HOST_PAIRS],
            "host_us": {"tmagen.ops.transpose(x)": [9.0, 9.5, 10.0],
                        "torch x.transpose(-2,-1).contiguous()": [10.0, 10.0, 10.0],
                        "tmagen.ops.copy(x)": [12.0, 12.0, 12.0], "torch x.clone()": [8.0, 8.0, 8.0]},
            "median_us": {"tmagen.ops.transpose(x)": 9.5, "torch x.transpose(-2,-1).contiguous()": 10.0,
                          "tmagen.ops.copy(x)": 12.0, "torch x.clone()": 8.0}}
    return {"format": 2, "gpu": "NVIDIA H200", "driver": "580.159.04", "sms": 132, "l2_bytes": 60 << 20,
            "versions": {"torch": "2.11.0", "triton": "3.6.0", "cupy": None}, "date": "2026-12-01",
            "method": {"rounds": 3, "repetitions": 3, "warmup": 2},
            "cases": [host, large, copy, view, permute, small], "unavailable": []}


def test_ops_page_judges_every_target() -> None:
    text = bench_report.markdown_report(_ops_fixture())
    assert "## tmagen.ops on every shape and view" in text
    assert "large cases at or above 0.95 of memcpy; copies at or above Triton's copy" in text
    small = _row(text, "| small | `transpose(x)` | float32 | 64x64 | -2,-1 |")
    assert "| 0.900 (0.900-0.900) | torch .transpose(-2,-1).contiguous() |" in small  # no target: not large
    assert small.endswith("| 1.050 (1.050-1.050) met | - |")  # no Triton copy: not a copy
    large = _row(text, "| large | `transpose(x)` | float32 | 16384x16384 | -2,-1 |")
    assert "| 0.926 (0.926-0.926) **missed** |" in large and "within noise" in large
    copy = _row(text, "| large | `copy(x)` | float32 | 16384x16384 | - |")
    assert "| 0.980 (0.980-0.980) met | torch clone() |" in copy
    assert copy.endswith("| 0.990 (0.990-0.990) **missed** | 1.020 (1.020-1.020) met |")
    view = _row(text, "| views | `copy(x[:, 1:])` | float32 | 8192x8193 | - |")
    # the best peer is Triton's gather, which is also Triton's copy of a view
    assert view.endswith(f"| {GATHER} | 7143 | 0.933 (0.933-0.933) **missed** | 0.933 (0.933-0.933) **missed** |")
    failed = _row(text, "| permute | `permute(x, [0, 2, 3, 1])` | bfloat16 | 32x256x64x64 | 0,2,3,1 |")
    assert "failed: tmagen.ops.permute's output differs \\| from PyTorch's" in failed
    assert failed.count("|") - failed.count("\\|") == 12  # the row keeps its 11 cells


def test_the_ops_section_with_a_miss_points_to_the_page_that_explains_it() -> None:
    text = bench_report.markdown_report(_ops_fixture())
    ops = text.split("## tmagen.ops on every shape and view")[1].split("\n## ")[0]
    verdicts = ops.split("Every case: GB/s")[0]  # the link sits with the verdicts, before the tables
    assert f"[{bench_report.MISSES_PAGE}]({bench_report.MISSES_PAGE})" in verdicts


def test_ops_page_tallies_and_host_time() -> None:
    text = bench_report.markdown_report(_ops_fixture())
    assert ("- Cases at or above the best peer: 1 met, 1 within noise (large `transpose(x)` float32 16384x16384), "
            "2 **missed** (views `copy(x[:, 1:])` float32 8192x8193; large `copy(x)` float32 16384x16384)") in text
    assert ("- Large cases at or above 0.95 of memcpy: 1 met, 1 **missed** (large `transpose(x)` float32 "
            "16384x16384)") in text
    assert ("- Copies at or above Triton's copy: 1 met, 1 **missed** (views `copy(x[:, 1:])` float32 "
            "8192x8193)") in text
    assert ("`tmagen.ops.transpose(x)` 9.5 us against `torch x.transpose(-2,-1).contiguous()` 10.0 us, PyTorch's / "
            "tmagen's 1.053 (1.000-1.111) met") in text
    assert "`tmagen.ops.copy(x)` 12.0 us against `torch x.clone()` 8.0 us, PyTorch's / tmagen's 0.667 " in text
    assert "- Without a tmagen figure (see the notes): permute `permute(x, [0, 2, 3, 1])` bfloat16" in text
    # the classes in their order, whatever the order of the run
    rows = [line.split(" | ")[0][2:] for line in text.splitlines() if line.startswith("| ") and "`" in line
            and line.count("|") > 10]
    assert rows[:5] == ["small", "permute", "views", "large", "large"]


def test_ops_page_lists_every_candidate_and_the_notes() -> None:
    text = bench_report.markdown_report(_ops_fixture())
    header = _row(text, "| class | op | dtype | shape | memcpy | tmagen |")
    assert header == ("| class | op | dtype | shape | memcpy | tmagen | PyTorch | Triton tl.trans, pointer tiles "
                      f"(autotuned) | {GATHER} | Triton tl.trans, TMA descriptors (autotuned) | {COPY} |")
    assert _row(text, "| large | `copy(x)` | float32 | 16384x16384 | 2000 | 1961 (0.980) | 1980 (0.990) | - | - | - | "
                      "1923 (0.962) |")
    assert _row(text, "| large | `transpose(x)` | float32 | 16384x16384 | 2000 |").endswith(
        "| 1852 (0.926) | - | 1852 (0.926) | - | failed its check | - |")
    assert ("- ops (small) `transpose(x)` float32 64x64: Triton tl.trans, pointer tiles (autotuned): BLOCK_M=32, "
            "BLOCK_N=32, num_warps=4, num_stages=3") in text
    assert "- ops (permute) `permute(x, [0, 2, 3, 1])` bfloat16 32x256x64x64: tmagen.ops.permute:" in text


def test_ops_page_says_where_it_was_measured_and_old_runs_render_without_it() -> None:
    data = _ops_fixture()
    data["sections"] = {"ops": {"gpu": "NVIDIA H200", "driver": "590.1", "date": "2026-12-02"}}
    text = bench_report.markdown_report(data)
    assert "Measured apart from the sections above: NVIDIA H200, driver 590.1, 2026-12-02." in text
    newest = json.loads(sorted((REPO / "benchmarks" / "results").glob("*.json"))[-1].read_text())
    if not any(c["group"] == "ops" for c in newest["cases"]):
        assert "## tmagen.ops" not in bench_report.markdown_report(newest)


def test_ops_page_of_a_case_that_failed_whole() -> None:
    """A case that raised before it was timed (run.py's record of it has no call): its row says so."""
    data = _ops_fixture()
    data["cases"].append({"group": "ops", "spec": "", "shape_kind": "batched", "size_mib": None,
                          "shape": [8, 4096, 4096], "ld": None, "dtype": "bfloat16", "candidates": [],
                          "retried_rounds": 0, "seconds": 0.1,
                          "failed": [{"name": "the whole case", "role": "tmagen", "why": "OutOfMemoryError: x"}]})
    text = bench_report.markdown_report(data)
    assert "failed: OutOfMemoryError: x" in _row(text, "| batched | `?` | bfloat16 | 8x4096x4096 | - |")


def test_noise_statement_counts_the_ops_cases() -> None:
    nz = bench_report.noise(_ops_fixture())
    assert nz["max"] == pytest.approx(0.02) and nz["memcpy_max"] == 0.0
    assert bench.Method().rounds == 20  # the suite's method is the section's
