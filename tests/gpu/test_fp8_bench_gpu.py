"""The fp8 section of the benchmark and the fp8 accuracy study on the GPU, small (issue 21): every
candidate (tmagen.ops.matmul with per-tensor, per-row and block scales, torch._scaled_mm per tensor
and row-wise, Triton's fp8 matmul) checked against the fp32 references and timed; torch._scaled_mm
refusing exactly the shapes lab.fp8_bench.scaled_mm_refusal names; the check failing wrong products;
the accuracy study's errors and timings on its smallest cases.

tmagen's candidates are asserted where tmagen.ops.matmul takes scale_a (issue 21's API); before
that they are left out and the peers alone are checked. Triton's fp8 kernel is pinned to one
configuration (one compile). Needs PyTorch; Triton where installed.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterator

import pytest
from triton_configs import pinned, triton_peers

from tmagen.bench import Method

pytestmark = pytest.mark.gpu
torch = pytest.importorskip("torch", reason="the fp8 cases run on PyTorch tensors")

QUICK = Method(rounds=4, repetitions=2, warmup=1)


def _has_fp8_ops() -> bool:
    import tmagen.ops

    matmul = getattr(tmagen.ops, "matmul", None)
    return matmul is not None and "scale_a" in inspect.signature(matmul).parameters


def _tmagen() -> object | None:
    from lab import fp8_bench

    return fp8_bench.tmagen_ops if _has_fp8_ops() else None


@pytest.fixture(scope="module")
def one_config() -> Iterator[None]:
    """Triton's fp8 kernel with one configuration of its list (no autotuning, one compile)."""
    with pinned(lambda tp: {tp.matmul_fp8_kernel: [c for c in tp.matmul_fp8_kernel.configs
                                                   if c.kwargs["BLOCK_N"] == 128][:1]}):
        yield


def _names(record: dict) -> set[str]:
    return {c["name"] for c in record["candidates"]}


SHAPES = [
    (256, 256, 256, "square-tile-multiple", None),
    (1, 1024, 512, "llm-projection", None),  # one row: several launches a sample
    (64, 1536, 512, "odd-leading-dimension", 528),  # sliced views: rows 16 bytes longer than K, NaN past K
    (4096, 4096, 4096, "square-tile-multiple", None),  # the block-scaled candidate joins
]


@pytest.mark.parametrize("m,n,k,cls,ld", SHAPES)
def test_every_fp8_candidate_passes_its_check_and_is_timed(device, one_config, report, m, n, k, cls, ld) -> None:
    from lab import fp8_bench

    shape = fp8_bench.MatmulShape(m, n, k, cls, ld)
    tmagen = _tmagen()
    record = fp8_bench.fp8_case(shape, QUICK, tmagen=tmagen)
    report(f"fp8_bench_{m}x{n}x{k}_{ld}", record)
    assert record["failed"] == []
    expected = {fp8_bench.CUBLAS_TENSOR, fp8_bench.CUBLAS_ROW, fp8_bench.CUBLAS_FAST}
    expected |= {fp8_bench.CUBLAS_BLOCK} if fp8_bench.block_scaled(shape) else set()
    if tmagen is not None:
        expected |= {fp8_bench.TMAGEN_TENSOR, fp8_bench.TMAGEN_ROW, fp8_bench.TMAGEN_FAST}
        expected |= {fp8_bench.TMAGEN_BLOCK} if fp8_bench.block_scaled(shape) else set()
    if triton_peers() is not None:
        expected.add(fp8_bench.TRITON)
    assert _names(record) == expected
    assert record["ld"] == ld and record["batch"] == fp8_bench.launches_per_sample(shape)
    for c in record["candidates"]:
        assert len(c["rep_medians_ms"]) == QUICK.repetitions and c["tflops"] > 0
        if c["name"] == fp8_bench.TRITON:
            assert "BLOCK_K=128" in c["note"]


