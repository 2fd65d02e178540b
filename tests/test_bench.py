"""The benchmark report (pure: from the JSON a GPU run wrote) and tmagen bench without a GPU."""

from __future__ import annotations

import json
import math
import os
import sys
import xml.etree.ElementTree as ET

import pytest

from lab import bench_report, fp8_bench, matmul_bench
from tmagen import bench
from tmagen.cli import main
from tmagen.plan import load as load_plan

from conftest import REPO

RESULTS = sorted((REPO / "benchmarks" / "results").glob("*.json"))


def _data() -> dict:
    """The newest committed run: the latest date it was measured on, then the last name (an A/B
    comparison of the same day, named for what it compares, sorts before the day's full run)."""
    runs = {p.name: json.loads(p.read_text()) for p in RESULTS}
    return runs[max(runs, key=lambda name: (runs[name].get("date", ""), name))]


def test_report_is_current() -> None:
    """BENCHMARKS.md and its plot are what the newest committed results render."""
    data = _data()
    assert (REPO / "BENCHMARKS.md").read_text() == bench_report.markdown_report(data, "benchmarks/bandwidth.svg")
    assert (REPO / "benchmarks" / "bandwidth.svg").read_text() == bench_report.plot_svg(data)


def test_plot_has_one_line_per_series() -> None:
    data = _data()
    root = ET.fromstring(bench_report.plot_svg(data))
    lines = root.findall("{http://www.w3.org/2000/svg}polyline")
    series = {c["spec"] for c in data["cases"] if c["group"] == "sweep"}
    if not series:  # a run without the size sweep (benchmarks/run.py --only ...): nothing to draw
        assert lines == []
        return
    assert len(lines) == len(series) + 1  # and memcpy
    assert all(len(line.get("points").split()) == 5 for line in lines)  # 16 MiB .. 2 GiB


def test_a_format_1_run_is_refused() -> None:
    """The first suite's format (one candidate at a time) is no longer rendered: said, not misdrawn."""
    old = {"records": [], "gpu": "x"}
    with pytest.raises(ValueError, match="only format 2"):
        bench_report.markdown_report(old)
    with pytest.raises(ValueError, match="only format 2"):
        bench_report.plot_svg(old)


def test_newest_page_shows_every_case_of_the_newest_run() -> None:
    """Once a run with peers is committed: every copy and transpose case has its row, with tmagen's
    bandwidth and its best peer, and every matmul shape its row."""
    data = _data()
    text = bench_report.markdown_report(data)
    for case in data["cases"]:
        if case["group"] in ("copy", "transpose"):
            row = _row(text, f"| {bench_report._label(case)} | `{case['spec']}` | {case['dtype']} | "
                             f"{'x'.join(map(str, case['shape']))} |")
            mine, peer = bench_report._role(case, "tmagen"), bench_report.best_peer(case)
            if mine and peer:
                assert f"| {mine['gbps']:.0f} |" in row and f"| {peer['name']} |" in row
        elif case["group"] == "matmul":
            m, n, k = case["shape"]
            assert _row(text, f"| {bench_report.matmul_class(case)} | {m} | {n} | {k} |")


def test_bench_without_gpu_says_so(capsys) -> None:
    from tmagen import runtime

    if runtime.no_gpu_reason() is None:
        import pytest

        pytest.skip("a GPU is here: benchmarks/run.py times things")
    assert main(["bench", str(REPO / "tmagen" / "ops_specs" / "bench_copy_float32.json")]) == 3
    err = capsys.readouterr().err
    assert err.startswith("tmagen bench: nothing run") and len(err.strip().splitlines()) == 1


# ----------------------------------------------------------------------------- the interleaved method
class _FakeGpu:
    """Stands in for torch.cuda: a clock that launches advance by their known durations, events that
    read it, and a sleep kernel that advances it too."""

    def __init__(self) -> None:
        self.now_ms = 0.0
        self.sleeps: list[int] = []
        gpu = self

        class Event:
            def __init__(self, enable_timing: bool = False) -> None:
                self.t: float | None = None

            def record(self) -> None:
                self.t = gpu.now_ms

            def synchronize(self) -> None:
                pass

            def elapsed_time(self, other: Event) -> float:
                return other.t - self.t

        self.Event = Event

    def _sleep(self, cycles: int) -> None:
        self.sleeps.append(cycles)
        self.now_ms += cycles / bench.SM_CLOCK_BOUND_HZ * 1e3

    def synchronize(self) -> None:
        pass


def _with_fake_torch(monkeypatch, min_sleep_s: float = 0.02) -> _FakeGpu:
    """The fake GPU, and a sleep in front of each round long enough that a busy test machine's
    scheduling cannot make the CPU late (the fake sleep costs no time)."""
    import sys
    import types

    gpu = _FakeGpu()
    monkeypatch.setitem(sys.modules, "torch", types.SimpleNamespace(cuda=gpu))
    monkeypatch.setattr(bench, "MIN_SLEEP_S", min_sleep_s)
    return gpu


