"""How tmagen.ops.matmul reads fp8 block scales, on the CPU (the products are
tests/gpu/test_fp8_matmul_gpu.py's): scale_b comes blocked as b [K, N] is, [ceil(K/128),
ceil(N/128)], as torch._scaled_mm takes it, and reaches the kernel as the [ceil(N/128),
ceil(K/128)] rows it reads, the same memory where it can be; w's own orientation is refused with
the fix named. Arrays are tests/numpy_gpu.py's, which speak __cuda_array_interface__."""

from __future__ import annotations

import numpy as np
import pytest

from tmagen.errors import ArgumentError
from tmagen.ops_matmul_fp8 import _scale

import numpy_gpu as gpu


class Scales(gpu.Array):
    """A float32 arena array with ``.T`` (a view, no copy), as a framework's has."""

    @property
    def T(self) -> Scales:  # noqa: N802 - numpy's and PyTorch's name
        return Scales(self.shape[::-1], self.strides[::-1], self.itemsize, self.ptr, "<f4")


def _scales(rows: int, cols: int) -> Scales:
    a = gpu.from_numpy(np.arange(rows * cols, dtype=np.float32).reshape(rows, cols))
    return Scales(a.shape, a.strides, a.itemsize, a.ptr, "<f4")


def test_torch_s_scale_b_reaches_the_kernel_as_w_s_rows_without_a_copy() -> None:
    k_blocks, n_blocks, n = 3, 5, 520
    of_w = _scales(n_blocks, k_blocks)  # w [N, K]'s blocks, row by row
    given = of_w.T  # torch._scaled_mm's scale_b: [K/128, N/128], blocked as b = w.t() is
    view = _scale(given, "scale_b", n, (k_blocks, n_blocks), blocked_as_b=True)
    assert view is not None
    assert view.shape == (n_blocks, k_blocks) and view.strides == (k_blocks, 1) and view.ptr == of_w.ptr


def test_a_square_shape_is_read_by_its_strides_not_its_shape() -> None:
    """K and N the same number of blocks: w's [N/128, K/128] has the shape torch's scale_b has, and
    before 2026-11-29 was read as it; now the [K/128, N/128] view of the same memory is."""
    blocks = 4
    of_w = _scales(blocks, blocks)
    view = _scale(of_w.T, "scale_b", 512, (blocks, blocks), blocked_as_b=True)
    assert view is not None and view.ptr == of_w.ptr and view.strides == (blocks, 1)  # w's rows, as they lie


def test_w_s_orientation_off_the_square_is_refused_with_the_fix() -> None:
    with pytest.raises(ArgumentError) as err:
        _scale(_scales(5, 3), "scale_b", 520, (3, 5), blocked_as_b=True)
    text = str(err.value)
    assert "scale_b.shape" in text and "(5, 3)" in text and "(3, 5)" in text and ".t()" in text


def test_scale_a_is_read_as_given() -> None:
    sa = _scales(300, 3)
    view = _scale(sa, "scale_a", 300, (300, 3))
    assert view is not None and view.shape == (300, 3) and view.strides == (3, 1) and view.ptr == sa.ptr
    with pytest.raises(ArgumentError) as err:
        _scale(_scales(3, 300), "scale_a", 300, (300, 3))
    assert "scale_a.shape" in str(err.value) and "1 x 128 block of a" in str(err.value)


class _Shaped:
    def __init__(self, *shape: int) -> None:
        self.shape = shape


@pytest.mark.parametrize("sa, sb, n, blocks", [
    ((300, 8), (8, 5), 520, True),        # K of 8 blocks: blocks by scale_a's columns
    ((300, 1), (1, 5), 520, True),        # K of one block: scale_b [1, N/128] can only be blocks
    ((300, 1), (1, 520), 520, False),     # per row and per column
    ((300, 1), (1, 1), 100, False),       # N of one block: one value for b, as a scale per tensor
    ((300, 1), None, 520, False),
    ((), (), 520, False),                 # one value each
])
def test_block_scales_are_told_by_their_shapes(sa, sb, n, blocks) -> None:
    from tmagen.ops_matmul_fp8 import _block_scales

    got = _block_scales(_Shaped(*sa) if sa is not None else None, _Shaped(*sb) if sb is not None else None, n)
    assert got is blocks


def test_with_k_one_block_the_kernel_reads_w_s_one_column_of_blocks() -> None:
    """K <= 128 with torch._scaled_mm's [1, ceil(N/128)] scale_b: the kernel's [ceil(N/128), 1] rows,
    one float apart (the layout test_block_scales_on_every_kernel runs at 64 x 200 x 128 on a GPU)."""
    given = _scales(1, 5)
    view = _scale(given, "scale_b", 520, (1, 5), blocked_as_b=True)
    assert view is not None and view.shape == (5, 1) and view.strides[0] == 1 and view.ptr == given.ptr
