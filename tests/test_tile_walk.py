"""The tiled kernels (copy, transpose) walk a tensor's tiles with uint32 indices and address each
with TMA's signed 32-bit coordinates. A tensor past either limit is refused, by the Python launcher
with a Violation and by the generated C API with bad_shape, before anything is encoded or launched:
before, the tile count was an unchecked 32-bit product and the coordinates wrapped, so a huge tensor
came back "ok" with a region never copied (issue 19, item 5)."""

from __future__ import annotations

import ctypes
import os

import pytest

from tmagen import build, toolchain
from tmagen.kinds.base import Array
from tmagen.kinds.copy.plan import flat_copy_shape
from tmagen.kinds.tiled import TileWalk, tile_overflow, tiles
from tmagen.limits import MAX_TILE_COORDINATE, MAX_TILES
from tmagen.plan import load

from conftest import REPO, ExampleBuilds

IN_CI = os.environ.get("CI") == "true"
COPY = REPO / "specs" / "copy_f32_3d.json"  # box (1, 32, 32) of float32
TRANSPOSE = REPO / "specs" / "transpose_int4_8x8.json"  # box (8, 32) of 4-byte elements, units of 4 elements
LAST_WHOLE = MAX_TILE_COORDINATE // 32 * 32  # the longest dimension that tiles of 32 cover within int32


@pytest.mark.parametrize(("shape", "box", "dim", "fragment"), [
    ((LAST_WHOLE,), (32,), None, None),  # the last tile ends exactly on the limit's last whole tile
    ((LAST_WHOLE + 1,), (32,), 0, "would end at coordinate 2147483648"),
    ((MAX_TILE_COORDINATE,), (1,), None, None),
    ((MAX_TILE_COORDINATE + 1,), (1,), 0, "signed 32-bit (at most 2147483647)"),
    ((1 << 32, 64), (8, 64), 0, "split the tensor along dimension 0 into parts of at most 2147483640"),
    ((2, 1 << 30), (1, 1), None, None),  # 2^31 tiles: the most a launch takes
    ((3, 1 << 30), (1, 1), None, "at most 2147483648 tiles"),
    ((1 << 20, 1 << 20), (8, 32), None, "32-bit indices"),  # 2^32 tiles: the old product wrapped to 0
])
def test_the_walk_holds_up_to_the_limits_and_says_where_it_would_wrap(shape, box, dim, fragment) -> None:
    over = tile_overflow(shape, box, TileWalk())
    if fragment is None:
        assert over is None
        return
    assert over is not None and over.dim == dim
    assert fragment in over.why + ": " + over.fix


def test_tiles_raise_rather_than_wrap_the_kernels_32_bit_counts() -> None:
    assert tiles((2, 1 << 30), (1, 1)).total == MAX_TILES
    with pytest.raises(OverflowError, match="32-bit"):
        tiles((1 << 20, 1 << 20), (8, 32))  # 2^32 tiles: c_uint32 would have held 0


@pytest.mark.parametrize(("spec", "shape", "field", "fragment"), [
    (COPY, (6, 100, 120), None, None),
    (COPY, (1 << 31, 8, 16), "x.shape[0]", "signed 32-bit"),
    (COPY, (4, 1 << 20, 1 << 20), "x.shape", "takes at most 2147483648 tiles"),
    (COPY, (1, LAST_WHOLE, 32), None, None),  # copied flat, in rows of 32: its tiles end on the limit
    (TRANSPOSE, (100, 120), None, None),
    (TRANSPOSE, (1 << 20, 1 << 20), "x.shape", "32-bit indices"),
    (TRANSPOSE, ((1 << 29) - 8, 32), None, None),
    # src's rows end within int32, but dst's columns are those rows x 4 elements: past it
    (TRANSPOSE, (1 << 30, 32), "out.shape[1]", "would end at coordinate 4294967296"),
])
def test_the_launcher_refuses_a_tensor_its_kernel_cannot_walk(spec, shape, field, fragment) -> None:
    plan = load(spec)
    found = plan.launcher.problems(plan, [Array.of(0, shape)])
    if field is None:
        assert found == []
        return
    assert [v.field for v in found] == [field]  # a copy's output, walked as its input, is not said twice
    v = found[0]
    assert v.rule == "array-tile-walk" and fragment in v.message and "split the tensor" in v.fix


