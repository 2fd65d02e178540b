"""A GPU in numpy, for running `tmagen.verify` and the campaign's worker on the CPU: device memory,
tensor maps the way the driver checks them (`check_encode_tiled`), and the three kernel kinds as
TMA and the generated kernels move bytes, written from the documents and independently of the
verifier's own expectations (element by element, the swizzle applied to absolute addresses).

It proves the host side (layouts, strides, run-time shapes, element strides, out-of-bounds boxes)
handles every run the generator draws; it proves nothing about the silicon.
`install(monkeypatch)` swaps it into `tmagen.runtime`."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from tmagen import fp8
from tmagen.dtypes import BY_DRIVER
from tmagen.enums import Interleave, Swizzle
from tmagen.rules import check_encode_tiled
from tmagen.swizzle import PATTERNS
from tmagen.verify import through_tma

MEMORY: dict[int, np.ndarray] = {}  # device address -> bytes
_NEXT = [1 << 24]


class GpuError(Exception):
    pass


class Buffer:
    def __init__(self, nbytes: int) -> None:
        self.nbytes = int(nbytes)
        self.ptr = _NEXT[0]
        _NEXT[0] += -(-max(self.nbytes, 1) // 4096) * 4096 + 4096
        MEMORY[self.ptr] = np.full(max(self.nbytes, 1), 0xEE, dtype=np.uint8)  # what cuMemAlloc leaves

    @classmethod
    def from_array(cls, array: np.ndarray) -> Buffer:
        buf = cls(array.nbytes)
        buf.upload(array)
        return buf

    def upload(self, array: np.ndarray) -> None:
        data = np.ascontiguousarray(array).reshape(-1).view(np.uint8)
        MEMORY[self.ptr][: data.size] = data

    def fill(self, byte: int) -> None:
        MEMORY[self.ptr][: self.nbytes] = byte & 0xFF

    def download(self, dtype: Any = np.uint8, shape: Sequence[int] | None = None) -> np.ndarray:
        out = MEMORY[self.ptr][: self.nbytes].copy().view(dtype)
        return out.reshape(shape) if shape is not None else out

    def free(self) -> None:
        MEMORY.pop(self.ptr, None)

    def __enter__(self) -> Buffer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.free()


@dataclass
class TensorMap:
    args: dict[str, Any]

    def as_parameter(self) -> TensorMap:
        return self


def encode_tiled(*, into: Any = None, **kwargs: Any) -> TensorMap:
    """The runtime's encode_tiled; ``into`` (storage to reuse) has no meaning here."""
    violations = check_encode_tiled(**kwargs)
    if violations:
        raise GpuError(f"cuTensorMapEncodeTiled returned CUDA_ERROR_INVALID_VALUE: {violations[0]}")
    return TensorMap(kwargs)


def _view(m: TensorMap) -> np.ndarray:
    """The tensor a map describes, outermost first, last axis the element's bytes."""
    a = m.args
    es = BY_DRIVER[a["dtype"]].nbytes
    memory = MEMORY[a["global_address"]]
    dims = list(a["global_dim"])[::-1]
    strides = [*list(a["global_strides"])[::-1], es]
    return np.lib.stride_tricks.as_strided(memory, shape=(*dims, es), strides=(*strides, 1))


def _loaded(m: TensorMap) -> np.ndarray:
    """The tensor as TMA loads it: TF32 maps round each value (tmagen.verify.through_tma)."""
    return through_tma(np.ascontiguousarray(_view(m)), BY_DRIVER[m.args["dtype"]].name)[0]


def _copy(src: TensorMap, dst: TensorMap) -> None:
    """Every box loaded and stored: within the tensor that is every element, once."""
    _view(dst)[...] = _loaded(src)


def _transpose(src: TensorMap, dst: TensorMap) -> None:
    s, d = _loaded(src), _view(dst)
    es = s.shape[-1]
    rows, cols = s.shape[-3], s.shape[-2]
    units = d.shape[-3]  # the output's rows: the input's columns, in units
    per = cols // units
    units_in = s.reshape(*s.shape[:-3], rows, units, per * es)
    out = np.swapaxes(units_in, -2, -3)  # (..., units, rows, unit bytes)
    d[...] = out.reshape(d.shape)


