"""tmagen.ops.quantize_fp8 and the fp8 moves against PyTorch, bit for bit (q as uint8, scales and amax
exact): fp8 transpose and copy of both fp8 types; every block mode, both fp8 types, every input type,
transpose on and off, on ragged shapes and views (slices, transposed views, a column step, an address off
16 bytes); a given scale; zeros, NaN, empty tensors, out=; and the outputs fed to torch._scaled_mm.
Cheap: small tensors, one NVRTC compile per configuration.

    python -m pytest -q tests/gpu/test_ops_quantize.py
"""

from __future__ import annotations

from typing import Any

import pytest

import tmagen.ops

pytestmark = pytest.mark.gpu

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("PyTorch sees no CUDA device", allow_module_level=True)

FP8 = [torch.float8_e4m3fn, torch.float8_e5m2]
BLOCKS = [(1, 128), (128, 128), None]


def reference(x: Any, fp8: Any, block: tuple[int, int] | None, transpose: bool,
              scale_inv: Any = None) -> tuple[Any, Any, Any]:
    """The documented arithmetic in PyTorch: s = amax_block / max (1 for zeros), q = fp8(clamp(x / s)).
    Every division has a GPU tensor as divisor: PyTorch divides by a Python number as a product with
    its reciprocal, which can differ from the quotient in the last bit."""
    top = torch.finfo(fp8).max
    xf = x.float()
    xq = (xf.t() if transpose else xf).contiguous()
    rows, cols = xq.shape
    amax = xf.abs().amax() if xf.numel() else torch.zeros((), device=x.device)
    if block is None:
        s = scale_inv.reshape(()).clone() if scale_inv is not None else torch.where(
            amax == 0, torch.ones_like(amax), amax / torch.full_like(amax, top))
        per = s
    else:
        br, bc = block
        nr, nc = -(-rows // br), -(-cols // bc)
        padded = torch.zeros((nr * br, nc * bc), device=x.device)
        padded[:rows, :cols] = xq.abs()
        m = padded.view(nr, br, nc, bc).amax(dim=(1, 3))
        s = torch.where(m == 0, torch.ones_like(m), m / torch.full_like(m, top))
        per = s.repeat_interleave(br, 0).repeat_interleave(bc, 1)[:rows, :cols]
    q = (xq / per).clamp(-top, top).to(fp8)
    return q, s, amax


def bits(t: Any) -> Any:
    return t.contiguous().view(torch.uint8) if t.element_size() == 1 else t.contiguous().view(torch.int32)


def check(got: tuple[Any, Any, Any], want: tuple[Any, Any, Any], what: str) -> None:
    for name, g, w in zip(("q", "scale_inv", "amax"), got, want):
        assert g.shape == w.shape and g.dtype == w.dtype, f"{what}: {name} {g.shape} {g.dtype} vs {w.shape} {w.dtype}"
        assert g.is_contiguous(), f"{what}: {name}"
        if not torch.equal(bits(g), bits(w)):
            diff = (bits(g) != bits(w)).nonzero()
            raise AssertionError(f"{what}: {name} differs at {diff.shape[0]} places, first {diff[:4].tolist()}")


def data(rows: int, cols: int, dtype: Any, gen: Any) -> Any:
    """Normal values scaled per row across 2^-12..2^12 (so blocks get different scales), a zero block."""
    x = torch.randn((rows, cols), device="cuda", generator=gen)
    x *= torch.exp2(torch.randint(-12, 13, (rows, 1), device="cuda", generator=gen).float())
    x[: min(rows, 130), 128:256] = 0
    return x.to(dtype)


def views(base: Any) -> dict[str, Any]:
    return {"contiguous": base, "sliced": base[3:, 5:], "transposed view": base.t(),
            "column step": base[:, ::2], "off 16 bytes": base.reshape(-1)[1:1 + 299 * 251].view(299, 251)}


@pytest.fixture()
def gen() -> Any:
    return torch.Generator(device="cuda").manual_seed(21)


# ----------------------------------------------------------------------------- fp8 moves
@pytest.mark.parametrize("fp8", FP8, ids=str)
def test_fp8_transpose_and_copy_are_torchs_bits(fp8: Any, gen: Any) -> None:
    raw = torch.randint(0, 256, (6, 300, 520), dtype=torch.uint8, device="cuda", generator=gen)
    base = raw.view(fp8)
    for name, v in {"contiguous": base, "2-D": base[0], "sliced": base[:, 7:, 9:], "transposed": base.mT,
                    "odd": base[:, :, :77], "off 16 bytes": base.reshape(-1)[3:3 + 300 * 517].view(300, 517)}.items():
        want_t = v.transpose(-2, -1).contiguous().view(torch.uint8)
        assert torch.equal(tmagen.ops.transpose(v).view(torch.uint8), want_t), f"transpose {name}"
        assert torch.equal(tmagen.ops.copy(v).view(torch.uint8), v.contiguous().view(torch.uint8)), f"copy {name}"
        assert tmagen.ops.transpose(v).dtype == fp8


# ----------------------------------------------------------------------------- quantize_fp8
@pytest.mark.parametrize("fp8", FP8, ids=str)
@pytest.mark.parametrize("block", BLOCKS, ids=str)
@pytest.mark.parametrize("transpose", [False, True], ids=["q=x", "q=x.T"])
def test_every_block_mode_and_view_bf16(fp8: Any, block: Any, transpose: bool, gen: Any) -> None:
    base = data(300, 520, torch.bfloat16, gen)
    for name, v in views(base).items():
        got = tmagen.ops.quantize_fp8(v, dtype=fp8, block=block, transpose=transpose)
        check(got, reference(v, fp8, block, transpose), f"{name} {tuple(v.shape)}")
        again = tmagen.ops.quantize_fp8(v, dtype=fp8, block=block, transpose=transpose)  # the kept plan
        check(again, got, f"{name}, repeated")


@pytest.mark.parametrize("dtype", [torch.float16, torch.float32], ids=str)
@pytest.mark.parametrize("fp8", FP8, ids=str)
@pytest.mark.parametrize("block", BLOCKS, ids=str)
def test_float16_and_float32_inputs(dtype: Any, fp8: Any, block: Any, gen: Any) -> None:
    base = data(257, 390, dtype, gen)
    for transpose in (False, True):
        for name, v in {"contiguous": base, "transposed view": base.t(), "sliced": base[1:, 3:]}.items():
            got = tmagen.ops.quantize_fp8(v, dtype=fp8, block=block, transpose=transpose)
            check(got, reference(v, fp8, block, transpose), f"{name} transpose={transpose}")


@pytest.mark.parametrize("shape", [(1, 1), (1, 129), (129, 1), (128, 128), (127, 1025), (1000, 3)], ids=str)
def test_ragged_shapes(shape: tuple[int, int], gen: Any) -> None:
    x = data(*shape, torch.bfloat16, gen)
    for block in BLOCKS:
        for transpose in (False, True):
            got = tmagen.ops.quantize_fp8(x, block=block, transpose=transpose)
            check(got, reference(x, torch.float8_e4m3fn, block, transpose), f"{block} transpose={transpose}")


def test_a_given_scale_saturates_and_still_reports_the_amax(gen: Any) -> None:
    x = data(200, 300, torch.bfloat16, gen)
    for fp8 in FP8:
        for given in (torch.tensor([0.001], device="cuda"), 0.25):
            got = tmagen.ops.quantize_fp8(x, dtype=fp8, block=None, scale_inv=given, transpose=True)
            scale = given if isinstance(given, torch.Tensor) else torch.tensor(given, device="cuda")
            check(got, reference(x, fp8, None, True, scale), f"given {given}")
            top = torch.finfo(fp8).max
            assert (got[0].float().abs() == top).any(), "a small given scale saturates"


def test_zeros_nan_and_empty() -> None:
    z = torch.zeros((130, 260), dtype=torch.bfloat16, device="cuda")
    for block in BLOCKS:
        q, s, amax = tmagen.ops.quantize_fp8(z, block=block)
        assert torch.all(q.view(torch.uint8) == 0) and torch.all(s == 1) and amax.item() == 0
    x = torch.ones((4, 256), dtype=torch.bfloat16, device="cuda")
    x[1, 200] = float("nan")
    q, s, amax = tmagen.ops.quantize_fp8(x, block=(1, 128))
    assert torch.isnan(amax) and torch.isnan(s[1, 1]) and torch.isnan(q[1, 128:].float()).all()
    assert torch.all(s[0] == 1 / 448) and torch.all(q[0].float() == 448)
    for shape in ((0, 5), (5, 0), (0, 0)):
        for block in BLOCKS:
            q, s, amax = tmagen.ops.quantize_fp8(torch.empty(shape, dtype=torch.bfloat16, device="cuda"),
                                                 block=block, transpose=True)
            assert q.shape == (shape[1], shape[0]) and amax.item() == 0 and (s.numel() == 0 or s.item() == 1)


def test_out_is_written(gen: Any) -> None:
    x = data(300, 520, torch.bfloat16, gen)
    q = torch.full((520, 300), 7, dtype=torch.uint8, device="cuda").view(torch.float8_e4m3fn)
    s = torch.full((5, 3), 7.0, device="cuda")  # 128 x 128 blocks of q [520, 300]
    amax = torch.full((), 7.0, device="cuda")
    got = tmagen.ops.quantize_fp8(x, block=(128, 128), transpose=True, out=(q, s, amax))
    assert got[0] is q and got[1] is s and got[2] is amax
    check(got, reference(x, torch.float8_e4m3fn, (128, 128), True), "out=")


def test_outputs_feed_scaled_mm_per_tensor(gen: Any) -> None:
    """A [M, K] activation and an MN-major weight [K, N] (transposed into K-major [N, K] by
    transpose=True), each with one scale: torch._scaled_mm takes them as they come, and its product is
    the product of the dequantized operands."""
    m, k, n = 64, 384, 160
    x = torch.randn((m, k), device="cuda", generator=gen).bfloat16()
    w_kn = torch.randn((k, n), device="cuda", generator=gen).bfloat16()
    qa, sa, _ = tmagen.ops.quantize_fp8(x, block=None)
    qb, sb, _ = tmagen.ops.quantize_fp8(w_kn, block=None, transpose=True)
    assert qb.shape == (n, k) and qb.is_contiguous()
    got = torch._scaled_mm(qa, qb.t(), scale_a=sa, scale_b=sb, out_dtype=torch.bfloat16).float()
    want = (qa.float() * sa) @ (qb.float() * sb).t()
    torch.testing.assert_close(got, want, rtol=1.6e-2, atol=1e-2)  # bfloat16's rounding of the product
    # and near the product of the unquantized operands: each e4m3 value is within half a unit in its last
    # place (2^-4 of itself, or of the scale's smallest normal), so each product within 2^-3 of |x||w|
    exact = x.float() @ w_kn.float()
    bound = (x.float().abs() @ w_kn.float().abs()) * 2.0 ** -3 + 1e-2
    assert bool(((got - exact).abs() <= bound).all())
