"""The ops section of the benchmark on the GPU, small (issue 19): ``benchmarks/run.py --only ops
--quick --merge`` on two small cases (a transpose and an attention permute) and the host time
writes their records into an existing bench.json, every candidate checked bit for bit against
PyTorch and timed, the other sections kept, and the page renders; a wrong tmagen result is
reported, not timed. Each Triton kernel is pinned to one configuration (one compile). Needs
PyTorch; CuPy and Triton where installed."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from triton_configs import pinned, triton_peers

from tmagen.bench import Method

from test_bench import _fixture, _run_module

pytestmark = pytest.mark.gpu
torch = pytest.importorskip("torch", reason="the ops cases run on PyTorch tensors")

QUICK = Method(rounds=4, repetitions=2, warmup=1)


def _has_cupy() -> bool:
    try:
        import cupy  # noqa: F401
    except Exception:  # noqa: BLE001 - CuPy built for another CUDA raises more than ImportError
        return False
    return True


@pytest.fixture(scope="module")
def one_config() -> Iterator[None]:
    """Each Triton kernel of the section with the first configuration of its list."""
    with pinned(lambda tp: {k: k.configs[:1] for k in (tp.copy_kernel, tp.transpose_kernel, tp.transpose_tma_kernel,
                                                      tp.permute_kernel, tp.permute_rows_kernel)}):
        yield


def test_ops_group_runs_merges_and_renders(device, one_config, tmp_path, monkeypatch, report) -> None:
    from lab import bench_report, ops_bench

    two = [ops_bench.OpsCase("small", "transpose", (64, 64), "float32"),
           ops_bench.OpsCase("small", "permute", (4, 256, 8, 64), "bfloat16", (0, 2, 1, 3))]
    monkeypatch.setattr(ops_bench, "ops_cases", lambda: two)
    old = _fixture()
    (tmp_path / "bench.json").write_text(json.dumps(old))
    run = _run_module()
    assert run.main([str(tmp_path), "--only", "ops", "--quick", "--merge", "--ops-class", "small,host"]) == 0
    data = json.loads((tmp_path / "bench.json").read_text())
    report("ops_bench_small", [c for c in data["cases"] if c["group"] == "ops"])
    # the other sections kept (as JSON has them: the fixture holds tuples)
    assert [c for c in data["cases"] if c["group"] != "ops"] == json.loads(json.dumps(old["cases"]))
    assert data["sections"]["ops"]["gpu"] == torch.cuda.get_device_name()
    host, *cases = [c for c in data["cases"] if c["group"] == "ops"]
    assert host["shape_kind"] == "host" and set(host["host_us"]) == {n for p in ops_bench.HOST_PAIRS for n in p}
    assert all(len(v) == 7 and min(v) > 0 for v in host["host_us"].values())
    tp = triton_peers()
    for case, record in zip(two, cases):
        assert record["failed"] == [], record["failed"]
        names = {c["name"] for c in record["candidates"]}
        expected = {f"tmagen.ops.{case.op}", "cudaMemcpyAsync D2D", ops_bench._torch_name(case)}
        if tp is not None:
            expected |= {ops_bench.TRITON_NAMES[t.kernel] for t in ops_bench.triton_layouts(case)}
        assert expected <= names and (len(names) == len(expected) + 1) == _has_cupy()
        assert record["call"] == case.describe() and record["shape_kind"] == "small"
        assert record["batch"] == ops_bench.launches_per_sample(case) > 1 and record["sets"] > 1
        for c in record["candidates"]:
            assert len(c["rep_medians_ms"]) == run.QUICK.repetitions  # --quick: the suite's quick method
            assert c["gbps"] > 0
            if c["name"].startswith("Triton"):
                assert "num_warps=" in c["note"]  # the autotuner's choice is reported
    text = bench_report.markdown_report(data)
    assert "## tmagen.ops on every shape and view" in text and "Host time per call on a 64x64 float32" in text
    assert "| small | `transpose(x)` | float32 | 64x64 | -2,-1 |" in text
    assert "| small | `permute(x, [0, 2, 1, 3])` | bfloat16 | 4x256x8x64 | 0,2,1,3 |" in text


def test_a_wrong_tmagen_result_is_reported_not_timed(device, monkeypatch) -> None:
    import tmagen.ops
    from lab import ops_bench

    monkeypatch.setattr(tmagen.ops, "transpose", lambda x, out: out.zero_())
    record = ops_bench.ops_case(ops_bench.OpsCase("small", "transpose", (64, 64), "float32"), QUICK, triton=False)
    assert [(f["name"], f["why"]) for f in record["failed"]] == [
        ("tmagen.ops.transpose", "tmagen.ops.transpose's output differs from PyTorch's")]
    assert "tmagen.ops.transpose" not in {c["name"] for c in record["candidates"]}