def _inspect(m: TensorMap, coords: list[int], poison: int, out_ptr: int, smem_offset: int) -> None:
    """One load at ``coords`` (innermost first) into shared memory filled with ``poison``: element k of
    the box is at coords + k x elementStride (dimension 0 whole without interleave), outside the
    tensor zero (or NaN), placed at row x pitch + column, then the swizzle of the absolute address."""
    a = m.args
    es = BY_DRIVER[a["dtype"]].nbytes
    tensor = _loaded(m)  # outermost first
    box, steps = list(a["box_dim"]), list(a["element_strides"])
    if Interleave(a["interleave"]) is Interleave.NONE:
        steps[0] = 1
    counts = [math.ceil(b / e) for b, e in zip(box, steps)][::-1]  # outermost first from here on
    starts, steps = coords[::-1], steps[::-1]
    pattern = PATTERNS[Swizzle(a["swizzle"])]
    inner = counts[-1] * es
    if inner % 16 or (pattern.span and inner > pattern.span):
        raise GpuError("a box row TMA cannot place (not whole 16-byte chunks, or wider than the span)")
    pitch = pattern.row_pitch(inner)
    index = np.meshgrid(*[c + e * np.arange(n) for c, e, n in zip(starts, steps, counts)], indexing="ij")
    inside = np.ones(counts, dtype=bool)
    for i, n in zip(index, tensor.shape[:-1]):
        inside &= (i >= 0) & (i < n)
    values = tensor[tuple(np.clip(i, 0, n - 1) for i, n in zip(index, tensor.shape[:-1]))].copy()
    fill = {2: b"\x00\x7e", 4: b"\x00\x00\xc0\x7f", 8: b"\x00" * 6 + b"\xf8\x7f"}.get(es) if a["oob_fill"] else None
    values[~inside] = np.frombuffer(fill, dtype=np.uint8) if fill else 0
    k = np.meshgrid(*[np.arange(n) for n in counts], indexing="ij")
    row = np.ravel_multi_index(k[:-1], counts[:-1]) if len(counts) > 1 else np.zeros(counts, dtype=np.int64)
    logical = smem_offset + row * pitch + k[-1] * es  # the box starts smem_offset past a 1024-byte boundary
    physical = pattern.apply(logical.astype(np.int64)) - smem_offset
    footprint = math.prod(counts[:-1]) * pitch
    smem = np.full(footprint, poison, dtype=np.uint8)
    for b in range(es):
        smem[(physical + b).reshape(-1)] = values[..., b].reshape(-1)
    MEMORY[out_ptr][:footprint] = smem


