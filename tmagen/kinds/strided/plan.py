"""The strided kernels' plan: how one launch of ``gather``, ``tile``, ``plane`` or ``narrow``
(templates/strided/) sees a view, decided once per layout by `tmagen.ops` and printed into the
kernel's one parameter.

These kernels address memory through pointers, not tensor maps, so they take every layout: rows or
strides that are not whole 16 bytes, pointers off 16 bytes, a view whose contiguous dimension is not
the innermost, elements of 16 bytes. They are not a spec kind (a spec describes tensor maps, and
these kernels have none); `tmagen.ops` reaches them where TMA cannot go (`tmagen/strided.py` compiles,
loads and launches them).

- ``gather``: ``dst[i] = src[i]`` over up to 5 dimensions; each thread takes one 16-byte vector of
  the output (one element of 16 bytes), loaded whole where the source holds it contiguously and
  aligned, in narrower words or element by element where not.
- ``tile``: the plane's move (below) for the moves that want every tile in flight at once (a few
  MiB and less, and rows of any bytes): one square tile per block (``TILE_SIDE`` elements a side,
  or ``TILE_SIDE_LARGE`` where those still number a tile per multiprocessor), no persistent walk,
  loads and stores in the widest words (16, 4 or the element's bytes) that the pointers and
  strides allow, on each side apart.
- ``plane``: the same where the output's innermost dimension (R) is not the source's (C), up to 3
  batch dimensions: tiles through shared memory, shaped by the plane. A tile is ``plane_units``
  units of ``P x P`` elements (at least 8 KiB), ``tile_cw`` units along C by the rest along R: 32
  along C where both extents allow, long and narrow where one is small (a plane of 8 one-byte
  channels moves 4 x 4096 elements per tile, not 8 x 32: `plane_tile_cw`). Elements of 1 and 2
  bytes are moved ``P`` = 4 or 2 to a 4-byte word (``packed``: a unit's rows read along C,
  transposed in registers by byte permutes, written along R): each unit row is loaded as one word
  where its address is whole 4 bytes and from the two words it straddles where not (rows of odd
  bytes, pointers off a word), and stored as one word or element by element alike, so that every
  layout moves words through shared memory and whole words where it can.
- ``narrow``: the plane's move where the source's rows are short (``NARROW_MAX_ROW_BYTES`` at most)
  and follow one another: a tile of whole rows is one contiguous span of the source, loaded as it
  lies in 4-byte words (coalesced whatever C is), then read across and written along the output's
  rows; small tiles (``NARROW_MIN_TILE_BYTES`` to ``NARROW_TILE_BYTES``), so that a small move
  still spreads over the multiprocessors. In words (``src_words``, `narrow_words_fit`: rows of whole
  words, each on a word): the span in 16-byte vectors into shared rows padded to an odd number of
  words, written in units of P x P elements transposed by byte permutes, whole 32-byte sectors of
  each output row; tiles of ``NARROW_WORDS_MIN_TILE_BYTES`` to ``NARROW_WORDS_TILE_BYTES``, for
  moves of any size (`narrow_words_pays`).

Shapes and strides are outermost first, strides in elements.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

SIZES = (1, 2, 4, 8, 16)  # element bytes the kernels move
VECTOR_BYTES = 16  # bytes of output one gather thread moves
GATHER_THREADS = 256
# Every strided kernel waits for the kernel before it in its stream (griddepcontrol.wait) before it
# touches memory, and is launched as a programmatic dependent launch (runtime.launch_dependent).
DEPENDENT_LAUNCH = True
PLANE_MIN_UNITS = 1024  # plane: units (P x P elements) per tile, at least
PLANE_TILE_BYTES = 8192  # and bytes per tile, at least
PLANE_THREADS = 256
PLANE_MAX_LOADS = 16  # loads a thread holds at once
PLANE_SIDE = 32  # units along C of a tile where both extents have that many
NARROW_C_TILES = 3  # a plane narrower along C than 3 x PLANE_SIDE units: tiles at most a third as wide
WORD_BYTES = 4  # packed planes move elements of 1 and 2 bytes in words of this size
# tile: elements along R and C, per element size (16-byte elements: plane), and the larger side a
# move takes where that still gives every multiprocessor a tile. Measured on an H200 (4-byte
# elements): 64 x 64 moved 8192 x 1001 in 20.7 us a launch against 32 x 32's 24.7, and 2048 x 2048
# in 11.7 against 13.7, but 64 x 64 (16 KiB) in 2.8 us against 2.4 and 512 x 512 in 3.4 against
# 3.0; other sizes' second sides were slower (16 x 16 for 8 bytes, 32 x 32 for 2).
TILE_SIDE = {1: 64, 2: 64, 4: 32, 8: 32}
TILE_SIDE_LARGE = {4: 64}
TILE_THREADS = 256
TILE_MIN_LOAD_BYTES = 2  # tile: the narrowest load (1-byte elements a byte at a time lose to the plane kernel)
TILE_BLOCKS_PER_SM = 4  # tile: blocks resident per multiprocessor the compiler keeps registers for
MAX_GRID = (1 << 31) - 1  # blocks of a one-dimensional grid
MAX_RANK = 5
U32_LIMIT = 1 << 31  # an index below this (and its offsets) runs the 32-bit variant
BLOCKS_PER_SM = 16  # grid-stride kernels: at most this many blocks per multiprocessor (the default)
NARROW_THREADS = 256
NARROW_TILE_BYTES = 2048  # narrow: bytes of the source per tile, at most
NARROW_MIN_TILE_BYTES = 512  # and at least; between, what gives every multiprocessor two tiles
NARROW_MAX_ROW_BYTES = 128  # narrow: the longest source rows it takes (C x E)
NARROW_WORDS_TILE_BYTES = 8192  # narrow in words (rows of whole words, each on a word): tiles up to this
NARROW_WORDS_MIN_TILE_BYTES = 2048  # and at least this (16385 x 8 bfloat16: 2.66 us a launch in 1 KiB, 2.31 in 2)
NARROW_WORDS_MAX_ROW_BYTES = 128  # and rows up to this (longer rows were slower than TMA's and the plane's)


@dataclass(frozen=True)
class StridedCall:
    """One launch of a strided kernel: its symbol, grid and block, and the layout parameter (extents,
    strides outermost first padded to 5, the element or tile count, the plane's tile counts)."""

    kernel: str  # "gather", "plane", "tile" or "narrow"
    elem_bytes: int
    extent: tuple[int, ...]
    src: tuple[int, ...]
    dst: tuple[int, ...]
    count: int
    tiles_c: int = 0
    tiles_r: int = 0
    tile_cw: int = 0  # plane: units per tile along C (a power of 2); plane_units / tile_cw along R
    pitch: int = 0  # plane: unit rows between the rows of a shared plane
    packed: bool = False  # plane: P elements of 1 or 2 bytes per 4-byte word
    src_linear: bool = False  # gather: src is contiguous in the order of extent
    # plane: every unit row of the source starts on a whole word (none is tested); narrow: the source's
    # rows are whole words, each on a word (the kernel in words, `narrow_words_fit`)
    src_words: bool = False
    dst_linear: bool = False
    side: int = 0  # tile: elements along each side of a tile
    load_bytes: int = 0  # tile: bytes per load (along the source's rows) and per store (the output's)
    store_bytes: int = 0
    wide: bool = False  # an index needs 64 bits
    tile_rows: int = 0  # narrow: source rows per tile
    grid: int = 1
    block: int = GATHER_THREADS

    @property
    def symbol(self) -> str:
        width = "u64" if self.wide else "u32"
        if self.kernel == "tile":
            return (f"tmagen_strided_tile_e{self.elem_bytes}_t{self.side}_l{self.load_bytes}_s{self.store_bytes}_"
                    f"{width}")
        if self.kernel == "narrow":
            return f"tmagen_strided_narrow_e{self.elem_bytes}{'_words' if self.src_words else ''}_{width}"
        words = "_w4" if self.packed else ""
        return f"tmagen_strided_{self.kernel}_e{self.elem_bytes}{words}_{width}"

    @property
    def unit(self) -> int:
        """Plane: elements along each side of a unit (P)."""
        return WORD_BYTES // self.elem_bytes if self.packed else 1

    @property
    def tile(self) -> tuple[int, int]:
        """Plane, tile and narrow: a tile's elements along R and along C."""
        if self.kernel == "tile":
            return self.side, self.side
        if self.kernel == "narrow":
            return self.tile_rows, self.extent[4]
        return self.unit * plane_units(self.elem_bytes, self.packed) // self.tile_cw, self.unit * self.tile_cw


def _pad(values: Sequence[int], fill: int) -> tuple[int, ...]:
    if len(values) > MAX_RANK:
        raise ValueError(f"{len(values)} dimensions: the strided kernels take at most {MAX_RANK}")
    return tuple([fill] * (MAX_RANK - len(values)) + [int(v) for v in values])


def _span(shape: Sequence[int], strides: Sequence[int]) -> int:
    """The largest element offset a view reaches (for the index width)."""
    return sum((n - 1) * abs(s) for n, s in zip(shape, strides))


def _contiguous(shape: Sequence[int], strides: Sequence[int]) -> bool:
    expect = 1
    for n, s in zip(reversed(shape), reversed(strides)):
        if n != 1 and s != expect:
            return False
        expect *= n
    return True


def gather(shape: Sequence[int], src: Sequence[int], dst: Sequence[int], elem_bytes: int,
           multiprocessors: int, blocks_per_sm: int = BLOCKS_PER_SM) -> StridedCall:
    """``dst = src`` elementwise over ``shape`` (at most 5 dimensions, none empty)."""
    count = math.prod(shape)
    per = max(1, VECTOR_BYTES // elem_bytes)
    vectors = -(-count // per)
    wide = max(count + per, _span(shape, src), _span(shape, dst)) >= U32_LIMIT
    grid = max(1, min(-(-vectors // GATHER_THREADS), multiprocessors * blocks_per_sm))
    return StridedCall("gather", elem_bytes, _pad(shape, 1), _pad(src, 0), _pad(dst, 0), count,
                       dst_linear=_contiguous(shape, dst), src_linear=_contiguous(shape, src), wide=wide, grid=grid,
                       block=GATHER_THREADS)


def _pow2_at_least(n: int) -> int:
    return 1 << max(0, n - 1).bit_length()


def plane_units(elem_bytes: int, packed: bool) -> int:
    """Units per tile: at least PLANE_MIN_UNITS, and enough for PLANE_TILE_BYTES (a tile of 1024
    one-byte elements kept too few bytes in flight: 0.3 TB/s), but at most PLANE_MAX_LOADS a thread
    (each thread holds its tile's loads in registers at once: 32 spilled)."""
    unit = WORD_BYTES // elem_bytes if packed else 1
    wanted = max(PLANE_MIN_UNITS, PLANE_TILE_BYTES // (unit * unit * elem_bytes))
    return min(wanted, PLANE_MAX_LOADS * PLANE_THREADS // unit)


def _bank_words(elem_bytes: int, packed: bool) -> int:
    """Shared-memory elements per 4-byte bank word (of a unit's rows): 1 for words of 4 bytes or more."""
    return max(1, WORD_BYTES // (elem_bytes * (WORD_BYTES // elem_bytes if packed else 1)))


def plane_pitch(tile_cw: int, units: int, per_bank: int) -> int:
    """The shared planes' row pitch (in unit rows): a warp of the load phase, 32 neighbouring units
    along C (or ``tile_cw`` units of ``32 / tile_cw`` rows), writes ``pitch`` rows apart, which
    the padding makes an odd number of bank words (or spreads over 32 banks). Not quite for tiles of
    2 or 4 rows of words under 4 bytes (planes of at most 4 rows): two of a warp's rows meet in a bank."""
    pad = per_bank * (PLANE_SIDE // tile_cw if tile_cw < PLANE_SIDE else 1)
    return units // tile_cw + pad


def plane_words(units: int, per_bank: int) -> int:
    """Unit rows per shared plane: the widest pitch of any tile shape (tile_cw at most units / 2),
    and 8 words between planes so that one warp's planes start in different banks."""
    return units + units // 2 * per_bank + 8


def plane_tile_cw(rows: int, cols: int, unit: int, units: int) -> int:
    """Units per tile along C: 32 where both sides have many units; where R has few (and C many), the
    rest of the tile along C; where C has fewer than NARROW_C_TILES x 32, the power of 2 at most a
    NARROW_C_TILES-th of them (at least 1) and the rest of the tile along R. Tiles that narrow and
    long were the fastest of every width on an H100 (2026-11-27, R of 2000 to 2,000,000 against C of
    3 to 96, 1-, 2- and 4-byte elements): 40000 x 48 bfloat16 took 4.9 us a launch in tiles 8 units
    wide, 7.9 in 32; 1,000,000 x 12 took 23.1 in 2 units, 39.8 in 8 (its units to a power of 2, the
    rule before); 2,000,000 x 3 float32 21.7 in 1, 26.5 in 4."""
    units_r, units_c = -(-rows // unit), -(-cols // unit)
    if units_r < units // PLANE_SIDE and units_c >= PLANE_SIDE:
        return units // max(2, _pow2_at_least(units_r))
    if units_c < NARROW_C_TILES * PLANE_SIDE:
        return 1 << max(0, (units_c // NARROW_C_TILES).bit_length() - 1)
    return PLANE_SIDE


def plane(batch: Sequence[int], rows: int, cols: int, src: Sequence[int], dst: Sequence[int], elem_bytes: int,
          multiprocessors: int, blocks_per_sm: int = BLOCKS_PER_SM, src_align: int = 0,
          tile_cw: int | None = None) -> StridedCall:
    """``dst = src`` over ``[*batch, rows, cols]`` (batch of at most 3 dimensions) where the output's
    innermost dimension is ``rows`` (its stride ``dst[-2]`` is 1) and the source's is ``cols``
    (``src[-1]`` is 1): tiled through shared memory. ``src`` and ``dst`` are strides of that shape;
    the source's pointer is ``src_align`` bytes past a 16-byte boundary. ``tile_cw``: units per
    tile along C (a power of 2, at most half the tile's units); default `plane_tile_cw`'s."""
    if src[-1] != 1 or dst[-2] != 1:
        raise ValueError(f"a plane reads along its source's last dimension and writes along its rows: strides "
                         f"{tuple(src)} and {tuple(dst)}")
    shape = [*batch, rows, cols]
    # each unit row's load and store tests its own address: whole words where it can, where not a load
    # shifts the two words it straddles and a store goes element by element (on an H200, 4099 x 4101
    # uint8: 35 us a launch one element at a time, 19 in words); the loads test
    # nothing where the pointer and every stride but C's (1) are whole words (a uint8 NHWC -> NCHW
    # permute of 64 x 512 x 512 x 8: 106 us with the test, 92 without)
    packed = elem_bytes < WORD_BYTES
    src_words = packed and src_align % WORD_BYTES == 0 and all(s * elem_bytes % WORD_BYTES == 0 for s in src[:-1])
    unit = WORD_BYTES // elem_bytes if packed else 1
    units = plane_units(elem_bytes, packed)
    if tile_cw is None:
        tile_cw = plane_tile_cw(rows, cols, unit, units)
    elif tile_cw & (tile_cw - 1) or not 1 <= tile_cw <= units // 2:
        raise ValueError(f"a plane tile {tile_cw} units wide: the kernel takes powers of 2 up to {units // 2}")
    tile_r, tile_c = unit * units // tile_cw, unit * tile_cw
    tiles_c, tiles_r = -(-cols // tile_c), -(-rows // tile_r)
    count = tiles_c * tiles_r * math.prod(batch)
    wide = max(count, _span(shape, src), _span(shape, dst), rows + tile_r, cols + tile_c) >= U32_LIMIT
    grid = max(1, min(count, multiprocessors * blocks_per_sm))
    return StridedCall("plane", elem_bytes, _pad(shape, 1), _pad(src, 0), _pad(dst, 0), count, tiles_c, tiles_r,
                       tile_cw, plane_pitch(tile_cw, units, _bank_words(elem_bytes, packed)), packed,
                       src_words=src_words, wide=wide,
                       grid=grid, block=PLANE_THREADS)


def narrow_fits(rows: int, cols: int, src: Sequence[int], elem_bytes: int) -> bool:
    """Whether `narrow` can take a plane: source rows of at most NARROW_MAX_ROW_BYTES that follow one
    another (its stride of R is C)."""
    return cols * elem_bytes <= NARROW_MAX_ROW_BYTES and src[-1] == 1 and src[-2] == cols


def narrow_words_fit(cols: int, src: Sequence[int], elem_bytes: int, src_align: int) -> bool:
    """Whether the narrow kernel in words takes a plane: short contiguous source rows (at most
    NARROW_WORDS_MAX_ROW_BYTES) of whole 4-byte words, each starting on a word (the pointer and
    every stride of the source whole words)."""
    return (cols * elem_bytes <= NARROW_WORDS_MAX_ROW_BYTES and cols * elem_bytes % WORD_BYTES == 0
            and src[-1] == 1 and src[-2] == cols and src_align % WORD_BYTES == 0
            and all(s * elem_bytes % WORD_BYTES == 0 for s in src[:-2]))


NARROW_WORDS_OVER_TMA_BYTES = 48  # rows shorter than this go to the narrow kernel in words before TMA


def narrow_words_pays(plane: StridedCall) -> bool:
    """Whether the narrow kernel in words beats the ``plane`` it would replace (rows it takes,
    `narrow_words_fit`): where the plane packs elements of 1 or 2 bytes into words and its tiles cover
    less than half of a row along C (each tile then reads a word of every row it crosses, the rest of
    the row's sectors read again by the tiles beside it).
    Measured on an H100 (2026-11-27, lab.narrow_routes, tests/data/hw_h100/narrow_routes.json):
    300000 x 20 uint8 8.5 us a launch in words against the plane's 13.6, 300000 x 20 bfloat16 13.0
    against 14.5; the plane won where its tiles cover half a row (an NHWC -> NCHW permute of
    64 x 512 x 512 x 8 uint8: 98 against 113) or all of it (2000000 x 4 uint8: 9.3 against 9.3),
    and elements of 4 bytes were even (1000000 x 12 float32 41.2 against 40.0, 2000000 x 3 21.7
    against 21.8)."""
    units_c = -(-plane.extent[-1] // plane.unit)
    return plane.packed and 2 * plane.tile_cw < units_c


def narrow_words_over_tma(plane: StridedCall) -> bool:
    """Whether a plane TMA could take goes to the narrow kernel in words instead: where words pay over
    the plane kernel (`narrow_words_pays`) and the rows are shorter than NARROW_WORDS_OVER_TMA_BYTES,
    where TMA's tiles as wide as the rows (`tmagen.ops.fitted_tile`) are a few rows of a few sectors.
    On an H100 (2026-11-27, tests/data/hw_h100/narrow_routes.json), an NHWC -> NCHW permute of
    16 x 128 x 128 x 16 uint8 (rows of 16 bytes) took 5.7 us a launch in words, 7.1 through TMA in
    64-row tiles (Triton 5.8); rows of 32 bytes were even (8 x 256 x 256 x 16 bfloat16: 14.7 against
    14.6; in the tuned box 26.6); rows of 48 bytes went faster through TMA (500000 x 48 uint8: 21.2
    against 27.1)."""
    return narrow_words_pays(plane) and plane.extent[-1] * plane.elem_bytes < NARROW_WORDS_OVER_TMA_BYTES


def narrow_words_pitch(cols: int, elem_bytes: int) -> int:
    """Words between the rows of the narrow kernel's shared span (in words): a row's words, made odd,
    so that the 32 / P rows a warp reads at once fall in different banks."""
    return cols * elem_bytes // WORD_BYTES | 1


def _narrow_tile_rows(tile_bytes: int, row_bytes: int) -> int:
    """Source rows per narrow tile: whole multiples of 4 (every tile's output rows start alike on
    words), at least 4."""
    return max(4, tile_bytes // row_bytes // 4 * 4)


def narrow_words_span() -> int:
    """4-byte words of the narrow kernel's shared span in words: its largest tile, rows padded."""
    return max(_narrow_tile_rows(NARROW_WORDS_TILE_BYTES, 4 * cw) * (cw | 1)
               for cw in range(1, NARROW_WORDS_MAX_ROW_BYTES // WORD_BYTES + 1))


def narrow_bytes_span() -> int:
    """4-byte words of the shared span of the narrow kernel in bytes (its first form; `narrow_words_span`
    is the form in words'): its largest tile (at least 4 of the longest rows), and the word before its
    first byte."""
    return (max(NARROW_TILE_BYTES, 4 * NARROW_MAX_ROW_BYTES) + 8) // 4


def narrow(batch: Sequence[int], rows: int, cols: int, src: Sequence[int], dst: Sequence[int], elem_bytes: int,
           multiprocessors: int, blocks_per_sm: int = BLOCKS_PER_SM, tile_bytes: int | None = None,
           src_align: int = 0, words: bool = False) -> StridedCall:
    """`plane`'s move over ``[*batch, rows, cols]`` where the source's rows are short and contiguous:
    tiles of whole rows, ``tile_bytes`` of the source at most (default: enough tiles for two a
    multiprocessor, within the kernel's limits; a multiple of 4 rows, so that every tile's output
    rows start alike on words). ``words``: the kernel in words (rows of whole words, each on a word,
    `narrow_words_fit`: up to NARROW_WORDS_MAX_ROW_BYTES a row, tiles of NARROW_WORDS_MIN_TILE_BYTES to
    NARROW_WORDS_TILE_BYTES), else the one in bytes (`narrow_fits`: up to NARROW_MAX_ROW_BYTES, tiles
    of NARROW_MIN_TILE_BYTES to NARROW_TILE_BYTES). The source's pointer is ``src_align`` bytes past
    a 16-byte boundary."""
    fit = narrow_words_fit(cols, src, elem_bytes, src_align)
    max_row, min_tile, max_tile = ((NARROW_WORDS_MAX_ROW_BYTES, NARROW_WORDS_MIN_TILE_BYTES, NARROW_WORDS_TILE_BYTES)
                                   if words else (NARROW_MAX_ROW_BYTES, NARROW_MIN_TILE_BYTES, NARROW_TILE_BYTES))
    if not (fit if words else narrow_fits(rows, cols, src, elem_bytes)) or dst[-2] != 1:
        whole = "of whole 4-byte words, each on a word, " if words else ""
        raise ValueError(f"the narrow kernel takes rows {whole}of at most {max_row} bytes one after the other, "
                         f"written along the output's rows: {cols} x {elem_bytes} bytes, strides {tuple(src)} "
                         f"and {tuple(dst)}, the source {src_align} bytes past 16")
    shape = [*batch, rows, cols]
    if tile_bytes is None:
        nbytes = math.prod(batch) * rows * cols * elem_bytes
        tile_bytes = max(min_tile, min(max_tile, nbytes // (2 * multiprocessors)))
    if not min_tile <= tile_bytes <= max_tile:  # the kernel's shared span holds no more
        raise ValueError(f"narrow tiles of {tile_bytes} bytes: the kernel {'in words ' if words else ''}takes "
                         f"{min_tile} to {max_tile}")
    tile_rows = _narrow_tile_rows(tile_bytes, cols * elem_bytes)
    tiles_r = -(-rows // tile_rows)
    count = tiles_r * math.prod(batch)
    wide = max(count, _span(shape, src), _span(shape, dst), rows + tile_rows) >= U32_LIMIT
    return StridedCall("narrow", elem_bytes, _pad(shape, 1), _pad(src, 0), _pad(dst, 0), count, 1, tiles_r,
                       pitch=narrow_words_pitch(cols, elem_bytes) if words else 0, src_words=words,
                       wide=wide, tile_rows=tile_rows, grid=max(1, min(count, multiprocessors * blocks_per_sm)),
                       block=NARROW_THREADS)


def plane_kernels() -> list[dict[str, int]]:
    """What the template instantiates per plane kernel: element bytes, unit (P), units per tile and
    unit rows per shared plane."""
    out = []
    for e in SIZES:
        for packed in (False, True) if e < WORD_BYTES else (False,):
            units = plane_units(e, packed)
            out.append({"e": e, "unit": WORD_BYTES // e if packed else 1, "units": units,
                        "plane_words": plane_words(units, _bank_words(e, packed))})
    return out


def tile_words(elem_bytes: int) -> tuple[int, ...]:
    """The word sizes a tile kernel loads or stores elements of ``elem_bytes`` in, widest first: 16
    bytes, 4 (for elements of 1 and 2), and the element itself."""
    return tuple(w for w in (VECTOR_BYTES, WORD_BYTES) if w > elem_bytes) + (elem_bytes,)


def widest_word(elem_bytes: int, align: int, strides: Sequence[int]) -> int:
    """The widest of `tile_words` that every row's address is a multiple of: the pointer ``align``
    bytes past 16, and the rows ``strides`` (elements) apart."""
    return next(w for w in tile_words(elem_bytes) if align % w == 0 and all(s * elem_bytes % w == 0 for s in strides))


def tile(batch: Sequence[int], rows: int, cols: int, src: Sequence[int], dst: Sequence[int], elem_bytes: int,
         src_align: int = 0, dst_align: int = 0, multiprocessors: int = 132) -> StridedCall:
    """`plane`'s move over ``[*batch, rows, cols]`` one tile per block: the output's innermost
    dimension ``rows`` (``dst[-2]`` is 1), the source's ``cols`` (``src[-1]`` is 1), the pointers
    ``src_align`` and ``dst_align`` bytes past a 16-byte boundary; in tiles of TILE_SIDE_LARGE
    where those number at least ``multiprocessors``, else of TILE_SIDE."""
    if elem_bytes not in TILE_SIDE:
        raise ValueError(f"no tile kernel moves elements of {elem_bytes} bytes (the plane kernel does)")
    if src[-1] != 1 or dst[-2] != 1:
        raise ValueError(f"a tile reads along its source's last dimension and writes along its rows: strides "
                         f"{tuple(src)} and {tuple(dst)}")
    shape = [*batch, rows, cols]
    side = TILE_SIDE[elem_bytes]
    large = TILE_SIDE_LARGE.get(elem_bytes, side)
    if -(-cols // large) * -(-rows // large) * math.prod(batch) >= multiprocessors:
        side = large
    tiles_c, tiles_r = -(-cols // side), -(-rows // side)
    count = tiles_c * tiles_r * math.prod(batch)
    load = widest_word(elem_bytes, src_align, src[:-1])
    store = widest_word(elem_bytes, dst_align, [*dst[:-2], dst[-1]])
    wide = max(count, _span(shape, src), _span(shape, dst), rows + side, cols + side) >= U32_LIMIT
    return StridedCall("tile", elem_bytes, _pad(shape, 1), _pad(src, 0), _pad(dst, 0), count, tiles_c, tiles_r,
                       side=side, load_bytes=load, store_bytes=store, wide=wide, grid=max(1, min(count, MAX_GRID)),
                       block=TILE_THREADS)


def tile_fits(call: StridedCall) -> bool:
    """Whether the tile kernel moves ``call``'s plane as fast as the plane kernel would, as measured
    on an H200: planes at least one tile wide on both sides (a plane of 8 columns filled an eighth
    of each 64 x 64 tile: 16385 x 8 bfloat16, 4.3 us a launch against the plane kernel's 3.6),
    loads of at least TILE_MIN_LOAD_BYTES (one byte at a time, 4099 x 4101 uint8 took 40 us, the
    plane kernel's packed words 24: no kernel loads so). (Elements of 16 bytes have no tile kernel:
    512 x 512 complex128 took 5.9 us in tiles of 16 x 16, 5.7 in the plane kernel.)"""
    return min(call.extent[3], call.extent[4]) >= call.side and call.load_bytes >= TILE_MIN_LOAD_BYTES


def tile_shared_offset(elem_bytes: int, load_bytes: int, side: int, c: Any, r: Any) -> Any:
    """The byte of element ``r`` of row ``c`` in the tile kernel's shared tile (its ``at``; ints or
    numpy arrays): rows of ``side`` elements, whose 16-byte chunk j is stored at j XOR (c / NL mod
    chunks per row), NL the elements of one load."""
    pitch = side * elem_bytes
    chunk = ((r * elem_bytes) >> 4) ^ ((c // (load_bytes // elem_bytes)) & (pitch // 16 - 1))
    return c * pitch + (chunk << 4) + ((r * elem_bytes) & 15)


def tile_kernels() -> list[dict[str, int]]:
    """What the template instantiates per tile kernel: element bytes, load and store words, side
    (loads of TILE_MIN_LOAD_BYTES and more: `tile_fits` sends no other to a tile kernel)."""
    return [{"e": e, "vl": vl, "vs": vs, "side": side} for e in TILE_SIDE
            for side in sorted({TILE_SIDE[e], TILE_SIDE_LARGE.get(e, TILE_SIDE[e])})
            for vl in tile_words(e) if vl >= TILE_MIN_LOAD_BYTES for vs in tile_words(e)]
