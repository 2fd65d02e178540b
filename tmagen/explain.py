"""Text views of the swizzle model: the PTX ISA's pattern tables, rebuilt from `tmagen.swizzle`."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING
from xml.sax.saxutils import escape

from tmagen.enums import Swizzle
from tmagen.errors import ModelError
from tmagen.swizzle import CHUNK_BYTES, LINE_BYTES, BoxLayout, chunk_table, pattern

if TYPE_CHECKING:
    from tmagen.plan import Plan


def pattern_table(swizzle: Swizzle | str | int, base_offset: int = 0) -> str:
    """For each 128-byte line of one period, the logical 16-byte chunk at each physical position,
    with the bank group (four banks) each position covers, as the seeds' tables show it."""
    pat = pattern(swizzle)
    lines_per_period = pat.period // LINE_BYTES
    if not 0 <= base_offset < max(lines_per_period, 1):
        raise ModelError(f"base offset = {base_offset}, but the {pat.swizzle.spec_name} pattern has "
                         f"{lines_per_period} lines: use 0 to {lines_per_period - 1}")
    name = pat.swizzle.spec_name
    head = (f"swizzle {name}: Swizzle<{pat.bits},{pat.base},{pat.shift}>" if pat.cute else f"swizzle {name}")
    head += f", repeats every {pat.period} bytes"
    if base_offset:
        head += f", base offset {base_offset} (buffer {base_offset * LINE_BYTES} bytes past the pattern start)"
    if not pat.measured:
        head += "  [sm_100a only: modelled from the PTX ISA tables, not run on Hopper]"
    if pat.flip_8b:
        head += "  [odd lines also swap the 8-byte halves of each chunk]"
    lines = [head, "line | banks " + " ".join(f"{4 * p:>2}-{4 * p + 3:<2}" for p in range(8))]
    for y, row in enumerate(chunk_table(swizzle, base_offset)):
        lines.append((f"{y:>4} |       " + " ".join(f"{x:^5}" for x in row)).rstrip())
    return "\n".join(lines)


def all_pattern_tables() -> str:
    return "\n\n".join(pattern_table(s) for s in Swizzle)


# ----------------------------------------------------------------------------- a spec, in words
def explain_plan(plan: Plan) -> str:
    """The tensor maps of a plan as the host code will build them, and where their boxes land."""
    from tmagen.mma import explain_tile

    spec = plan.spec
    out = [f"spec {spec.name}: {plan.description} for {spec.target}"]
    for v in plan.maps:
        m = v.spec
        t = m.tensor
        strides = t.driver_strides()
        out += [
            "",
            f"map {v.name}{f' (built by tmagen: {m.derived})' if m.derived else ''}: "
            f"{t.dtype} {list(t.shape)}, box {list(t.box)} (outermost first)",
            "  cuTensorMapEncodeTiled(&map,",
            f"      {v.dtype_enum}, {v.rank}, ptr,",
            f"      globalDim = {{{', '.join(map(str, t.shape[::-1]))}}},",
            f"      globalStrides = {{{', '.join(map(str, strides))}}},  // bytes, dimensions 1..{v.rank - 1}",
            f"      boxDim = {{{', '.join(map(str, v.box_driver))}}},",
            f"      elementStrides = {{{', '.join(map(str, v.element_strides_driver))}}},",
            f"      {v.interleave}, {v.swizzle},",
            f"      {v.l2_promotion}, {v.oob_fill});",
            f"  shared memory: {v.rows} rows of {v.row_bytes} bytes every {v.row_pitch} bytes = {v.footprint} bytes"
            f" (one load brings {v.tx_bytes}); the box starts {v.smem_offset} bytes past a 1024-byte boundary",
            f"  base offset {v.smem_offset // 128 % max(v.period // 128, 1)} of the {v.period}-byte pattern; "
            f"TMA needs 128-byte alignment, the pattern repeats every {v.period} bytes",
            f"  device code: {spec.name}::{v.name}_box::at(box, {', '.join(f'i{d}' for d in range(v.rank))}) gives "
            f"{v.cpp_type}&, raw_at() the same bits as {v.raw_type}&",
            "  16-byte chunks per 128-byte line (logical row.chunk at each bank group):",
            *("  " + line
              for line in box_chunk_table(t.box, t.dt.nbytes, t.swizzle.driver, v.smem_offset).splitlines()),
        ]
        if v.mma is not None:
            out += explain_tile(v.mma, v.mma_operand)
    for k in plan.kernels:
        out.append(f"\nkernel {k.symbol}: {k.threads} threads, {k.smem_bytes} bytes of dynamic shared memory")
    if not plan.has_kernel:
        out.append(f"\nno kernel: {spec.name}.cuh has the TMA primitives and each map's accessors "
                   "(at() gives the element's CUDA type) for kernels of your own; each box needs its "
                   "footprint of shared memory, smem_offset bytes past a 1024-byte boundary")
    return "\n".join(out)


