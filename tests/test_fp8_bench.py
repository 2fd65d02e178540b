"""The fp8 section of the benchmark and the fp8 accuracy study without a GPU (issue 21): the shape
set and the rules that decide who refuses what, the check's bound against an emulated fp8
product, the budget, and the pages rendered from made-up runs whose verdicts are known
(tests/data/bench_fp8_fixture.json, tests/data/fp8_accuracy_fixture.json; not measurements)."""

from __future__ import annotations

import importlib.util
import json
import math
import sys

import numpy as np
import pytest

from lab import bench_report, fp8_accuracy, fp8_bench, matmul_bench
from lab.fp8_bench import CUBLAS_TENSOR, TMAGEN_TENSOR, MatmulShape

from conftest import REPO

BENCH_FIXTURE = REPO / "tests" / "data" / "bench_fp8_fixture.json"
ACCURACY_FIXTURE = REPO / "tests" / "data" / "fp8_accuracy_fixture.json"


def _row(text: str, start: str) -> str:
    rows = [line for line in text.splitlines() if line.startswith(start)]
    assert len(rows) == 1, (start, rows)
    return rows[0]


def _gm(values: list[float]) -> float:
    return math.prod(values) ** (1 / len(values))


# ----------------------------------------------------------------------------- the shape set and its rules
def test_fp8_shapes_are_the_bf16_set_with_the_same_pitches_in_bytes() -> None:
    bf16, fp8 = matmul_bench.matmul_shapes(), fp8_bench.fp8_shapes()
    # every K-major shape (wgmma reads fp8 operands K-major only: not the weight gradients)
    assert [(s.m, s.n, s.k, s.shape_class) for s in fp8] == [(s.m, s.n, s.k, s.shape_class) for s in bf16
                                                            if s.shape_class != "weight-gradient"]
    for a, b in zip(bf16, fp8):
        if a.ld is None:
            assert b.ld is None
        else:  # the same bytes past K: 16, so a pitch a multiple of 16 bytes and not of 128
            assert (b.ld - b.k) * 1 == (a.ld - a.k) * 2 == 16 and b.ld % 16 == 0 and b.ld % 128
            assert fp8_bench.tma_refusal(b.k, b.ld) is None


def test_scaled_mm_refuses_k_or_n_off_16_and_takes_any_m() -> None:
    assert fp8_bench.scaled_mm_refusal(1, 4096, 4096) is None
    assert fp8_bench.scaled_mm_refusal(1000, 4096, 4096) is None  # M is free
    why = fp8_bench.scaled_mm_refusal(4096, 14344, 4096)
    assert why is not None and "N = 14344" in why and "K =" not in why
    why = fp8_bench.scaled_mm_refusal(1000, 1000, 1000)
    assert why is not None and "K = 1000" in why and "N = 1000" in why
    refused = {(s.m, s.n, s.k) for s in fp8_bench.fp8_shapes() if fp8_bench.scaled_mm_refusal(s.m, s.n, s.k)}
    assert refused == {(s.m, s.n, s.k) for s in fp8_bench.fp8_shapes() if s.k % 16 or s.n % 16}
    assert (264, 264, 264) in refused and (4096, 14344, 4096) in refused and (4000, 4000, 4000) not in refused


def test_tma_takes_fp8_rows_of_whole_16_bytes_only() -> None:
    assert fp8_bench.tma_refusal(1000, None) is not None and fp8_bench.tma_refusal(4096, 4112) is None
    assert "4104 bytes" in fp8_bench.tma_refusal(4104, None)


def test_block_scaled_candidate_runs_on_the_large_square_shapes() -> None:
    chosen = [(s.m, s.shape_class) for s in fp8_bench.fp8_shapes() if fp8_bench.block_scaled(s)]
    assert (4096, "square-tile-multiple") in chosen and (16384, "square-tile-multiple") in chosen
    assert (6000, "square-ragged") in chosen and all(m >= 4096 for m, _ in chosen)
    assert not fp8_bench.block_scaled(MatmulShape(4096, 4096, 16384, "long-K"))
    assert not fp8_bench.block_scaled(MatmulShape(2048, 2048, 2048, "square-tile-multiple"))


