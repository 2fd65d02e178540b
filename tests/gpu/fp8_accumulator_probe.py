"""How many bits the tensor core's accumulator keeps: a probe of wgmma's sums on the silicon.

Each output element d[m, n] of one tiny wgmma kernel is one experiment: a big term 2^X and a small
one +-2^(X - e), and the question whether the sum the tensor core returns still shows the small one.
Three ways of adding them (`MODES`):

    one_instruction  both terms are products of one wgmma (d starts at 0): the sum inside an instruction
    carried          the big product in one wgmma, the small one in the next, which accumulates onto the
                     first's result (d = 2^X carried in the accumulator registers)
    registers        d loaded with 2^X from memory, one wgmma adds the small product
    passthrough      d loaded with 2^X +- 2^(X-e) itself (where float32 holds it: e <= 23 for +, 24 for -),
                     one wgmma adds zero products: does the instruction keep what d held? (SageAttention2
                     reports the fp8 instruction cuts d to 13 fraction bits even so)

for e = 1 .. 32 (rows 0-31 add +2^(X-e), rows 32-63 subtract it: truncation and rounding differ
there), fp8 operands (m64n16k32, every pairing of e4m3 and e5m2) and, as controls, bfloat16 and
float16 (m64n8k16). Column n owns the two K slots 2n, 2n+1 of each instruction (slot pairs are
disjoint, so each (m, n) can hold its own products although A and B are shared): its B values fix
2^X's and the small term's scale, and even columns put the big product first, odd ones the small.
Every factor is a normal number of its type (no subnormal fp8 input), so a cell whose e the type
pair cannot reach that way is left out (e4m3 x e4m3 reaches e = 28: 2^16 = 2^8 * 2^8 against
2^-12 = 2^-6 * 2^-6).

The verdict per case, mode and sign: the outcomes (d / 2^X - 1, exact in float64) of the cells of each
e, `largest_exact` (the largest e up to which every cell's sum is exactly 2^X +- 2^(X-e)) and
`largest_changed` (the largest e whose addend still changes every cell's sum). fp32 with round to
nearest even would give 23 and 23 for +, 24 and 24 for - (1 - 2^-24 is a float32, 1 + 2^-24 is not).
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass

import numpy as np

from wgmma_probe import fp8_bits

ROWS = 64
E_MAX = 32  # e = 1 .. 32 on rows 0-31 (+) and 32-63 (-)
MODES = ("one_instruction", "carried", "registers", "passthrough")
SIGNS = ("+", "-")
# normal exponents of each type (no subnormal factor), its K per instruction and its wgmma name
NORMAL_EXPONENTS = {"float8_e4m3": (-6, 8), "float8_e5m2": (-14, 15), "bfloat16": (-126, 127), "float16": (-14, 15)}
PTX = {"float8_e4m3": "e4m3", "float8_e5m2": "e5m2", "bfloat16": "bf16", "float16": "f16"}


@dataclass(frozen=True)
class Case:
    a_dtype: str
    b_dtype: str

    @property
    def fp8(self) -> bool:
        return self.a_dtype.startswith("float8")

    @property
    def k(self) -> int:  # K of one instruction: 32 bytes of each operand
        return 32 if self.fp8 else 16

    @property
    def n(self) -> int:  # one column per pair of K slots
        return self.k // 2

    @property
    def label(self) -> str:
        return f"{PTX[self.a_dtype]} x {PTX[self.b_dtype]}"

    @property
    def instruction(self) -> str:
        return f"wgmma.mma_async m64n{self.n}k{self.k}.f32.{PTX[self.a_dtype]}.{PTX[self.b_dtype]}"

    @property
    def name(self) -> str:
        return f"acc_{PTX[self.a_dtype]}_{PTX[self.b_dtype]}"


CASES = (Case("float8_e4m3", "float8_e4m3"), Case("float8_e4m3", "float8_e5m2"),
         Case("float8_e5m2", "float8_e4m3"), Case("float8_e5m2", "float8_e5m2"),
         Case("bfloat16", "bfloat16"), Case("float16", "float16"))


def spec_for(c: Case) -> dict:
    """Two instructions' K of A (64 rows) and B (n rows), K-major, one 32-byte box per instruction."""
    def operand(name: str, dtype: str, rows: int) -> dict:
        return {"name": name, "dtype": dtype, "shape": [rows, 2 * c.k], "box": [rows, c.k], "swizzle": {"mode": "32B"},
                "mma": {"operand": name, "major": "k", "mn_boxes": 1}}

    return {"name": c.name, "tensors": [operand("a", c.a_dtype, ROWS), operand("b", c.b_dtype, c.n)],
            "kernel": {"kind": "inspect"}}


