"""The quantize kernels' plan: how one call of `tmagen.ops.quantize_fp8` is cut into tiles, read and
written, decided once per configuration and printed into the kernel (templates/quantize/kernels.cu.j2).

The kernel computes ``q = fp8(x / s)`` over ``q``'s orientation: ``q[i, j] = x[i, j]``, or ``x[j, i]``
with ``transpose``, so a transpose is the source's two strides exchanged. One block of threads takes one
tile of ``tile_rows x 128`` elements of ``q``: it reads the tile from ``x`` along whichever of ``x``'s
dimensions is contiguous (``read_along``: "j" or "i" of ``q``), ``vec`` elements per load, into shared
memory as fp32 (a row pitch of ``pitch`` floats), keeps the largest magnitude it read, and writes ``q``
one row of the tile per warp, along ``q``'s contiguous dimension. The scales:

- ``mode`` "row" (block 1 x 128): one scale per row of a tile, from the warp's reduction of that row;
- "tile" (block 128 x 128): one scale per tile of 128 x 128, from the block's reduction of the whole
  tile, which is why the tile is staged whole in shared memory before a byte is written;
- "tensor" (block None): one scale for the tensor: ``scale_from`` "given" (the caller's ``scale_inv``)
  or "amax" (computed first by a second kernel over the same tiles, ``amax_kernel``, which only reduces).

``s = amax / fp8_max`` (1 where the amax is 0), ``q = fp8(x / s)`` with both divisions IEEE
(round to nearest even), the cast rounding to nearest even and saturating to +-fp8_max (PTX
``cvt.rn.satfinite``). The tensor's amax is the bits of ``|x|`` as unsigned integers, whose order is
the floats' (a NaN above infinity, so a NaN propagates as ``x.abs().max()`` does), combined by one
``atomicMax`` per block into a word the launcher zeroes first.

Pure: no GPU, no compiler. Shapes outermost first, strides in elements.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

INPUTS: dict[str, int] = {"bfloat16": 2, "float16": 2, "float32": 4}  # x's element types, bytes each
FP8: dict[str, tuple[str, float]] = {  # tmagen dtype -> PTX type, largest finite value
    "float8_e4m3": ("e4m3", 448.0),  # OCP FP8 E4M3: S.1111.110 = 1.75 * 2^8 (PTX ISA 9.7.9.21 cvt)
    "float8_e5m2": ("e5m2", 57344.0),  # OCP FP8 E5M2: S.11110.11 = 1.75 * 2^15
}
BLOCKS: dict[tuple[int, int] | None, str] = {(1, 128): "row", (128, 128): "tile", None: "tensor"}
TILE_COLS = 128  # q's columns per tile: one block of 128 along q's contiguous dimension
ROW_TILE_ROWS = 64  # q's rows per tile in modes "row" and "tensor"
THREADS = 256
WARPS = THREADS // 32


@dataclass(frozen=True)
class QuantizeConfig:
    """What a call asks, and the facts of its layout that change the kernel (its key in the caches)."""

    dtype: str  # x's, one of INPUTS
    fp8: str  # one of FP8
    block: tuple[int, int] | None  # in q's orientation; a key of BLOCKS
    transpose: bool
    scale_given: bool  # block None: the caller's scale_inv, not one computed from the amax
    read_along: str  # "j": x is contiguous along q's columns; "i": along q's rows
    vec: int  # x's elements per load


@dataclass(frozen=True)
class QuantizePlan:
    """One configuration's kernel(s): everything the template prints."""

    config: QuantizeConfig
    mode: str  # "row", "tile", "tensor"
    scale_from: str  # "block" (row, tile), "given" or "amax" (tensor)
    tile_rows: int
    tile_cols: int
    pitch: int  # floats per row of the staged tile
    threads: int
    elem_bytes: int
    ptx_fp8: str
    fp8_max: float
    amax_atomic: bool  # the quantize kernel folds its tile's amax into the tensor's

    @property
    def name(self) -> str:
        c = self.config
        block = "tensor" if c.block is None else f"{c.block[0]}x{c.block[1]}"
        return (f"tmagen_quantize_{c.dtype}_{self.ptx_fp8}_{block}{'_t' if c.transpose else ''}"
                f"{'_given' if c.scale_given else ''}_{c.read_along}{c.vec}")

    @property
    def symbol(self) -> str:
        return f"{self.name}_kernel"

    @property
    def amax_symbol(self) -> str | None:
        """The reduction that runs first (scale_from "amax"), or None."""
        return f"{self.name}_amax" if self.scale_from == "amax" else None

    @property
    def smem_bytes(self) -> int:
        return self.tile_rows * self.pitch * 4


