"""A probe of tmagen's wgmma descriptors on the silicon: for one combination of swizzle, operand
major-ness, 16-bit type and shared-memory offset, TMA loads A (64 x 128) and B (128 x 128) into
the boxes of a generated header, eight wgmma.mma_async steps (m64n128k16) read them through the
header's descriptors, and the product is compared with numpy. Small integers make every product
and sum exact in fp32, so the comparison is bit for bit: a wrong descriptor cannot pass.

K = 128 makes every K-major operand cross at least one box along K and every MN-major one cross
8-row groups; N = 128 makes MN-major B span several atoms along N (LBO), and A MN-major with a
32B or 64B swizzle several atoms along M.

The fp8 probe (`Fp8Combo`) is the same with K-major e4m3 or e5m2 A and B (wgmma has no transpose
for 8-bit operands), m64n128k32 steps over K = 256: two 128B boxes along K, up to sixteen
unswizzled ones. Halves in [-4, 4] are exact in both fp8 types (`fp8_bits` writes their bytes).
"""

from __future__ import annotations

import ctypes
import itertools
from dataclasses import dataclass

import numpy as np

M, N, K = 64, 128, 128
K_ROWS_PER_BOX = 64  # MN-major boxes: rows of K per box
SWIZZLES = ("none", "32B", "64B", "128B")
MAJORS = ("k", "mn")
DTYPES = ("bfloat16", "float16")
OFFSETS = tuple(range(0, 1024, 128))
# What the probe puts in the descriptors' base-offset bits: tmagen's, or the PTX ISA's (start >> 7) % lines.
BASE_MODES = {"tmagen": 0, "ptx_formula": 1}


@dataclass(frozen=True)
class Combo:
    swizzle: str
    a_major: str
    b_major: str
    dtype: str
    smem_offset: int

    @property
    def name(self) -> str:
        return (f"wgmma_{self.swizzle.lower()}_a{self.a_major}_b{self.b_major}_{self.dtype[:4]}"
                f"_o{self.smem_offset}")


def combos() -> list[Combo]:
    return [Combo(*c) for c in itertools.product(SWIZZLES, MAJORS, MAJORS, DTYPES, OFFSETS)]


def _atom(swizzle: str) -> int:
    """Elements of 16-bit data across one box: a span, or one 16-byte core-matrix column."""
    return {"none": 16, "32B": 32, "64B": 64, "128B": 128}[swizzle] // 2


def _operand(name: str, operand: str, major: str, mn: int, c: Combo) -> dict:
    atom = _atom(c.swizzle)
    if major == "k":  # [MN, K], K contiguous: one box of all MN rows per K atom
        shape, box, mn_boxes = [mn, K], [mn, atom], 1
    else:  # [K, MN], MN contiguous: boxes one atom wide, 64 rows of K
        shape, box, mn_boxes = [K, mn], [K_ROWS_PER_BOX, atom], mn // atom
    return {"name": name, "dtype": c.dtype, "shape": shape, "box": box, "swizzle": {"mode": c.swizzle},
            "smem_offset": c.smem_offset, "mma": {"operand": operand, "major": major, "mn_boxes": mn_boxes}}


def spec_for(c: Combo) -> dict:
    return {"name": c.name, "tensors": [_operand("a", "a", c.a_major, M, c), _operand("b", "b", c.b_major, N, c)],
            "kernel": {"kind": "inspect"}}


def _coords(major: str) -> str:
    """The box's start coordinates, innermost first, from its place (kb along K, mb along M/N)."""
    return ("kb * W::k_per_box, mb * W::mn_per_box" if major == "k" else "mb * W::mn_per_box, kb * W::k_per_box")


def kernel_source(c: Combo) -> str:
    return _kernel_source(c.name, c.a_major, c.b_major, K, 16, "mma_m64n128k16")