def test_fp8_section_fits_its_budget() -> None:
    """The section, autotuning and checks included, in one 10-minute call of its own (under 9
    minutes) with the suite's full method; long launches in fewer rounds, no case rotating through
    more than ROTATION_BYTES."""
    spec = importlib.util.spec_from_file_location("bench_run_fp8", REPO / "benchmarks" / "run.py")
    run = importlib.util.module_from_spec(spec)
    sys.modules["bench_run_fp8"] = run
    spec.loader.exec_module(run)
    seconds, line = fp8_bench.estimate(fp8_bench.fp8_shapes(), run.FULL)
    assert 0 < seconds < 540 and "fp8       53 shapes" in line
    big = MatmulShape(16384, 16384, 16384, "square-tile-multiple")
    assert fp8_bench.method_for(big, run.FULL).rounds < run.FULL.rounds
    assert fp8_bench.launches_per_sample(MatmulShape(1, 4096, 4096, "llm-projection")) > 1
    for s in fp8_bench.fp8_shapes():
        sets = fp8_bench.buffer_sets(s, 60 << 20)
        per_set = (s.m + s.n) * (s.ld or s.k) + 2 * s.m * s.n
        assert sets == 1 or sets * per_set <= matmul_bench.ROTATION_BYTES


# ----------------------------------------------------------------------------- the check's bound
def _e4m3(x: np.ndarray) -> np.ndarray:
    """Rounded to float8_e4m3fn values (3 mantissa bits, subnormals 2^-9 apart), within +-448."""
    x = np.clip(x, -448, 448)
    f, e = np.frexp(x)
    normal = np.ldexp(np.round(f * 16) / 16, e)
    return np.where(np.abs(x) < 2.0 ** -6, np.round(x * 2 ** 9) / 2 ** 9, normal)


def _bits(x: np.ndarray, keep: int, truncate: bool) -> np.ndarray:
    """``x`` with ``keep`` significant bits, truncated toward zero or rounded to nearest."""
    f, e = np.frexp(x)
    scaled = f * 2.0 ** keep
    return np.ldexp((np.trunc(scaled) if truncate else np.round(scaled)) / 2.0 ** keep, e)


def _emulated(a: np.ndarray, b: np.ndarray, sa: np.ndarray, sb: np.ndarray, promote_every: int) -> np.ndarray:
    """C in bfloat16 (as float64) as a Hopper fp8 kernel computes it, pessimistically: each wgmma of
    k = 32 adds its products into an accumulator of 14 significant bits, truncated; every
    ``promote_every`` of K (0: never) that accumulator joins an fp32 sum; scales applied to the sum."""
    m, k = a.shape
    total = np.zeros((m, b.shape[0]), dtype=np.float32)
    acc = np.zeros_like(total, dtype=np.float64)
    for k0 in range(0, k, 32):
        acc = _bits(acc + a[:, k0:k0 + 32] @ b[:, k0:k0 + 32].T, 14, truncate=True)
        if promote_every and (k0 + 32) % promote_every == 0:
            total += acc.astype(np.float32)
            acc[:] = 0
    total += acc.astype(np.float32)
    return _bits(total.astype(np.float64) * sa * sb, 8, truncate=False)


def _operands(kind: str, rows: int, k: int, rng: np.random.Generator) -> tuple[np.ndarray, float]:
    x = rng.standard_normal((rows, k))
    if kind == "positive":
        x = np.abs(x)
    scale = np.abs(x).max() / 448
    return _e4m3(x / scale), scale


def _within(c: np.ndarray, a: np.ndarray, b: np.ndarray, sa: np.ndarray, sb: np.ndarray) -> bool:
    reference = (a @ b.T) * sa * sb
    magnitude = (np.abs(a) @ np.abs(b).T) * np.abs(sa) * np.abs(sb)
    return bool(np.all(np.abs(c - reference) <= fp8_bench.fp8_tolerance(reference, magnitude)))