def test_interleave_gives_each_candidate_its_own_time(monkeypatch) -> None:
    """Rotated order, batches and buffer sets: every sample lands on the candidate that ran."""
    gpu = _with_fake_torch(monkeypatch)
    durations = [0.5, 0.25, 2.0]
    used_sets: list[list[int]] = [[], [], []]

    def launcher(i: int):
        def launch(s: int) -> None:
            used_sets[i].append(s)
            gpu.now_ms += durations[i]

        return launch

    method = bench.Method(rounds=7, repetitions=3, warmup=2)
    samples = bench.interleave([launcher(i) for i in range(3)], method, sets=3, batch=2)
    assert samples.retried_rounds == 0
    for i, d in enumerate(durations):
        assert len(samples.ms[i]) == 3 and all(len(rep) == 7 for rep in samples.ms[i])
        assert all(x == pytest.approx(d) for rep in samples.ms[i] for x in rep)
        assert set(used_sets[i]) == {0, 1, 2}  # every candidate rotates through every buffer set
    assert gpu.sleeps and all(c > 0 for c in gpu.sleeps)  # every round behind a sleep


def test_interleave_times_a_round_again_when_the_cpu_was_late(monkeypatch) -> None:
    """A round whose queuing outlasted the sleep in front of it may have let the GPU wait: it is
    timed again behind a longer sleep, and its samples are not kept."""
    import time as _time

    gpu = _with_fake_torch(monkeypatch)
    calls = {"n": 0}

    def slow_once(s: int) -> None:
        calls["n"] += 1
        if calls["n"] == 4:  # the first timed round (after 2 warm-up calls and the queuing estimate)
            _time.sleep(0.03)
            gpu.now_ms += 100.0  # what this round would have measured: must not be kept
        gpu.now_ms += 1.0

    samples = bench.interleave([slow_once], bench.Method(rounds=3, repetitions=1, warmup=2))
    assert samples.retried_rounds >= 1 and samples.late_rounds == 0
    assert samples.ms[0] == [[pytest.approx(1.0)] * 3]
    assert samples.sleep_us == pytest.approx(bench.MAX_SLEEP_S * 1e6)  # longer, within its bound


def test_interleave_keeps_and_counts_rounds_a_blocking_launch_makes_late(monkeypatch) -> None:
    """A launch that waits for the GPU is late behind any sleep: after MAX_RETRIES its round is kept
    and counted, rather than retried for ever."""
    import time as _time

    gpu = _with_fake_torch(monkeypatch)

    def blocking(s: int) -> None:
        _time.sleep(bench.MAX_SLEEP_S * 1.2)
        gpu.now_ms += 1.0

    samples = bench.interleave([blocking], bench.Method(rounds=2, repetitions=1, warmup=1))
    assert samples.retried_rounds == 2 * bench.MAX_RETRIES and samples.late_rounds == 2
    assert samples.ms[0] == [[pytest.approx(1.0)] * 2]


def test_summarize_reports_median_quartiles_and_each_repetition() -> None:
    t = bench.summarize("k", "tmagen", [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], shape=(2, 3), dtype="float32",
                        bytes_moved=10 ** 9)
    assert t.median_ms == 3.5 and t.spread_ms == 5.0
    assert t.rep_medians_ms == (2.0, 5.0)
    assert t.q1_ms == pytest.approx(2.25) and t.q3_ms == pytest.approx(4.75)
    assert t.as_dict()["gbps"] == pytest.approx(10 ** 9 / 3.5e-3 / 1e9)


def test_checked_drops_a_wrong_or_crashing_candidate_with_the_reason() -> None:
    def boom() -> str | None:
        raise RuntimeError("illegal memory access\nmore")

    cands = [bench.Candidate("right", "peer", lambda i: None, lambda: None),
             bench.Candidate("wrong", "peer", lambda i: None, lambda: "output differs"),
             bench.Candidate("crash", "peer", lambda i: None, boom)]
    good, failed = bench.checked(cands)
    assert [c.name for c in good] == ["right"]
    assert failed == [{"name": "wrong", "role": "peer", "why": "output differs"},
                      {"name": "crash", "role": "peer", "why": "RuntimeError: illegal memory access"}]


# ----------------------------------------------------------------------------- the format-2 page, from a fixture
GB = 10 ** 9


def _cand(name: str, role: str, reps_ms: list[list[float]], nbytes: int = GB, flops: int = 0,
          note: str = "") -> dict:
    return bench.summarize(name, role, reps_ms, shape=(1,), dtype="x", bytes_moved=nbytes, flops=flops,
                           note=note).as_dict()


def _case(group: str, spec: str, kind: str, shape: list[int], dtype: str, cands: list[dict],
          failed: list[dict] | None = None, size_mib: int | None = None) -> dict:
    return {"group": group, "spec": spec, "shape_kind": kind, "shape": shape, "dtype": dtype, "size_mib": size_mib,
            "candidates": cands, "failed": failed or [], "retried_rounds": 0, "sets": 1, "batch": 1}


def _flat(ms: float, reps: int = 3, jitter: float = 0.0) -> list[list[float]]:
    """``reps`` repetitions of three samples around ``ms``, each repetition's median ``ms * (1 + k * jitter)``."""
    return [[ms * (1 + k * jitter)] * 3 for k in range(reps)]


