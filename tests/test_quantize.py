"""The fp8 quantize kind without a GPU: its planning (how a layout is read, the tiles, the scales'
shapes as the fp8 matmul takes them), the numpy reference of its arithmetic (round to nearest even,
saturation, zero blocks, ragged edges, the transpose), every configuration's source compiling under
NVRTC, and tmagen.ops.quantize_fp8's refusals (with PyTorch, on CPU tensors and bad arguments)."""

from __future__ import annotations

import itertools
import os

import numpy as np
import pytest

from tmagen import nvrtc
from tmagen import quantize as launcher
from tmagen.fp8 import finite_values
from tmagen.kinds.quantize import plan as qp
from tmagen.kinds.quantize.reference import quantize, to_fp8

FP8S = list(qp.FP8)


# ----------------------------------------------------------------------------- planning
@pytest.mark.parametrize(("shape", "strides", "transpose", "along", "vec"), [
    ((256, 512), (512, 1), False, "j", 4),       # contiguous: along q's rows, 4 elements a load
    ((256, 512), (512, 1), True, "i", 8),        # its transpose: q's columns are x's rows, read along q's i
    ((512, 256), (1, 512), True, "j", 4),        # x = w.t(): transposed back, contiguous again
    ((256, 510), (512, 1), False, "j", 4),       # a slice of whole rows: still 4-aligned
    ((256, 510), (510, 1), False, "j", 1),       # rows of 510 bf16: not 8-byte aligned rows
    ((256, 512), (1024, 2), False, "j", 1),      # a column step: neither contiguous, the nearer
    ((256, 512), (2, 1024), False, "i", 1),
    ((1, 512), (7, 1), False, "j", 4),           # one row: its stride never used
])
def test_layouts_are_read_along_their_contiguous_dimension(shape: tuple[int, int], strides: tuple[int, int],
                                                           transpose: bool, along: str, vec: int) -> None:
    c = qp.configure("bfloat16", "float8_e4m3", (1, 128), transpose, False, shape, strides, 0)
    assert (c.read_along, c.vec) == (along, vec)


def test_a_misaligned_address_reads_one_element_at_a_time() -> None:
    assert qp.configure("float32", "float8_e4m3", None, False, False, (64, 64), (64, 1), 8).vec == 1
    assert qp.configure("bfloat16", "float8_e4m3", None, False, False, (64, 64), (64, 1), 8).vec == 4
    assert qp.configure("bfloat16", "float8_e4m3", None, True, False, (64, 64), (64, 1), 8).vec == 1


@pytest.mark.parametrize(("shape", "block", "transpose", "want"), [
    ((300, 1000), (1, 128), False, (300, 8)),     # A's scales: [M, ceil(K / 128)]
    ((300, 1000), (1, 128), True, (1000, 3)),     # of x.T, q [1000, 300]
    ((300, 1000), (128, 128), False, (3, 8)),     # B's: [ceil(N / 128), ceil(K / 128)]
    ((300, 1000), (128, 128), True, (8, 3)),
    ((300, 1000), None, False, ()),
    ((0, 1000), (1, 128), False, (0, 8)),
])
def test_scales_are_laid_out_as_the_fp8_matmul_takes_them(shape: tuple[int, int], block: tuple[int, int] | None,
                                                          transpose: bool, want: tuple[int, ...]) -> None:
    assert qp.scale_shape(shape, block, transpose) == want


def test_plans_tile_by_block_and_are_cached_per_configuration() -> None:
    row = qp.configure("bfloat16", "float8_e4m3", (1, 128), False, False, (300, 1000), (1000, 1), 0)
    tile = qp.configure("bfloat16", "float8_e4m3", (128, 128), False, False, (300, 1000), (1000, 1), 0)
    tensor = qp.configure("bfloat16", "float8_e5m2", None, False, False, (300, 1000), (1000, 1), 0)
    given = qp.configure("bfloat16", "float8_e5m2", None, False, True, (300, 1000), (1000, 1), 0)
    assert qp.plan(row) is qp.plan(row)
    assert (qp.plan(row).mode, qp.plan(row).tile_rows, qp.plan(row).amax_symbol) == ("row", 64, None)
    assert (qp.plan(tile).mode, qp.plan(tile).tile_rows) == ("tile", 128)
    assert qp.plan(tile).smem_bytes == 128 * 132 * 4  # the whole 128 x 128 block staged before a byte is written
    assert qp.plan(tensor).scale_from == "amax" and qp.plan(tensor).amax_symbol is not None
    assert not qp.plan(tensor).amax_atomic  # its amax pass already reduced the tensor
    assert qp.plan(given).scale_from == "given" and qp.plan(given).amax_symbol is None and qp.plan(given).amax_atomic
    g = qp.geometry(qp.plan(tile), (300, 1000), (1000, 1))
    assert (g.rows, g.cols, g.tiles_i, g.tiles_j, g.grid) == (300, 1000, 3, 8, 24)
    t = qp.plan(qp.configure("bfloat16", "float8_e4m3", (1, 128), True, False, (300, 1000), (1000, 1), 0))
    g = qp.geometry(t, (300, 1000), (1000, 1))
    assert (g.rows, g.cols, g.si, g.sj, g.tiles_i, g.tiles_j) == (1000, 300, 1, 1000, 16, 3)