@pytest.mark.parametrize("kind", ["normal", "positive"])
def test_check_passes_a_kernel_promoting_every_128_at_every_k(kind) -> None:
    """The bound holds for the worst rounding the argument in lab/fp8_bench.py allows (14-bit
    accumulator truncated every k = 32, promoted every 128), per-tensor and per-row scales."""
    rng = np.random.default_rng(3)
    for k in (128, 1024, 4096):
        a, sa = _operands(kind, 24, k, rng)
        b, sb = _operands(kind, 40, k, rng)
        assert _within(_emulated(a, b, np.float64(sa), np.float64(sb), 128), a, b, sa, sb), (kind, k)
        rows_a, rows_b = sa * rng.uniform(0.5, 2, (24, 1)), sb * rng.uniform(0.5, 2, (1, 40))
        assert _within(_emulated(a, b, rows_a, rows_b, 128), a, b, rows_a, rows_b), (kind, k)


def test_check_passes_fast_accumulation_on_signed_data_only() -> None:
    """A kernel that never promotes stays within the bound on signed random inputs (its rounding a
    random walk), as the benchmark's inputs are; on all-positive inputs, whose partial sums grow
    with K, it leaves the bound by K = 4096 (the accuracy study measures both)."""
    rng = np.random.default_rng(4)
    for kind, fits in (("normal", True), ("positive", False)):
        a, sa = _operands(kind, 16, 4096, rng)
        b, sb = _operands(kind, 16, 4096, rng)
        assert _within(_emulated(a, b, np.float64(sa), np.float64(sb), 0), a, b, sa, sb) == fits, kind


def test_check_fails_wrong_scales_and_unwritten_output() -> None:
    rng = np.random.default_rng(5)
    for k in (256, 4096):
        a, sa = _operands("normal", 24, k, rng)
        b, sb = _operands("normal", 40, k, rng)
        rows_a = sa * rng.uniform(0.5, 2, (24, 1))
        wrong = _emulated(a, b, rows_a[::-1], np.float64(sb), 128)  # A's row scales in the wrong rows
        assert not _within(wrong, a, b, rows_a, sb)
        assert not _within(_emulated(a, b, np.float64(sa), np.float64(sb), 128) * 1.05, a, b, sa, sb)
        assert not _within(np.full((24, 40), np.nan), a, b, sa, sb)
        shifted = _emulated(a[:, list(range(1, k)) + [0]], b, np.float64(sa), np.float64(sb), 128)  # K misread
        assert not _within(shifted, a, b, sa, sb)


# ----------------------------------------------------------------------------- the page's fp8 section
def _fixture() -> dict:
    return json.loads(BENCH_FIXTURE.read_text())


def test_fp8_report_judges_every_shape() -> None:
    text = bench_report.markdown_report(_fixture())
    assert "## fp8 matmul" in text
    row = _row(text, "| square-tile-multiple | 4096 | 4096 | 4096 | K |")
    assert row.endswith("| 1.038 (1.038-1.038) met | 1.154 (1.154-1.154) met | 1.037 (1.037-1.037) | "
                        "0.929 (0.929-0.929) met | 1.250 (1.250-1.250) met | 1.042 (1.042-1.042) |")
    assert "| 1145 |" in row  # tmagen use_fast_accum: 2 * 4096^3 flops in 0.12 ms
    assert _row(text, "| square-tile-multiple | 8192 |").endswith("| 0.833 (0.833-0.833) **missed** | - | - |")
    ragged = _row(text, "| square-ragged | 1000 |")
    assert "| refused | refused | - | refused |" in ragged and ragged.endswith("| - | - | - | - | - | - |")
    small = _row(text, "| llm-projection | 1 | 4096 |")
    assert "| 0.800 (0.800-0.800) **missed** | 0.900 (0.900-0.900) **missed** |" in small
    odd = _row(text, "| odd-leading-dimension | 64 | 14336 | 4096 | 4112 |")
    assert "| failed | failed | - | - | 150 | 150 | - | 125 |" in odd
    assert "| 1.000 (0.980-1.020) within noise |" in _row(text, "| long-K | 4096 |")
    # the 16-element rows and the long K have no block-scaled target: their ratio cell is empty
    assert _row(text, "| long-K | 4096 |").endswith("| - | - | - |")


