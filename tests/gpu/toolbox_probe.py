"""What the toolbox tests share, pure Python: the spec whose header the user kernels of
tests/gpu/toolbox_kernels.cu include, their compile (nvcc, into the session's cache), and the numpy
model of each reduction of cp.reduce.async.bulk.tensor. tests/test_toolbox_primitives.py compiles the kernels
on any machine with nvcc; tests/gpu/test_toolbox.py runs them."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from tmagen import toolchain
from tmagen.plan import Plan, resolve
from tmagen.render import render
from tmagen.spec import parse_spec

KERNELS = Path(__file__).resolve().parent / "toolbox_kernels.cu"

# The tensors the kernels use, one map each: `tile` for multicast, prefetch and the hinted copies
# (its l2_hint a constant of its box), one per element type that has reductions (r_f32 declares
# its reduce). Shapes are the C API's example only: the tests encode maps over arrays of their own.
REDUCE_MAPS = {"uint32": "r_u32", "int32": "r_s32", "uint64": "r_u64", "int64": "r_s64", "float32": "r_f32",
               "float16": "r_f16", "bfloat16": "r_bf16"}
_ROW = {1: 64, 2: 32, 4: 16, 8: 8}  # elements of one 64-byte row, the 64B swizzle's span


def spec_dict() -> dict:
    sizes = {"uint32": 4, "int32": 4, "uint64": 8, "int64": 8, "float32": 4, "float16": 2, "bfloat16": 2}
    tensors = [{"name": "tile", "dtype": "float32", "shape": [256, 256], "box": [32, 32], "swizzle": "128B",
                "l2_hint": "evict_first"}]
    for dtype, name in REDUCE_MAPS.items():
        t = {"name": name, "dtype": dtype, "shape": [64, 64], "box": [8, _ROW[sizes[dtype]]], "swizzle": "64B"}
        if name == "r_f32":
            t["reduce"] = "add"
        tensors.append(t)
    return {"name": "toolbox", "description": "the header the toolbox tests' user kernels include",
            "tensors": tensors}


def plan() -> Plan:
    return resolve(parse_spec(spec_dict()))


def compile_kernels(tc: toolchain.Toolchain | None = None) -> tuple[Plan, Path]:
    """The plan of the toolbox spec and the cubin of tests/gpu/toolbox_kernels.cu on its header."""
    p = plan()
    files = {k: v for k, v in render(p, "tests/gpu/toolbox_probe.py").items() if k.endswith(".cuh")}
    files["toolbox_kernels.cu"] = KERNELS.read_text()
    cubin, _ = toolchain.compile_cubin("toolbox_kernels", files, "toolbox_kernels.cu", "sm_90a", tc)
    return p, cubin


# ----------------------------------------------------------------------------- the reductions' model
INT_TYPES = {"uint32": np.uint32, "int32": np.int32, "uint64": np.uint64, "int64": np.int64}
REDUCE_OP_CODES = {"add": 0, "min": 1, "max": 2, "inc": 3, "dec": 4, "and": 5, "or": 6, "xor": 7}  # tma::reduce_op


def bfloat16_bits(values: np.ndarray) -> np.ndarray:
    """float32 values rounded to bfloat16 (to nearest even), as their 16 bits."""
    bits = np.ascontiguousarray(values, dtype=np.float32).view(np.uint32)
    return ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)


def bfloat16_values(bits: np.ndarray) -> np.ndarray:
    return (bits.astype(np.uint32) << 16).view(np.float32)


def operands(rng: np.random.Generator, op: str, dtype: str, shape: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
    """(dst, src) as the bits the GPU holds: random over the whole range for the integer types (sums
    wrap, signed compares see negatives), small for inc and dec (so that both branches of each are
    taken), and for the 16-bit floats magnitudes in [0.5, 64) of either sign, whose float32 sum is
    exact, so that one rounding to the type gives the correctly rounded result."""
    if dtype in INT_TYPES:
        t = INT_TYPES[dtype]
        if op in ("inc", "dec"):
            return (rng.integers(0, 12, size=shape).astype(t), rng.integers(0, 12, size=shape).astype(t))
        info = np.iinfo(t)
        return tuple(rng.integers(info.min, info.max, size=shape, dtype=t, endpoint=True) for _ in range(2))
    if dtype == "float32":
        return tuple((rng.standard_normal(shape) * 100).astype(np.float32) for _ in range(2))
    values = [rng.uniform(0.5, 64.0, size=shape) * rng.choice([-1.0, 1.0], size=shape) for _ in range(2)]
    if dtype == "float16":
        return tuple(v.astype(np.float16) for v in values)
    return tuple(bfloat16_bits(v) for v in values)


def reduce_model(op: str, dtype: str, dst: np.ndarray, src: np.ndarray) -> np.ndarray:
    """dst op src, element by element, as the PTX ISA defines each reduction (inc and dec as atom's:
    inc: old >= src ? 0 : old + 1; dec: old == 0 or old > src ? src : old - 1), in the bits of
    ``dtype`` (bfloat16 as uint16 bits)."""
    if dtype in INT_TYPES:
        with np.errstate(over="ignore"):
            if op == "add":
                return dst + src
            if op in ("min", "max"):
                return np.minimum(dst, src) if op == "min" else np.maximum(dst, src)
            if op == "inc":
                return np.where(dst >= src, 0, dst + 1).astype(dst.dtype)
            if op == "dec":
                return np.where((dst == 0) | (dst > src), src, dst - 1).astype(dst.dtype)
            u = dst.view(np.dtype(f"u{dst.itemsize}")), src.view(np.dtype(f"u{src.itemsize}"))
            bits = {"and": u[0] & u[1], "or": u[0] | u[1], "xor": u[0] ^ u[1]}[op]
            return bits.view(dst.dtype)
    if dtype == "float32":
        assert op == "add"
        return dst + src
    as_float = (lambda b: bfloat16_values(b)) if dtype == "bfloat16" else (lambda h: h.astype(np.float32))
    a, b = as_float(dst), as_float(src)
    if op == "add":
        exact = a + b  # exact in float32 for the operands drawn above
        return bfloat16_bits(exact) if dtype == "bfloat16" else exact.astype(np.float16)
    pick = (a <= b) if op == "min" else (a >= b)
    return np.where(pick, dst, src)
