"""tmagen explain (text, SVG, PNG), the bank-conflict predictor, and the generated docs."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from tmagen import banks, docs
from tmagen.cli import main
from tmagen.explain import PALETTE, chunk_cells, explain_plan, layout_png, layout_svg
from tmagen.plan import load as load_plan
from tmagen.plan import resolve
from tmagen.render import render
from tmagen.swizzle import smem_offsets

from conftest import REPO

SVG = "{http://www.w3.org/2000/svg}"


# ----------------------------------------------------------------------------- the predictor
def test_lds128_fully_conflicting_and_perfect() -> None:
    same_bank_group = [128 * lane for lane in range(32)]  # every lane in banks 0-3
    assert banks.predict(same_bank_group, 16) == banks.Prediction(32, 4)
    spread = [16 * lane for lane in range(32)]  # consecutive chunks
    assert banks.predict(spread, 16) == banks.Prediction(4, 4)


def test_4_and_8_byte_accesses() -> None:
    assert banks.predict([128 * lane for lane in range(32)], 4).conflicts == 31  # 32-way
    assert banks.predict([4 * lane for lane in range(32)], 4).conflicts == 0
    assert banks.predict([0] * 32, 4) == banks.Prediction(1, 1)  # one word: a broadcast
    assert banks.predict([8 * lane for lane in range(32)], 8) == banks.Prediction(2, 2)
    assert banks.predict([256 * lane for lane in range(32)], 8).conflicts == 30  # 16-way in each phase
    assert banks.predict([None] * 8 + [16 * k for k in range(8)] + [None] * 16, 16) == banks.Prediction(1, 1)


def test_predictor_refuses_misaligned_or_odd_widths() -> None:
    with pytest.raises(ValueError, match="not aligned"):
        banks.predict([4], 16)
    with pytest.raises(ValueError, match="1, 2, 4, 8 or 16"):
        banks.predict([0], 12)


def test_seed_transpose_column_read() -> None:
    """The Programming Guide: reading a column of the 8x8 int4 matrix is an 8-way conflict without
    swizzle and conflict-free with the 128B swizzle."""
    assert banks.predict(banks.column_access((8, 8), 16, "128B"), 16) == banks.Prediction(1, 1)
    assert banks.predict(banks.column_access((8, 8), 16, "none"), 16) == banks.Prediction(8, 1)


# ----------------------------------------------------------------------------- text
def test_explain_text_passes_what_the_host_code_passes() -> None:
    spec = load_plan(REPO / "specs" / "inspect_bf16_offset384.json").spec
    text = explain_plan(resolve(spec))
    host = render(resolve(spec), "specs/inspect_bf16_offset384.json")["inspect_bf16_offset384.cu"]
    box = re.search(r"const cuuint32_t box\[2\] = \{(.*?)\}", host).group(1)
    assert f"boxDim = {{{box}}}" in text
    assert "globalDim = {200, 64}" in text and "globalStrides = {400}" in text
    assert "CU_TENSOR_MAP_DATA_TYPE_BFLOAT16" in text and "CU_TENSOR_MAP_SWIZZLE_128B" in text
    assert "16 rows of 80 bytes every 128 bytes = 2048 bytes" in text
    assert "starts 384 bytes past a 1024-byte boundary" in text and "base offset 3 of the 1024-byte" in text
    # the first line of the box sits 384 bytes in: line 3 of the pattern, chunks xor 3
    # line 0 of the box is line 3 of the pattern: logical chunk c sits at position c ^ 3, and the
    # 80-byte row leaves positions 4 to 6 untouched
    first_row = text.split("b28-31\n")[1].splitlines()[0].split()
    assert first_row == ["0", "|", "0.3", "0.2", "0.1", "0.0", "-", "-", "-", "0.4"]


def test_explain_chunk_cells_follow_the_model() -> None:
    cells = chunk_cells((6, 16), 4, "64B", 256)
    offsets = smem_offsets((6, 16), 4, "64B", 256)
    assert len(cells) == 6 * 4
    for c in cells:
        absolute = 256 + int(offsets[c.row, 4 * c.chunk])
        assert (c.line, c.bank_group) == ((absolute - 256) // 128, (absolute % 128) // 16)


def test_explain_cli(capsys) -> None:
    assert main(["explain", str(REPO / "specs" / "transpose_int4_8x8.json")]) == 0
    out = capsys.readouterr().out
    assert "map src" in out and "map dst (built by tmagen: the transposed output)" in out
    assert main(["explain", "--svg", "x.svg"]) == 2
    assert "give the spec" in capsys.readouterr().err


# ----------------------------------------------------------------------------- drawings
def _svg(box, elem, swizzle, base=0, column=0) -> ET.Element:
    return ET.fromstring(layout_svg(box, elem, swizzle, base, column))


@pytest.mark.parametrize("box,elem,swizzle,base", [((8, 8), 16, "128B", 0), ((16, 40), 2, "128B", 384),
                                                   ((4, 16), 2, "32B", 128), ((5, 64), 1, "64B", 0)])
def test_svg_cells_labels_and_colours_come_from_the_model(box, elem, swizzle, base) -> None:
    root = _svg(box, elem, swizzle, base)
    rects = [r for r in root.iter(f"{SVG}rect") if r.get("class", "").startswith("cell")]
    chunks = box[-1] * elem // 16
    assert len(rects) == 3 * box[0] * chunks  # the layout and two access panels
    offsets = smem_offsets(box, elem, swizzle, base)
    per = 16 // elem
    layout = rects[: box[0] * chunks]
    for r in layout:
        row, chunk = int(r.get("data-row")), int(r.get("data-chunk"))
        group = ((base + int(offsets[row, chunk * per])) % 128) // 16
        assert int(r.get("data-bank-group")) == group
        assert r.get("fill") == PALETTE[group]
    labels = [t.text for t in root.iter(f"{SVG}text") if t.get("class") == "label"]
    assert labels[: box[0] * chunks] == [f"{r},{c}" for r in range(box[0]) for c in range(chunks)]


def test_svg_of_the_seed_example_marks_the_conflicts_of_no_swizzle() -> None:
    root = _svg((8, 8), 16, "128B")
    rects = [r for r in root.iter(f"{SVG}rect") if r.get("class", "").startswith("cell")]
    swizzled, plain = rects[64:128], rects[128:]
    assert sum("conflict" in r.get("class") for r in swizzled) == 0
    assert sum("conflict" in r.get("class") for r in plain) == 8
    captions = [t.text for t in root.iter(f"{SVG}text") if t.get("class") == "caption"]
    assert captions[1] == "1 wavefront for 1 ideal: 0 conflicts"
    assert captions[2] == "8 wavefronts for 1 ideal: 7 conflicts"
    # in the swizzled panel, the eight reads of column 0 use eight bank groups
    assert sorted(int(r.get("data-bank-group")) for r in swizzled if "read" in r.get("class")) == list(range(8))


def test_png_of_the_seed_example(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    path = tmp_path / "seed.png"
    layout_png(str(path), (8, 8), 16, "128B")
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 20000


def test_cli_writes_svg_and_png(tmp_path: Path, capsys) -> None:
    pytest.importorskip("matplotlib")
    svg, png = tmp_path / "a.svg", tmp_path / "a.png"
    assert main(["explain", str(REPO / "specs" / "transpose_int4_8x8.json"), "--svg", str(svg), "--png", str(png),
                 "--column", "3"]) == 0
    ET.parse(svg)
    assert png.stat().st_size > 0
    assert main(["explain", str(REPO / "specs" / "transpose_int4_8x8.json"), "--svg", str(svg), "--column", "8"]) == 2
    assert "use 0 to 7" in capsys.readouterr().err


# ----------------------------------------------------------------------------- docs
def test_generated_docs_are_current() -> None:
    assert docs.stale(REPO / "docs") == [], "run `tmagen docs`"


def test_rules_doc_lists_every_rule_and_marks_the_measured_ones() -> None:
    text = docs.rules_reference()
    from tmagen.rules import RULES

    for r in RULES.values():
        assert f"| `{r.id}` |" in text
    assert "*(measured)*" in text.split("`box-bytes-driver-limit`")[1].split("\n")[0]


def test_every_example_spec_has_a_line_in_the_docs() -> None:
    readme = (REPO / "README.md").read_text()
    for path in (REPO / "specs").glob("*.json"):
        line = next((row for row in readme.splitlines() if f"`{path.name}`" in row), None)
        assert line is not None, f"{path.name} is not described in README.md"
        assert len(line) > len(path.name) + 20


def test_docs_check_cli(tmp_path: Path, capsys) -> None:
    assert main(["docs", "--out", str(tmp_path)]) == 0
    assert main(["docs", "--check", "--out", str(tmp_path)]) == 0
    (tmp_path / "rules.md").write_text("old")
    assert main(["docs", "--check", "--out", str(tmp_path)]) == 1
    assert "rules.md: stale" in capsys.readouterr().out


# ----------------------------------------------------------------------------- legible at any box size
def test_svg_of_a_tall_box_elides_the_repeating_rows() -> None:
    """The README's specs/nhwc_64b_fp16.json: 100 rows of 4 chunks. Two periods of the 64B pattern
    (8 rows each), an ellipsis row that says so, and the last row; the physical lines beside it."""
    root = _svg((100, 32), 2, "64B")
    layout = [r for r in root.iter(f"{SVG}rect") if r.get("class", "").startswith("cell")][: 17 * 4]
    assert sorted({int(r.get("data-row")) for r in layout}) == [*range(16), 99]
    elided = [t.text for t in root.iter(f"{SVG}text") if t.get("class") == "elided"]
    assert elided[0] == "rows 16 to 98: the pattern repeats every 8 rows"
    slots = [r for r in root.iter(f"{SVG}rect") if r.get("class") == "slot"]
    lines = sorted({int(r.get("data-line")) for r in slots})
    assert lines == [*range(8), 49] and len(slots) == 9 * 8  # 50 lines of 128 bytes, 8 slots each
    offsets = smem_offsets((100, 32), 2, "64B")
    for r in slots:  # each slot holds the chunk the model puts at that line and bank group
        row, chunk = int(r.get("data-row")), int(r.get("data-chunk"))
        assert int(offsets[row, chunk * 8]) // 128 == int(r.get("data-line"))
    assert root.get("height") and int(float(root.get("height"))) < 1000


def test_png_is_sized_from_its_content(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    from matplotlib.image import imread

    tall, short = tmp_path / "tall.png", tmp_path / "short.png"
    layout_png(str(tall), (100, 32), 2, "64B")
    layout_png(str(short), (8, 8), 16, "128B")
    h_tall, w_tall = imread(str(tall)).shape[:2]
    h_short, w_short = imread(str(short)).shape[:2]
    # 18 drawn rows (16, the ellipsis, the last) against 8, each row 0.34 inches at 110 dpi: about 37 pixels,
    # never a few
    assert (h_tall - h_short) / (18 - 8) == pytest.approx(0.34 * 110, rel=0.05)
    assert w_tall < w_short  # 4 chunks a row against 8: width follows the columns too
