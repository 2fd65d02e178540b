"""Reference model of where TMA puts each byte of a box in shared memory.

Every tensor-map swizzle is an XOR of address bits, CuTe's ``Swizzle<B, M, S>`` on
*absolute* shared-memory byte addresses:

    address bit   9 8 7 | 6 5 4 | 3 2 1 0
                  y y y   z z z   - - - -      128B:           Swizzle<3,4,3>  zzz ^= yyy
                    y y   z z                  64B:            Swizzle<2,4,3>
                      y       z                32B:            Swizzle<1,4,3>
                    y y   z z -                128B atom 32B:  Swizzle<2,5,2>  (32-byte units)
                      y   z - -                128B atom 64B:  Swizzle<1,6,1>  (64-byte units)
                      y         f              128B atom 32B flip 8B: atom 32B, and bit 3 ^= bit 7

    apply(a) = a ^ ((a & (((1 << B) - 1) << (M + S))) >> S)

Bits 7 and up (the 128-byte line) never change, so each line keeps its bytes and the
pattern repeats every ``1 << (B + M + S)`` bytes. Because the function reads the absolute
address, a buffer that does not start on a repeat boundary sees the pattern from the
middle: the "base offset" of the PTX ISA, ``(address / 128) % (period / 128)``.

Worked example, 128B, line 1 of a 1024-aligned buffer: address 128 + 16*x lands at
128 + 16*(x ^ 1), the seeds' ``smem[y][((y + offset) % 8) ^ x]`` with y = 1, offset = 0.

How a box is laid out before the XOR (measured on an H200, every mode Hopper runs, inner
widths 16 B to the span, all eight 128-byte base offsets, 1/2/4/8-byte elements, 2-D and
3-D boxes: bit-exact): the box is a stack of rows of ``box[-1] * elem_bytes`` bytes;
without swizzle the rows are packed, with a swizzle each row starts ``span`` bytes after
the previous one even when it is narrower (the rest of the span is left untouched).

The 128B atom modes cannot run on Hopper (the driver refuses them there); they are modelled
from the PTX ISA tables (section 5.5.7) and marked ``measured=False``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import overload

import numpy as np

from tmagen import limits
from tmagen.enums import Swizzle
from tmagen.errors import ModelError

LINE_BYTES = limits.SMEM_LINE_BYTES  # a shared-memory line: 32 banks of 4 bytes
CHUNK_BYTES = limits.CHUNK_BYTES  # swizzling moves whole 16-byte chunks (8-byte halves with FLIP_8B)
TMA_SMEM_ALIGN = limits.TMA_SMEM_ALIGN_BYTES  # a TMA shared-memory address off a 128-byte boundary faults


@dataclass(frozen=True)
class Pattern:
    """One swizzle mode as ``Swizzle<bits, base, shift>`` plus what follows from it."""

    swizzle: Swizzle
    bits: int  # B: log2 of the number of distinct XOR masks
    base: int  # M: log2 of the bytes kept together (the atomicity)
    shift: int  # S: distance from the source bits (the line) to the target bits
    span: int  # row width in bytes: the widest inner box, and the row pitch of a narrower one
    flip_8b: bool = False
    measured: bool = True  # False: cannot run on sm_90, modelled from the PTX ISA tables

    @property
    def period(self) -> int:
        """Bytes after which the pattern repeats; a buffer on this boundary has base offset 0."""
        return 1 << (self.bits + self.base + self.shift) if self.bits else LINE_BYTES

    @property
    def atomicity(self) -> int:
        return 1 << self.base

    @overload
    def apply(self, address: int) -> int: ...

    @overload
    def apply(self, address: np.ndarray) -> np.ndarray: ...

    def apply(self, address: np.ndarray | int) -> np.ndarray | int:
        """Physical byte address of the byte whose unswizzled absolute address is ``address``."""
        mask = ((1 << self.bits) - 1) << (self.base + self.shift)
        out = address ^ ((address & mask) >> self.shift)
        if self.flip_8b:
            out = out ^ (((address >> 7) & 1) << 3)
        return out

    # Every mode keeps the line bits, which are also the XOR's inputs: applying it twice is
    # the identity, so the inverse is the function itself.
    invert = apply

    def base_offset(self, address: int) -> int:
        """The PTX ISA's swizzle base offset of a buffer starting at ``address``."""
        return (address // LINE_BYTES) % (self.period // LINE_BYTES)

    def row_pitch(self, inner_bytes: int) -> int:
        return max(inner_bytes, self.span) if self.span else inner_bytes

    @property
    def cute(self) -> tuple[int, int, int] | None:
        """CuTe's ``Swizzle<B, M, S>`` on byte addresses; None where CuTe has none (FLIP_8B)."""
        return None if self.flip_8b else (self.bits, self.base, self.shift)

    @property
    def wgmma_layout_type(self) -> int | None:
        """Bits 62-63 of a wgmma matrix descriptor (PTX ISA 9.7.15.5.1.2.2); None: no such layout."""
        return {Swizzle.NONE: 0, Swizzle.B128: 1, Swizzle.B64: 2, Swizzle.B32: 3}.get(self.swizzle)

    @property
    def tcgen05_layout_type(self) -> int | None:
        """Bits 61-63 of a tcgen05 shared-memory descriptor (PTX ISA 9.7.16.4.1); None: no such layout."""
        return {Swizzle.NONE: 0, Swizzle.B128_ATOM_32B: 1, Swizzle.B128: 2,
                Swizzle.B64: 4, Swizzle.B32: 6}.get(self.swizzle)


PATTERNS: dict[Swizzle, Pattern] = {
    p.swizzle: p
    for p in (
        Pattern(Swizzle.NONE, 0, 4, 3, span=0),
        Pattern(Swizzle.B32, 1, 4, 3, span=32),
        Pattern(Swizzle.B64, 2, 4, 3, span=64),
        Pattern(Swizzle.B128, 3, 4, 3, span=128),
        Pattern(Swizzle.B128_ATOM_32B, 2, 5, 2, span=128, measured=False),
        Pattern(Swizzle.B128_ATOM_32B_FLIP_8B, 2, 5, 2, span=128, flip_8b=True, measured=False),
        Pattern(Swizzle.B128_ATOM_64B, 1, 6, 1, span=128, measured=False),
    )
}


def pattern(swizzle: Swizzle | str | int) -> Pattern:
    """The pattern of a swizzle given as a `Swizzle`, a name ("128B", "none", ...) or its integer."""
    try:
        return PATTERNS[Swizzle.parse(swizzle)]
    except ValueError as exc:
        raise ModelError(str(exc)) from None


@dataclass(frozen=True)
class BoxLayout:
    """A box of ``shape`` (outermost first) of ``elem_bytes`` elements, as TMA lays it down."""

    shape: tuple[int, ...]
    elem_bytes: int
    pattern: Pattern
    base_address: int = 0

    def __post_init__(self) -> None:
        if not self.shape or any(int(n) < 1 for n in self.shape):
            raise ModelError(f"box shape {list(self.shape)} must have at least one dimension, each >= 1")
        if self.elem_bytes not in (1, 2, 4, 8, 16):
            raise ModelError(f"elem_bytes = {self.elem_bytes}: use 1, 2, 4, 8 or 16")
        inner = self.inner_bytes
        if inner % CHUNK_BYTES:
            raise ModelError(
                f"box[-1] * elem_bytes = {inner} bytes is not a multiple of 16: TMA moves 16-byte chunks"
                f" (use box[-1] a multiple of {CHUNK_BYTES // math.gcd(CHUNK_BYTES, self.elem_bytes)})")
        if self.pattern.span and inner > self.pattern.span:
            raise ModelError(
                f"box[-1] * elem_bytes = {inner} bytes exceeds the {self.pattern.swizzle.spec_name} swizzle"
                f" span of {self.pattern.span} bytes (use box[-1] <= {self.pattern.span // self.elem_bytes})")
        if self.base_address < 0 or self.base_address % TMA_SMEM_ALIGN:
            raise ModelError(
                f"base_address = {self.base_address} is not a multiple of {TMA_SMEM_ALIGN}: a TMA copy"
                " to or from such a shared-memory address faults (measured on sm_90)")

    @property
    def inner_bytes(self) -> int:
        return self.shape[-1] * self.elem_bytes

    @property
    def rows(self) -> int:
        return math.prod(self.shape[:-1])

    @property
    def row_pitch(self) -> int:
        return self.pattern.row_pitch(self.inner_bytes)

    @property
    def footprint(self) -> int:
        """Bytes of shared memory from the box's start to the end of its last row."""
        return self.rows * self.row_pitch

    @property
    def data_bytes(self) -> int:
        """Bytes TMA writes (the mbarrier transaction count of one load)."""
        return self.rows * self.inner_bytes

    def offsets(self) -> np.ndarray:
        """Byte offset from the box's start of every element, in an array of the box's shape."""
        rows = np.arange(self.rows, dtype=np.int64)[:, None] * self.row_pitch
        cols = np.arange(self.shape[-1], dtype=np.int64)[None, :] * self.elem_bytes
        absolute = self.base_address + rows + cols
        return (self.pattern.apply(absolute) - self.base_address).reshape(self.shape)

    def element_at(self, offset: int) -> tuple[int, ...] | None:
        """The box index whose element starts at byte ``offset``; None for padding or mid-element."""
        if not 0 <= offset < self.footprint:
            return None
        logical = int(self.pattern.invert(self.base_address + offset)) - self.base_address
        row, col_byte = divmod(logical, self.row_pitch)
        if col_byte >= self.inner_bytes or col_byte % self.elem_bytes:
            return None
        outer = np.unravel_index(row, self.shape[:-1]) if len(self.shape) > 1 else ()
        return (*(int(i) for i in outer), col_byte // self.elem_bytes)

    def place(self, box: np.ndarray, fill: int = 0) -> np.ndarray:
        """The bytes of shared memory (``footprint`` long) after TMA loads ``box``; gaps hold ``fill``."""
        data = np.ascontiguousarray(box)
        if tuple(data.shape) != self.shape or data.itemsize != self.elem_bytes:
            raise ModelError(f"box array {data.shape}/{data.itemsize}B does not match {self.shape}/{self.elem_bytes}B")
        out = np.full(self.footprint, fill, dtype=np.uint8)
        starts = self.offsets().reshape(-1)
        src = data.reshape(-1).view(np.uint8).reshape(-1, self.elem_bytes)
        for k in range(self.elem_bytes):
            # FLIP_8B moves 8-byte halves, so bytes of one element stay together for elem_bytes <= 8
            out[starts + k] = src[:, k]
        return out


def smem_offsets(box_shape: Sequence[int], elem_bytes: int, swizzle: Swizzle | str | int,
                 base_address: int = 0) -> np.ndarray:
    """Byte offset, relative to ``base_address``, where TMA puts each element of a box.

    ``box_shape`` is outermost first; ``swizzle`` is a name ("none", "32B", "64B", "128B",
    "128B_atom_32B", ...) or a ``CUtensorMapSwizzle`` integer; ``base_address`` is the absolute
    shared-memory address the copy targets (a multiple of 128). Returns an int64 array of
    ``box_shape``.
    """
    shape = tuple(int(n) for n in box_shape)
    return BoxLayout(shape, int(elem_bytes), pattern(swizzle), int(base_address)).offsets()


def chunk_table(swizzle: Swizzle | str | int, base_offset: int = 0) -> list[list[int]]:
    """The PTX ISA's pattern table: for each 128-byte line of one period, the logical 16-byte
    chunk stored at each of the line's eight physical chunk positions."""
    pat = pattern(swizzle)
    lines = pat.period // LINE_BYTES
    table = []
    for y in range(lines):
        line_addr = (base_offset + y) * LINE_BYTES
        row = [0] * (LINE_BYTES // CHUNK_BYTES)
        for x in range(LINE_BYTES // CHUNK_BYTES):
            physical = int(pat.apply(line_addr + x * CHUNK_BYTES)) - line_addr
            row[physical // CHUNK_BYTES] = x
        table.append(row)
    return table
