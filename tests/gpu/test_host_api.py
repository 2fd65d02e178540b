"""The generated C API, built as a shared library and called through ctypes: run-time checks
refuse a misaligned pointer, a shape TMA cannot express and a faulting coordinate with their
status, and launch nothing; a valid call copies."""

from __future__ import annotations

import ctypes
import json

import numpy as np
import pytest

from tmagen import runtime, toolchain
from tmagen.plan import resolve
from tmagen.render import render
from tmagen.spec import parse_spec

from conftest import REPO

pytestmark = pytest.mark.gpu

STATUS = {"ok": 0, "bad_argument": 1, "misaligned": 2, "bad_shape": 3, "bad_coordinate": 4}


def _library(name: str, tmp_path) -> tuple[ctypes.CDLL, object]:
    spec = parse_spec(json.loads((REPO / "specs" / f"{name}.json").read_text()))
    result = toolchain.compile_folder(resolve(spec), render(resolve(spec), f"specs/{name}.json"))
    lib = ctypes.CDLL(str(result.shared_library))
    getattr(lib, f"{name}_last_error").restype = ctypes.c_char_p
    return lib, spec


def _u64(xs):
    return (ctypes.c_uint64 * len(xs))(*xs)


def test_copy_refuses_bad_input_and_launches_nothing(device, tmp_path) -> None:
    lib, spec = _library("copy_f32_3d", tmp_path)
    shape = [6, 100, 120]
    launch = lib.copy_f32_3d_copy_launch
    last_error = lib.copy_f32_3d_last_error
    host = np.random.default_rng(1).integers(0, 256, size=(*shape, 4), dtype=np.uint8)
    with runtime.Buffer(host.nbytes + 64) as src, runtime.Buffer(host.nbytes + 64) as dst:
        src.upload(host)
        dst.fill(0xA5)
        # a pointer 4 bytes past the allocation's start: float32-aligned, not 16-byte aligned
        status = launch(ctypes.c_void_p(src.ptr + 4), ctypes.c_void_p(dst.ptr), _u64(shape), None, None)
        device.synchronize()
        assert status == STATUS["misaligned"]
        assert b"4 bytes past a 16-byte boundary" in last_error()
        # an innermost extent of 121 floats: rows of 484 bytes, no stride TMA can express
        status = launch(ctypes.c_void_p(src.ptr), ctypes.c_void_p(dst.ptr), _u64([6, 100, 121]), None, None)
        device.synchronize()
        assert status == STATUS["bad_shape"] and b"multiples of 16 bytes" in last_error()
        assert np.all(dst.download() == 0xA5), "a refused call launched nothing"
        status = launch(ctypes.c_void_p(src.ptr), ctypes.c_void_p(dst.ptr), _u64(shape), None, None)
        device.synchronize()
        assert status == STATUS["ok"], last_error()
        assert np.array_equal(dst.download()[: host.nbytes], host.reshape(-1))


def test_inspect_refuses_a_faulting_coordinate(device, tmp_path) -> None:
    lib, spec = _library("inspect_bf16_offset384", tmp_path)
    t = spec.tensors[0]
    launch = lib.inspect_bf16_offset384_inspect_tile_launch
    with runtime.Buffer(int(np.prod(t.shape)) * 2) as src, runtime.Buffer(8192) as out:
        out.fill(0xA5)
        coords = (ctypes.c_int32 * 2)(8, 3)  # 3 bf16 = 6 bytes: the copy would stop the context
        status = launch(ctypes.c_void_p(src.ptr), _u64(t.shape), None, coords, ctypes.c_uint8(0x5A),
                        ctypes.c_void_p(out.ptr), None)
        device.synchronize()
        assert status == STATUS["bad_coordinate"]
        assert b"coords[-1] = 3" in lib.inspect_bf16_offset384_last_error()
        assert np.all(out.download() == 0xA5)
        coords = (ctypes.c_int32 * 2)(8, 24)
        status = launch(ctypes.c_void_p(src.ptr), _u64(t.shape), None, coords, ctypes.c_uint8(0x5A),
                        ctypes.c_void_p(out.ptr), None)
        device.synchronize()
        assert status == STATUS["ok"]