def _fixture() -> dict:
    """A made-up run (not measurements): each case built so that its verdict is known."""
    memcpy = _cand("cudaMemcpyAsync D2D", "limit", _flat(0.50))
    copy = _case("copy", "bench_copy_float32", "full", [16384, 16384], "float32", [
        _cand("tmagen bench_copy_float32_copy", "tmagen", _flat(0.510)),  # 0.980 of memcpy, ahead of every peer
        memcpy,
        _cand("torch clone()", "peer", _flat(0.515)),
        _cand("Triton copy (autotuned)", "peer", _flat(0.520), note="BLOCK=4096, num_warps=8, num_stages=3"),
    ])
    square = _case("transpose", "bench_transpose_float32", "square", [16384, 16384], "float32", [
        _cand("tmagen bench_transpose_float32_transpose", "tmagen", _flat(0.540)),
        memcpy,
        _cand("torch .transpose(-2,-1).contiguous()", "peer", _flat(1.9)),
        _cand("Triton tl.trans, pointer tiles (autotuned)", "peer", _flat(0.525)),  # faster than tmagen
    ], failed=[{"name": "Triton tl.trans, TMA descriptors (autotuned)", "role": "peer",
                "why": "Triton TMA transpose's output differs from PyTorch's"}])
    ragged = _case("transpose", "bench_transpose_float32", "ragged", [16352, 16352], "float32", [
        # 0.9961 of the square case's bytes at 0.95 of its bandwidth
        _cand("tmagen bench_transpose_float32_transpose", "tmagen", _flat(0.540 * 0.9961 / 0.95),
              nbytes=int(GB * 0.9961)),
        _cand("cudaMemcpyAsync D2D", "limit", _flat(0.50 * 0.9961), nbytes=int(GB * 0.9961)),
        # tmagen ahead in one repetition, behind in another: within noise
        _cand("Triton tl.trans, pointer tiles (autotuned)", "peer",
              [[0.540 * 0.9961 / 0.95 * f] * 3 for f in (0.99, 1.0, 1.01)], nbytes=int(GB * 0.9961)),
    ])
    flops = 2 * 4096 ** 3
    mm = _case("matmul", "", "4096x4096x4096", [4096, 4096, 4096], "bfloat16", [
        _cand("tmagen matmul", "tmagen", _flat(0.200), flops=flops),
        _cand("cuBLAS (torch.mm)", "peer", _flat(0.190), flops=flops),  # tmagen at 0.95 of cuBLAS: met
        _cand("Triton TMA persistent (autotuned)", "peer", _flat(0.230), flops=flops),
    ])
    mm_free = _case("matmul", "", "6144x6144x2048", [6144, 6144, 2048], "bfloat16", [
        _cand("tmagen matmul", "tmagen", _flat(0.100), flops=flops),
        _cand("cuBLAS (torch.mm)", "peer", _flat(0.080), flops=flops),
        _cand("Triton TMA persistent (autotuned)", "peer", _flat(0.090), flops=flops),  # ahead of tmagen
    ])
    sweep = [_case("sweep", name, "sweep", [256, 16384], "float32", [
        _cand(f"tmagen {name}", "tmagen", _flat(0.01 * size), nbytes=size << 21),
        _cand("cudaMemcpyAsync D2D", "limit", _flat(0.009 * size), nbytes=size << 21),
    ], size_mib=size) for size in (16, 64, 256, 1024, 2048)
        for name in ("bench_copy_float32", "bench_transpose_float32")]
    return {"format": 2, "gpu": "NVIDIA H200", "driver": "580.159.04", "sms": 132, "l2_bytes": 60 << 20,
            "versions": {"torch": "2.11.0", "triton": "3.6.0", "cupy": None}, "date": "2026-12-01",
            "method": {"rounds": 3, "repetitions": 3, "warmup": 2},
            "cases": [copy, square, ragged, mm, mm_free, *sweep],
            "unavailable": [{"name": "CuPy", "why": "not importable (ModuleNotFoundError: No module named 'cupy')"}]}


def _row(text: str, start: str) -> str:
    return next(line for line in text.splitlines() if line.startswith(start))


def test_report_judges_every_case_against_memcpy_and_the_best_peer() -> None:
    text = bench_report.markdown_report(_fixture())
    copy = _row(text, "| copy | `bench_copy_float32`")
    assert "| 0.980 (0.980-0.980) met |" in copy  # of memcpy, the 0.97 target
    assert "| torch clone() | 1942 | 1.010 (1.010-1.010) met |" in copy  # the best of the peers, named
    square = _row(text, "| transpose | `bench_transpose_float32`")
    assert "Triton tl.trans, pointer tiles (autotuned) | 1905 | 0.972 (0.972-0.972) **missed** |" in square
    ragged = _row(text, "| transpose (ragged) | `bench_transpose_float32`")
    assert "within noise" in ragged and "(0.990-1.010)" in ragged
    # a transpose has no target against memcpy: the ratio is shown, not judged
    assert "| 0.926 (0.926-0.926) |" in square


