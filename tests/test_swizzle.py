"""The swizzle model: its algebra, the documents' tables and formulas, and the seed's errors."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tmagen.enums import Swizzle
from tmagen.errors import ModelError
from tmagen.swizzle import PATTERNS, BoxLayout, chunk_table, pattern, smem_offsets

HOPPER = [Swizzle.NONE, Swizzle.B32, Swizzle.B64, Swizzle.B128]
SWIZZLED = [s for s in Swizzle if s is not Swizzle.NONE]

# The destination-layout tables of PTX ISA 5.5.7 "Swizzling Modes" (16-byte chunk indices per
# 128-byte line, one period, pattern start aligned). Figures, kept as data.
PTX_TABLES = {
    Swizzle.NONE: ["0 1 2 3 4 5 6 7"],
    Swizzle.B32: ["0 1 2 3 4 5 6 7", "1 0 3 2 5 4 7 6"],
    Swizzle.B64: ["0 1 2 3 4 5 6 7", "1 0 3 2 5 4 7 6", "2 3 0 1 6 7 4 5", "3 2 1 0 7 6 5 4"],
    Swizzle.B128: ["0 1 2 3 4 5 6 7", "1 0 3 2 5 4 7 6", "2 3 0 1 6 7 4 5", "3 2 1 0 7 6 5 4",
                   "4 5 6 7 0 1 2 3", "5 4 7 6 1 0 3 2", "6 7 4 5 2 3 0 1", "7 6 5 4 3 2 1 0"],
    Swizzle.B128_ATOM_32B: ["0 1 2 3 4 5 6 7", "2 3 0 1 6 7 4 5", "4 5 6 7 0 1 2 3", "6 7 4 5 2 3 0 1"],
    Swizzle.B128_ATOM_64B: ["0 1 2 3 4 5 6 7", "4 5 6 7 0 1 2 3"],
}


def cute_swizzle(b: int, m: int, s: int, x: int) -> int:
    """CuTe's Swizzle<B,M,S> for S >= 0, written independently of tmagen: ZZZ ^= YYY."""
    yyy = ((1 << b) - 1) << (m + s)
    return x ^ ((x & yyy) >> s)


@pytest.mark.parametrize("swz", list(Swizzle), ids=lambda s: s.spec_name)
def test_bijection_within_each_period_and_lines_kept(swz: Swizzle) -> None:
    pat = PATTERNS[swz]
    addr = np.arange(4 * pat.period, dtype=np.int64)
    out = pat.apply(addr)
    for start in range(0, 4 * pat.period, pat.period):
        block = out[start:start + pat.period]
        assert sorted(block.tolist()) == list(range(start, start + pat.period))
    assert np.array_equal(out >> 7, addr >> 7), "a swizzle never moves a byte to another 128-byte line"
    assert np.array_equal(pat.invert(out), addr)


@pytest.mark.parametrize("swz", list(Swizzle), ids=lambda s: s.spec_name)
def test_periodic(swz: Swizzle) -> None:
    pat = PATTERNS[swz]
    addr = np.arange(pat.period, dtype=np.int64)
    for k in (1, 2, 7, 1000):
        assert np.array_equal(pat.apply(addr + k * pat.period), pat.apply(addr) + k * pat.period)


@pytest.mark.parametrize("swz", [s for s in Swizzle if s is not Swizzle.B128_ATOM_32B_FLIP_8B],
                         ids=lambda s: s.spec_name)
def test_equals_cute_swizzle(swz: Swizzle) -> None:
    pat = PATTERNS[swz]
    assert pat.cute is not None
    b, m, s = pat.cute
    addr = np.arange(1 << 14, dtype=np.int64)
    assert np.array_equal(pat.apply(addr), [cute_swizzle(b, m, s, int(a)) for a in addr])


def test_canonical_cute_parameters() -> None:
    assert PATTERNS[Swizzle.B128].cute == (3, 4, 3)
    assert PATTERNS[Swizzle.B64].cute == (2, 4, 3)
    assert PATTERNS[Swizzle.B32].cute == (1, 4, 3)
    assert PATTERNS[Swizzle.B128_ATOM_32B].cute == (2, 5, 2)
    assert PATTERNS[Swizzle.B128_ATOM_32B_FLIP_8B].cute is None


@pytest.mark.parametrize("swz,lines", [(Swizzle.B128, 8), (Swizzle.B64, 4), (Swizzle.B32, 2)])
def test_equals_programming_guide_index_relation(swz: Swizzle, lines: int) -> None:
    """smem[y][x] <-> smem[y][((y + offset) % lines) ^ x], offset = (smem_ptr / 128) % lines."""
    pat = PATTERNS[swz]
    for offset in range(8):
        base = 1024 * 5 + 128 * offset
        for y in range(16):
            for x in range(8):
                physical = int(pat.apply(base + 128 * y + 16 * x)) - base - 128 * y
                assert physical // 16 == ((y + offset % lines) % lines) ^ x
                assert pat.base_offset(base) == offset % lines