def _kernel_source(name: str, a_major: str, b_major: str, k: int, k_step: int, mma: str) -> str:
    """One probe kernel: TMA loads all of A (64 x k) and B (128 x k), then k / k_step wgmma steps of
    ``mma`` (the header's m64n128kK wrapper) read them through the header's descriptors."""
    ta, tb = int(a_major == "mn"), int(b_major == "mn")
    loads = []
    for operand, major in (("A", a_major), ("B", b_major)):
        loads.append(f"""
    {{
      using W = {operand}::wgmma;
      for (uint32_t kb = 0; kb < K / W::k_per_box; ++kb)
        for (uint32_t mb = 0; mb < W::mn_boxes; ++mb)
          g::tma::load_2d({operand.lower()}_tile + (kb * W::mn_boxes + mb) * W::box_stride,
                          &{operand.lower()}_map, &loaded, {_coords(major)});
    }}""")
    return f"""
extern "C" __global__ void __launch_bounds__(128, 1) probe_{name}(
    const __grid_constant__ CUtensorMap a_map, const __grid_constant__ CUtensorMap b_map, float* out,
    uint32_t base_mode) {{
  namespace g = {name};
  using A = g::a_box;
  using B = g::b_box;
  constexpr uint32_t K = {k};
  constexpr uint32_t a_boxes = A::wgmma::mn_boxes * (K / A::wgmma::k_per_box);
  constexpr uint32_t b_boxes = B::wgmma::mn_boxes * (K / B::wgmma::k_per_box);
  extern __shared__ uint8_t smem_raw[];
  __shared__ alignas(8) uint64_t loaded;
  uint8_t* base = smem_raw + ((1024u - (g::tma::smem_address(smem_raw) & 1023u)) & 1023u);
  uint8_t* a_tile = base + A::smem_offset;
  uint8_t* b_tile = base + a_boxes * A::wgmma::box_stride + B::smem_offset;
  if (threadIdx.x == 0) {{
    g::tma::mbarrier_init(&loaded, 1);
    g::tma::fence_mbarrier_init();
    g::tma::mbarrier_arrive_expect_tx(&loaded, a_boxes * A::tx_bytes + b_boxes * B::tx_bytes);{''.join(loads)}
  }}
  __syncthreads();
  g::tma::mbarrier_wait(&loaded, 0);
  float d[64];
#pragma unroll
  for (int i = 0; i < 64; ++i) d[i] = 0.0f;
  g::wgmma::fence_operands(d);
  g::wgmma::fence();
#pragma unroll
  for (uint32_t kk = 0; kk < K / {k_step}; ++kk) {{
    uint64_t da = A::wgmma::descriptor(a_tile, 0, {k_step} * kk), db = B::wgmma::descriptor(b_tile, 0, {k_step} * kk);
    if (base_mode == 1) {{
      da = (da & ~(uint64_t(7) << 49)) | uint64_t(((da & 0x3FFFu) << 4 >> 7) % (A::period / 128)) << 49;
      db = (db & ~(uint64_t(7) << 49)) | uint64_t(((db & 0x3FFFu) << 4 >> 7) % (B::period / 128)) << 49;
    }}
    g::wgmma::{mma}<{ta}, {tb}>(d, da, db, kk > 0 ? 1u : 0u);
  }}
  g::wgmma::commit_group();
  g::wgmma::wait_group<0>();
  g::wgmma::fence_operands(d);
  const uint32_t warp = threadIdx.x / 32, lane = threadIdx.x % 32;
#pragma unroll
  for (int i = 0; i < 64; ++i) {{
    const uint32_t row = 16 * warp + lane / 4 + 8 * (i / 2 % 2), col = 8 * (i / 4) + 2 * (lane % 4) + i % 2;
    out[row * {N} + col] = d[i];
  }}
}}
"""


def batch_source(batch: list[Combo]) -> str:
    includes = "".join(f'#include "{c.name}.cuh"\n' for c in batch)
    return includes + "".join(kernel_source(c) for c in batch)