def test_report_states_the_method_and_the_noise() -> None:
    data = _fixture()
    text = bench_report.markdown_report(data)
    assert "3 rounds after 2 warm-up launches of each, and that loop 3 times" in text
    nz = bench_report.noise(data)
    assert nz["max"] == pytest.approx(0.02)  # the jittered peer: its repetitions' medians 2% apart
    assert f"{100 * nz['max']:.1f}% at most" in text
    assert "PyTorch 2.11.0, Triton 3.6.0" in text and "CuPy could not run: not importable" in text


def test_report_ragged_against_square_and_the_failed_peer() -> None:
    text = bench_report.markdown_report(_fixture())
    assert "`bench_transpose_float32` 0.950 (0.950-0.950) **missed**" in text  # under 0.97 of square
    assert ("- transpose `bench_transpose_float32` 16384x16384: Triton tl.trans, TMA descriptors (autotuned): "
            "Triton TMA transpose's output differs from PyTorch's") in text
    # a failed peer is never the best peer, nor in the tables as timed
    assert "| failed its check |" in _row(text, "| transpose `bench_transpose_float32` | float32 | 16384x16384")
    assert "BLOCK=4096, num_warps=8, num_stages=3" in text


def test_report_command_writes_a_format_2_page_and_plot(tmp_path, capsys) -> None:
    data_file = tmp_path / "bench.json"
    data_file.write_text(json.dumps(_fixture()))
    md, svg = tmp_path / "B.md", tmp_path / "b.svg"
    assert bench_report.main([str(data_file), "--markdown", str(md), "--plot", str(svg)]) == 0
    assert capsys.readouterr().out == f"wrote {md} and {svg}\n"
    assert md.read_text() == bench_report.markdown_report(_fixture(), str(svg))
    root = ET.fromstring(svg.read_text())
    lines = root.findall("{http://www.w3.org/2000/svg}polyline")
    assert len(lines) == 3  # two kernels and memcpy
    assert all(len(line.get("points").split()) == 5 for line in lines)


@pytest.mark.parametrize("what", ["nul", "missing", "another json", "unwritable"])
def test_report_command_refuses_bad_input_in_one_line(tmp_path, capsys, what) -> None:
    """A NUL in the path, a missing file, a JSON that is no benchmark run (a spec: it raised
    KeyError) and a page it cannot write: exit 2 and one line naming the file, no traceback."""
    good = tmp_path / "bench.json"
    good.write_text(json.dumps(_fixture()))
    source, markdown, named, why = {
        "nul": ("nul\x00.json", tmp_path / "B.md", "nul", "embedded null byte"),
        "missing": (str(tmp_path / "missing.json"), tmp_path / "B.md", "missing.json", "cannot read it"),
        "another json": (str(REPO / "specs" / "copy_f32_3d.json"), tmp_path / "B.md", "copy_f32_3d.json",
                         "not a benchmark run"),
        "unwritable": (str(good), tmp_path / "no" / "B.md", "B.md", "cannot write it"),
    }[what]
    assert bench_report.main([source, "--markdown", str(markdown), "--plot", str(tmp_path / "b.svg")]) == 2
    out, err = capsys.readouterr()
    assert out == "" and len(err.strip().splitlines()) == 1 and named in err and why in err, err
    assert not markdown.exists()