@pytest.mark.parametrize("swz", list(PTX_TABLES), ids=lambda s: s.spec_name)
def test_pattern_tables_equal_ptx_isa(swz: Swizzle) -> None:
    expected = [[int(x) for x in row.split()] for row in PTX_TABLES[swz]]
    assert chunk_table(swz) == expected


SEED = Path(__file__).resolve().parents[2] / "shared" / "seeds" / "001_b7ddeca9b9b315ae.txt"


@pytest.mark.skipif(not SEED.exists(), reason="the seed documents (../shared/seeds) are not beside this checkout")
def test_pattern_tables_equal_seed_document() -> None:
    """Parse the PTX ISA tables out of the seed text itself and compare every row."""
    text = SEED.read_text()
    sections = {"32 byte swizzle": Swizzle.B32, "64 byte swizzle": Swizzle.B64,
                "128 byte swizzle mode:": Swizzle.B128, "32-byte atomicity sub-mode": Swizzle.B128_ATOM_32B,
                "64-byte atomicity sub-mode": Swizzle.B128_ATOM_64B}
    for heading, swz in sections.items():
        start = text.index(heading)
        rows = []
        for line in text[start:].splitlines()[1:]:
            if "Pattern repeats" in line:
                break
            cells = re.findall(r"\d", line) if re.match(r"\s*\|\s*\d", line) else []
            if cells:
                rows.append([int(c) for c in cells])
        assert rows == chunk_table(swz), heading