def smem_bytes(c: Combo, tiles: dict) -> int:
    return tiles["a"].stride * tiles["a"].mn_boxes * (K // tiles["a"].k_per_box) + \
        tiles["b"].stride * tiles["b"].mn_boxes * (K // tiles["b"].k_per_box) + 1024


def to_device_bits(values: np.ndarray, dtype: str) -> np.ndarray:
    """Small integers as bfloat16 or float16 bit patterns (exact)."""
    if dtype == "float16":
        return values.astype(np.float16).view(np.uint16)
    return (values.astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)


def run(combo: Combo, spec, kernel, device, rng: np.random.Generator, base_mode: int) -> tuple[bool, int]:
    """Runs the probe once; (exact match, mismatching elements)."""
    from tmagen import runtime
    from tmagen.launch import array_args, encode
    from tmagen.plan import resolve

    a = rng.integers(-4, 5, size=(M, K)).astype(np.float32)
    b = rng.integers(-4, 5, size=(N, K)).astype(np.float32)
    a_global = a if combo.a_major == "k" else np.ascontiguousarray(a.T)
    b_global = b if combo.b_major == "k" else np.ascontiguousarray(b.T)
    maps = {m.role: m for m in resolve(spec).maps}
    expected = a @ b.T
    with runtime.Buffer.from_array(to_device_bits(a_global, combo.dtype)) as da, \
            runtime.Buffer.from_array(to_device_bits(b_global, combo.dtype)) as db, \
            runtime.Buffer(M * N * 4) as out:
        out.fill(0xA5)
        params = [encode(array_args(maps["a"], da.ptr, a_global.shape)),
                  encode(array_args(maps["b"], db.ptr, b_global.shape)),
                  ctypes.c_uint64(out.ptr), ctypes.c_uint32(base_mode)]
        kernel.launch(1, 128, params)
        device.synchronize()
        got = out.download(np.float32, (M, N))
    bad = int(np.count_nonzero(got != expected))
    return bad == 0, bad



# --- fp8 operands (wgmma m64n128k32, K-major A and B only) -----------------------------------------
FP8_K = 256  # every swizzle's boxes repeat along K: 128B 2 boxes, 64B 4, 32B 8, none 16
FP8_DTYPES = ("float8_e4m3", "float8_e5m2")
FP8_PAIRS = (("float8_e4m3", "float8_e4m3"), ("float8_e4m3", "float8_e5m2"), ("float8_e5m2", "float8_e5m2"),
             ("float8_e5m2", "float8_e4m3"))
# Halves in [-4, 4]: exact in e4m3 (3 mantissa bits) and e5m2 (2); products are quarters up to 16, and
# a row's running sums over K = 256 stay below 2^10 quarters, so even an accumulator of 12 bits keeps
# them exactly (the descriptor, not the accumulator, is under test; fp8_accumulator_probe measures that).
FP8_VALUES = np.arange(-8, 9) / 2


@dataclass(frozen=True)
class Fp8Combo:
    swizzle: str
    a_dtype: str
    b_dtype: str
    smem_offset: int

    @property
    def name(self) -> str:
        short = {"float8_e4m3": "e4m3", "float8_e5m2": "e5m2"}
        return f"wgmma8_{self.swizzle.lower()}_{short[self.a_dtype]}_{short[self.b_dtype]}_o{self.smem_offset}"


def fp8_combos() -> list[Fp8Combo]:
    return [Fp8Combo(s, a, b, o) for s, (a, b), o in itertools.product(SWIZZLES, FP8_PAIRS, OFFSETS)]


def fp8_spec_for(c: Fp8Combo) -> dict:
    atom = {"none": 16, "32B": 32, "64B": 64, "128B": 128}[c.swizzle]  # one byte per element

    def operand(name: str, dtype: str, mn: int) -> dict:
        return {"name": name, "dtype": dtype, "shape": [mn, FP8_K], "box": [mn, atom], "swizzle": {"mode": c.swizzle},
                "smem_offset": c.smem_offset, "mma": {"operand": name, "major": "k", "mn_boxes": 1}}

    return {"name": c.name, "tensors": [operand("a", c.a_dtype, M), operand("b", c.b_dtype, N)],
            "kernel": {"kind": "inspect"}}


def fp8_kernel_source(c: Fp8Combo) -> str:
    return _kernel_source(c.name, "k", "k", FP8_K, 32, "mma_m64n128k32")


def fp8_batch_source(batch: list[Fp8Combo]) -> str:
    includes = "".join(f'#include "{c.name}.cuh"\n' for c in batch)
    return includes + "".join(fp8_kernel_source(c) for c in batch)


def fp8_smem_bytes(tiles: dict) -> int:
    return sum(t.stride * t.mn_boxes * (FP8_K // t.k_per_box) for t in tiles.values()) + 1024


_FP8_FORMAT = {"float8_e4m3": (3, 7, 448.0), "float8_e5m2": (2, 15, 57344.0)}  # mantissa bits, bias, largest


def fp8_bits(values: np.ndarray, dtype: str) -> np.ndarray:
    """Values as OCP fp8 bytes (e4m3: PyTorch's float8_e4m3fn; e5m2), subnormals included. Every value
    must be exact in the type: a probe's inputs are chosen so, and a value that is not raises."""
    mbits, bias, largest = _FP8_FORMAT[dtype]
    flat = np.asarray(values, dtype=np.float64).ravel()
    out = np.empty(flat.size, dtype=np.uint8)
    for i, v in enumerate(flat):
        sign = 0x80 if np.signbit(v) else 0
        a = abs(float(v))
        if a == 0:
            out[i] = sign
            continue
        if not a <= largest:
            raise ValueError(f"{v} is out of {dtype}'s range (largest {largest})")
        mant, exp = np.frexp(a)  # a = mant * 2^exp, 0.5 <= mant < 1
        e = int(exp) - 1  # a = (2 mant) * 2^e
        if e < 1 - bias:  # subnormal: a = m * 2^(1 - bias - mbits)
            m, biased = a / 2.0 ** (1 - bias - mbits), 0
        else:
            m, biased = (2 * float(mant) - 1) * 2 ** mbits, e + bias
        if m != int(m) or m >= 2 ** mbits:
            raise ValueError(f"{v} is not exact in {dtype}")
        out[i] = sign | biased << mbits | int(m)
    return out.reshape(np.shape(values))


def fp8_values(bits: np.ndarray, dtype: str) -> np.ndarray:
    """The inverse of fp8_bits (finite values only)."""
    mbits, bias, _ = _FP8_FORMAT[dtype]
    b = np.asarray(bits, dtype=np.int64)
    biased, m = (b >> mbits) & (0x7F >> mbits), b & ((1 << mbits) - 1)
    mag = np.where(biased == 0, m * 2.0 ** (1 - bias - mbits), (1 + m / 2 ** mbits) * 2.0 ** (biased - bias))
    return np.where(b & 0x80, -mag, mag)


def fp8_run(combo: Fp8Combo, spec, kernel, device, rng: np.random.Generator, base_mode: int) -> tuple[bool, int]:
    """Runs the fp8 probe once; (exact match, mismatching elements)."""
    from tmagen import runtime
    from tmagen.launch import array_args, encode
    from tmagen.plan import resolve

    a = rng.choice(FP8_VALUES, size=(M, FP8_K))
    b = rng.choice(FP8_VALUES, size=(N, FP8_K))
    maps = {m.role: m for m in resolve(spec).maps}
    expected = (a @ b.T).astype(np.float32)
    with runtime.Buffer.from_array(fp8_bits(a, combo.a_dtype)) as da, \
            runtime.Buffer.from_array(fp8_bits(b, combo.b_dtype)) as db, \
            runtime.Buffer(M * N * 4) as out:
        out.fill(0xA5)
        params = [encode(array_args(maps["a"], da.ptr, a.shape)), encode(array_args(maps["b"], db.ptr, b.shape)),
                  ctypes.c_uint64(out.ptr), ctypes.c_uint32(base_mode)]
        kernel.launch(1, 128, params)
        device.synchronize()
        got = out.download(np.float32, (M, N))
    bad = int(np.count_nonzero(got != expected))
    return bad == 0, bad


__all__ = ["Combo", "combos", "spec_for", "batch_source", "smem_bytes", "run", "BASE_MODES", "Fp8Combo", "fp8_combos",
           "fp8_spec_for", "fp8_batch_source", "fp8_smem_bytes", "fp8_run", "fp8_bits", "fp8_values"]
