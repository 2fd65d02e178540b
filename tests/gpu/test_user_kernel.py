"""A user's own kernel on a folder generated from a spec without a kernel (tests/vendor_project/
weighted_row_sums.cu on generated/maps_only_bf16_f32): it encodes its maps with the generated C API,
loads bfloat16 and float32 boxes with the generated TMA primitives, reads them through the typed
accessors and does arithmetic in float. Checked against numpy on random data, every product bit for
bit and every row sum within float32's rounding, on the spec's shape and on ragged ones."""

from __future__ import annotations

import ctypes
import subprocess

import numpy as np
import pytest

from tmagen import runtime, toolchain
from tmagen.limits import TARGETS

from conftest import REPO

pytestmark = pytest.mark.gpu

FOLDER = REPO / "generated" / "maps_only_bf16_f32"
POISON = 0xA5


@pytest.fixture(scope="module")
def library(tmp_path_factory: pytest.TempPathFactory) -> ctypes.CDLL:
    """The user's kernel and the generated host code in one shared library, as the project's CMake
    builds it (tests/test_codegen.py builds it with CMake on the CPU machines)."""
    tc = toolchain.find_toolchain()
    out = tmp_path_factory.mktemp("user_kernel") / "libweighted_row_sums.so"
    run = subprocess.run([str(tc.nvcc), "-std=c++17", "-O3", f"-gencode={TARGETS['sm_90a'].gencode}", "-shared",
                          "-Xcompiler", "-fPIC", f"-I{FOLDER}", f"-L{tc.root / 'lib'}", "-o", str(out),
                          str(REPO / "tests" / "vendor_project" / "weighted_row_sums.cu"),
                          str(FOLDER / "maps_only_bf16_f32.cu")], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    lib = ctypes.CDLL(str(out))
    lib.weighted_row_sums_launch.restype = ctypes.c_int
    lib.weighted_row_sums_launch.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_uint64, ctypes.c_uint64,
                                             ctypes.c_float, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
    lib.weighted_row_sums_error.restype = ctypes.c_char_p
    return lib


def _bfloat16_bits(values: np.ndarray) -> np.ndarray:
    """float32 values rounded to bfloat16 (to nearest even), as their 16 bits."""
    bits = values.astype(np.float32).view(np.uint32)
    return ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)


# (rows, cols): the spec's shape, and ragged ones whose edges are partial boxes on both axes (cols
# stays a multiple of 8: rows of bfloat16 must be multiples of 16 bytes apart).
SHAPES = [(1000, 1000), (333, 200), (31, 72), (64, 8)]


@pytest.mark.parametrize("rows,cols", SHAPES)
def test_user_kernel_reads_bfloat16_and_float32_through_the_typed_accessors(device, library, rows: int,
                                                                            cols: int) -> None:
    rng = np.random.default_rng(rows * 7919 + cols)
    x_bits = _bfloat16_bits(rng.uniform(-4.0, 4.0, size=(rows, cols)))
    x = (x_bits.astype(np.uint32) << 16).view(np.float32)  # the bfloat16 values, exactly, as float32
    w = rng.standard_normal((rows, cols)).astype(np.float32)
    scale = np.float32(0.375)
    with runtime.Buffer.from_array(x_bits) as x_dev, runtime.Buffer.from_array(w) as w_dev, \
            runtime.Buffer(rows * cols * 4) as products_dev, runtime.Buffer(rows * 4) as sums_dev:
        products_dev.fill(POISON)
        sums_dev.fill(POISON)
        status = library.weighted_row_sums_launch(x_dev.ptr, w_dev.ptr, rows, cols, scale, products_dev.ptr,
                                                  sums_dev.ptr, None)
        device.synchronize()
        assert status == 0, library.weighted_row_sums_error()
        products = products_dev.download(np.float32, (rows, cols))
        sums = sums_dev.download(np.float32, (rows,))
    expected = scale * x * w  # float32, in the kernel's order: (scale * x) * w
    assert np.array_equal(products, expected), \
        f"{int(np.count_nonzero(products != expected))} of {products.size} products differ"
    exact = (scale.astype(np.float64) * x.astype(np.float64) * w).sum(axis=1)
    # sequential float32 sums of `cols` terms: off by at most about cols * 2^-24 of the sum of magnitudes
    bound = cols * 2.0**-23 * np.abs(expected.astype(np.float64)).sum(axis=1) + 1e-30
    error = np.abs(sums.astype(np.float64) - exact)
    assert np.all(error <= bound), f"worst row {int(np.argmax(error / bound))}: {error.max()} > {bound.max()}"


def test_user_kernel_reports_a_misaligned_tensor_through_the_generated_checks(device, library) -> None:
    rows, cols = 64, 64
    with runtime.Buffer(rows * cols * 2 + 64) as x_dev, runtime.Buffer(rows * cols * 4) as w_dev, \
            runtime.Buffer(rows * cols * 4) as products_dev, runtime.Buffer(rows * 4) as sums_dev:
        sums_dev.fill(POISON)
        status = library.weighted_row_sums_launch(x_dev.ptr + 8, w_dev.ptr, rows, cols, 1.0, products_dev.ptr,
                                                  sums_dev.ptr, None)
        device.synchronize()
        assert status == 1
        message = library.weighted_row_sums_error()
        assert b"x: the pointer" in message and b"16-byte" in message
        assert np.all(sums_dev.download() == POISON), "nothing launched"