def kernel_source(c: Case, steps: int) -> str:
    """steps wgmma (one per box along K) onto d loaded from d_in: the first accumulates when
    accumulate_first is 1, the second always."""
    mma = f"mma_m64n{c.n}k{c.k}"
    return f"""
extern "C" __global__ void __launch_bounds__(128, 1) {c.name}_s{steps}(
    const __grid_constant__ CUtensorMap a_map, const __grid_constant__ CUtensorMap b_map, const float* d_in,
    float* out, uint32_t accumulate_first) {{
  namespace g = {c.name};
  using A = g::a_box;
  using B = g::b_box;
  constexpr uint32_t K = {2 * c.k};
  constexpr uint32_t N = {c.n};
  extern __shared__ uint8_t smem_raw[];
  __shared__ alignas(8) uint64_t loaded;
  uint8_t* base = smem_raw + ((1024u - (g::tma::smem_address(smem_raw) & 1023u)) & 1023u);
  uint8_t* a_tile = base;
  uint8_t* b_tile = base + (K / A::wgmma::k_per_box) * A::wgmma::box_stride;
  if (threadIdx.x == 0) {{
    g::tma::mbarrier_init(&loaded, 1);
    g::tma::fence_mbarrier_init();
    g::tma::mbarrier_arrive_expect_tx(&loaded, (K / A::wgmma::k_per_box) * A::tx_bytes
                                               + (K / B::wgmma::k_per_box) * B::tx_bytes);
    for (uint32_t kb = 0; kb < K / A::wgmma::k_per_box; ++kb)
      g::tma::load_2d(a_tile + kb * A::wgmma::box_stride, &a_map, &loaded, kb * A::wgmma::k_per_box, 0);
    for (uint32_t kb = 0; kb < K / B::wgmma::k_per_box; ++kb)
      g::tma::load_2d(b_tile + kb * B::wgmma::box_stride, &b_map, &loaded, kb * B::wgmma::k_per_box, 0);
  }}
  __syncthreads();
  g::tma::mbarrier_wait(&loaded, 0);
  const uint32_t warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  float d[N / 2];
#pragma unroll
  for (uint32_t i = 0; i < N / 2; ++i) {{
    const uint32_t row = 16 * warp + lane / 4 + 8 * (i / 2 % 2), col = 8 * (i / 4) + 2 * (lane % 4) + i % 2;
    d[i] = d_in[row * N + col];
  }}
  g::wgmma::fence_operands(d);
  g::wgmma::fence();
#pragma unroll
  for (uint32_t s = 0; s < {steps}; ++s)
    g::wgmma::{mma}<0, 0>(d, A::wgmma::descriptor(a_tile, 0, {c.k} * s), B::wgmma::descriptor(b_tile, 0, {c.k} * s),
                            s > 0 ? 1u : accumulate_first);
  g::wgmma::commit_group();
  g::wgmma::wait_group<0>();
  g::wgmma::fence_operands(d);
#pragma unroll
  for (uint32_t i = 0; i < N / 2; ++i) {{
    const uint32_t row = 16 * warp + lane / 4 + 8 * (i / 2 % 2), col = 8 * (i / 4) + 2 * (lane % 4) + i % 2;
    out[row * N + col] = d[i];
  }}
}}
"""


