"""The matmul kernel kind on the GPU: random shapes (M, N, K no multiples of the tile, K below one
tile) for every operand layout and output type, each element within the tolerance `tmagen.verify`
derives from K and the output type; the generated C API's leading dimensions, K = 0 and refusals;
and the SASS it compiles to (HGMMA, UTMALDG, UTMASTG, no local memory)."""

from __future__ import annotations

import ctypes
import json
import shutil
import subprocess

import numpy as np
import pytest

from tmagen import runtime, toolchain
from tmagen.launch import Array, launch_parameters
from tmagen.plan import resolve
from tmagen.render import render
from tmagen.spec import parse_spec
from tmagen.verify import Verifier, from_device, matmul_tolerance, to_16bit

from conftest import REPO

pytestmark = pytest.mark.gpu


def variant(name: str, dtype: str, out: str, b_major: str, tile=(128, 256, 64), consumers=2, stages=4,
            c_swizzle: str = "128B", a_major: str = "k", a_swizzle: str = "128B") -> dict:
    bm, bn, bk = tile
    span = {"128B": 128, "64B": 64, "32B": 32}[c_swizzle]
    c_cols = min(span // {"bfloat16": 2, "float16": 2, "float32": 4}[out], bn)
    return {"name": name, "tensors": [
        {"name": "a", "dtype": dtype, "shape": [512, 512], "box": [bm, 64] if a_major == "k" else
         [64, {"128B": 64, "64B": 32, "32B": 16}[a_swizzle]], "swizzle": {"mode": a_swizzle}},
        {"name": "b", "dtype": dtype, "shape": [512, 512], "box": [bn, 64] if b_major == "k" else [64, 64],
         "swizzle": {"mode": "128B"}},
        {"name": "c", "dtype": out, "shape": [512, 512], "box": [64, c_cols], "swizzle": {"mode": c_swizzle}}],
        "kernel": {"kind": "matmul", "a_major": a_major, "b_major": b_major, "tile": list(tile), "consumers": consumers,
                   "stages": stages}}


VARIANTS = [
    variant("mm_tn_bf16", "bfloat16", "bfloat16", "k"),
    variant("mm_nn_bf16", "bfloat16", "bfloat16", "mn"),
    variant("mm_tn_f16_f32", "float16", "float32", "k"),
    variant("mm_nn_f16_f16", "float16", "float16", "mn", c_swizzle="64B"),
    variant("mm_tn_256x128", "bfloat16", "float32", "k", tile=(256, 128, 64)),
    variant("mm_tn_128x128_c1", "bfloat16", "bfloat16", "k", tile=(128, 128, 128), consumers=1, stages=3),
    variant("mm_nn_64x64", "bfloat16", "bfloat16", "mn", tile=(64, 64, 64), consumers=1, stages=2),
    # an MN-major A ([K, M]: x.T), with either B; boxes of 64 K rows by a swizzle span of M (64, 32 or 16
    # columns, side by side for a wgmma's 64 rows)
    variant("mm_at_bk_bf16", "bfloat16", "bfloat16", "k", a_major="mn"),
    variant("mm_at_bmn_f16_f32", "float16", "float32", "mn", a_major="mn"),
    variant("mm_at_64b_bf16", "bfloat16", "bfloat16", "mn", tile=(128, 128, 64), a_major="mn", a_swizzle="64B"),
    variant("mm_at_32b_64x64", "float16", "float16", "k", tile=(64, 64, 64), consumers=1, stages=2, a_major="mn",
            a_swizzle="32B"),
]


def random_shapes(rng: np.random.Generator, count: int, m_step: int = 1) -> list[tuple[int, int, int]]:
    """M anything (a multiple of ``m_step``: 8 for an MN-major A, whose rows run along M); N and K
    multiples of 8 (rows of 16-byte multiples, as TMA needs); K below a tile in some."""
    shapes = [(1, 8, 8), (64, 256, 64), (129, 264, 72), (300, 40, 2056), (777, 1024, 16)]
    while len(shapes) < count:
        m = int(rng.integers(1, 1600))
        n = 8 * int(rng.integers(1, 200))
        k = 8 * int(rng.choice([rng.integers(1, 8), rng.integers(8, 300)]))
        shapes.append((m, n, k))
    return [(-(-m // m_step) * m_step, n, k) for m, n, k in shapes]


def test_random_shapes_every_layout(device, compiler, report) -> None:
    compiled = compiler(VARIANTS)
    rng = np.random.default_rng(20261122)
    rows, bad = [], []
    for name, (spec, cubin) in sorted(compiled.items()):
        checker = Verifier(resolve(spec), cubin, device, seed=int(rng.integers(1 << 30)))
        try:
            for shape in random_shapes(rng, 24, 8 if spec.kernel.a_major == "mn" else 1):
                o = checker.matmul(shape)
                rows.append({"spec": name, "shape": shape, "ok": o.ok, "detail": o.detail})
                if not o.ok:
                    bad.append((name, shape, o.detail))
        finally:
            checker.close()
    report("matmul_random_shapes", {"cases": len(rows), "mismatching_cases": len(bad), "rows": rows})
    assert len(rows) == 24 * len(VARIANTS)
    assert bad == []


def test_sass_has_the_tensor_core_and_copy_engine_instructions(compiler) -> None:
    if shutil.which("cuobjdump") is None:
        pytest.skip("no cuobjdump on PATH")

    specs = [parse_spec(v) for v in VARIANTS[:3] + VARIANTS[7:9]]  # and an MN-major A
    tc = toolchain.find_toolchain()
    for spec in specs:
        plan = resolve(spec)
        result = toolchain.compile_folder(plan, render(plan, f"{spec.name}.json"), tc, cubin_only=True)
        assert all(not k.spills and k.stack_frame_bytes == 0 for k in result.kernels), result.kernels
        sass = subprocess.run(["cuobjdump", "-sass", str(result.cubin)], capture_output=True, text=True,
                              check=True).stdout
        for instruction in ("HGMMA.64x", "UTMALDG.2D", "UTMASTG.2D"):
            assert instruction in sass, (spec.name, instruction)
        assert "LDL" not in sass and "STL" not in sass
        bn = resolve(spec).kernels[0].detail.kernels[0].bn
        assert f"HGMMA.64x{bn}x16.F32" in sass


K_ZERO_VARIANTS = [VARIANTS[i] for i in (0, 1, 2, 5)]  # both B layouts, fp32 out, one consumer


@pytest.mark.parametrize("raw", K_ZERO_VARIANTS, ids=[v["name"] for v in K_ZERO_VARIANTS])
def test_the_exported_kernel_launched_with_k_zero_writes_zeros(device, compiler, raw: dict) -> None:
    """The kernel itself, from its cubin, with K = 0 (its maps encoded over a K of one stage, as a
    caller of the exported kernel may leave them): no wgmma runs, and every element of C, poisoned
    first, is 0. Before, the epilogue stored registers no wgmma had zeroed (only the C API cleared C)."""
    spec, cubin = compiler([raw])[raw["name"]]
    plan = resolve(spec)
    p = plan.kernel.detail.kernels[0]
    c_t = plan.map("c").tensor
    m, n, k = 2 * p.bm + 3, p.bn + 8, p.bk  # ragged tiles, several of them, more than one per consumer row
    b_shape = (n, k) if p.b_major == "k" else (k, n)
    rng = np.random.default_rng(7)
    a_bits, _ = to_16bit(rng.standard_normal((m, k)).astype(np.float32), plan.map("a").tensor.dtype)
    b_bits, _ = to_16bit(rng.standard_normal(b_shape).astype(np.float32), plan.map("b").tensor.dtype)
    module = runtime.Module(cubin)
    try:
        kernel = module.function(plan.kernel.symbol, plan.kernel.smem_bytes)
        with runtime.Buffer.from_array(a_bits) as da, runtime.Buffer.from_array(b_bits) as db, \
                runtime.Buffer(m * n * c_t.dt.nbytes) as dc:
            # the same launch twice: first with K = k, which leaves the accumulators' registers holding
            # products, then with K = 0 over a poisoned C
            call, params = launch_parameters(plan, [Array.of(da.ptr, (m, k)), Array.of(db.ptr, b_shape)],
                                             Array.of(dc.ptr, (m, n)), device.multiprocessors, choice=(0, 1))
            kernel.launch(call.grid, plan.kernel.threads, params)
            device.synchronize()
            assert np.any(dc.download() != 0), "the K = k launch wrote its products"
            dc.fill(0xA5)
            params[len(call.maps) + 2] = ctypes.c_uint32(0)  # K (after the maps, A's edge-row map too, M and N)
            kernel.launch(call.grid, plan.kernel.threads, params)
            device.synchronize()
            got = dc.download()
            assert np.all(got == 0), f"{np.count_nonzero(got)} of {got.size} bytes of C are not 0 after K = 0"
    finally:
        module.unload()


def _library(name: str):
    spec = parse_spec(json.loads((REPO / "specs" / f"{name}.json").read_text()))
    result = toolchain.compile_folder(resolve(spec), render(resolve(spec), f"specs/{name}.json"))
    lib = ctypes.CDLL(str(result.shared_library))
    getattr(lib, f"{name}_last_error").restype = ctypes.c_char_p
    launch = getattr(lib, f"{name}_matmul_launch")
    launch.argtypes = [ctypes.c_void_p] * 3 + [ctypes.c_uint64] * 3 + [ctypes.c_int64] * 3 + [ctypes.c_void_p]
    return lib, launch, spec


def test_c_api_leading_dimensions_k_zero_and_refusals(device) -> None:
    lib, launch, spec = _library("matmul_bf16_tn")
    last_error = lib.matmul_bf16_tn_last_error
    rng = np.random.default_rng(3)
    m, n, k, lda, ldb, ldc = 300, 264, 200, 216, 256, 272  # padded rows, each a multiple of 8 elements
    a = rng.standard_normal((m, lda)).astype(np.float32)
    b = rng.standard_normal((n, ldb)).astype(np.float32)
    a_bits, a_vals = to_16bit(a, "bfloat16")
    b_bits, b_vals = to_16bit(b, "bfloat16")
    with runtime.Buffer.from_array(a_bits) as da, runtime.Buffer.from_array(b_bits) as db, \
            runtime.Buffer(m * ldc * 2) as dc:
        dc.fill(0xA5)
        status = launch(da.ptr, db.ptr, dc.ptr, m, n, k, lda, ldb, ldc, None)
        device.synchronize()
        assert status == 0, last_error()
        got = from_device(dc.download(np.uint16, (m, ldc)), "bfloat16")
        ref = a_vals[:, :k].astype(np.float64) @ b_vals[:, :k].astype(np.float64).T
        tol, _ = matmul_tolerance(np.abs(a_vals[:, :k]).astype(np.float64) @ np.abs(b_vals[:, :k]).astype(np.float64).T,
                                  ref, k, "bfloat16")
        assert np.all(np.abs(got[:, :n] - ref) <= tol)
        assert np.all(dc.download(np.uint16, (m, ldc))[:, n:] == 0xA5A5), "the padding of C is left alone"
        # K = 0: an empty sum, C becomes zeros (and its padding stays)
        status = launch(da.ptr, db.ptr, dc.ptr, m, n, 0, lda, ldb, ldc, None)
        device.synchronize()
        assert status == 0, last_error()
        after = dc.download(np.uint16, (m, ldc))
        assert np.all(after[:, :n] == 0) and np.all(after[:, n:] == 0xA5A5)
        # a leading dimension that is not a multiple of 16 bytes: refused, nothing launched
        dc.fill(0xA5)
        status = launch(da.ptr, db.ptr, dc.ptr, m, n, k, k + 1, ldb, ldc, None)
        device.synchronize()
        assert status == 3 and b"multiples of 16 bytes" in last_error()
        assert np.all(dc.download() == 0xA5)
        # M = 0 or N = 0: nothing to do, nothing written
        assert launch(da.ptr, db.ptr, dc.ptr, 0, n, k, lda, ldb, ldc, None) == 0
        device.synchronize()
        assert np.all(dc.download() == 0xA5)
