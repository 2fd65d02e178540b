"""The benchmark report (pure: from the JSON a GPU run wrote) and tmagen bench without a GPU."""

from __future__ import annotations

import json
import os
import sys
import xml.etree.ElementTree as ET

import pytest

from lab import bench_report
from tmagen import bench
from tmagen.cli import main
from tmagen.plan import load as load_plan

from conftest import REPO

RESULTS = sorted((REPO / "benchmarks" / "results").glob("*.json"))


def _data() -> dict:
    return json.loads(RESULTS[-1].read_text())


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
            assert _row(text, f"| {'x'.join(map(str, case['shape']))} | {case['dtype']} |")


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


def test_report_matmul_targets() -> None:
    data = _fixture()
    text = bench_report.markdown_report(data)
    row = _row(text, "| 4096x4096x4096 |")
    assert row.startswith("| 4096x4096x4096 | bfloat16 | 687 | 723 | 598 | 0.950 (0.950-0.950) met | "
                          "1.150 (1.150-1.150) met |")
    row = _row(text, "| 6144x6144x2048 |")
    assert "0.800 (0.800-0.800) (no target)" in row and "| 0.900 (0.900-0.900) **missed** |" in row
    for case in data["cases"]:
        if case["group"] == "matmul":
            case["candidates"] = [c for c in case["candidates"] if c["role"] != "tmagen"]
    text = bench_report.markdown_report(data)
    assert "No tmagen matmul was timed in this run" in text
    assert _row(text, "| 4096x4096x4096 |").startswith("| 4096x4096x4096 | bfloat16 | - | 723 | 598 | - | - |")


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
    cases = run.plan(specs, set(run.GROUPS))
    transposes = [c for c in cases if c.group == "transpose"]
    assert {c.shape_kind for c in transposes} == {"square", "ragged", "odd strides"}
    assert len(transposes) == 3 * sum(s.kernel.kind == "transpose" for s in specs)
    assert {c.spec for c in cases if c.group == "copy"} == {s.name for s in specs if s.kernel.kind == "copy"}
    assert [c.shape for c in cases if c.group == "matmul"] == [
        [4096, 4096, 4096], [8192, 8192, 8192], [4000, 4000, 4000], [8192, 8192, 1024], [6144, 6144, 2048]]
    assert [c.group for c in run.plan(specs, {"matmul"})] == ["matmul"] * 5
    # the whole suite, autotuning included, fits one 10-minute GPU call with room for compiling the specs
    seconds, _ = run.estimate(cases, run.FULL)
    assert 0 < seconds < 400


def test_suite_estimate_runs_without_a_gpu(capsys) -> None:
    run = _run_module()
    assert run.main(["--estimate", "--only", "transpose,matmul"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("plan: 17 cases") and "Triton: 18+18 configs" in out


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
    assert [(c.group, c.shape_kind) for c in cases if c.group != "matmul"] == [
        ("copy", "full"), ("copy", "ragged"), ("copy", "odd strides")]  # no sweep spec among them