@dataclass(frozen=True)
class Geometry:
    """One call's launch: q's shape, x's strides in q's orientation, the tile grid."""

    rows: int
    cols: int
    si: int
    sj: int
    tiles_i: int
    tiles_j: int

    @property
    def grid(self) -> int:
        return self.tiles_i * self.tiles_j


def configure(dtype: str, fp8: str, block: tuple[int, int] | None, transpose: bool, scale_given: bool,
              shape: tuple[int, int], strides: tuple[int, int], address: int) -> QuantizeConfig:
    """The configuration of a call on ``x`` of ``shape`` and element ``strides`` at ``address``: x
    read along its contiguous dimension (in q's orientation), ``vec`` elements per load where the
    strides and the address allow one aligned vector (4 elements along q's columns, 16 bytes along q's
    rows), else one at a time. Inputs are checked by the caller (`problems`)."""
    es = INPUTS[dtype]
    si, sj = (strides[1], strides[0]) if transpose else strides
    ni, nj = (shape[1], shape[0]) if transpose else shape
    if sj == 1 and nj > 1:
        read_along = "j"
    elif si == 1 and ni > 1:
        read_along = "i"
    else:  # neither dimension contiguous: along the nearer
        read_along = "j" if abs(sj) <= abs(si) else "i"
    vec = 1
    if read_along == "j" and sj == 1:
        want = 4
        if (si % want == 0 or ni == 1) and address % (want * es) == 0:
            vec = want
    elif read_along == "i" and si == 1:
        want = 16 // es
        if (sj % want == 0 or nj == 1) and address % 16 == 0:
            vec = want
    return QuantizeConfig(dtype, fp8, block, transpose, scale_given, read_along, vec)


@lru_cache(maxsize=256)
def plan(config: QuantizeConfig) -> QuantizePlan:
    """The plan of ``config`` (cached per configuration)."""
    mode = BLOCKS[config.block]
    scale_from = "block" if mode != "tensor" else "given" if config.scale_given else "amax"
    tile_rows = 128 if mode == "tile" else ROW_TILE_ROWS
    # pitch: 132 floats keeps rows 16-byte aligned for the float4 stores of loads along j (a quarter
    # warp's 8 lanes meet 32 distinct banks); 129 spreads the column stores of loads along i
    pitch = TILE_COLS + 4 if config.read_along == "j" else TILE_COLS + 1
    ptx, top = FP8[config.fp8]
    return QuantizePlan(config, mode, scale_from, tile_rows, TILE_COLS, pitch, THREADS, INPUTS[config.dtype], ptx,
                        top, amax_atomic=scale_from != "amax")


def geometry(p: QuantizePlan, shape: tuple[int, int], strides: tuple[int, int]) -> Geometry:
    """The launch of plan ``p`` on ``x`` of ``shape`` and ``strides``."""
    si, sj = (strides[1], strides[0]) if p.config.transpose else strides
    rows, cols = (shape[1], shape[0]) if p.config.transpose else shape
    return Geometry(rows, cols, si, sj, -(-rows // p.tile_rows), -(-cols // p.tile_cols))


def q_shape(shape: tuple[int, int], transpose: bool) -> tuple[int, int]:
    return (shape[1], shape[0]) if transpose else shape


def scale_shape(shape: tuple[int, int], block: tuple[int, int] | None, transpose: bool) -> tuple[int, ...]:
    """The scales' shape, in q's orientation as the fp8 matmul takes them: [rows, ceil(cols/128)] for
    1 x 128 blocks, [ceil(rows/128), ceil(cols/128)] for 128 x 128, [] for one scale."""
    rows, cols = q_shape(shape, transpose)
    if block is None:
        return ()
    return (-(-rows // block[0]), -(-cols // block[1]))
