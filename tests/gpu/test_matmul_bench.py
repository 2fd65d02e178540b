"""The matmul section of the benchmark on the GPU, small: every candidate (tmagen through the tuned
spec and through tmagen.ops.matmul where it exists, cuBLAS, Triton's TMA and pointer matmuls)
checked against a float64 product and timed, on contiguous operands and on sliced views; a
candidate that leaves C unwritten or reads past K fails its check and is not timed.

Each Triton kernel is pinned to one configuration here (the suite autotunes them over their whole
lists), so that the file costs a few compiles. Needs PyTorch; Triton where installed.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from triton_configs import pinned, triton_peers

from tmagen.bench import Method

from conftest import REPO

pytestmark = pytest.mark.gpu
torch = pytest.importorskip("torch", reason="the matmul case runs on PyTorch tensors")

QUICK = Method(rounds=4, repetitions=2, warmup=1)
TMA, POINTER = "Triton TMA persistent (autotuned)", "Triton pointer tiles (autotuned)"


@pytest.fixture(scope="module")
def one_config() -> Iterator[None]:
    """Each Triton matmul kernel with one configuration of its list (no autotuning, two compiles)."""
    with pinned(lambda tp: {tp.matmul_kernel: [c for c in tp.matmul_kernel.configs if c.kwargs["BLOCK_N"] == 128][:1],
                            tp.matmul_pointer_kernel: tp.matmul_pointer_kernel.configs[1:2]}):
        yield


@pytest.fixture(scope="module")
def spec_matmul(device, compiler):
    """tmagen's matmul through the tuned spec of tmagen/ops_specs, launched directly."""
    from lab import matmul_bench

    name = "bench_matmul_bfloat16"
    spec, cubin = compiler([json.loads((REPO / "tmagen" / "ops_specs" / f"{name}.json").read_text())])[name]
    return matmul_bench.tmagen_spec(spec, cubin, device)


def _names(record: dict) -> set[str]:
    return {c["name"] for c in record["candidates"]}


SHAPES = [
    (256, 256, 256, "square-tile-multiple", None),
    (1000, 1000, 1000, "square-ragged", None),  # partial tiles on every side
    (1, 1024, 512, "llm-projection", None),  # one row: the pointer kernel joins, several launches a sample
    (64, 1536, 520, "odd-leading-dimension", 528),  # sliced views: rows of 1056 bytes, NaN past K
    (512, 520, 256, "odd-leading-dimension", None),  # C's rows of 1040 bytes
]


@pytest.mark.parametrize("m,n,k,cls,ld", SHAPES)
def test_every_matmul_candidate_passes_its_check_and_is_timed(device, spec_matmul, one_config, report,
                                                               m, n, k, cls, ld) -> None:
    from lab import matmul_bench

    shape = matmul_bench.MatmulShape(m, n, k, cls, ld)
    record = matmul_bench.matmul_case(shape, QUICK, spec_matmul, "tmagen bench_matmul_bfloat16 (spec)")
    report(f"matmul_bench_{m}x{n}x{k}_{ld}", record)
    assert record["failed"] == []
    expected = {"tmagen bench_matmul_bfloat16 (spec)", "cuBLAS (torch.matmul)"}
    if triton_peers() is not None:
        expected |= {TMA} | ({POINTER} if m <= matmul_bench.TRITON_POINTER_MAX_M else set())
    assert _names(record) == expected
    assert record["ld"] == ld and record["method"] == {"rounds": 4, "repetitions": 2, "warmup": 1}
    assert record["batch"] == matmul_bench.launches_per_sample(shape)
    if m == 1:
        assert record["batch"] > 1
    for c in record["candidates"]:
        assert len(c["rep_medians_ms"]) == QUICK.repetitions and c["tflops"] > 0
        if c["name"].startswith("Triton"):
            assert "num_warps=" in c["note"]


def test_tmagen_ops_matmul_is_the_candidate_where_it_exists(device, one_config) -> None:
    """tmagen.ops.matmul(a, b.T, out=c), on a contiguous shape and on sliced views."""
    from lab import matmul_bench

    if not matmul_bench.has_ops_matmul():
        pytest.skip("this tmagen.ops has no matmul yet (benchmarks/run.py falls back to the tuned spec)")
    for shape in (matmul_bench.MatmulShape(1, 4096, 4096, "llm-projection"),
                  matmul_bench.MatmulShape(1000, 1000, 1000, "square-ragged"),
                  matmul_bench.MatmulShape(300, 700, 4096, "odd-leading-dimension", ld=4104)):
        record = matmul_bench.matmul_case(shape, QUICK, matmul_bench.tmagen_ops(), matmul_bench.OPS, triton=False)
        assert record["failed"] == [], (shape, record["failed"])
        assert matmul_bench.OPS in _names(record)


def test_a_matmul_that_leaves_c_unwritten_or_reads_past_k_fails(device, one_config) -> None:
    """The check's poison (NaN in C) and the views' padding (NaN past K) catch both."""
    from lab import matmul_bench

    def unwritten(a, b, c) -> None:
        pass

    def past_k(a, b, c) -> None:  # a product over the padded rows
        wide = (a.shape[0], a.stride(0))
        torch.matmul(a.as_strided(wide, a.stride()), b.as_strided((b.shape[0], b.stride(0)), b.stride()).T, out=c)

    shape = matmul_bench.MatmulShape(128, 256, 192, "odd-leading-dimension", ld=200)
    for fn in (unwritten, past_k):
        record = matmul_bench.matmul_case(shape, QUICK, fn, "tmagen matmul", triton=False)
        assert [f["name"] for f in record["failed"]] == ["tmagen matmul"] and "nan" in record["failed"][0]["why"]
        assert _names(record) == {"cuBLAS (torch.matmul)"}


def test_a_plugged_in_cublas_measures_as_cublas(device, one_config) -> None:
    """time_matmul's plug-in: torch.mm standing in for tmagen's matmul measures within 10% of cuBLAS
    in the same loop (the samples land on the candidate that ran)."""
    from lab import matmul_bench

    record = matmul_bench.time_matmul(2048, 2048, 2048, tmagen=lambda a, b, c: torch.mm(a, b.T, out=c),
                                      method=QUICK)
    mine = next(c for c in record["candidates"] if c["role"] == "tmagen")
    cublas = next(c for c in record["candidates"] if c["name"].startswith("cuBLAS"))
    assert mine["tflops"] == pytest.approx(cublas["tflops"], rel=0.1)