def test_fp8_report_tallies_and_class_means() -> None:
    text = bench_report.markdown_report(_fixture())
    # tmagen per-tensor against cuBLASLt per-tensor, per repetition: 4096^3, 8192^3, 1 x 4096^2, long K
    medians = [0.135 / 0.13, 1.0, 0.016 / 0.02, 0.52 / 0.5]
    lows = [0.135 / 0.13, 0.99, 0.016 / 0.02, 0.52 / 0.5]
    highs = [0.135 / 0.13, 1.01, 0.016 / 0.02, 0.52 / 0.5]
    band = f"{_gm(medians):.3f} ({_gm(lows):.3f}-{_gm(highs):.3f})"
    assert f"- Geometric mean of tmagen / cuBLASLt, per-tensor scales, over 4 shapes: {band} **missed**" in text
    assert "- Shapes at or above 0.90 of cuBLASLt (per-tensor): 3 met, 1 **missed** (1x4096x4096)" in text
    assert ("- Shapes ahead of Triton (per-tensor, tmagen promoting, Triton not): 2 met, 1 within noise "
            "(4096x4096x16384), 1 **missed** (1x4096x4096)") in text
    # use_fast_accum: on the one shape with figures, 0.12 ms against Triton's 0.15 and cuBLASLt's 0.125
    assert "- Shapes ahead of Triton with `use_fast_accum=True` (neither promoting): 1 met" in text
    assert ("- `use_fast_accum=True` (no target), tmagen / cuBLASLt with it over 1 shapes: 1.042 (1.042-1.042)"
            in text)
    assert "- Block-scaled at or above 0.90 of tmagen per-tensor, 4096^3 and above: 1 met, 1 **missed** " \
           "(8192x8192x8192)" in text
    assert ("- Refused by `torch._scaled_mm` (K and N must be multiples of 16; nothing is padded): "
            "1000x1000x1000") in text
    assert "- Without a tmagen per-tensor figure (see the notes): 64x14336x4096 (rows of A and B 4112 apart)" in text
    assert _row(text, "| all | 5 of 6 |").startswith(f"| all | 5 of 6 | {band} | 0.800 at 1x4096x4096 |")
    assert _row(text, "| odd-leading-dimension | 0 of 1 |")
    assert "refused: Expected trailing dimension of mat1 to be divisible by 16" in text  # the notes keep the why


def test_fp8_report_sets_cublaslt_block_scales_beside_tmagen_s_where_a_run_has_them() -> None:
    """A run with cuBLASLt's block-scaled candidate (PyTorch 2.10 on) gets its column, the ratio of
    tmagen's block scales to it on each shape, and a line of both ratios; a run without has neither."""
    data = _fixture()
    assert fp8_bench.CUBLAS_BLOCK not in bench_report.markdown_report(data)
    assert "cuBLASLt block" not in bench_report.markdown_report(data)
    for case in data["cases"]:
        if case.get("group") == "fp8" and case["shape"] == [4096, 4096, 4096]:
            ours = next(c for c in case["candidates"] if c["name"] == fp8_bench.TMAGEN_BLOCK)
            case["candidates"].append({**ours, "name": fp8_bench.CUBLAS_BLOCK, "role": "peer", "median_ms": 0.1375,
                                       "rep_medians_ms": [0.1375, 0.1375, 0.1375], "tflops": 999.6})
    text = bench_report.markdown_report(data)
    assert "| cuBLASLt block | Triton |" in text and "| block / tmagen | block / cuBLASLt block |" in text
    row = _row(text, "| square-tile-multiple | 4096 | 4096 | 4096 | K |")
    assert "| 1000 |" in row and "| 0.929 (0.929-0.929) met | 0.982 (0.982-0.982) |" in row  # 0.1375 / 0.14
    assert ("- Block-scaled (no target), tmagen / cuBLASLt's block scales over 1 shapes: 0.982 (0.982-0.982); "
            "cuBLASLt's block-scaled / tmagen per-tensor: 0.945 (0.945-0.945)") in text  # 0.13 / 0.1375
    assert _row(text, "| square-tile-multiple | 8192 |").endswith("| 0.833 (0.833-0.833) **missed** | - | - | - |")