def test_report_module_runs_from_the_repository(tmp_path) -> None:
    """`python -m lab.bench_report`, as scripts/gpu_check.sh calls it from the repository root."""
    import subprocess

    from conftest import pythonpath_with_repo

    data_file = tmp_path / "bench.json"
    data_file.write_text(json.dumps(_fixture()))
    md, svg = tmp_path / "B.md", tmp_path / "b.svg"
    proc = subprocess.run([sys.executable, "-m", "lab.bench_report", str(data_file), "--markdown", str(md),
                           "--plot", str(svg)], cwd=REPO, capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": pythonpath_with_repo()})
    assert proc.returncode == 0, proc.stderr
    assert md.read_text() == bench_report.markdown_report(_fixture(), str(svg))


def test_judge() -> None:
    assert bench_report.judge([1.01, 1.02], 1.0) == "met"
    assert bench_report.judge([0.98, 0.99], 1.0) == "**missed**"
    assert bench_report.judge([0.99, 1.01], 1.0) == "within noise"


# ----------------------------------------------------------------------------- the suite's plan and budget
def _run_module():
    import importlib.util

    spec = importlib.util.spec_from_file_location("bench_run", REPO / "benchmarks" / "run.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_run"] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def test_suite_plan_covers_every_spec_shape_and_matmul() -> None:
    run = _run_module()

    specs = [load_plan(p).spec for p in sorted((REPO / "tmagen" / "ops_specs").glob("*.json"))]
    cases = run.plan(specs, set(run.DEFAULT_GROUPS))
    transposes = [c for c in cases if c.group == "transpose"]
    assert {c.shape_kind for c in transposes} == {"square", "ragged", "odd strides"}
    assert len(transposes) == 3 * sum(s.kernel.kind == "transpose" for s in specs)
    assert {c.spec for c in cases if c.group == "copy"} == {s.name for s in specs if s.kernel.kind == "copy"}
    shapes = matmul_bench.matmul_shapes()
    # a tuned spec launched directly reads K-major operands: the weight gradients are tmagen.ops.matmul's alone
    k_major = [s for s in shapes if s.shape_class != matmul_bench.WEIGHT_GRADIENT]
    assert [(c.shape, c.shape_kind, c.ld) for c in cases if c.group == "matmul"] == [
        ([s.m, s.n, s.k], s.shape_class, s.ld) for s in k_major]
    assert [c.group for c in run.plan(specs, {"matmul"})] == ["matmul"] * len(k_major)
    through_ops = run.plan(specs, {"matmul"}, tmagen_matmul="ops")
    assert [(c.shape, c.shape_kind) for c in through_ops] == [([s.m, s.n, s.k], s.shape_class) for s in shapes]
    assert all(run.matmul_shape(c) == s for c, s in zip(through_ops, shapes)), "each case's shape, its layouts too"
    # the whole suite by default, autotuning included, fits one 10-minute GPU call with a minute for compiling
    # the specs; the fp8 section is measured apart (--only fp8 --merge), in a call of its own
    seconds, _ = run.estimate(cases, run.FULL)
    assert 0 < seconds < 540
    fp8 = run.plan(specs, {"fp8"})
    assert [(c.shape, c.shape_kind, c.ld, c.dtype) for c in fp8] == [
        ([s.m, s.n, s.k], s.shape_class, s.ld, "float8_e4m3") for s in fp8_bench.fp8_shapes()]
    seconds, _ = run.estimate(fp8, run.FULL)
    assert 0 < seconds < 540
    assert "fp8" in run.GROUPS and "fp8" not in run.DEFAULT_GROUPS


def test_suite_estimate_runs_without_a_gpu(capsys) -> None:
    run = _run_module()
    assert run.main(["--estimate", "--only", "transpose,matmul"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"plan: {12 + len(matmul_bench.matmul_shapes())} cases") and "Triton: 18+18 configs" in out
    assert f"matmul    {len(matmul_bench.matmul_shapes())} shapes" in out and "Triton: 16+10 configs" in out


def test_report_of_a_partial_run_with_a_case_that_failed_whole() -> None:
    """A run of some groups only (no sweep), one of whose cases raised: the page says so."""
    data = _fixture()
    data["cases"] = [c for c in data["cases"] if c["group"] != "sweep"]
    data["cases"].append(_case("transpose", "bench_transpose_uint8", "odd strides", [16368, 65520], "uint8", [],
                               failed=[{"name": "the whole case", "role": "tmagen",
                                        "why": "GpuError: launching x failed: CUDA_ERROR_ILLEGAL_ADDRESS"}]))
    text = bench_report.markdown_report(data)
    row = _row(text, "| transpose (odd strides) | `bench_transpose_uint8`")
    assert "failed: GpuError: launching x failed: CUDA_ERROR_ILLEGAL_ADDRESS" in row and row.count("|") == 10
    assert "bandwidth against size" not in text
    assert "no size sweep" in bench_report.plot_svg(data)
    ET.fromstring(bench_report.plot_svg(data))


def test_suite_plan_of_chosen_specs() -> None:
    run = _run_module()

    specs = [load_plan(REPO / "tmagen" / "ops_specs" / "bench_copy_uint8.json").spec]
    cases = run.plan(specs, set(run.GROUPS))
    assert [(c.group, c.shape_kind) for c in cases if c.group not in ("matmul", "fp8", "ops")] == [
        ("copy", "full"), ("copy", "ragged"), ("copy", "odd strides")]  # no sweep spec among them


# ----------------------------------------------------------------------------- the matmul section (issue 18)
def test_matmul_shape_set_has_every_class_it_names() -> None:
    """At least 40 shapes; each class's shapes are what its name says; every row pitch is a whole
    number of 16 bytes (TMA's rule, which the Triton TMA peer needs too)."""
    shapes = matmul_bench.matmul_shapes()
    assert len(shapes) >= 40 and len({(s.m, s.n, s.k, s.ld, s.a_major, s.b_major) for s in shapes}) == len(shapes)
    by = {c: [s for s in shapes if s.shape_class == c] for c in matmul_bench.CLASSES}
    assert all(by.values()) and sum(map(len, by.values())) == len(shapes)
    assert all(s.m == s.n == s.k and s.k % 256 == 0 for s in by["square-tile-multiple"])
    assert {256, 16384} <= {s.m for s in by["square-tile-multiple"]}
    assert all(s.m == s.n == s.k and s.k % 64 != 0 for s in by["square-ragged"])
    assert {(s.n, s.k) for s in by["llm-projection"]} == set(matmul_bench.LLM_NK)
    assert {s.m for s in by["llm-projection"]} >= {1, 16384}
    assert all(s.k <= 512 for s in by["short-K"]) and all(s.k >= 16384 for s in by["long-K"])
    for s in by["odd-leading-dimension"]:
        assert any(p % 128 for p in matmul_bench.pitches(s)), s
    assert any(s.ld for s in by["odd-leading-dimension"]) and any(not s.ld for s in by["odd-leading-dimension"])
    assert all(p % 16 == 0 for s in shapes for p in matmul_bench.pitches(s))
    # the weight gradients: A and B transposed views (x.T, dy), their rows M and N long; the others K-major
    assert all((s.a_major, s.b_major) == (("mn", "mn") if s.shape_class == "weight-gradient" else ("k", "k"))
               for s in shapes)
    assert {s.k for s in by["weight-gradient"]} >= {4096, 16384}
    assert all(s.ld is None or s.ld > s.k for s in shapes)


def test_merging_a_matmul_class_replaces_only_its_cases() -> None:
    """--only matmul --matmul-class weight-gradient --merge: the class's cases replaced, the other
    matmul classes and the other groups kept (before, every matmul case of the old run was dropped)."""
    run = _run_module()
    old = {"format": 2, "gpu": "A", "date": "1", "cases": [
        {"group": "copy", "shape_kind": "full", "n": 1}, {"group": "matmul", "shape_kind": "long-K", "n": 2},
        {"group": "matmul", "shape_kind": "weight-gradient", "n": 3}, {"group": "fp8", "shape_kind": "long-K", "n": 4}]}
    new = {"gpu": "B", "date": "2", "cases": [{"group": "matmul", "shape_kind": "weight-gradient", "n": 5}]}
    got = run.merged(old, new, {"matmul"}, matmul_classes={"weight-gradient"})
    # the new case takes the old one's place (the report's rows keep their order)
    assert [c["n"] for c in got["cases"]] == [1, 2, 5, 4] and got["sections"]["matmul"]["gpu"] == "B"
    assert [c["n"] for c in run.merged(old, new, {"matmul"})["cases"]] == [1, 5, 4]


def test_merging_matmul_shapes_replaces_only_their_cases_in_place() -> None:
    """--only fp8 --matmul-shape 2048x2048x32768 --merge: that shape's cases replaced where they
    stood, every other case kept; a case of the shapes that the new run did not reach (cut short) is
    dropped, not kept from the old run."""
    run = _run_module()
    old = {"format": 2, "gpu": "A", "date": "1", "cases": [
        {"group": "fp8", "shape_kind": "long-K", "shape": [4096, 4096, 16384], "n": 1},
        {"group": "fp8", "shape_kind": "long-K", "shape": [2048, 2048, 32768], "n": 2},
        {"group": "fp8", "shape_kind": "long-K", "shape": [1024, 4096, 65536], "n": 3},
        {"group": "matmul", "shape_kind": "long-K", "shape": [2048, 2048, 32768], "n": 4}]}
    new = {"gpu": "B", "date": "2", "cases": [
        {"group": "fp8", "shape_kind": "long-K", "shape": [2048, 2048, 32768], "n": 5}]}
    shapes = {(2048, 2048, 32768), (1024, 4096, 65536)}
    got = run.merged(old, new, {"fp8"}, matmul_shapes=shapes)
    assert [c["n"] for c in got["cases"]] == [1, 5, 4]
    assert [c["n"] for c in run.merged(old, new, {"fp8"}, matmul_classes={"long-K"},
                                       matmul_shapes=shapes)["cases"]] == [1, 5, 4]


def test_matmul_section_fits_its_budget() -> None:
    """The whole section, autotuning and checks included, in under 6 minutes (the estimate's rates
    are an H200's); long launches are timed in fewer rounds, short ones several to a sample, and
    no case rotates through more than ROTATION_BYTES of buffers."""
    run = _run_module()
    shapes = matmul_bench.matmul_shapes()
    seconds, _ = matmul_bench.estimate(shapes, run.FULL, ops=True)
    assert 0 < seconds < 360
    big = matmul_bench.MatmulShape(16384, 16384, 16384, "square-tile-multiple")
    small = matmul_bench.MatmulShape(1, 4096, 4096, "llm-projection")
    assert matmul_bench.method_for(big, run.FULL).rounds * matmul_bench.method_for(big, run.FULL).repetitions < 20
    assert matmul_bench.method_for(small, run.FULL) == run.FULL
    assert matmul_bench.launches_per_sample(small) > 1 and matmul_bench.launches_per_sample(big) == 1
    l2 = 60 << 20
    for s in shapes:
        sets = matmul_bench.buffer_sets(s, l2)
        per_set = 2 * ((s.m + s.n) * (s.ld or s.k) + s.m * s.n)
        assert sets == 1 or sets * per_set <= matmul_bench.ROTATION_BYTES
    assert matmul_bench.buffer_sets(small, l2) * (4096 * 4096 * 2) >= 4 * l2  # B leaves the L2 between uses


def test_matmul_plan_follows_the_tmagen_path_and_the_classes() -> None:
    run = _run_module()
    specs = [load_plan(p).spec for p in sorted((REPO / "tmagen" / "ops_specs").glob("*.json"))]
    ops = run.plan(specs, {"matmul"}, "ops")
    assert {c.spec for c in ops} == {matmul_bench.OPS} and len(ops) == len(matmul_bench.matmul_shapes())
    spec = run.plan(specs, {"matmul"}, "spec")
    assert {c.spec for c in spec} == {s.name for s in specs if s.kernel.kind == "matmul"
                                      and "float8" not in s.tensors[0].dtype}  # fp8: the fp8 section's
    short = run.plan(specs, {"matmul"}, "ops", {"short-K", "long-K"})
    assert {c.shape_kind for c in short} == {"short-K", "long-K"} and all(c.shape[2] <= 512 or c.shape[2] >= 16384
                                                                          for c in short)
    assert [c.ld for c in ops if c.ld] == [s.ld for s in matmul_bench.matmul_shapes() if s.ld]


def test_matmul_options_refuse_what_they_cannot_do(capsys) -> None:
    run = _run_module()
    with pytest.raises(SystemExit) as exc:
        run.main(["--estimate", "--only", "matmul", "--matmul-class", "square,short-K"])
    assert exc.value.code == 2 and "--matmul-class takes square-tile-multiple" in capsys.readouterr().err
    assert run.main(["--estimate", "--only", "matmul", "--matmul-class", "short-K", "--tmagen-matmul", "spec"]) == 0
    assert capsys.readouterr().out.startswith("plan: 4 cases")
    if not matmul_bench.has_ops_matmul():
        with pytest.raises(SystemExit) as exc:
            run.main(["--estimate", "--only", "matmul", "--tmagen-matmul", "ops"])
        assert exc.value.code == 2 and "this tmagen.ops has no matmul" in capsys.readouterr().err


MATMUL_FIXTURE = REPO / "tests" / "data" / "bench_matmul_fixture.json"


def _matmul_fixture() -> dict:
    """A made-up matmul section (tests/data/bench_matmul_fixture.json; not measurements): each
    case's times were chosen so that its verdicts are known."""
    return json.loads(MATMUL_FIXTURE.read_text())


def _gm(values: list[float]) -> float:
    return math.prod(values) ** (1 / len(values))


def test_matmul_report_judges_every_shape() -> None:
    text = bench_report.markdown_report(_matmul_fixture())
    assert _row(text, "| square-tile-multiple | 4096 | 4096 | 4096 | K |") == (
        "| square-tile-multiple | 4096 | 4096 | 4096 | K | 687 | 723 | 598 | 0.950 (0.950-0.950) met | "
        "1.150 (1.150-1.150) met | 0.826 (0.826-0.826) | TMA |")
    # M = 1: below 0.90 of cuBLAS, and behind Triton, whose faster kernel there is the pointer one
    row = _row(text, "| llm-projection | 1 | 4096 | 4096 |")
    assert "| 0.833 (0.833-0.833) **missed** | 0.917 (0.917-0.917) **missed** |" in row
    assert row.endswith("| pointer tiles |") and "| 3.4 |" in row  # small figures keep a decimal
    assert "| 1.000 (0.990-1.010) within noise |" in _row(text, "| short-K | 8192 | 8192 | 512 |")
    assert "| 1.000 (0.990-1.010) met |" in _row(text, "| square-ragged | 4000 |")  # the floor is 0.90
    assert _row(text, "| odd-leading-dimension | 4096 | 4096 | 4096 | 4104 |")
    failed = _row(text, "| odd-leading-dimension | 64 | 14336 | 4096 | 4104 |")
    assert "| failed: max \\|C - A B^T\\| = nan, more than 0.5 | 188 | 167 | - | - |" in failed
    assert failed.count("|") - failed.count("\\|") == 13  # the cell's bars escaped: the row keeps its 12 cells


def test_matmul_report_geometric_means_and_tallies() -> None:
    """The overall and per-class geometric means of each shape's median ratio, with those of the
    lowest and highest repetitions as the noise; the tallies name the shapes that missed."""
    text = bench_report.markdown_report(_matmul_fixture())
    # tmagen's time against cuBLAS's per shape (the fixture's), the failed shape left out
    medians = [0.190 / 0.200, 1.0, 0.010 / 0.012, 2.6 / 2.5, 1.0, 0.88 / 0.9, 0.205 / 0.21]
    lows = [0.190 / 0.200, 1 / 1.01, 0.010 / 0.012, 2.6 / 2.5, 0.99, 0.88 / 0.9, 0.205 / 0.21]
    highs = [0.190 / 0.200, 1 / 0.99, 0.010 / 0.012, 2.6 / 2.5, 1.01, 0.88 / 0.9, 0.205 / 0.21]
    band = f"{_gm(medians):.3f} ({_gm(lows):.3f}-{_gm(highs):.3f})"
    assert f"- Geometric mean of tmagen / cuBLAS over 7 shapes: {band} **missed**" in text
    assert "- Shapes at or above 0.90 of cuBLAS: 6 met, 1 **missed** (1x4096x4096)" in text
    assert ("- Shapes ahead of Triton: 5 met, 1 within noise (8192x8192x512), 1 **missed** (1x4096x4096)"
            in text)
    assert "- Without a tmagen figure (see the notes): 64x14336x4096 (rows of A and B 4104 apart)" in text
    assert _row(text, "| all |").startswith(f"| all | 7 of 8 | {band} | 0.833 at 1x4096x4096 |")
    llm = f"{_gm([0.010 / 0.012, 2.6 / 2.5]):.3f}"
    assert _row(text, "| llm-projection | 2 |").startswith(f"| llm-projection | 2 | {llm} ({llm}-{llm}) | "
                                                          "0.833 at 1x4096x4096 |")
    assert _row(text, "| odd-leading-dimension | 1 of 2 |")
    assert "M = 1: 0.833 (0.833-0.833); M = 16384: 1.040 (1.040-1.040)." in text
    assert "20 rounds x 3 repetitions for 7 shapes, 10 rounds x 3 repetitions for 1 shape" in text
    classes = [line.split(" |")[0][2:] for line in text.splitlines()
               if line.startswith("| ") and " | " in line and line.split(" | ")[1].split()[0].isdigit()
               and "at " in line]
    present = {c["shape_kind"] for c in _matmul_fixture()["cases"] if c["group"] == "matmul"}
    assert len(present) >= 6  # the classes the fixture has, in the set's order, then the whole set
    assert classes == [c for c in matmul_bench.CLASSES if c in present] + ["all"]


def test_matmul_report_geometric_mean_met_and_within_noise() -> None:
    data = _matmul_fixture()
    data["cases"] = [c for c in data["cases"] if c["shape_kind"] == "square-ragged"]
    text = bench_report.markdown_report(data)
    assert "over 1 shapes: 1.000 (0.990-1.010) within noise" in text  # repetitions on both sides of 1.00
    data = _matmul_fixture()
    data["cases"] = [c for c in data["cases"] if c["shape"] == [16384, 14336, 4096]]
    assert "over 1 shapes: 1.040 (1.040-1.040) met" in bench_report.markdown_report(data)
    for case in data["cases"]:
        case["candidates"] = [c for c in case["candidates"] if c["role"] != "tmagen"]
    text = bench_report.markdown_report(data)
    assert "No tmagen matmul was timed in this run." in text and "Geometric mean of tmagen" not in text
    assert _row(text, "| llm-projection | 16384 | 14336 | 4096 | K | - | 740 | 687 | - | - |")


def test_matmul_report_of_a_run_before_the_shape_set() -> None:
    """A run whose matmul cases carry no class (before issue 18) renders them as unclassified."""
    data = _fixture()
    text = bench_report.markdown_report(data)
    assert _row(text, "| unclassified | 4096 | 4096 | 4096 | K | 687 | 723 | 598 | 0.950 (0.950-0.950) met |")
    assert _row(text, "| unclassified | 2 |")


class _DeviceArray:
    """What the spec path reads of a torch tensor (data_ptr, shape, stride), over emulated memory."""

    def __init__(self, ptr: int, shape: tuple[int, int], strides: tuple[int, int]) -> None:
        self.ptr, self.shape, self.strides = ptr, shape, strides

    def data_ptr(self) -> int:
        return self.ptr

    def stride(self) -> tuple[int, int]:
        return self.strides


def test_matmul_spec_path_binds_sliced_views_by_their_strides(monkeypatch) -> None:
    """tmagen's candidate through the tuned spec, on the emulated GPU: A and B sliced views (rows
    K + 8 long, NaN past K) and a C whose rows are no multiple of 128 bytes give A B^T, so the
    maps were encoded with each operand's own pitch."""
    import numpy as np

    import emulated_gpu

    device = emulated_gpu.install(monkeypatch)
    plan = load_plan(REPO / "tmagen" / "ops_specs" / "bench_matmul_bfloat16.json")
    monkeypatch.setattr(emulated_gpu.Module, "majors", {plan.kernel.symbol: ("k", "k")})
    m, n, k, ld = 100, 72, 40, 48
    rng = np.random.default_rng(5)

    def operand(rows: int) -> tuple[np.ndarray, _DeviceArray]:
        bits = np.full((rows, ld), 0x7FC0, dtype=np.uint16)  # bfloat16 NaN past K
        bits[:, :k] = (rng.standard_normal((rows, k)).astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)
        buf = emulated_gpu.Buffer.from_array(bits.view(np.uint8))
        values = (bits[:, :k].astype(np.uint32) << 16).view(np.float32).astype(np.float64)
        return values, _DeviceArray(buf.ptr, (rows, k), (ld, 1))

    (av, a), (bv, b) = operand(m), operand(n)
    out = emulated_gpu.Buffer(m * n * 2)
    launch = matmul_bench.tmagen_spec(plan.spec, b"emulated", device)
    launch(a, b, _DeviceArray(out.ptr, (m, n), (n, 1)))
    c = (out.download(np.uint16, (m, n)).astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    reference = av @ bv.T
    assert np.abs(c - reference).max() <= 2.0 ** -7 * np.abs(reference).max()


def test_each_section_s_estimate_covers_what_the_newest_run_took() -> None:
    """`benchmarks/run.py --estimate` budgets the 10-minute device calls a run is split into: each
    section's estimate must reach at least 0.8 of the seconds its cases took in the newest committed
    run (a section estimated at 145 s took 460, and a call budgeted on it lost the section)."""
    run = _run_module()
    data = _data()
    specs = [load_plan(p).spec for p in sorted(run.SPECS.glob("*.json"))]
    for group in ("copy", "transpose", "matmul", "fp8", "ops"):
        took = sum(c.get("seconds", 0.0) for c in data["cases"] if c["group"] == group)
        if took == 0:
            continue
        seconds, _ = run.estimate(run.plan(specs, {group}, "ops"), run.FULL)
        assert seconds >= 0.8 * took, (group, seconds, took)