def source(cases: tuple[Case, ...] = CASES) -> str:
    return "".join(f'#include "{c.name}.cuh"\n' for c in cases) + \
        "".join(kernel_source(c, s) for c in cases for s in (1, 2))


def kernel_symbol(c: Case, mode: str) -> str:
    return f"{c.name}_s{2 if mode == 'carried' else 1}"


# --- the experiments ------------------------------------------------------------------------------
@dataclass(frozen=True)
class Layout:
    """What one launch computes: A [64, 2k], B [n, 2k], d_in [64, n] (fp64 values, exact in their
    types), and per cell its e, sign, 2^X (big) and whether its factors exist (valid)."""
    a: np.ndarray
    b: np.ndarray
    d_in: np.ndarray
    e: np.ndarray  # [64, n]
    sign: np.ndarray  # [64, n], +1 or -1
    big: np.ndarray  # [64, n], 2^X
    valid: np.ndarray  # [64, n] bool


def columns(c: Case) -> list[tuple[int, int, int]]:
    """Per column pair: (X, big's B exponent, small's B exponent). Half the pairs put 2^X at the
    largest product of two normal powers of two (e reaches furthest there), half at 2^0; the small
    term's B factor steps across B's range so that the A factors cover e = 1 .. 32 between them."""
    (a_lo, a_hi), (b_lo, b_hi) = NORMAL_EXPONENTS[c.a_dtype], NORMAL_EXPONENTS[c.b_dtype]
    pairs = c.n // 2
    x_top = min(a_hi + b_hi, 16)
    out = []
    for j in range(pairs):
        x = x_top if j < pairs // 2 else 0
        b0 = min(b_hi, max(b_lo, x - max(a_lo, min(a_hi, x // 2))))
        steps = pairs // 2
        b1 = round(b_hi - (b_hi - b_lo) * (j % steps) / max(steps - 1, 1))
        b1 = max(b_lo, min(b_hi, b1, x - 1 - a_lo))  # keep e = 1 in reach where the range allows
        out.append((x, b0, b1))
    return out


def layout(c: Case, mode: str) -> Layout:
    n, k = c.n, c.k
    a = np.zeros((ROWS, 2 * k))
    b = np.zeros((n, 2 * k))
    d_in = np.zeros((ROWS, n))
    e = np.zeros((ROWS, n), dtype=np.int64)
    sign = np.zeros((ROWS, n), dtype=np.int64)
    big = np.zeros((ROWS, n))
    valid = np.zeros((ROWS, n), dtype=bool)
    a_lo, a_hi = NORMAL_EXPONENTS[c.a_dtype]
    for col in range(n):
        x, b0, b1 = columns(c)[col // 2]
        big_slot, small_slot = (2 * col, 2 * col + 1) if col % 2 == 0 else (2 * col + 1, 2 * col)
        if mode == "carried":
            small_slot += k  # in the second instruction
        a0 = x - b0
        assert a_lo <= a0 <= a_hi, (c, x, b0)
        if mode not in ("registers", "passthrough"):
            b[col, big_slot] = 2.0 ** b0
        if mode != "passthrough":
            b[col, small_slot] = 2.0 ** b1
        for row in range(ROWS):
            ee, s = row % E_MAX + 1, 1 if row < E_MAX else -1
            e[row, col], sign[row, col], big[row, col] = ee, s, 2.0 ** x
            if mode == "passthrough":  # no products: d_in is the sum, where float32 holds it exactly
                valid[row, col] = ee <= (23 if s > 0 else 24)
                d_in[row, col] = (2.0 ** x + s * 2.0 ** (x - ee)) if valid[row, col] else 0.0
                continue
            a1 = x - ee - b1
            if not a_lo <= a1 <= a_hi:
                continue
            valid[row, col] = True
            a[row, small_slot] = s * 2.0 ** a1
            if mode == "registers":
                d_in[row, col] = 2.0 ** x
            else:
                a[row, big_slot] = 2.0 ** a0
    return Layout(a, b, d_in, e, sign, big, valid)


def operand_bytes(values: np.ndarray, dtype: str) -> np.ndarray:
    if dtype.startswith("float8"):
        return fp8_bits(values, dtype)
    if dtype == "float16":
        return values.astype(np.float16).view(np.uint16)
    bits = values.astype(np.float32).view(np.uint32)
    assert not (bits & 0xFFFF).any(), "bfloat16 inputs are exact"
    return (bits >> 16).astype(np.uint16)


# --- the verdict ----------------------------------------------------------------------------------
def summarize(lay: Layout, got: np.ndarray) -> dict:
    """Per sign: each e's outcomes (d / 2^X - 1 -> cells), and the two figures the docs report."""
    rel = got.astype(np.float64) / lay.big - 1.0
    out: dict = {}
    for s, sym in ((1, "+"), (-1, "-")):
        per_e: dict[str, list[list[float]]] = {}
        for ee in range(1, E_MAX + 1):
            cells = lay.valid & (lay.e == ee) & (lay.sign == s)
            if not cells.any():
                continue
            values, counts = np.unique(rel[cells], return_counts=True)
            per_e[str(ee)] = [[float(v), int(n)] for v, n in zip(values, counts)]
        out[sym] = {"outcomes": per_e, **verdict(per_e, s)}
    return out


def verdict(per_e: dict[str, list[list[float]]], sign: int) -> dict[str, int]:
    """largest_exact: every e up to it added exactly (a gap-free run from the first measured e);
    largest_changed: the largest e whose addend changed every cell's sum."""
    exact = changed = 0
    run = True
    for key in sorted(per_e, key=int):
        ee, outcomes = int(key), per_e[key]
        if run and all(v == sign * 2.0 ** -ee for v, _ in outcomes):
            exact = ee
        else:
            run = False
        if all(v != 0 for v, _ in outcomes):
            changed = ee
    return {"largest_exact": exact, "largest_changed": changed}


def run(c: Case, mode: str, kernel, device, map_args) -> np.ndarray:
    """One launch of ``kernel`` (the case's 1- or 2-step kernel) on the mode's layout; d as float32."""
    from tmagen import runtime
    from tmagen.launch import encode

    lay = layout(c, mode)
    with runtime.Buffer.from_array(operand_bytes(lay.a, c.a_dtype)) as da, \
            runtime.Buffer.from_array(operand_bytes(lay.b, c.b_dtype)) as db, \
            runtime.Buffer.from_array(lay.d_in.astype(np.float32)) as din, \
            runtime.Buffer(ROWS * c.n * 4) as out:
        out.fill(0xA5)
        accumulate_first = int(mode in ("registers", "passthrough"))
        params = [encode(map_args("a", da.ptr, lay.a.shape)), encode(map_args("b", db.ptr, lay.b.shape)),
                  ctypes.c_uint64(din.ptr), ctypes.c_uint64(out.ptr), ctypes.c_uint32(accumulate_first)]
        kernel.launch(1, 128, params)
        device.synchronize()
        return out.download(np.float32, (ROWS, c.n))


def model(lay: Layout, bits: int | None, rounding: str = "rne") -> np.ndarray:
    """What an accumulator would return (for the CPU tests of the verdict): None = fp32 (round to
    nearest even); else the exact sum cut to ``bits`` significant bits at the big term's exponent,
    toward zero ("rz") or to nearest even ("rne"), then stored as float32."""
    products = lay.a @ lay.b.T + lay.d_in  # exact: two powers of two per cell
    if bits is None:
        return products.astype(np.float32)
    ulp = lay.big * 2.0 ** (1 - bits)
    scaled = products / ulp
    cut = np.trunc(scaled) if rounding == "rz" else np.round(scaled)
    return (cut * ulp).astype(np.float32)


__all__ = ["CASES", "MODES", "Case", "Layout", "columns", "kernel_source", "kernel_symbol", "layout", "model",
           "operand_bytes", "run", "source", "spec_for", "summarize", "verdict"]