def _floats(view: np.ndarray, dtype: int) -> np.ndarray:
    """A tensor's elements (bfloat16, float16 or float32 bytes on the last axis) as float64."""
    name = BY_DRIVER[dtype].name
    bits = np.ascontiguousarray(view).view({2: np.uint16, 4: np.uint32}[view.shape[-1]])[..., 0]
    if name == "bfloat16":
        return (bits.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    return bits.view({"float16": np.float16, "float32": np.float32}[name]).astype(np.float64)


def _decoded(raw: np.ndarray, name: str) -> np.ndarray:
    """The bytes ``raw`` as float64 values of the 16- or 32-bit float type ``name``."""
    if name == "bfloat16":
        return (raw.view(np.uint16).astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    return raw.view({"float16": np.float16, "float32": np.float32}[name]).astype(np.float64)


def _fp8_floats(view: np.ndarray, dtype: str) -> np.ndarray:
    return fp8.decode(np.ascontiguousarray(view)[..., 0], dtype).astype(np.float64)


def _scales(ptr: int | None, kind: int, ld: int, rows: int, k_blocks: int) -> np.ndarray | None:
    """The fp32 scales a matmul's epilogue points to: 1 value, ``rows`` values or [rows, k_blocks] blocks."""
    if not ptr:
        return None
    flat = MEMORY[ptr].view(np.float32)
    if kind == 2:
        return np.stack([flat[r * ld: r * ld + k_blocks] for r in range(rows)]).astype(np.float64)
    return flat[: rows if kind == 1 else 1].astype(np.float64)


def _matmul(a: TensorMap, b: TensorMap, c: TensorMap, majors: tuple[str, str], types: tuple[str, str] | None = None,
            epilogue: Any = None) -> None:
    """C = A B^T (A [M, K] or, a_major "mn", [K, M]; B [N, K], or, b_major "mn", [K, N]) in float64,
    rounded to C's type to nearest even. fp8 (``types``): the operands decoded, scaled as
    ``epilogue`` says (per tensor, row or block)."""
    if types is None:
        av, bv = _floats(_view(a), a.args["dtype"]), _floats(_view(b), b.args["dtype"])
    else:
        av, bv = _fp8_floats(_view(a), types[0]), _fp8_floats(_view(b), types[1])
    a_major, b_major = majors
    if a_major == "mn":
        av = av.T
    if epilogue is not None and (epilogue.scale_a or epilogue.scale_b):
        (m, k), n = av.shape, bv.shape[0]
        kb = -(-k // 128)
        sa = _scales(epilogue.scale_a, epilogue.scale_a_kind, epilogue.scale_a_ld, m, kb)
        sb = _scales(epilogue.scale_b, epilogue.scale_b_kind, epilogue.scale_b_ld, -(-n // 128)
                     if epilogue.scale_b_kind == 2 else n, kb)
        if sa is not None:
            av = av * (np.repeat(sa, 128, axis=1)[:, :k] if sa.ndim == 2 else sa.reshape(-1, 1))
        if sb is not None:
            bv = bv * (np.repeat(np.repeat(sb, 128, axis=0)[:n], 128, axis=1)[:, :k] if sb.ndim == 2
                       else sb.reshape(-1, 1))
    product = av @ (bv.T if b_major == "k" else bv)
    out = _view(c)
    name = BY_DRIVER[c.args["dtype"]].name
    if epilogue is not None:  # alpha A B + beta C_in + bias, C_in and the bias in C's type
        m, n = product.shape
        product = epilogue.alpha * product
        if epilogue.c_in:
            c_in = _decoded(MEMORY[epilogue.c_in], name)
            product = product + epilogue.beta * np.stack([c_in[r * epilogue.ldc_in: r * epilogue.ldc_in + n]
                                                          for r in range(m)])
        if epilogue.bias_along:
            bias = _decoded(MEMORY[epilogue.bias], name)
            product = product + (bias[None, :n] if epilogue.bias_along == 1 else bias[:m, None])
    if name == "bfloat16":
        bits32 = product.astype(np.float32).view(np.uint32)
        rounded = ((bits32 + 0x7FFF + ((bits32 >> 16) & 1)) >> 16).astype(np.uint16)
    else:
        rounded = product.astype({"float16": np.float16, "float32": np.float32}[name])
    out[...] = rounded.view(np.uint8).reshape(out.shape)


class Kernel:
    def __init__(self, symbol: str, smem: int) -> None:
        self.symbol, self.dynamic_smem = symbol, smem

    launches: list[tuple[str, bool]] = []  # (symbol, launched as a programmatic dependent launch), every launch

    def launch(self, grid: int, block: int, params: Sequence[Any], stream: Any = 0, dependent: bool = False) -> None:
        Kernel.launches.append((self.symbol, dependent))
        if self.symbol.endswith("_copy"):
            _copy(params[0], params[1])
        elif "_matmul" in self.symbol:  # any kernel of the family: the product is the same
            family = self.symbol[:self.symbol.rindex("_matmul") + len("_matmul")]
            # the maps (a, b, c, then A's again in 8-row boxes where the family loads M's edge so), then
            # M, N, K and the epilogue
            maps = [p for p in params if isinstance(p, TensorMap)]
            if len(maps) == 4:
                a, a_rows = maps[0].args, maps[3].args
                assert a_rows["global_address"] == a["global_address"] and a_rows["global_dim"] == a["global_dim"]
                assert a_rows is a or a_rows["box_dim"][1] == 8, "A's map, or A's in boxes of 8 rows"
            epilogue = params[len(maps) + 3] if len(params) > len(maps) + 3 else None
            _matmul(maps[0], maps[1], maps[2], Module.majors[family], Module.fp8_types.get(family), epilogue)
        elif self.symbol.endswith("_transpose"):
            _transpose(params[0], params[1])
        else:  # the coordinates come innermost first, as the kernel takes them
            coords = [int(p.value) for p in params[1:-2]]
            _inspect(params[0], coords, int(params[-2].value), int(params[-1].value), Module.smem_offsets[self.symbol])


class Module:
    """Kernels by symbol. A cubin bakes each inspect kernel's smem_offset in: the emulation is told."""

    smem_offsets: dict[str, int] = {}  # inspect kernel symbol -> its map's smem_offset
    majors: dict[str, tuple[str, str]] = {}  # matmul kernel symbol -> its A's and B's major-ness
    fp8_types: dict[str, tuple[str, str]] = {}  # fp8 matmul kernel symbol -> A's and B's types (maps say uint8)

    def __init__(self, cubin: bytes) -> None:
        pass

    def function(self, symbol: str, dynamic_smem: int = 0) -> Kernel:
        return Kernel(symbol, dynamic_smem)

    def unload(self) -> None:
        pass


class Timer:
    ms = 0.0

    def __enter__(self) -> Timer:
        return self

    def __exit__(self, *exc: object) -> None:
        pass


@dataclass
class Device:
    name: str = "Emulated GPU"
    compute_capability: tuple[int, int] = (9, 0)
    multiprocessors: int = 132
    driver_version: int = 13000
    memory_bytes_per_us: int = 0  # not known: a matmul takes the first dispatch table
    hang_error: type = type("KernelHang", (Exception,), {})

    def synchronize(self) -> None:
        pass


def install(monkeypatch: Any) -> Device:
    from tmagen import runtime

    for name, value in (("Buffer", Buffer), ("encode_tiled", encode_tiled), ("Module", Module), ("Timer", Timer),
                        ("GpuError", GpuError)):
        monkeypatch.setattr(runtime, name, value)
    return Device()