def test_a_section_with_a_miss_points_to_the_page_that_explains_it() -> None:
    text = bench_report.markdown_report(_fixture())  # its fp8 section misses targets
    fp8 = text.split("## fp8 matmul")[1].split("\n## ")[0]
    assert f"[{bench_report.MISSES_PAGE}]({bench_report.MISSES_PAGE})" in fp8
    assert (REPO / bench_report.MISSES_PAGE).is_file()
    assert bench_report._why_missed(["- Shapes at or above 0.90 of cuBLAS: 61 met"]) == []


def test_fp8_report_without_tmagen_figures() -> None:
    data = _fixture()
    for case in data["cases"]:
        case["candidates"] = [c for c in case["candidates"] if c["role"] != "tmagen"]
    text = bench_report.markdown_report(data)
    assert "- No shape has both tmagen's and cuBLASLt's per-tensor figures." in text
    assert _row(text, "| all | 0 of 6 |")


def test_fp8_section_merges_into_a_run_of_the_other_groups() -> None:
    """benchmarks/run.py --only fp8 --merge: the old run's other cases and header kept, its fp8
    cases replaced, the fp8 run's machine and date recorded for the page."""
    spec = importlib.util.spec_from_file_location("bench_run_merge", REPO / "benchmarks" / "run.py")
    run = importlib.util.module_from_spec(spec)
    sys.modules["bench_run_merge"] = run
    spec.loader.exec_module(run)
    old = json.loads((REPO / "tests" / "data" / "bench_matmul_fixture.json").read_text())
    old["cases"].append({**_fixture()["cases"][0], "shape": [1, 2, 3]})  # a stale fp8 case
    new = {**_fixture(), "date": "2026-12-02", "driver": "590.1"}
    data = run.merged(old, new, {"fp8"})
    assert data["date"] == old["date"] and data["sections"]["fp8"]["date"] == "2026-12-02"
    assert [c for c in data["cases"] if c["group"] == "matmul"] == [c for c in old["cases"] if c["group"] == "matmul"]
    assert [c for c in data["cases"] if c["group"] == "fp8"] == new["cases"]
    text = bench_report.markdown_report(data)
    assert "## Matmul" in text and "Measured apart from the sections above: NVIDIA H200, driver 590.1, 2026-12-02." \
        in text


# ----------------------------------------------------------------------------- the accuracy study
def _accuracy() -> dict:
    return json.loads(ACCURACY_FIXTURE.read_text())


def test_accuracy_page_judges_each_row_against_cublaslt() -> None:
    text = fp8_accuracy.accuracy_markdown(_accuracy())
    assert "- Rows at or below cuBLASLt's largest error: 3 of 4 met; **missed**: positive 256x256x16384" in text
    row = _row(text, "| positive | 256 | 16384 |")
    assert row.endswith("| 16.67 | **missed** |") and "| 0.5 (0.0001) |" in row
    assert _row(text, "| normal | 256 | 16384 |").endswith("| 0.67 | met |")
    assert "failed: SpecError: kernel.promote_every = 256" in _row(text, "| positive | 256 | 256 |")
    assert "| max \\|R\\| |" in text  # the bars of a header cell escaped


def test_accuracy_page_shows_the_promotions_cost() -> None:
    text = fp8_accuracy.accuracy_markdown(_accuracy())
    assert "## The promotion's cost" in text and "10 rounds x 3 repetitions after 2 warm-up launches" in text
    row = _row(text, "| 4096x4096x4096 |")
    assert row == ("| 4096x4096x4096 | 1057 (1.000) | 1057 | failed: SpecError: x \\| y | 1100 (1.040) | "
                   "1018 (0.963) | 1100 (1.040) |")
    data = _accuracy()
    del data["speed"]
    assert "promotion's cost" not in fp8_accuracy.accuracy_markdown(data)