def test_names_differ_wherever_the_kernels_do() -> None:
    configs = _every_config()
    assert len({qp.plan(c).name for c in configs}) == len(configs)


def _every_config() -> list[qp.QuantizeConfig]:
    out = []
    for dt, f8, blk, tr in itertools.product(qp.INPUTS, qp.FP8, qp.BLOCKS, (False, True)):
        for given in ((False, True) if blk is None else (False,)):
            for along in "ji":
                for vec in (1, 4 if along == "j" else 16 // qp.INPUTS[dt]):
                    out.append(qp.QuantizeConfig(dt, f8, blk, tr, given, along, vec))
    return out


# ----------------------------------------------------------------------------- the reference's arithmetic
def _torch_cpu() -> object:
    return pytest.importorskip("torch")


@pytest.mark.parametrize("fp8", FP8S)
def test_fp8_values_are_the_formats(fp8: str) -> None:
    t = finite_values(fp8)
    assert t[-1] == qp.FP8[fp8][1] and t[0] == 0 and np.all(np.diff(t) > 0)
    assert len(t) == (127 if fp8 == "float8_e4m3" else 124)  # e4m3: S.1111.111 is NaN; e5m2: exponent 11111
    assert t[1] == (2.0 ** -9 if fp8 == "float8_e4m3" else 2.0 ** -16)  # the smallest subnormal


@pytest.mark.parametrize("fp8", FP8S)
def test_rounding_is_to_nearest_even_and_saturates(fp8: str) -> None:
    t = finite_values(fp8)
    mids = ((t[:-1] + t[1:]) / 2).astype(np.float32)  # exact in float32
    codes = np.arange(len(t) - 1)
    tie = to_fp8(mids, fp8)
    assert np.array_equal(tie, np.where(codes % 2 == 0, codes, codes + 1)), "a tie goes to the even code"
    below, above = np.nextafter(mids, np.float32(0)), np.nextafter(mids, np.float32(np.inf))
    assert np.array_equal(to_fp8(below, fp8), codes) and np.array_equal(to_fp8(above, fp8), codes + 1)
    top = len(t) - 1
    big = np.float32([t[-1], t[-1] * 1.07, 1e30, np.inf])
    assert to_fp8(big, fp8).tolist() == [top] * 4
    assert to_fp8(-big, fp8).tolist() == [top | 0x80] * 4
    assert to_fp8(np.float32([0.0, -0.0, -1e-30, np.nan]), fp8).tolist() == [0, 0x80, 0x80, 0x7F]


@pytest.mark.parametrize("fp8", FP8S)
def test_within_the_range_the_reference_casts_as_pytorch(fp8: str) -> None:
    torch: object = _torch_cpu()
    import torch as tt

    rng = np.random.default_rng(21)
    top = qp.FP8[fp8][1]
    v = np.concatenate([rng.standard_normal(20000).astype(np.float32) * s for s in (1e-5, 1e-2, 1, 40, top / 3)])
    v = np.clip(v, -top, top).astype(np.float32)
    want = tt.from_numpy(v).to(getattr(tt, "float8_e4m3fn" if fp8 == "float8_e4m3" else "float8_e5m2"))
    assert torch is not None and np.array_equal(to_fp8(v, fp8), want.view(tt.uint8).numpy())


@pytest.mark.parametrize("fp8", FP8S)
@pytest.mark.parametrize("block", [(1, 128), (128, 128), None])
@pytest.mark.parametrize("transpose", [False, True])
def test_quantize_scales_blocks_and_rebuilds_x(fp8: str, block: tuple[int, int] | None, transpose: bool) -> None:
    rng = np.random.default_rng(5)
    x = (rng.standard_normal((200, 300)) * np.exp(rng.uniform(-4, 4, (200, 1)))).astype(np.float32)
    x[:, 256:] = 0  # a zero block column: scale 1, q zero
    q, s, amax = quantize(x, fp8, block, transpose)
    xq = x.T if transpose else x
    assert q.shape == xq.shape and s.shape == qp.scale_shape(x.shape, block, transpose) and amax == np.abs(x).max()
    if block is not None:
        br, bc = block
        per = np.repeat(np.repeat(s, br, 0), bc, 1)[:xq.shape[0], :xq.shape[1]]
        zero = np.array([[not np.any(xq[i * br:(i + 1) * br, j * bc:(j + 1) * bc]) for j in range(s.shape[1])]
                         for i in range(s.shape[0])])
        assert zero.any() and np.all(s[zero] == 1)
        assert np.all(s[~zero] > 0)
    else:
        per = np.full(xq.shape, s)
    values = finite_values(fp8)
    back = np.where(q & 0x80, -1, 1) * values[q & 0x7F] * per
    assert np.abs(q & 0x7F).max() <= len(values) - 1
    # each block's largest magnitude lands on fp8_max (or within rounding of it)
    mag = np.abs(back).max()
    assert mag <= np.abs(x).max() * (1 + 2 ** -3)
    rel = 2.0 ** (-3 if fp8 == "float8_e4m3" else -2)  # half a step of the mantissa, relative
    big = np.abs(xq) > per * values[8 if fp8 == "float8_e4m3" else 4] * 2  # normal range of fp8
    assert np.all(np.abs(back - xq)[big] <= np.abs(xq)[big] * rel / 2 + 1e-30)


def test_ragged_blocks_take_only_their_own_elements() -> None:
    x = np.zeros((130, 129), np.float32)
    x[129, 128] = 7.0  # alone in the last (ragged) block both ways
    x[0, 0] = -448.0
    q, s, _ = quantize(x, "float8_e4m3", (128, 128))
    assert s.tolist() == [[1.0, 1.0], [1.0, np.float32(7.0) / np.float32(448.0)]]
    assert q[129, 128] == 0x7E and q[0, 0] == 0xFE  # both at +-448
    q, s, _ = quantize(x, "float8_e4m3", (1, 128))
    assert s.shape == (130, 2) and s[129, 1] == np.float32(7.0 / 448.0) and s[129, 0] == 1.0


def test_a_given_scale_is_used_and_saturates() -> None:
    x = np.float32([[1.0, -2.0, 1000.0]])
    q, s, amax = quantize(x, "float8_e4m3", None, scale_inv=0.5)
    assert s == np.float32(0.5) and amax == 1000.0
    assert q.tolist() == [[to_fp8(np.float32([2.0]), "float8_e4m3")[0], to_fp8(np.float32([-4.0]), "float8_e4m3")[0],
                           0x7E]]


def test_a_nan_makes_the_amax_and_its_block_nan() -> None:
    x = np.ones((2, 256), np.float32)
    x[0, 3] = np.nan
    q, s, amax = quantize(x, "float8_e5m2", (1, 128))
    assert np.isnan(amax) and np.isnan(s[0, 0]) and s[0, 1] == s[1, 0] == np.float32(1 / 57344)
    assert np.all(q[0, :128] == 0x7F) and np.all(q[1] == 0x7B)


# ----------------------------------------------------------------------------- the generated source
def _nvrtc_or_skip() -> None:
    try:
        nvrtc.bind()
    except nvrtc.NvrtcError as exc:
        if os.environ.get("CI") == "true":
            raise
        pytest.skip(f"no NVRTC: {exc}")


SAMPLE = [c for c in _every_config() if c.fp8 == "float8_e4m3" or (c.dtype == "bfloat16" and c.vec > 1)][::5]


@pytest.mark.parametrize("config", SAMPLE, ids=lambda c: qp.plan(c).name)
def test_the_source_compiles_under_nvrtc_with_its_kernels(config: qp.QuantizeConfig) -> None:
    _nvrtc_or_skip()
    p = qp.plan(config)
    text = launcher.source(p)
    assert f"cvt.rn.satfinite.{p.ptx_fp8}x2.f32" in text and f"TR = {p.tile_rows}" in text
    cubin = nvrtc.compile_source(text, {}, launcher.ARCH, "cubin", name=f"{p.name}.cu")
    assert p.symbol.encode() in cubin
    if p.amax_symbol:
        assert p.amax_symbol.encode() in cubin


# ----------------------------------------------------------------------------- the op's refusals
def test_the_op_refuses_what_it_cannot_run() -> None:
    torch = pytest.importorskip("torch")
    from tmagen.errors import ArgumentError
    from tmagen.ops import quantize_fp8

    x = torch.zeros(4, 4, dtype=torch.bfloat16)
    with pytest.raises(ArgumentError, match=r"x.device = cpu.*array-device"):
        quantize_fp8(x)
    meta = torch.zeros(4, 4, 4, dtype=torch.bfloat16, device="meta")
    with pytest.raises(ArgumentError, match="x.device"):
        quantize_fp8(meta)
    with pytest.raises(ArgumentError, match="quantize-block"):
        quantize_fp8(x, block=(2, 64))
    with pytest.raises(ArgumentError, match="quantize-fp8-dtype"):
        quantize_fp8(x, dtype=torch.float16)