def test_a_strided_output_is_walked_in_its_own_shape() -> None:
    """A contiguous input goes flat only with a contiguous output: with a strided one the launch
    walks the tensor's own shape, and the check follows the launch."""
    plan = load(COPY)
    shape = (1, 1, 1 << 31)  # rows of 2^31 floats: past int32 as they are, 2^26 rows of 32 when flat
    x = Array.of(0, shape)
    assert plan.launcher.problems(plan, [x]) == []  # a new output is contiguous: flat
    assert plan.launcher.problems(plan, [x], Array.of(0, shape)) == []
    strided = Array.of(0, shape, (1 << 33, 1 << 32, 1))
    assert [v.field for v in plan.launcher.problems(plan, [x], strided)] == ["x.shape[2]"]


def test_a_flat_copy_view_never_passes_the_coordinates() -> None:
    """The flat view is taken only where its rows stay inside TMA's coordinates (it was 2^32 rows)."""
    plan = load(COPY)
    src = plan.map("src")
    assert flat_copy_shape([1, LAST_WHOLE, 32], src.box, 4, True) == [1, LAST_WHOLE, 32]
    assert flat_copy_shape([1, LAST_WHOLE + 32, 32], src.box, 4, True) is None
    assert plan.kernel.detail.max_rows == LAST_WHOLE


# ------------------------------------------------------------------ the generated C API, on the CPU

STATUS = {"ok": 0, "bad_argument": 1, "bad_shape": 3}


def _library(spec: str, example_builds: ExampleBuilds) -> ctypes.CDLL:
    try:
        tc = toolchain.find_toolchain()
    except toolchain.ToolchainError as exc:
        if IN_CI:
            raise
        pytest.skip(f"no CUDA compiler: {exc}")
    example_builds.results()  # compiled in the background, into this session's cache
    rendered = build.render_spec_file(f"specs/{spec}.json")
    lib = ctypes.CDLL(str(toolchain.compile_folder(rendered.plan, rendered.files, tc).shared_library))
    getattr(lib, f"{spec}_last_error").restype = ctypes.c_char_p
    return lib


def _u64(xs) -> ctypes.Array:
    return (ctypes.c_uint64 * len(xs))(*xs)


@pytest.mark.parametrize(("shape", "status", "fragment"), [
    # within the limits the launcher goes on to encode: the null pointer is refused there, still before
    # any CUDA call, so the tile check has passed (this machine needs no GPU)
    ((6, 100, 120), "bad_argument", b"the pointer and the shape are required"),
    ((1, LAST_WHOLE, 32), "bad_argument", b"the pointer and the shape are required"),
    ((1 << 31, 8, 16), "bad_shape", b"src: shape[0] = 2147483648, but its tiles of 1 would reach past coordinate "
                                    b"2147483647"),
    ((3, LAST_WHOLE + 1, 64), "bad_shape", b"src: shape[1] = 2147483617"),
    # 2^32 tiles: the old 32-bit product was 0 and the launcher returned ok without copying anything
    ((4, 1 << 20, 1 << 20), "bad_shape", b"makes at least 4294967296 tiles, but the kernel walks its tiles with "
                                         b"32-bit indices and takes at most 2147483648"),
    ((1, (1 << 64) - 1, 32), "bad_shape", b"shape[1] = 18446744073709551615"),  # no wrap in the check itself
], ids=["small", "flat-at-limit", "coordinate", "coordinate-ragged", "tiles", "u64-max"])
def test_the_copy_c_api_refuses_a_tensor_past_the_walk(shape, status, fragment, example_builds) -> None:
    lib = _library("copy_f32_3d", example_builds)
    assert lib.copy_f32_3d_copy_launch(None, None, _u64(shape), None, None) == STATUS[status]
    assert fragment in lib.copy_f32_3d_last_error()


@pytest.mark.parametrize(("shape", "status", "fragment"), [
    ((100, 120), "bad_argument", b"the pointer and the shape are required"),
    ((1 << 20, 1 << 20), "bad_shape", b"src: the shape makes at least 4294967296 tiles"),
    # dst's last tile ends at 2^31 - 32
    (((1 << 29) - 8, 32), "bad_argument", b"the pointer and the shape are required"),
    ((1 << 30, 32), "bad_shape", b"dst: shape[1] = 4294967296, but its tiles of 32 would reach past coordinate"),
], ids=["small", "tiles", "dst-at-limit", "dst-coordinate"])
def test_the_transpose_c_api_refuses_a_tensor_past_the_walk(shape, status, fragment, example_builds) -> None:
    lib = _library("transpose_int4_8x8", example_builds)
    assert lib.transpose_int4_8x8_transpose_launch(None, None, _u64(shape), None) == STATUS[status]
    assert fragment in lib.transpose_int4_8x8_last_error()
