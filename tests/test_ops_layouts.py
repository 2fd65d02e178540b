"""tmagen.ops on every shape and view, on a GPU of numpy (tests/numpy_gpu.py): each result is
bit-identical to numpy's, whatever route the op takes (the TMA kernels where they can address the
layout, the strided kernels everywhere else), and the common cases take TMA."""

from __future__ import annotations

import itertools
import json
import math
from pathlib import Path

import numpy as np
import pytest

from tmagen import kernels, ops
from tmagen.errors import ArgumentError

import numpy_gpu as gpu

DTYPES = [np.bool_, np.int8, np.float16, np.int16, np.float32, np.int32, np.complex64, np.float64, np.int64,
          np.complex128]


@pytest.fixture(autouse=True)
def numpy_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    gpu.install(monkeypatch)


def _data(shape: tuple, dtype: type, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    nbytes = int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize
    return np.frombuffer(rng.integers(0, 256, nbytes, dtype=np.uint8).tobytes(), dtype).reshape(shape)


def _same(got: gpu.Array, want: np.ndarray) -> None:
    g = gpu.to_numpy(got, want.dtype)
    assert g.shape == want.shape
    assert g.tobytes() == np.ascontiguousarray(want).tobytes()


def _run(op: str, x: np.ndarray, dims: tuple = (), misalign: int = 0, out_misalign: int = 0) -> str:
    want = {"copy": lambda: x, "transpose": lambda: np.swapaxes(x, -1, -2),
            "permute": lambda: np.transpose(x, dims)}[op]()
    xin = gpu.from_numpy(x, misalign)
    out = gpu.empty(want.shape, x.dtype, out_misalign)
    gpu.ROUTES.clear()
    if op == "permute":
        ops.permute(xin, dims, out=out)
    else:
        getattr(ops, op)(xin, out=out)
    _same(out, want)
    return ",".join(gpu.ROUTES)


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_every_dtype_in_every_class_of_view(dtype: type) -> None:
    base = _data((6, 40, 72), dtype)
    views = [base, base[:, 3:37, 5:69], base[::2], base[:, :, ::3],  # contiguous, sliced rows, batch, stepped
             base.transpose(0, 2, 1), base.swapaxes(0, 1), base[:, ::-1],  # transposed, batch transposed, negative
             np.broadcast_to(base[:1, :1], (4, 40, 72)), base[2:3, 7:8, 1:2],  # broadcast (stride 0), single
             base[1, 2], base[1, :, 5]]  # 1-d, 1-d stepped
    for v in views:
        _run("copy", v)
        if v.ndim >= 2:
            _run("transpose", v)


@pytest.mark.parametrize("shape,dtype", [((777, 1032), np.float16), ((1, 4), np.float32), ((16385, 8), np.uint16),
                                         ((1000, 1000), np.float32), ((3, 5), np.int8), ((2, 129, 65), np.float64),
                                         ((64, 64), np.complex128)], ids=str)
def test_the_refused_shapes_of_issue_19(shape: tuple, dtype: type) -> None:
    x = _data(shape, dtype)
    _run("transpose", x)
    _run("copy", x)


@pytest.fixture()
def by_layout(monkeypatch: pytest.MonkeyPatch) -> None:
    """The table with its size thresholds off: the route follows from the layout alone (the shipped
    table sends small moves to the gather and tile kernels, as measured)."""
    base = ops.table()
    off = {cls: {**config, "gather_max_bytes": 0, "gather_max_bytes_transposed": 0, "tile_max_bytes": 0,
                 "tile_max_bytes_strided": 0} for cls, config in base["classes"].items()}
    monkeypatch.setattr(ops, "table", lambda: {**base, "classes": off})
    ops._MOVES.clear()


@pytest.mark.usefixtures("by_layout")
def test_zero_size_zero_d_and_misaligned() -> None:
    for shape in [(0,), (3, 0), (0, 5, 7)]:
        assert _run("copy", _data(shape, np.float32)) == ""
        if len(shape) >= 2:
            assert _run("transpose", _data(shape, np.float32)) == ""
    assert _run("copy", _data((), np.float64)) == "gather"  # 0-d: one element
    for misalign, out_misalign in [(2, 0), (0, 4), (6, 6), (1, 3)]:
        dtype = np.uint8 if (misalign | out_misalign) & 1 else np.float16
        x = _data((37, 300), dtype)
        assert _run("copy", x, misalign=misalign, out_misalign=out_misalign) == "gather"
        assert _run("transpose", x, misalign=misalign, out_misalign=out_misalign) == "plane"


@pytest.mark.usefixtures("by_layout")
def test_the_common_cases_take_tma() -> None:
    assert _run("copy", _data((256, 512), np.float32)) == "copy"  # one contiguous run, as 4-byte words
    assert _run("copy", _data((256, 3), np.float32)) == "copy"  # 3072 bytes: whole 16-byte chunks
    assert _run("copy", _data((5, 7), np.uint8)) == "bytes,copy"  # 35 bytes: 32 by TMA, 3 by a device copy
    assert _run("copy", _data((64, 512), np.float16)[:, :384]) == "copy"  # rows of whole 16 bytes, strided
    assert _run("transpose", _data((8, 512, 256), np.float16)) == "transpose"  # batched
    assert _run("transpose", _data((512, 256), np.float32)[:, 64:192]) == "transpose"  # a view
    assert _run("copy", _data((256, 512), np.float32).T) == "transpose"  # a transposed view's copy
    assert _run("transpose", _data((256, 512), np.float32).T) == "copy"  # and its transpose
    assert _run("copy", _data((128, 64), np.complex128)) == "copy"  # 16-byte elements as pairs of 8 bytes


PERMUTES = [((2, 32, 16, 48), (0, 2, 3, 1)), ((2, 16, 48, 32), (0, 3, 1, 2)),  # NCHW <-> NHWC
            ((2, 40, 4, 64), (0, 2, 1, 3)), ((2, 4, 40, 64), (0, 2, 1, 3)),  # [B,S,H,D] <-> [B,H,S,D]
            ((24, 40), (1, 0)), ((3, 20, 36), (2, 0, 1)), ((3, 4, 5, 6, 7), (4, 2, 0, 3, 1)),
            ((2, 3, 4, 32, 48), (1, 0, 2, 4, 3)), ((5, 3, 4, 2, 3), (3, 1, 4, 0, 2))]


@pytest.mark.parametrize("shape,dims", PERMUTES, ids=str)
@pytest.mark.parametrize("dtype", [np.uint8, np.float16, np.float32, np.float64, np.complex128],
                         ids=lambda d: np.dtype(d).name)
def test_permutes_of_ranks_2_to_5(shape: tuple, dims: tuple, dtype: type) -> None:
    _run("permute", _data(shape, dtype), dims)


def test_every_permutation_of_4_dimensions() -> None:
    x = _data((3, 8, 5, 16), np.float32)
    for dims in itertools.permutations(range(4)):
        _run("permute", x, dims)
        _run("permute", x[:, 1:7, :, 2:14], dims)


@pytest.mark.usefixtures("by_layout")
def test_common_permutes_take_tma() -> None:
    assert _run("permute", _data((4, 64, 32, 32), np.float16), (0, 2, 3, 1)) == "transpose"  # NCHW -> NHWC
    assert _run("permute", _data((2, 256, 8, 64), np.float16), (0, 2, 1, 3)) == "copy"  # [B,S,H,D] -> [B,H,S,D]
    assert _run("permute", _data((2, 3, 4, 32, 48), np.float32), (1, 0, 2, 4, 3)) == "transpose"  # 3 batch dims


def test_views_of_more_than_5_dimensions_that_do_not_merge() -> None:
    x = _data((2, 3, 2, 3, 2, 3, 16), np.float32)[:, :, :, :, :, :, ::2]
    _run("copy", x)
    _run("permute", x, (6, 5, 4, 3, 2, 1, 0))


def test_refusals_name_the_field() -> None:
    x = gpu.from_numpy(_data((4, 4), np.float32))
    with pytest.raises(ArgumentError) as info:
        ops.permute(x, (0, 0), out=gpu.empty((4, 4), np.float32))
    assert [v.rule for v in info.value.violations] == ["permute-dims"]
    with pytest.raises(ArgumentError) as info:
        ops.transpose(gpu.from_numpy(_data((4,), np.float32)), out=gpu.empty((4,), np.float32))
    assert [v.rule for v in info.value.violations] == ["array-rank"]
    with pytest.raises(ArgumentError) as info:
        ops.copy(x, out=gpu.empty((4, 5), np.float32))
    assert [v.field for v in info.value.violations] == ["out.shape"]


# ----------------------------------------------------------------------------- the per-call path
def _planned(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """A list that grows by one at each call that takes the eager path (reading the arrays, finding the route)."""
    planned: list[int] = []
    move = ops.move
    monkeypatch.setattr(ops, "move", lambda *a, **k: planned.append(1) or move(*a, **k))
    return planned


def test_a_repeated_call_replays_its_launches_and_a_new_pointer_plans_again(monkeypatch: pytest.MonkeyPatch) -> None:
    torch = gpu.install_torch(monkeypatch)
    planned = _planned(monkeypatch)
    x_host = _data((64, 64), np.float32)
    x = gpu.tensor(x_host)
    for kind, want in (("transpose", x_host.T), ("copy", x_host)):
        first = getattr(ops, kind)(x)
        _same(first, want)
        count, routes = len(planned), len(gpu.ROUTES)
        again = getattr(ops, kind)(x)  # the same input, the same output block: replayed, nothing planned
        _same(again, want)
        assert len(planned) == count and len(gpu.ROUTES) == routes + 1
    y_host = _data((64, 64), np.float32, seed=1)
    y = gpu.tensor(y_host)  # a new pointer of the same layout: its own launches, its own result
    count = len(planned)
    _same(ops.transpose(y), y_host.T)
    _same(ops.transpose(x), x_host.T)
    assert len(planned) == count + 1
    torch.hold = False  # a new output block: the eager path again
    _same(ops.transpose(x), x_host.T)
    assert len(planned) == count + 2
    p = gpu.tensor(_data((2, 8, 16, 32), np.float16))
    _same(ops.permute(p, (0, 2, 3, 1)), np.transpose(gpu.to_numpy(p, np.float16), (0, 2, 3, 1)))
    _same(ops.permute(p, (0, 2, 3, 1)), np.transpose(gpu.to_numpy(p, np.float16), (0, 2, 3, 1)))


def test_a_repeated_call_into_the_same_output_replays_and_another_output_plans_again(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """out= takes the replayed path too (it was the slow path on every call: 13.3 us against 10.2
    without out= on an H200 machine), keyed by the output's layout and pointer as well."""
    gpu.install_torch(monkeypatch)
    planned = _planned(monkeypatch)
    x_host = _data((64, 96), np.float32)
    x = gpu.tensor(x_host)
    out, other = gpu.tensor(np.zeros((96, 64), np.float32)), gpu.tensor(np.zeros((96, 64), np.float32))
    assert ops.transpose(x, out=out) is out
    _same(out, x_host.T)
    gpu.ARENA[out.ptr - gpu.BASE:out.ptr - gpu.BASE + out.itemsize * 96 * 64] = 0xEE  # poisoned
    assert ops.transpose(x, out=out) is out  # replayed: nothing planned, the result written again
    _same(out, x_host.T)
    assert len(planned) == 1
    _same(ops.transpose(x, out=other), x_host.T)  # another output: planned, then replayed
    _same(ops.transpose(x, out=other), x_host.T)
    assert len(planned) == 2
    flat = gpu.tensor(np.zeros((64, 96), np.float32))
    for _ in range(2):
        _same(ops.copy(x, out=flat), x_host)
        _same(ops.permute(x, (1, 0), out=out), x_host.T)
    assert len(planned) == 4
    wrong = gpu.tensor(np.zeros((96, 64), np.float64))  # refused each time, with the eager path's message
    for _ in range(2):
        with pytest.raises(ArgumentError):
            ops.transpose(x, out=wrong)
    assert len(planned) == 4


def test_a_refused_replayed_launch_or_another_current_device_takes_the_eager_path(
        monkeypatch: pytest.MonkeyPatch) -> None:
    gpu.install_torch(monkeypatch)
    planned = _planned(monkeypatch)
    x_host = _data((64, 64), np.float32)
    x = gpu.tensor(x_host)
    _same(ops.transpose(x), x_host.T)
    _same(ops.transpose(x), x_host.T)
    assert len(planned) == 1  # replayed
    monkeypatch.setattr(ops, "_TORCH_DEVICE", lambda: 1)  # PyTorch's current device is another: not replayed
    _same(ops.transpose(x), x_host.T)
    assert len(planned) == 2
    monkeypatch.setattr(ops, "_TORCH_DEVICE", lambda: 0)
    monkeypatch.setattr(kernels, "_RAW_LAUNCH", lambda *args: 201)  # the driver refuses (CUDA_ERROR_INVALID_CONTEXT)
    _same(ops.transpose(x), x_host.T)  # the eager path ran, and its result is right
    assert len(planned) == 3


def test_the_gradient_and_the_compiled_permute_of_the_gpu_test_are_exact() -> None:
    """The layouts tests/gpu's autograd/compile test moves (float32 of random bits, NaN among them):
    the forward (0, 2, 3, 1) and the backward's inverse permute, bit for bit. That test compared
    with torch.equal, which is False for any tensor holding a NaN, its own copy included."""
    pytest.importorskip("torch")  # tmagen.torch_ops registers the ops with PyTorch on import
    from tmagen import torch_ops

    x = _data((2, 8, 16, 32), np.float32, seed=19)
    assert np.isnan(x).any() and not np.array_equal(x, x.copy())  # why torch.equal failed on the GPU
    _run("permute", x, (0, 2, 3, 1))
    inverse = torch_ops.inverse_dims([0, 2, 3, 1])
    assert inverse == [0, 3, 1, 2]
    _run("permute", np.ascontiguousarray(np.transpose(x, (0, 2, 3, 1))), tuple(inverse))
    for rank in range(1, 6):
        for dims in itertools.permutations(range(rank)):
            y = np.arange(math.prod(range(2, rank + 2))).reshape(range(2, rank + 2))
            inv = torch_ops.inverse_dims(list(dims))
            assert np.array_equal(np.transpose(np.transpose(y, dims), inv), y)
    assert torch_ops.inverse_dims([-1, 0]) == [1, 0]


def test_arrays_off_the_gpu_are_refused_up_front_whatever_the_route_cache_holds() -> None:
    """A CPU array is refused with the op's message before any route, kernel or allocation, even
    when a GPU array of its layout was moved before (the route cache is keyed by layout)."""
    torch = pytest.importorskip("torch")
    _run("transpose", _data((64, 64), np.float32))  # the layout's route, cached
    _run("copy", _data((64, 64), np.float32))
    for call in (lambda: ops.transpose(torch.zeros(64, 64)),
                 lambda: ops.transpose(torch.zeros(64, 64), out=torch.empty(64, 64)),
                 lambda: ops.copy(torch.zeros(64, 64)),
                 lambda: ops.permute(torch.zeros(64, 64), (1, 0))):
        with pytest.raises(ArgumentError, match="x.device = cpu") as info:
            call()
        assert [(v.rule, v.field) for v in info.value.violations] == [("array-device", "x.device")]
    with pytest.raises(ArgumentError, match="out.device = cpu"):
        ops.copy(gpu.from_numpy(_data((64, 64), np.float32)), out=torch.empty(64, 64))


def test_a_permute_of_no_dimensions_on_the_per_call_path(monkeypatch: pytest.MonkeyPatch) -> None:
    gpu.install_torch(monkeypatch)
    x_host = _data((), np.float64)
    x = gpu.tensor(x_host)
    for _ in range(2):  # planned, then replayed
        _same(ops.permute(x, ()), x_host)


# ----------------------------------------------------------------------------- the plane kernel's plan
@pytest.mark.parametrize("rows,cols,elem,tile_cw,packed", [
    (4096, 4096, 4, 32, False),  # both sides long: 32 x 32 units
    (262144, 8, 1, 1, True),  # NHWC -> NCHW of 8 one-byte channels: 2 words along C, tiles 1 wide, 4096 long
    (8, 262144, 1, 512, True),  # NCHW -> NHWC: 2 words along R, 2048 columns along C
    (262144, 8, 4, 2, False),  # 4-byte elements are their own words: 8 along C, tiles 2 wide
    (102, 6, 2, 1, True),  # 3 words of 2 halves along C: tiles 1 word wide
    (40000, 48, 2, 8, True),  # 24 words along C: tiles 8 wide (a third, to a power of 2)
    (100000, 96, 4, 32, False),  # 96 along C: 32 wide, as planes wide on both sides
    (1, 5000, 8, 512, False),  # one row: tiles of 2 rows (the shared pitch stays within its bound)
])
def test_the_plane_shapes_its_tile_to_the_plane(rows: int, cols: int, elem: int, tile_cw: int, packed: bool) -> None:
    from tmagen.kinds.strided import plan as sp

    call = sp.plane((3,), rows, cols, (rows * cols, cols, 1), (rows * cols, 1, rows), elem, 132)
    assert (call.tile_cw, call.packed) == (tile_cw, packed)
    tile_r, tile_c = call.tile
    assert tile_r * tile_c * elem >= sp.PLANE_TILE_BYTES  # enough bytes in flight
    assert tile_r * tile_c == sp.plane_units(elem, packed) * call.unit ** 2
    assert (call.tiles_r, call.tiles_c) == (-(-rows // tile_r), -(-cols // tile_c))
    assert call.count == 3 * call.tiles_r * call.tiles_c
    assert call.symbol == f"tmagen_strided_plane_e{elem}{'_w4' if packed else ''}_u32"


def test_the_width_of_narrow_planes_replays_the_h100_measurement() -> None:
    """Planes narrow along C take tiles about a third of their units wide, the rest of each tile
    along R (`plane_tile_cw`): on the H100's measurement of every width (tests/data/hw_h100/
    plane_widths.json, python -m lab.plane_widths: 36 planes of 3 to 96 columns and 2000 to
    2,000,000 rows, 1-, 2- and 4-byte elements), the width the rule picks took at most 15% longer
    than the fastest width of its plane, and 2% over all of them (geometric mean)."""
    from tmagen.kinds.strided import plan as sp

    data = json.loads((Path(__file__).parent / "data" / "hw_h100" / "plane_widths.json").read_text())
    assert len(data["cases"]) >= 30 and not any(c["failed"] for c in data["cases"])
    ratios = []
    for case in data["cases"]:
        size = np.dtype({"bfloat16": "uint16"}.get(case["dtype"], case["dtype"])).itemsize
        rows, cols = case["rows"], case["cols"]
        call = sp.plane((), rows, cols, (cols, 1), (1, rows), size, 132)
        widths = {int(name.split()[1]): us for name, us in case["us"].items() if name.startswith("cw ")}
        ratio = widths[call.tile_cw] / min(widths.values())
        assert ratio <= 1.15, (case["dtype"], rows, cols, call.tile_cw, widths)
        ratios.append(ratio)
    assert math.exp(sum(math.log(r) for r in ratios) / len(ratios)) <= 1.02, ratios


def test_a_plane_can_be_planned_in_any_width_the_kernel_takes() -> None:
    """The width lab.plane_widths times each plane in: the planned width gives back the planned call,
    every other power of 2 up to half the tile's units tiles the whole plane with the pitch rule, and
    other widths are refused."""
    from tmagen.kinds.strided import plan as sp

    for size, rows, cols in ((2, 40000, 12), (1, 16385, 8), (4, 100000, 96)):
        call = sp.plane((), rows, cols, (cols, 1), (1, rows), size, 132)
        assert sp.plane((), rows, cols, (cols, 1), (1, rows), size, 132, tile_cw=call.tile_cw) == call
        for cw in (1, 2, 4, 8):
            w = sp.plane((), rows, cols, (cols, 1), (1, rows), size, 132, tile_cw=cw)
            tile_r, tile_c = w.tile
            assert (w.tile_cw, tile_c) == (cw, call.unit * cw)
            assert w.tiles_r * tile_r >= rows and w.tiles_c * tile_c >= cols and w.count == w.tiles_r * w.tiles_c
            assert w.pitch == sp.plane_pitch(cw, sp.plane_units(size, call.packed), sp._bank_words(size, call.packed))
        units = sp.plane_units(size, call.packed)
        for bad in (3, 0, units):
            with pytest.raises(ValueError, match="plane tile"):
                sp.plane((), rows, cols, (cols, 1), (1, rows), size, 132, tile_cw=bad)


def test_the_narrow_kernels_tiles_fit_its_shared_span() -> None:
    """A narrow tile (whole rows, a multiple of 4) with the word before its first byte fits the kernel's
    shared span for every row length it takes; tiles larger than the span, and rows that do not follow
    one another, are refused rather than planned."""
    from tmagen.kinds.strided import plan as sp

    span_bytes = 4 * sp.narrow_bytes_span()
    for size in (1, 2, 4, 8, 16):
        for cols in range(1, sp.NARROW_MAX_ROW_BYTES // size + 1):
            for rows in (1, 5, 1000, 1 << 20):
                call = sp.narrow((2,), rows, cols, (rows * cols, cols, 1), (rows * cols, 1, rows), size, 132)
                assert call.tile_rows % 4 == 0 and call.tiles_r * call.tile_rows >= rows
                assert 3 + call.tile_rows * cols * size + 3 <= span_bytes, (size, cols, rows, call.tile_rows)
                assert call.count == 2 * call.tiles_r and call.symbol == f"tmagen_strided_narrow_e{size}_u32"
    with pytest.raises(ValueError, match="narrow tiles"):
        sp.narrow((), 1000, 8, (8, 1), (1, 1000), 4, 132, tile_bytes=2 * sp.NARROW_TILE_BYTES)
    with pytest.raises(ValueError, match="one after the other"):
        sp.narrow((), 1000, 8, (10, 1), (1, 1000), 4, 132)  # rows 10 apart
    with pytest.raises(ValueError, match="one after the other"):
        sp.narrow((), 1000, 40, (40, 1), (1, 1000), 4, 132)  # rows of 160 bytes


def test_planes_of_1_and_2_byte_elements_move_words_whatever_their_alignment() -> None:
    """Each unit row tests its own address in the kernel, so the plan packs every plane of 1- and
    2-byte elements (rows of odd bytes and pointers off a word included) and none of wider ones."""
    from tmagen.kinds.strided import plan as sp

    for elem in (1, 2, 4, 8, 16):
        for src, dst in [((64 * 64, 64, 1), (64 * 64, 1, 64)), ((64 * 65, 65, 1), (64 * 67, 1, 67))]:
            call = sp.plane((2,), 64, 64, src, dst, elem, 132)
            assert call.packed == (elem < 4) and call.unit == (4 // elem if elem < 4 else 1)
            # the loads skip the test where every source row starts on a word
            assert call.src_words == (elem < 4 and src[1] * elem % 4 == 0)
    assert not sp.plane((2,), 64, 64, (64 * 64, 64, 1), (64 * 64, 1, 64), 1, 132, src_align=2).src_words
    assert sp.plane((2,), 64, 64, (64 * 64, 64, 1), (64 * 64, 1, 64), 2, 132, src_align=4).src_words
    with pytest.raises(ValueError, match="plane"):
        sp.plane((2,), 64, 64, (64 * 64, 1, 64), (64 * 64, 1, 64), 1, 132)  # the source not contiguous along C


def test_the_plane_kernel_source_has_a_packed_variant_for_small_elements() -> None:
    from tmagen import strided

    source = strided.source()
    for e in (1, 2):
        assert f"tmagen_strided_plane_e{e}_w4_u32" in source and f"tmagen_strided_plane_e{e}_w4_u64" in source
    for e in (4, 8, 16):
        assert f"tmagen_strided_plane_e{e}_w4" not in source and f"tmagen_strided_plane_e{e}_u32" in source


def test_the_table_names_every_knob_for_every_class() -> None:
    table = ops.table()
    keys = {"tma_min_row_bytes", "tma_min_plane", "strided_blocks_per_sm", "gather_max_bytes",
            "gather_max_bytes_transposed", "tma_tiles_per_sm", "tile_max_bytes", "tile_max_bytes_strided",
            "narrow_max_bytes", "narrow_words"}
    assert set(table["classes"]) == set(ops.CLASSES)
    assert all(set(config) == keys for config in table["classes"].values()), table["classes"]


def test_small_planes_of_short_contiguous_rows_take_the_narrow_kernel(monkeypatch: pytest.MonkeyPatch) -> None:
    """The table's per-class narrow_max_bytes sends transposes of short rows that follow one another
    (a plane narrow along its source rows) that TMA cannot take to the narrow kernel, up to that many
    bytes; longer rows, rows apart, larger moves and what TMA takes stay where they were. Bit for bit."""
    base = ops.table()
    knobs = {"gather_max_bytes": 0, "gather_max_bytes_transposed": 0, "tile_max_bytes": 0,
             "tile_max_bytes_strided": 0, "narrow_max_bytes": 1 << 16}
    classes = {name: {**config, **knobs} for name, config in base["classes"].items()}
    monkeypatch.setattr(ops, "table", lambda: {**base, "classes": classes})
    ops._MOVES.clear()
    assert _run("transpose", _data((1000, 8), np.float32)) == "narrow"  # 32 KiB, rows of 32 bytes
    assert _run("transpose", _data((4099, 3), np.uint8)) == "narrow"  # rows of 3 bytes
    assert _run("transpose", _data((2, 500, 5), np.float16)) == "narrow"  # batched
    assert _run("transpose", _data((1001, 5), np.uint8), misalign=1, out_misalign=3) == "narrow"
    assert _run("permute", _data((2, 40, 30, 3), np.uint8), (0, 3, 1, 2)) == "narrow"  # NHWC -> NCHW
    assert _run("transpose", _data((3000, 8), np.float32)) == "plane"  # 94 KiB: past the threshold
    assert _run("transpose", _data((1000, 10), np.float32)[:, :8]) == "plane"  # rows 40 bytes apart
    assert _run("transpose", _data((100, 41), np.float32)) == "plane"  # rows of 164 bytes
    assert _run("transpose", _data((1000, 16), np.float32)) == "transpose"  # TMA takes it


def test_planes_whose_tiles_split_short_rows_take_the_narrow_kernel_in_words() -> None:
    """Planes of 1- and 2-byte elements whose rows the plane kernel's tiles cover less than half of go
    to the narrow kernel in words at any size, where the rows are whole words on words; where the plane's
    tiles cover half a row or more, the source is off a word, the elements are of 4 bytes or the rows
    are long enough for TMA, they stay where they were (as measured: tests/test_ops_routes.py)."""
    def how(shape: tuple[int, ...], itemsize: int, src_align: int = 0) -> str:
        move = ops.plan_move(*_plane_layout(shape), itemsize, src_align, 0, 132)
        return move.how + ("(words)" if move.how == "narrow" and move.strided.src_words else "")

    assert how((300000, 20), 1) == "narrow(words)"  # tiles 4 bytes wide of rows of 20
    assert how((1000000, 12), 2) == "narrow(words)"
    assert how((8, 256 * 256, 16), 2) == "narrow(words)"  # NHWC -> NCHW, rows of 32 bytes: before TMA
    assert how((300000, 20), 1, src_align=1) == "plane"  # rows off words
    assert how((300000, 21), 1) == "plane"  # rows of odd bytes
    assert how((2000000, 4), 1) == "plane"  # the plane's tile spans the row
    assert how((64, 512 * 512, 8), 1) == "plane"  # the plane's tile spans half the row
    assert how((1000000, 12), 4) == "plane"  # 4-byte elements
    assert how((500000, 48), 1) == "transpose"  # rows of 48 bytes: TMA


def test_tma_transposes_of_planes_narrower_than_the_tuned_box_take_tiles_as_wide_as_their_rows() -> None:
    """A plane TMA takes, whose rows are narrower than the tuned box and than 128 bytes, moves in tiles
    of 64 rows by its rows' bytes rounded up to 16 where the tuned tile would be taken; a small move
    keeps the small tiles it takes, and wider planes the tuned box (measured: tests/test_ops_routes.py)."""
    def tile(shape: tuple[int, ...], itemsize: int) -> tuple[int, int] | None:
        move = ops.plan_move(*_plane_layout(shape), itemsize, 0, 0, 132)
        assert move.how == "transpose", move
        return move.tile

    assert tile((500000, 48), 1) == (64, 48)
    assert tile((300000, 20), 4) == (64, 80)
    assert tile((8, 100000, 40), 2) == (64, 80)  # batched
    assert ops.fitted_tile((500000, 44), 1) == (64, 48)  # 44 bytes of rows 48 apart, rounded up to 16
    assert tile((300000, 48), 4) is None  # rows of 192 bytes: the tuned box
    assert tile((100000, 128), 2) is None  # as wide as the tuned box
    assert tile((1024, 48), 1) in ops.SMALL_TILES["transpose"]  # a small move: its small tiles
    assert ops.fitted_tile((1000, 20), 16) is None  # no TMA type of 16 bytes


def _plane_layout(shape: tuple[int, ...]) -> tuple[tuple[int, ...], ...]:
    """plan_move's shape and strides for [*batch, R, C] -> [*batch, C, R] as tmagen.ops sees it: the
    output's shape, the source's strides in the output's order, the output's own."""
    *batch, rows, cols = shape
    source = tuple(int(np.prod(shape[i + 1:])) for i in range(len(shape)))
    out = (*batch, cols, rows)
    return out, (*source[:-2], 1, cols), tuple(int(np.prod(out[i + 1:])) for i in range(len(out)))


def test_moves_of_at_most_gather_max_bytes_take_the_gather_kernel(monkeypatch: pytest.MonkeyPatch) -> None:
    """The table's per-class gather_max_bytes sends small moves, whatever their layout, to the gather
    kernel (one load and one store per element), and leaves larger ones where they were."""
    base = ops.table()
    knobs = {"gather_max_bytes": 1 << 15, "gather_max_bytes_transposed": 1 << 14, "tile_max_bytes": 0}
    small = {**base, "classes": {**base["classes"], "small": {**base["classes"]["small"], **knobs}}}
    monkeypatch.setattr(ops, "table", lambda: small)
    ops._MOVES.clear()
    assert _run("transpose", _data((64, 64), np.float32)) == "gather"  # 16 KiB
    assert _run("copy", _data((128, 64), np.float32)) == "gather"  # 32 KiB
    assert _run("transpose", _data((128, 64), np.float32)) == "transpose"  # 32 KiB: TMA as before
    assert _run("copy", _data((256, 64), np.float32)) == "copy"


def test_transposing_moves_up_to_the_tile_thresholds_take_the_tile_kernel(monkeypatch: pytest.MonkeyPatch) -> None:
    """The table's per-class tile_max_bytes sends moves that transpose and that TMA could take to the
    tile kernel, tile_max_bytes_strided those it cannot (rows of odd bytes, pointers off 16, views):
    batches and permutes too; copies, larger moves, planes narrower than a tile, byte-by-byte loads
    and 16-byte elements stay where they were. Results bit for bit, and the numpy GPU checks every
    row's address against the kernel's word sizes."""
    base = ops.table()

    def thresholds(tma: int, strided: int) -> None:
        classes = {cls: {**config, "gather_max_bytes": 0, "gather_max_bytes_transposed": 0, "tile_max_bytes": tma,
                         "tile_max_bytes_strided": strided} for cls, config in base["classes"].items()}
        monkeypatch.setattr(ops, "table", lambda: {**base, "classes": classes})
        ops._MOVES.clear()

    thresholds(1 << 16, 1 << 16)
    assert _run("transpose", _data((64, 64), np.float32)) == "tile"  # 16 KiB
    assert _run("transpose", _data((77, 66), np.float16)) == "tile"  # rows of odd bytes on both sides
    assert _run("transpose", _data((3, 72, 72), np.uint16)[:, 1:, 3:]) == "tile"  # a view, batched
    assert _run("transpose", _data((70, 80), np.int16), misalign=2, out_misalign=6) == "tile"
    assert _run("permute", _data((2, 36, 4, 8), np.float64), (0, 2, 3, 1)) == "tile"
    assert _run("copy", _data((64, 64), np.float32).T) == "tile"  # a copy of a transposed view transposes
    assert _run("copy", _data((64, 64), np.float32)) == "copy"
    assert _run("transpose", _data((256, 128), np.float32)) == "transpose"  # 128 KiB: TMA as before
    assert _run("transpose", _data((129, 131), np.float32)) == "plane"  # rows of odd bytes, 66 KiB
    assert _run("transpose", _data((101, 20), np.float32)) == "narrow"  # 20 columns, rows one after the other
    assert _run("transpose", _data((101, 24), np.float32)[:, :20]) == "plane"  # 20 columns of rows 24 apart
    assert _run("transpose", _data((67, 65), np.uint8)) == "narrow"  # short rows of one-byte elements
    assert _run("transpose", _data((67, 130), np.uint8)) == "plane"  # loads of one byte
    assert _run("transpose", _data((20, 30), np.complex128)) == "plane"  # no tile kernel for 16-byte elements
    thresholds(0, 1 << 16)  # the strided threshold alone: TMA keeps what it can take
    assert _run("transpose", _data((64, 64), np.float32)) == "transpose"
    assert _run("transpose", _data((77, 66), np.float16)) == "tile"
    thresholds(1 << 16, 0)
    assert _run("transpose", _data((64, 64), np.float32)) == "tile"
    assert _run("transpose", _data((77, 66), np.float16)) == "plane"


@pytest.mark.parametrize("elem", [1, 2, 4, 8])
def test_the_tile_kernel_loads_and_stores_the_widest_words_each_side_allows(elem: int) -> None:
    from tmagen import strided
    from tmagen.kinds.strided import plan as sp

    side = sp.TILE_SIDE[elem]
    assert side * elem % 16 == 0  # a tile's first element on each side starts on a whole 16 bytes
    words = sp.tile_words(elem)
    assert words[0] == 16 and words[-1] == elem and list(words) == sorted(words, reverse=True)
    for src_pitch, dst_pitch in ((80, 104), (64, 70), (65, 33), (96, 112)):  # row strides, in elements
        call = sp.tile((3,), 30, 60, (30 * src_pitch, src_pitch, 1), (60 * dst_pitch, 1, dst_pitch), elem)

        def widest(pitch: int, rows: int) -> int:
            return max(w for w in words if pitch * elem % w == 0 and rows * pitch * elem % w == 0)

        want = (widest(src_pitch, 30), widest(dst_pitch, 60))
        assert (call.load_bytes, call.store_bytes) == want, (src_pitch, dst_pitch)
    tiles_r, tiles_c = -(-30 // side), -(-60 // side)
    assert (call.tiles_r, call.tiles_c, call.count) == (tiles_r, tiles_c, 3 * tiles_r * tiles_c)
    assert call.grid == call.count and call.block == sp.TILE_THREADS
    for align in (1, 2, 4, 8):  # a pointer off 16 bytes narrows that side's words to what it allows
        if align % elem == 0:
            narrowed = sp.tile((1,), 8, 8, (64, 8, 1), (64, 1, 8), elem, src_align=align, dst_align=align)
            assert narrowed.load_bytes == narrowed.store_bytes == max(w for w in words if align % w == 0)
    assert call.side == side
    assert call.symbol == f"tmagen_strided_tile_e{elem}_t{side}_l{call.load_bytes}_s{call.store_bytes}_u32"
    # the larger side where its tiles number at least the multiprocessors, for the sizes that have one
    large = sp.TILE_SIDE_LARGE.get(elem, side)
    assert large * elem % 16 == 0
    assert sp.tile((), large * 12, large * 11, (large * 11, 1), (1, large * 12), elem, multiprocessors=132).side \
        == large
    assert sp.tile((), large * 12, large * 11, (large * 11, 1), (1, large * 12), elem, multiprocessors=133).side \
        == side
    source = strided.source()
    for t in {side, large}:
        for load in words:
            for store in words:
                # no kernel loads narrower than TILE_MIN_LOAD_BYTES (tile_fits sends it none)
                built = f"tmagen_strided_tile_e{elem}_t{t}_l{load}_s{store}_u32" in source
                assert built == (load >= sp.TILE_MIN_LOAD_BYTES), (t, load, store)
    with pytest.raises(ValueError, match="tile"):
        sp.tile((1,), 8, 8, (64, 1, 8), (64, 1, 8), elem)  # the source not contiguous along C


def test_the_tile_kernels_shared_tile_is_a_permutation_and_spreads_its_load_warps_over_the_banks() -> None:
    """For every tile kernel: element (c, r) of the shared tile has its own bytes inside the array
    the template sizes (S rows of S elements); a load-phase warp (lane x: row x / (S / NL) of the
    source, vector x mod (S / NL) along it) writing element k of its vectors meets each bank in one
    4-byte word where its loads are 16 bytes into rows of at most 128 bytes, and in at most 8 words
    anywhere (words of 8-byte elements go to the banks a half warp at a time: 2); a store-phase
    quarter warp reading 16 bytes each reads 8 different chunks."""
    from tmagen.kinds.strided import plan as sp

    for k in sp.tile_kernels():
        e, vl, vs, side = k["e"], k["vl"], k["vs"], k["side"]
        nl, ns = vl // e, vs // e
        c, r = np.meshgrid(np.arange(side), np.arange(side), indexing="ij")
        at = sp.tile_shared_offset(e, vl, side, c, r)
        assert at.max() + e <= side * side * e and len(np.unique(at // e)) == side * side, k
        assert (at % e == 0).all(), k
        lanes = np.arange(32)
        lr, lc = lanes // (side // nl), lanes % (side // nl) * nl
        in_tile = lr < side
        for j in range(nl):
            byte = sp.tile_shared_offset(e, vl, side, lc + j, lr)[in_tile]
            words: dict[int, set[int]] = {}
            for b in byte:
                for w in range(max(1, e // 4)):
                    words.setdefault((b // 4 + w) % 32, set()).add(b // 4 + w)
            worst = max(len(v) for v in words.values())
            assert worst <= (1 if vl == 16 and side * e <= 128 else 2 if vl == 16 and e == 8 else 8), (k, j, worst)
        if vs == 16:  # a quarter warp: 8 lanes of one output row's chunks
            sc, sr = lanes[:8] // (side // ns), lanes[:8] % (side // ns) * ns
            chunks = sp.tile_shared_offset(e, vl, side, sc, sr) // 16
            assert len(set(chunks % 8)) == min(8, len(set(zip(sc, sr)))), k


def test_every_plane_tile_shape_fits_its_shared_planes_and_spreads_the_load_phase_over_the_banks() -> None:
    """For every plane kernel and every tile shape the launcher can choose, the addresses the kernel
    writes (plane k, unit column w, unit row g: k * PLANE + w * pitch + g) are distinct and inside
    the shared array the template sizes, and the 32 threads of a load-phase warp (neighbouring
    units: along C, then along R) write words in 32 distinct banks wherever a warp's units are whole
    4-byte words; narrower words share a bank only within one 4-byte word (but in tiles of 2 or 4
    rows of them)."""
    from tmagen.kinds.strided import plan as sp

    for k in sp.plane_kernels():
        e, unit, units, plane = k["e"], k["unit"], k["units"], k["plane_words"]
        word = e * unit  # bytes of a unit row
        per_bank = max(1, 4 // word)
        cw = 1
        while cw <= units // 2:
            rw = units // cw
            pitch = sp.plane_pitch(cw, units, per_bank)
            w, g = np.meshgrid(np.arange(cw), np.arange(rw), indexing="ij")
            addresses = (np.arange(unit)[:, None, None] * plane + w[None] * pitch + g[None]).ravel()
            assert addresses.max() < unit * plane, (k, cw)
            assert len(np.unique(addresses)) == addresses.size, (k, cw)
            lanes = np.arange(32)
            lane_w, lane_g = lanes % cw, lanes // cw  # the first warp's units (and every warp's, shifted)
            in_tile = lane_g < rw
            byte = (lane_w * pitch + lane_g)[in_tile] * word
            banks = {}
            for b in byte:
                banks.setdefault((b // 4) % 32, set()).add(b // 4)
            worst = max(len(v) for v in banks.values())  # distinct words meeting in one bank
            # words of 8 and 16 bytes go to the banks a half or a quarter warp at a time; tiles of 2 or 4
            # unit rows of narrower words (planes of at most 4 rows) keep a 2-way conflict
            allowed = 2 if word == 8 else 4 if word == 16 else 2 if (word < 4 and cw >= 32 and rw < 8) else 1
            assert worst <= allowed, (k, cw, worst)
            cw *= 2


def test_a_move_too_small_for_the_tuned_tiles_takes_smaller_ones() -> None:
    """The tuned tile where it gives each multiprocessor tma_tiles_per_sm tiles, else the first
    smaller one that does, else the smallest; every tile's spec passes the kernel's rules."""
    sms = 132
    # float32 transpose: tuned 128 x 64, then 64 x 32 and 32 x 32 elements
    assert ops.tile_for("transpose", (16384, 16384), 4, sms, 4) is None
    assert ops.tile_for("transpose", (2048, 2048), 4, sms, 4) == (64, 128)  # 512 tuned tiles < 528
    assert ops.tile_for("transpose", (1024, 1024), 4, sms, 4) == (32, 128)  # 512 of 64 x 32 < 528
    assert ops.tile_for("transpose", (64, 64), 4, sms, 4) == (32, 128)  # the smallest, whatever the count
    assert ops.tile_for("transpose", (8, 4096, 4096), 2, sms, 4) is None  # a batch counts its tiles
    assert ops.tile_for("transpose", (2048, 2048), 4, sms, 1) is None  # fewer tiles asked for
    assert ops.tile_for("copy", (256, 16384), 4, sms, 4) == (16, 1024)  # 256 tuned 64 x 256 tiles < 528
    assert ops.tile_for("copy", (4096, 4096), 4, sms, 4) is None  # 1024 tuned tiles
    assert ops.tile_for("copy", (100,), 4, sms, 4) is None  # rank 1: the tuned spec
    for kind, tiles in ops.SMALL_TILES.items():
        for size, dtype in ((1, "uint8"), (2, "bfloat16"), (4, "float32"), (8, "float64")):
            for rank in (2, 3, 5):
                for tile in tiles:
                    kern = ops.kernel(kind, dtype, rank, tile)
                    assert kern.spec.tensors[0].box[-2:] == list(ops.small_tile_box(tile, size))
                    assert kern.spec.tensors[0].box[:-2] == [1] * (rank - 2)


@pytest.mark.usefixtures("by_layout")
def test_plan_move_carries_the_tile_it_chose() -> None:
    m = ops.plan_move((1024, 1024), (1, 1024), (1024, 1), 4, 0, 0)
    assert (m.how, m.tile) == ("transpose", (32, 128))
    m = ops.plan_move((16384, 16384), (1, 16384), (16384, 1), 4, 0, 0)
    assert (m.how, m.tile) == ("transpose", None)
    # 16 MiB in one run: the flat copy's rows of 16384 words, 256 of them, 256 tuned tiles of 64 x 256
    m = ops.plan_move((1 << 22,), (1,), (1,), 4, 0, 0)
    assert ops.contiguous_layout(1 << 22, 4) == [256, 16384]
    assert (m.how, m.tile) == ("flat", (16, 1024))