@dataclass(frozen=True)
class ChunkCell:
    """One 16-byte chunk of a box: its logical place and where TMA puts it."""

    row: int  # logical row (outer box dimensions flattened)
    chunk: int  # logical 16-byte chunk within the row
    line: int  # 128-byte shared-memory line, counted from the box start
    bank_group: int  # physical chunk position in its line: banks 4g .. 4g+3


def chunk_cells(box: Sequence[int], elem_bytes: int, swizzle: Swizzle | str | int, base: int = 0) -> list[ChunkCell]:
    layout = BoxLayout(tuple(box), elem_bytes, pattern(swizzle), base)
    offsets = layout.offsets().reshape(layout.rows, -1)
    per = CHUNK_BYTES // elem_bytes if elem_bytes <= CHUNK_BYTES else 1
    cells = []
    for r in range(layout.rows):
        for c in range(layout.inner_bytes // CHUNK_BYTES):
            absolute = base + int(offsets[r, c * per])
            cells.append(ChunkCell(r, c, (absolute - base) // LINE_BYTES, (absolute % LINE_BYTES) // CHUNK_BYTES))
    return cells


def box_chunk_table(box: Sequence[int], elem_bytes: int, swizzle: Swizzle | str | int, base: int = 0,
                    max_lines: int = 16) -> str:
    cells = chunk_cells(box, elem_bytes, swizzle, base)
    lines: dict[int, dict[int, str]] = {}
    for cell in cells:
        lines.setdefault(cell.line, {})[cell.bank_group] = f"{cell.row}.{cell.chunk}"
    shown = sorted(lines)[:max_lines]
    text = ["line | " + " ".join(f"b{4 * g:<2}-{4 * g + 3:<2}" for g in range(8))]
    for line in shown:
        text.append(f"{line:>4} | " + " ".join(f"{lines[line].get(g, '-'):^7}" for g in range(8)).rstrip())
    if len(lines) > len(shown):
        text.append(f"  ... {len(lines) - len(shown)} more lines")
    return "\n".join(text)


# ----------------------------------------------------------------------------- drawings
PALETTE = ("#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7")
CELL, GAP = 46, 26


@dataclass(frozen=True)
class AccessPanel:
    """A warp reading one logical chunk column, lane i on row i: how many wavefronts it takes."""

    title: str
    cells: list[ChunkCell]
    column: int
    conflicting: set[tuple[int, int]]  # (row, chunk) of accesses that share a bank with another
    wavefronts: int
    ideal: int


def access_panel(box: Sequence[int], elem_bytes: int, swizzle: Swizzle | str | int, base: int,
                 column: int) -> AccessPanel:
    from tmagen import banks

    cells = chunk_cells(box, elem_bytes, swizzle, base)
    rows = len({c.row for c in cells})
    col = [c for c in cells if c.chunk == column]
    lanes = [base + c.line * LINE_BYTES + c.bank_group * CHUNK_BYTES for c in col[: banks.WARP]]
    prediction = banks.predict(lanes + [None] * (banks.WARP - len(lanes)), CHUNK_BYTES)
    conflicting = set()
    for phase in range(0, len(col), banks.lanes_per_phase(CHUNK_BYTES)):
        group = col[phase:phase + banks.lanes_per_phase(CHUNK_BYTES)]
        for c in group:
            if sum(1 for d in group if d.bank_group == c.bank_group) > 1:
                conflicting.add((c.row, c.chunk))
    name = pattern(swizzle).swizzle.spec_name
    return AccessPanel(f"swizzle {name}: column {column}, {min(rows, banks.WARP)} lanes",
                       cells, column, conflicting, prediction.wavefronts, prediction.ideal)


@dataclass(frozen=True)
class _Grid:
    """One drawn panel, for both renderers: rows of cells, repeating rows elided."""

    title: str
    caption: str
    col_labels: list[str]
    row_labels: list[str | None]  # None: the elided rows (the pattern repeats)
    elided: str  # what the elided row says
    # (row slot, column, text, colour, opacity, conflict, css class, data attributes)
    cells: list[tuple[int, int, str, str, float, bool, str, dict[str, int]]]


MAX_FULL_ROWS = 16  # boxes with more rows show two periods of the pattern, an ellipsis, and the last row


def _period(patterns: list[tuple[int, ...]]) -> int:
    """The smallest p with patterns[r] == patterns[r + p] for every r: the swizzle's repeat, in rows."""
    n = len(patterns)
    return next((p for p in range(1, n) if all(patterns[r] == patterns[r + p] for r in range(n - p))), n)


def _shown_rows(n: int, period: int) -> list[int | None]:
    if n <= MAX_FULL_ROWS:
        return list(range(n))
    keep = max(2 * period, 4) if 2 * period <= MAX_FULL_ROWS else min(period, MAX_FULL_ROWS)
    return [*range(keep), None, n - 1]


def _logical_grid(title: str, caption: str, cells: list[ChunkCell], panel: AccessPanel | None) -> _Grid:
    rows = max(c.row for c in cells) + 1
    chunks = max(c.chunk for c in cells) + 1
    by_row: dict[int, list[ChunkCell]] = {}
    for c in cells:
        by_row.setdefault(c.row, []).append(c)
    period = _period([tuple(c.bank_group for c in by_row[r]) for r in range(rows)])
    shown = _shown_rows(rows, period)
    out = []
    for slot, r in enumerate(shown):
        for c in by_row.get(r, []) if r is not None else []:
            on_column = panel is not None and c.chunk == panel.column
            conflict = panel is not None and (c.row, c.chunk) in panel.conflicting
            klass = "cell" + (" read" if on_column else "") + (" conflict" if conflict else "")
            out.append((slot, c.chunk, f"{c.row},{c.chunk}", PALETTE[c.bank_group],
                        1.0 if panel is None or on_column else 0.25, conflict, klass,
                        {"row": c.row, "chunk": c.chunk, "bank-group": c.bank_group}))
    labels = [None if r is None else str(r) for r in shown]
    hidden = [r for r in range(rows) if r not in shown]
    elided = (f"rows {hidden[0]} to {hidden[-1]}: the pattern repeats every {_count(period, 'row')}"
              if hidden else "")
    return _Grid(title, caption, [str(k) for k in range(chunks)], labels, elided, out)


def _lines_grid(cells: list[ChunkCell], base: int) -> _Grid:
    """Shared memory as the banks see it: each 128-byte line, its eight 16-byte slots (banks 4g to
    4g+3), and the box chunk (row,chunk) TMA put in each, coloured by the chunk's column."""
    lines = max(c.line for c in cells) + 1
    at = {(c.line, c.bank_group): c for c in cells}
    period = _period([tuple(at[(ln, g)].chunk if (ln, g) in at else -1 for g in range(8)) for ln in range(lines)])
    shown = _shown_rows(lines, period)
    out = []
    for slot, ln in enumerate(shown):
        for g in range(8):
            c = at.get((ln, g)) if ln is not None else None
            if c is not None and ln is not None:
                out.append((slot, g, f"{c.row},{c.chunk}", PALETTE[c.chunk % len(PALETTE)], 1.0, False, "slot",
                            {"line": ln, "row": c.row, "chunk": c.chunk}))
    labels = [None if ln is None else f"+{base + ln * LINE_BYTES}" for ln in shown]
    hidden = [ln for ln in range(lines) if ln not in shown]
    elided = (f"lines {hidden[0]} to {hidden[-1]}: the pattern repeats every {_count(period, 'line')}"
              if hidden else "")
    return _Grid(f"shared memory: {_count(lines, '128-byte line')} x 32 banks",
                 "cell: the box chunk (row,chunk) in each 16-byte slot; colour: its chunk column",
                 [f"b{4 * g}-{4 * g + 3}" for g in range(8)], labels, elided, out)


def _grids(box: Sequence[int], elem_bytes: int, swizzle: Swizzle | str | int, base: int, column: int) -> list[_Grid]:
    main = chunk_cells(box, elem_bytes, swizzle, base)
    name = pattern(swizzle).swizzle.spec_name
    grids = [_logical_grid(f"box {list(box)} x {elem_bytes} B, swizzle {name}, base {base}",
                           "colour: the group of four banks the chunk lands in", main, None)]
    panels = (access_panel(box, elem_bytes, swizzle, base, column), access_panel(box, elem_bytes, "none", base, column))
    for p in panels:
        grids.append(_logical_grid(p.title, _count(p.wavefronts, "wavefront") + f" for {p.ideal} ideal: "
                                   + _count(p.wavefronts - p.ideal, "conflict"), p.cells, p))
    grids.append(_lines_grid(main, base))
    return grids


def _grid_svg(x0: int, y0: int, g: _Grid) -> tuple[list[str], int, int]:
    label_w = max(GAP, 8 + 7 * max((len(label) for label in g.row_labels if label), default=2))
    out = [f'<text x="{x0}" y="{y0 + 16}" class="title">{escape(g.title)}</text>']
    top = y0 + GAP + 10
    for k, heading in enumerate(g.col_labels):
        x = x0 + label_w + k * CELL + CELL // 2
        out.append(f'<text x="{x}" y="{top - 6}" class="margin">{escape(heading)}</text>')
    for slot, label in enumerate(g.row_labels):
        y = top + slot * CELL + CELL // 2 + 4
        if label is None:
            out.append(f'<text x="{x0 + label_w - 6}" y="{y}" class="rowlabel">&#8942;</text>')
            out.append(f'<text x="{x0 + label_w + 4}" y="{y}" class="elided">{escape(g.elided)}</text>')
        else:
            out.append(f'<text x="{x0 + label_w - 6}" y="{y}" class="rowlabel">{escape(label)}</text>')
    for slot, col, text, colour, opacity, _, klass, data in g.cells:
        x, y = x0 + label_w + col * CELL, top + slot * CELL
        attrs = "".join(f' data-{k}="{v}"' for k, v in data.items())
        out.append(f'<rect class="{klass}" x="{x}" y="{y}" width="{CELL - 2}" height="{CELL - 2}" '
                   f'fill="{colour}" fill-opacity="{opacity:g}"{attrs}/>')
        out.append(f'<text x="{x + (CELL - 2) // 2}" y="{y + CELL // 2 + 3}" '
                   f'class="label{"" if opacity == 1 else " faded"}">{text}</text>')
    height = top + len(g.row_labels) * CELL + 8
    out.append(f'<text x="{x0}" y="{height + 12}" class="caption">{escape(g.caption)}</text>')
    width = max(label_w + len(g.col_labels) * CELL, 7 * max(len(g.title), len(g.caption), len(g.elided) // 2))
    return out, width, height + 20 - y0


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def layout_svg(box: Sequence[int], elem_bytes: int, swizzle: Swizzle | str | int, base: int = 0,
               column: int = 0) -> str:
    """An SVG in the spirit of the Programming Guide's figures: the box as 16-byte chunks, each
    labelled with its logical row,chunk and coloured by its bank group (four banks); a warp reading
    chunk column ``column`` with this swizzle and with none, conflicts outlined; and the physical
    128-byte lines against the 32 banks. Boxes of many rows show two periods of the pattern, an
    ellipsis row and the last row."""
    parts: list[str] = []
    x, width, height = 10, 0, 0
    for g in _grids(box, elem_bytes, swizzle, base, column):
        svg, w, h = _grid_svg(x, 10, g)
        parts += svg
        x += w + 40
        width, height = x, max(height, h)
    style = ("<style>.title{font:bold 13px sans-serif}.margin{font:11px sans-serif;fill:#555;text-anchor:middle}"
             ".label{font:10px monospace;fill:#fff;text-anchor:middle}.faded{fill:#333}.caption{font:12px sans-serif}"
             ".rowlabel{font:11px sans-serif;fill:#555;text-anchor:end}"
             ".elided{font:italic 11px sans-serif;fill:#555}.conflict{stroke:#d00;stroke-width:3}</style>")
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height + 20}" '
            f'viewBox="0 0 {width} {height + 20}">{style}<rect width="100%" height="100%" fill="#fff"/>'
            + "".join(parts) + "</svg>\n")


def layout_png(path: str, box: Sequence[int], elem_bytes: int, swizzle: Swizzle | str | int, base: int = 0,
               column: int = 0) -> None:
    """The same drawing as ``layout_svg``, as a PNG through matplotlib, sized from its content:
    every cell is 0.62 x 0.34 inches at 110 dpi whatever the box, labels inside it readable."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from matplotlib.patches import Rectangle
    except ImportError:
        raise ModelError("--png needs matplotlib: pip install matplotlib (or use --svg)") from None
    grids = _grids(box, elem_bytes, swizzle, base, column)
    cell_w, cell_h, margin = 0.62, 0.34, 0.9  # inches
    widths = [max(len(g.col_labels) * cell_w, 0.075 * max(len(g.title), len(g.caption), len(g.elided) // 2))
              for g in grids]
    rows = max(len(g.row_labels) for g in grids)
    fig = plt.figure(figsize=(sum(widths) + margin * len(grids) + 0.4, rows * cell_h + 1.9))
    spec = fig.add_gridspec(1, len(grids), width_ratios=widths, wspace=margin / (sum(widths) / len(grids)),
                            left=margin / (sum(widths) + margin * len(grids) + 0.4), right=0.99,
                            top=1 - 1.0 / (rows * cell_h + 1.9), bottom=0.6 / (rows * cell_h + 1.9))
    for i, g in enumerate(grids):
        ax = fig.add_subplot(spec[0, i])
        n = len(g.row_labels)
        for slot, col, text, colour, opacity, conflict, _, _ in g.cells:
            y = rows - 1 - slot
            ax.add_patch(Rectangle((col + 0.03, y + 0.05), 0.94, 0.9, facecolor=colour, alpha=opacity,
                                   edgecolor="#d00" if conflict else "none", lw=2.5 if conflict else 0))
            ax.text(col + 0.5, y + 0.5, text, ha="center", va="center", color="white" if opacity == 1 else "#333",
                    fontsize=8, family="monospace")
        for slot, label in enumerate(g.row_labels):
            if label is None:
                ax.text(len(g.col_labels) / 2, rows - 1 - slot + 0.5, "\u22ee  " + g.elided, ha="center", va="center",
                        fontsize=8, style="italic", color="#555")
        ax.set_xlim(0, max(len(g.col_labels), widths[i] / cell_w))
        ax.text(0, rows - n - 0.25, g.caption, ha="left", va="top", fontsize=8)
        ax.set_ylim(0, rows)
        ax.set_xticks([k + 0.5 for k in range(len(g.col_labels))], g.col_labels, fontsize=8)
        ax.set_yticks([rows - 1 - s + 0.5 for s in range(n)], [label or "\u22ee" for label in g.row_labels],
                      fontsize=8)
        ax.xaxis.tick_top()
        ax.tick_params(length=0)
        for side in ax.spines.values():
            side.set_visible(False)
        ax.set_title(g.title, fontsize=9, loc="left", pad=18)
    try:
        fig.savefig(path, format="png", dpi=110)  # the path asked for, no suffix added
    finally:
        plt.close(fig)
