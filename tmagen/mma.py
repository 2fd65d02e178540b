"""Tensor-core operands in shared memory: the wgmma (sm_90a) and tcgen05 (sm_100a) matrix descriptors.

A descriptor is 64 bits that tell the tensor core where the 8-row x 16-byte "core matrices" of an
operand lie (PTX ISA 9.7.15.5.1 for wgmma, 9.7.16.4.1 for tcgen05):

    bit  63 62 61 | 60..53 | 52 | 51 50 49 | 48 47 46 | 45 ........ 32 | 29 ........ 16 | 13 ......... 0
         layout   |   0    | lm |  base    | version  | SBO >> 4       | LBO >> 4       | start >> 4
    wgmma:   bits 62-63 layout: 0 none, 1 = 128B, 2 = 64B, 3 = 32B; bits 46-48 and 52 zero
    tcgen05: bits 61-63 layout: 0 none, 1 = 128B with 32-byte atoms, 2 = 128B, 4 = 64B, 6 = 32B;
             bits 46-48 = 0b001; bit 52 (lm) selects an absolute LBO (0 here)

    start  the shared-memory address of the operand's first core matrix *before* the swizzle
           (the tensor core applies the swizzle to the address it forms, as TMA does)
    LBO    "leading" byte offset, SBO "stride" byte offset: which is which depends on the major-ness

An operand tile is what TMA loaded for it: ``mn_boxes`` boxes side by side along M (operand A) or
N (operand B), and as many rows of such boxes along K as the tile needs, each box ``stride``
bytes after the previous one (MN innermost; ``stride`` keeps every box at the same phase of the
swizzle pattern). A box is ``rows x inner`` elements, the inner dimension contiguous:

    K-major  (A [M,K], B [N,K]):  box rows run along M/N, the inner dimension along K
      swizzled: an atom is 8 rows x span bytes, rows span apart:  SBO = 8 * span (the next 8 rows);
                the instruction's K (32 bytes of 16-bit data) never leaves one row's span, so LBO is
                unused; K steps inside the span add their byte offset to the start address
      none:     a core matrix is 8 rows of 16 bytes, packed: the box is 16 bytes wide,
                SBO = 128 (the next 8 rows), LBO = the next box along K (mn_boxes * stride)
    MN-major (A [K,M], B [K,N]; 16-bit types, through the instruction's transpose bits):
      box rows run along K, the inner dimension along M/N
      swizzled: an atom is span bytes of M/N x 8 K-rows: the box is one span wide,
                SBO = 8 * span (the next 8 K-rows), LBO = the next box along M/N (stride)
      none:     a core matrix is 16 bytes of M/N x 8 K-rows, packed: the box is 16 bytes wide,
                LBO = 128 (the next 8 K-rows), SBO = the next box along M/N (stride)

The matrix base offset (bits 49-51). The PTX ISA asks for ``(start >> 7) % (pattern lines)`` in a
tile that does not start on its pattern's repeat boundary. The silicon disagrees: on an H200
(tests/gpu/test_wgmma_descriptors.py, 256 combinations of swizzle, A and B major-ness, 16-bit
type and the eight 128-byte offsets) a base offset of 0 gave the exact product in every case,
because the tensor core, like TMA, swizzles absolute shared-memory addresses; the PTX formula gave
wrong products in 122 of the 136 cases whose offset makes it non-zero (it held only for
K-major operands at half a period). tmagen writes 0.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from tmagen.enums import Swizzle
from tmagen.limits import SMEM_PATTERN_BYTES
from tmagen.swizzle import BoxLayout

Major = Literal["k", "mn"]
Operand = Literal["a", "b"]

WGMMA_M = 64  # rows of A (and of the accumulator) per wgmma instruction
WGMMA_K_BYTES = 32  # K per instruction: 16 elements of 16-bit data, 32 of 8-bit, 8 of tf32
CORE_ROWS = 8
CORE_ROW_BYTES = 16
_FIELD_MASK = (1 << 14) - 1

# Measured (see the module's notes): the tensor core swizzles absolute addresses, as TMA does, and
# wants a base offset of 0 wherever the tile starts; the PTX ISA's (start >> 7) % lines is wrong.
BASE_OFFSET_FROM_ADDRESS = False


def encode_field(n_bytes: int) -> int:
    """A 14-bit address or offset field: bytes >> 4 (the low 4 bits must be zero)."""
    return (n_bytes & 0x3FFFF) >> 4


@dataclass(frozen=True)
class DescriptorFields:
    start_address: int  # bytes
    lbo: int  # bytes
    sbo: int  # bytes
    base_offset: int
    layout_type: int

    def wgmma(self) -> int:
        return (encode_field(self.start_address) | encode_field(self.lbo) << 16 | encode_field(self.sbo) << 32
                | (self.base_offset & 7) << 49 | (self.layout_type & 3) << 62)

    def tcgen05(self) -> int:
        return (encode_field(self.start_address) | encode_field(self.lbo) << 16 | encode_field(self.sbo) << 32
                | 1 << 46 | (self.base_offset & 7) << 49 | (self.layout_type & 7) << 61)


def decode_wgmma(desc: int) -> DescriptorFields:
    return DescriptorFields((desc & _FIELD_MASK) << 4, (desc >> 16 & _FIELD_MASK) << 4,
                            (desc >> 32 & _FIELD_MASK) << 4, desc >> 49 & 7, desc >> 62 & 3)


@dataclass(frozen=True)
class OperandTile:
    """The boxes of one tensor-core operand in shared memory (see the module's layout notes)."""

    layout: BoxLayout  # one box, at its smem_offset past a 1024-byte boundary (layout.base_address)
    major: Major
    mn_boxes: int  # boxes side by side along M/N
    stride: int  # bytes from one box to the next

    @property
    def elem_bytes(self) -> int:
        return self.layout.elem_bytes

    @property
    def swizzled(self) -> bool:
        return self.layout.pattern.swizzle is not Swizzle.NONE

    @property
    def span(self) -> int:
        return self.layout.pattern.span

    @property
    def mn_per_box(self) -> int:
        return self.layout.rows if self.major == "k" else self.layout.shape[-1]

    @property
    def k_per_box(self) -> int:
        return self.layout.shape[-1] if self.major == "k" else self.layout.rows

    @property
    def mn(self) -> int:
        return self.mn_per_box * self.mn_boxes

    @property
    def lbo(self) -> int:
        if self.major == "k":
            return CORE_ROW_BYTES if self.swizzled else self.mn_boxes * self.stride
        return self.stride if self.swizzled else CORE_ROWS * CORE_ROW_BYTES

    @property
    def sbo(self) -> int:
        if self.major == "k":
            return CORE_ROWS * self.layout.row_pitch
        return CORE_ROWS * self.layout.row_pitch if self.swizzled else self.stride

    @property
    def wgmma_layout_type(self) -> int:
        code = self.layout.pattern.wgmma_layout_type
        if code is None:
            raise ValueError(f"{self.layout.pattern.swizzle.spec_name} has no wgmma layout")
        return code

    @property
    def tcgen05_layout_type(self) -> int:
        code = self.layout.pattern.tcgen05_layout_type
        if code is None:
            raise ValueError(f"{self.layout.pattern.swizzle.spec_name} has no tcgen05 layout")
        return code

    def offset(self, mn: int, k: int) -> int:
        """Bytes from the tile's first box to element (mn, k), before the swizzle."""
        box = (k // self.k_per_box) * self.mn_boxes + mn // self.mn_per_box
        mn_in, k_in = mn % self.mn_per_box, k % self.k_per_box
        row, col = (mn_in, k_in) if self.major == "k" else (k_in, mn_in)
        return box * self.stride + row * self.layout.row_pitch + col * self.elem_bytes

    def base_offset(self, address: int) -> int:
        return self.ptx_base_offset(address) if BASE_OFFSET_FROM_ADDRESS else 0

    def ptx_base_offset(self, address: int) -> int:
        """What the PTX ISA's table asks for (the H200 disagrees: see the module's notes)."""
        return self.layout.pattern.base_offset(address)

    def fields(self, tile_address: int, mn: int = 0, k: int = 0) -> DescriptorFields:
        """The descriptor fields of the operand starting at element (mn, k) of the tile whose first
        box is at shared address ``tile_address`` (``layout.base_address`` past a 1024 boundary)."""
        start = tile_address + self.offset(mn, k)
        return DescriptorFields(start, self.lbo, self.sbo, self.base_offset(start), self.wgmma_layout_type)

    def wgmma_descriptor(self, tile_address: int, mn: int = 0, k: int = 0) -> int:
        return self.fields(tile_address, mn, k).wgmma()

    def tcgen05_descriptor(self, tile_address: int, mn: int = 0, k: int = 0) -> int:
        f = self.fields(tile_address, mn, k)
        return DescriptorFields(f.start_address, f.lbo, f.sbo, f.base_offset, self.tcgen05_layout_type).tcgen05()


def explain_tile(tile: OperandTile, operand: str) -> list[str]:
    """The descriptor of the tile's first operand, field by field, for `tmagen explain`."""
    address = SMEM_PATTERN_BYTES * 16 + tile.layout.base_address  # an example shared address with the box's phase
    f = tile.fields(address)
    layout_name = tile.layout.pattern.swizzle.spec_name
    k_step = WGMMA_K_BYTES // tile.elem_bytes
    k_advance = tile.offset(0, k_step) - tile.offset(0, 0)
    lines = [
        f"  as wgmma operand {operand.upper()}, {tile.major.upper()}-major: {tile.mn_boxes} box(es) along "
        f"{'M' if operand == 'a' else 'N'}, {tile.stride} bytes apart; {tile.mn} x {tile.k_per_box} per K-row of boxes",
        f"    start address  (address + offset(mn, k)) >> 4   e.g. {address:#x} -> {f.start_address >> 4:#x}",
        f"    LBO            {f.lbo} bytes -> {f.lbo >> 4}" + ("   (unused: K stays inside one span)"
                                                              if tile.major == "k" and tile.swizzled else ""),
        f"    SBO            {f.sbo} bytes -> {f.sbo >> 4}",
        f"    base offset    {f.base_offset}   (the box starts {tile.layout.base_address} bytes into its pattern; "
        "measured: "
        f"0 is right wherever it starts, the PTX ISA's formula would give {tile.ptx_base_offset(address)})",
        f"    layout type    {f.layout_type} ({layout_name}); tcgen05: {tile.layout.pattern.tcgen05_layout_type}",
        f"    K advance      +{k_advance} bytes per {k_step}-element step ({k_advance >> 4} in the start field)",
        f"    descriptor     {tile.wgmma_descriptor(address):#018x} (wgmma), "
        f"{tile.tcgen05_descriptor(address):#018x} (tcgen05)",
    ]
    return lines