@pytest.mark.parametrize("swz", HOPPER, ids=lambda s: s.spec_name)
@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_box_offsets_are_a_placement(swz: Swizzle, data: st.DataObject) -> None:
    """Every element gets its own, aligned place inside the footprint, in its own row."""
    elem = data.draw(st.sampled_from([1, 2, 4, 8]))
    span = PATTERNS[swz].span or 256
    inner_chunks = data.draw(st.integers(1, min(span, 256 * elem) // 16))
    inner = inner_chunks * 16 // elem
    outer = data.draw(st.lists(st.integers(1, 6), min_size=0, max_size=3))
    base = 128 * data.draw(st.integers(0, 31))
    shape = (*outer, inner)
    layout = BoxLayout(shape, elem, PATTERNS[swz], base)
    off = layout.offsets()
    assert off.shape == shape
    flat = off.reshape(-1)
    assert len(set(flat.tolist())) == flat.size
    assert flat.min() >= 0 and flat.max() + elem <= layout.footprint
    assert np.all(flat % elem == 0)
    linear = (np.arange(layout.rows).repeat(inner) * layout.row_pitch
              + np.tile(np.arange(inner) * elem, layout.rows))
    assert np.array_equal((base + flat) >> 7, (base + linear) >> 7), "each element stays in its 128-byte line"
    for idx in [tuple(0 for _ in shape), tuple(n - 1 for n in shape)]:
        assert layout.element_at(int(off[idx])) == idx


def test_narrow_rows_take_the_full_span() -> None:
    """Measured: a 32-byte row under the 128B swizzle still advances 128 bytes per row."""
    off = smem_offsets([4, 16], 2, "128B")  # 16 bf16 = 32 bytes per row
    assert off[1, 0] == 128 + 16  # row 1 starts at 128, its chunk 0 goes to chunk 1
    assert off[2, 0] == 256 + 32
    assert BoxLayout((4, 16), 2, pattern("128B")).footprint == 4 * 128
    assert BoxLayout((4, 16), 2, pattern("none")).footprint == 4 * 32


def test_inverse_marks_padding() -> None:
    layout = BoxLayout((3, 24), 2, pattern("64B"), 128)  # 48-byte rows in 64-byte slots
    seen = {}
    for offset in range(layout.footprint):
        idx = layout.element_at(offset)
        if idx is not None:
            seen[idx] = offset
    assert len(seen) == 3 * 24
    assert all(int(layout.offsets()[idx]) == off for idx, off in seen.items())


def test_smem_offsets_accepts_names_and_integers() -> None:
    a = smem_offsets((8, 8), 16, "128B", 0)
    assert np.array_equal(a, smem_offsets([8, 8], 16, 3))
    assert np.array_equal(a, smem_offsets([8, 8], 16, Swizzle.B128))
    assert a.dtype == np.int64


@pytest.mark.parametrize("args,fragment", [
    (((4, 12), 2, "128B", 0), "= 24 bytes is not a multiple of 16"),
    (((4, 80), 2, "128B", 0), "exceeds the 128B swizzle span of 128 bytes (use box[-1] <= 64)"),
    (((4, 8), 2, "128B", 64), "base_address = 64 is not a multiple of 128"),
    (((4, 8), 3, "none", 0), "elem_bytes = 3"),
    (((4, 8), 2, "96B", 0), "'96B' is not a Swizzle"),
])
def test_model_errors_say_why(args: tuple, fragment: str) -> None:
    with pytest.raises(ModelError, match=re.escape(fragment)):
        smem_offsets(*args)


def test_seed_transpose_layout() -> None:
    """The Programming Guide's 8x8 int4 example: with 128B, column j of row i sits at chunk i ^ j,
    so the eight elements of any logical column fall in eight different bank groups."""
    off = smem_offsets((8, 8), 16, "128B")
    chunks = (off % 128) // 16
    assert np.array_equal(chunks, np.arange(8)[:, None] ^ np.arange(8)[None, :])
    for j in range(8):
        assert sorted(chunks[:, j].tolist()) == list(range(8))
    plain = smem_offsets((8, 8), 16, "none")
    assert len(set(((plain[:, 0] % 128) // 16).tolist())) == 1  # the 8-way conflict of the guide


def test_descriptor_layout_codes_follow_the_ptx_isa() -> None:
    wgmma = {s: PATTERNS[s].wgmma_layout_type for s in Swizzle}
    assert wgmma[Swizzle.NONE] == 0 and wgmma[Swizzle.B128] == 1 and wgmma[Swizzle.B64] == 2 and wgmma[Swizzle.B32] == 3
    assert wgmma[Swizzle.B128_ATOM_32B] is None
    tc = {s: PATTERNS[s].tcgen05_layout_type for s in Swizzle}
    order = (Swizzle.NONE, Swizzle.B128_ATOM_32B, Swizzle.B128, Swizzle.B64, Swizzle.B32)
    assert tuple(tc[s] for s in order) == (0, 1, 2, 4, 6)
    assert tc[Swizzle.B128_ATOM_64B] is None and tc[Swizzle.B128_ATOM_32B_FLIP_8B] is None


def test_alignment_and_periods() -> None:
    assert [PATTERNS[s].period for s in HOPPER] == [128, 256, 512, 1024]
    assert PATTERNS[Swizzle.B128_ATOM_32B].period == 512 and PATTERNS[Swizzle.B128_ATOM_64B].period == 256
    assert PATTERNS[Swizzle.B128_ATOM_32B].atomicity == 32 and PATTERNS[Swizzle.B128_ATOM_64B].atomicity == 64
    assert all(not PATTERNS[s].measured for s in SWIZZLED if s >= Swizzle.B128_ATOM_32B)


def test_flip_8b_swaps_halves_on_odd_lines_only() -> None:
    flip, atom = PATTERNS[Swizzle.B128_ATOM_32B_FLIP_8B], PATTERNS[Swizzle.B128_ATOM_32B]
    for a in range(0, 1024, 8):
        delta = int(flip.apply(a)) ^ int(atom.apply(a))
        assert delta == (8 if (a >> 7) & 1 else 0)


# --- the matmul note in the seeds (004) has three errors; tmagen must not carry them over
def seed_apply(offset: int, b: int = 3, m: int = 4, s: int = 3) -> int:
    """The note's Swizzle::apply, as written there."""
    bit_mbase = (offset >> m) & ((1 << b) - 1)
    bit_sshift = (offset >> (m + s)) & ((1 << b) - 1)
    return offset ^ ((bit_mbase ^ bit_sshift) << m)


def test_seed_note_apply_is_not_a_bijection_but_ours_is() -> None:
    seed = {seed_apply(a) for a in range(1024)}
    ours = {int(PATTERNS[Swizzle.B128].apply(a)) for a in range(1024)}
    assert len(seed) < 1024
    assert len(ours) == 1024


def test_seed_note_gmma_layout_code_is_wrong() -> None:
    seed_code_128b = 3  # "LAYOUT_TYPE_SWIZZLE_128B = 3" in the note
    assert PATTERNS[Swizzle.B128].wgmma_layout_type == 1 != seed_code_128b
    assert PATTERNS[Swizzle.B32].wgmma_layout_type == 3


def test_seed_note_bank_example_does_not_follow_from_its_formula() -> None:
    """The note says row 1, column 0 of a 128x64 bf16 tile reads bank 2 and row 2 bank 4; its own
    swizzle_offset and tmagen's model both put them in banks 4 and 8."""
    def note_swizzle_offset(row: int, col: int) -> int:
        byte_offset = (row * 64 + col) * 2
        m = (byte_offset >> 4) & 7
        s = (byte_offset >> 7) & 7
        return (byte_offset ^ ((m ^ s) << 4)) // 2

    off = smem_offsets((8, 64), 2, "128B")
    for row, claimed in ((1, 2), (2, 4)):
        ours = (int(off[row, 0]) // 4) % 32
        theirs = (note_swizzle_offset(row, 0) * 2 // 4) % 32
        assert ours == theirs == 4 * row
        assert ours != claimed