@pytest.mark.parametrize("m,n,k", [(32, 32, 40), (32, 40, 32), (40, 32, 32), (1, 16, 16), (1000, 1000, 1000)])
def test_scaled_mm_refuses_exactly_where_the_rule_says(device, m, n, k) -> None:
    from lab import fp8_bench

    a = torch.zeros(m, k, device="cuda").to(torch.float8_e4m3fn)
    b = torch.zeros(n, k, device="cuda").to(torch.float8_e4m3fn)
    one = torch.tensor(1.0, device="cuda")
    try:
        torch._scaled_mm(a, b.t(), one, one, out_dtype=torch.bfloat16)
        refused = False
    except RuntimeError:
        refused = True
    assert refused == (fp8_bench.scaled_mm_refusal(m, n, k) is not None)


def test_a_refused_shape_is_reported_not_dropped(device, one_config) -> None:
    from lab import fp8_bench

    record = fp8_bench.fp8_case(fp8_bench.MatmulShape(264, 264, 264, "square-ragged"), QUICK, tmagen=None)
    why = {f["name"]: f["why"] for f in record["failed"]}
    assert all(why[name].startswith("refused: ")
               for name in (fp8_bench.CUBLAS_TENSOR, fp8_bench.CUBLAS_ROW, fp8_bench.CUBLAS_FAST))
    assert record["scaled_mm_refusal"] == fp8_bench.scaled_mm_refusal(264, 264, 264)
    if triton_peers() is not None:  # rows of 264 bytes: no TMA descriptor
        assert why[fp8_bench.TRITON].startswith("refused: ")


def test_the_check_fails_wrong_fp8_products(device, one_config) -> None:
    """An unwritten C fails every tmagen candidate (NaN); a product that applies each operand's
    mean scale passes with per-tensor scales and fails with per-row ones."""
    from lab import fp8_bench

    def unwritten(a, b, sa, sb, c) -> None:
        pass

    def mean_scale(a, b, sa, sb, c) -> None:
        torch._scaled_mm(a, b.t(), sa.mean().reshape(()), sb.mean().reshape(()), out_dtype=torch.bfloat16, out=c)

    shape = fp8_bench.MatmulShape(256, 256, 512, "square-tile-multiple")
    record = fp8_bench.fp8_case(shape, QUICK, tmagen=unwritten, triton=False, tmagen_fast=None)
    assert {f["name"] for f in record["failed"]} == {fp8_bench.TMAGEN_TENSOR, fp8_bench.TMAGEN_ROW}
    assert all("nan" in f["why"] for f in record["failed"])
    record = fp8_bench.fp8_case(shape, QUICK, tmagen=mean_scale, triton=False, tmagen_fast=None)
    assert [f["name"] for f in record["failed"]] == [fp8_bench.TMAGEN_ROW]
    assert fp8_bench.TMAGEN_TENSOR in _names(record)


def test_accuracy_study_on_its_smallest_cases(device) -> None:
    """Errors for K = 256 and 4096 at M = N = 256, both input kinds: cuBLASLt's are small beside
    the products; tmagen's (where it takes fp8) no worse than cuBLASLt's; the page renders."""
    from lab import fp8_accuracy as fa

    rows = fa.measure_errors(ks=(256, 4096), mns=(256,))
    assert [(r["inputs"], r["k"]) for r in rows] == [("normal", 256), ("normal", 4096), ("positive", 256),
                                                     ("positive", 4096)]
    for r in rows:
        cublas = r["candidates"][fa.CUBLAS]
        assert 0 <= cublas["mean_abs"] <= cublas["max_abs"] < 2.0 ** -6 * r["max_abs_reference"]
        if _has_fp8_ops():
            assert fa.verdict(r) == "met", r
    speed = fa.measure_speed(QUICK, shapes=((1024, 1024, 1024),))
    assert {fa.CUBLAS, fa.CUBLAS_FAST} <= {c["name"] for c in speed[0]["candidates"]}
    page = fa.accuracy_markdown({"gpu": "x", "date": "today", "errors": rows, "speed": speed})
    assert page.count("\n| normal |") == 2