def test_accuracy_report_command(tmp_path, capsys) -> None:
    page = tmp_path / "page.md"
    assert fp8_accuracy.main([str(ACCURACY_FIXTURE), "--report", "--markdown", str(page)]) == 0
    assert page.read_text() == fp8_accuracy.accuracy_markdown(_accuracy())
    bad = tmp_path / "bad.json"
    bad.write_text("{}")
    assert fp8_accuracy.main([str(bad), "--report", "--markdown", str(page)]) == 2
    assert "KeyError" in capsys.readouterr().err


def test_committed_accuracy_page_is_its_run() -> None:
    """docs/fp8-accuracy.md, once measured (python -m lab.fp8_accuracy docs/fp8-accuracy.json), is
    what its JSON renders."""
    run = REPO / "docs" / "fp8-accuracy.json"
    if not run.exists():
        pytest.skip("no accuracy run committed yet (python -m lab.fp8_accuracy docs/fp8-accuracy.json on a GPU)")
    page = REPO / fp8_accuracy.PAGE
    assert page.read_text() == fp8_accuracy.accuracy_markdown(json.loads(run.read_text()))


def test_promote_specs_differ_in_the_setting_alone(tmp_path) -> None:
    base = fp8_accuracy.default_fp8_spec()
    never, every = fp8_accuracy.promote_spec(0, "float32", base), fp8_accuracy.promote_spec(128, "bfloat16", base)
    assert never["kernel"]["promote_every"] == 0 and every["kernel"]["promote_every"] == 128
    assert never["kernel"]["dispatch"] == every["kernel"]["dispatch"] == "single"
    c32 = next(t for t in never["tensors"] if t["name"] == "c")
    assert c32["dtype"] == "float32" and c32["box"] == [64, 32]
    assert next(t for t in every["tensors"] if t["name"] == "c")["box"] == [64, 64]
    assert [t for t in never["tensors"] if t["name"] != "c"] == [t for t in base["tensors"] if t["name"] != "c"]
    assert [t["dtype"] for t in base["tensors"][:2]] == ["float8_e4m3"] * 2
    assert base["kernel"].get("b_major", "k") == "k"
    assert "promote_every" not in base["kernel"]  # the base is left as it was
    # a tuned fp8 spec in tmagen/ops_specs is the base where there is one
    (tmp_path / "a_bf16.json").write_text(json.dumps(json.loads(
        (REPO / "tmagen" / "ops_specs" / "bench_matmul_bfloat16.json").read_text())))
    tuned = {**base, "name": "bench_matmul_float8_e4m3", "kernel": {**base["kernel"], "stages": 5}}
    (tmp_path / "b_fp8.json").write_text(json.dumps(tuned))
    assert fp8_accuracy.base_fp8_spec([tmp_path, REPO / "specs"]) == tuned
    assert fp8_accuracy.base_fp8_spec([tmp_path / "none"]) == base
    assert fp8_accuracy.base_fp8_spec()["tensors"][0]["dtype"] == "float8_e4m3"


@pytest.mark.parametrize("every", fp8_accuracy.PROMOTE_EVERY)
@pytest.mark.parametrize("out", ["float32", "bfloat16"])
def test_every_promote_spec_plans(every, out) -> None:
    """The study's specs pass every rule of the matmul kind (built from the repository's fp8 spec,
    and from the default)."""
    from tmagen.plan import resolve
    from tmagen.spec import parse_spec

    for base in (fp8_accuracy.base_fp8_spec(), fp8_accuracy.default_fp8_spec()):
        plan = resolve(parse_spec(fp8_accuracy.promote_spec(every, out, base)))
        assert plan.spec.kernel.promote_every == every and plan.spec.tensors[2].dtype == out


def test_candidate_names_are_what_the_page_orders_by() -> None:
    names = fp8_accuracy.candidate_names()
    assert names[0] == fp8_accuracy.OPS and names[-2:] == [fp8_accuracy.CUBLAS, fp8_accuracy.CUBLAS_FAST]
    assert fp8_accuracy.spec_name(0) in names and len(set(names)) == len(names)
    assert TMAGEN_TENSOR in fp8_bench.NAMES and CUBLAS_TENSOR in fp8_bench.NAMES
