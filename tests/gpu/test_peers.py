"""The benchmark's peers and its interleaved method on the GPU: every peer's output checked
against PyTorch's before it is timed, a wrong one reported and never timed, and the method able to
tell equal candidates from unequal ones. Needs PyTorch; the Triton and CuPy peers are tested
where those are installed (the GPU machine has them)."""

from __future__ import annotations

import json

import pytest

from tmagen.bench import Candidate, Method, time_case

from conftest import REPO

pytestmark = pytest.mark.gpu
torch = pytest.importorskip("torch", reason="the peers run on PyTorch tensors")

QUICK = Method(rounds=4, repetitions=2, warmup=1)


def _bench_spec(name: str) -> dict:
    return json.loads((REPO / "tmagen" / "ops_specs" / f"{name}.json").read_text())


def _names(record: dict) -> set[str]:
    return {c["name"] for c in record["candidates"]}


def _expected_peers(kind: str) -> set[str]:
    names = {"copy": {"torch clone()"}, "transpose": {"torch .transpose(-2,-1).contiguous()"}}[kind]
    try:
        import cupy  # noqa: F401

        names |= {"copy": {"cupy x.copy()"}, "transpose": {"cupy ascontiguousarray(swapaxes(x,-2,-1))"}}[kind]
    except ImportError:
        pass
    try:
        import triton  # noqa: F401

        names |= {"copy": {"Triton copy (autotuned)"},
                  "transpose": {"Triton tl.trans, pointer tiles (autotuned)",
                                "Triton tl.trans, TMA descriptors (autotuned)"}}[kind]
    except ImportError:
        pass
    return names


@pytest.mark.parametrize("name,shape", [
    ("bench_transpose_float32", [2048, 4096]),
    ("bench_transpose_uint8", [1008, 4080]),  # ragged for tmagen's tiles and most of Triton's
    ("bench_transpose_bfloat16", [1024, 2048]),
    ("bench_copy_bfloat16", [1024, 4096]),
    ("bench_copy_float32_r3", [4, 256, 1040]),
])
def test_every_peer_passes_its_check_and_is_timed(device, compiler, report, name, shape) -> None:
    """The case a benchmark runs, small: tmagen, memcpy and every peer checked bit for bit against
    PyTorch on the same tensor, then timed in one loop."""
    from lab import peers

    spec, cubin = compiler([_bench_spec(name)])[name]
    record = peers.data_movement_case(spec, cubin, device, shape, QUICK)
    report(f"peers_{name}", record)
    assert record["failed"] == []
    kind = spec.kernel.kind
    assert _names(record) == {f"tmagen {name}_{kind}", "cudaMemcpyAsync D2D"} | _expected_peers(kind)
    for c in record["candidates"]:
        assert len(c["rep_medians_ms"]) == QUICK.repetitions and c["gbps"] > 0
        assert c["q1_ms"] <= c["median_ms"] <= c["q3_ms"]
        if c["name"].startswith("Triton"):
            assert "num_warps=" in c["note"]  # the autotuner's choice is reported


def test_a_wrong_peer_is_reported_and_not_timed(device) -> None:
    x = torch.arange(1 << 20, device="cuda", dtype=torch.float32)
    out = torch.empty_like(x)

    def wrong() -> str | None:
        out.copy_(x)
        out[12345] = -1.0
        return None if torch.equal(out, x) else "element 12345 differs"

    right = Candidate("right", "peer", lambda i: out.copy_(x), lambda: None)
    record = time_case([right, Candidate("wrong", "peer", lambda i: out.copy_(x), wrong)], QUICK,
                       shape=x.shape, dtype="float32", bytes_moved=2 * x.nbytes)
    assert _names(record) == {"right"}
    assert record["failed"] == [{"name": "wrong", "role": "peer", "why": "element 12345 differs"}]


def test_interleaving_tells_equal_from_double(device, report) -> None:
    """Two identical memcpy candidates measure the same within 3%, and one that queues two copies
    per launch measures twice the time: samples land on the candidate that ran, and the events
    time the GPU, not the Python that queued it."""
    from lab import peers

    x = peers.random_tensor([1 << 28], "float32")
    out = torch.empty_like(x)
    once = peers.memcpy([x], [out]).launch

    def twice(i: int) -> None:
        once(i)
        once(i)

    record = time_case([Candidate("a", "limit", once), Candidate("b", "limit", once), Candidate("2x", "peer", twice)],
                       Method(rounds=10, repetitions=3, warmup=2), shape=x.shape, dtype="float32",
                       bytes_moved=2 * x.nbytes)
    report("interleave_equal_and_double", record)
    ms = {c["name"]: c["median_ms"] for c in record["candidates"]}
    assert ms["a"] == pytest.approx(ms["b"], rel=0.03)
    assert ms["2x"] == pytest.approx(ms["a"] + ms["b"], rel=0.05)


def test_small_cases_rotate_buffers_and_batch_launches(device, compiler) -> None:
    """A 16 MiB transpose (both tensors fit in L2) rotates through enough buffer sets to pass 4 L2s
    between two uses of one, and times several launches a sample."""
    from lab import peers

    name = "bench_transpose_float32"
    spec, cubin = compiler([_bench_spec(name)])[name]
    record = peers.sweep_case(spec, cubin, device, [256, 16384], QUICK)
    assert record["failed"] == []
    assert record["sets"] * 2 * (16 << 20) >= 4 * peers.l2_bytes() and record["batch"] > 1
    assert {c["role"] for c in record["candidates"]} == {"tmagen", "limit"}
