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
            f"map {v.name}{' (built by tmagen: the transposed output)' if m.derived else ''}: "
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


def _grid_svg(x0: int, y0: int, title: str, cells: list[ChunkCell], highlight: set[tuple[int, int]] | None,
              column: int | None, caption: str) -> tuple[list[str], int, int]:
    rows = max(c.row for c in cells) + 1
    chunks = max(c.chunk for c in cells) + 1
    out = [f'<text x="{x0}" y="{y0 + 16}" class="title">{escape(title)}</text>']
    top = y0 + GAP + 10
    for k in range(chunks):
        out.append(f'<text x="{x0 + GAP + k * CELL + CELL // 2}" y="{top - 6}" class="margin">{k}</text>')
    for r in range(rows):
        out.append(f'<text x="{x0 + GAP - 6}" y="{top + r * CELL + CELL // 2 + 4}" class="margin" '
                   f'text-anchor="end">{r}</text>')
    for c in cells:
        x, y = x0 + GAP + c.chunk * CELL, top + c.row * CELL
        on_column = column is not None and c.chunk == column
        conflict = highlight and (c.row, c.chunk) in highlight
        klass = "cell" + (" read" if on_column else "") + (" conflict" if conflict else "")
        opacity = "1" if column is None or on_column else "0.25"
        out.append(f'<rect class="{klass}" x="{x}" y="{y}" width="{CELL - 2}" height="{CELL - 2}" '
                   f'fill="{PALETTE[c.bank_group]}" fill-opacity="{opacity}" data-row="{c.row}" '
                   f'data-chunk="{c.chunk}" data-bank-group="{c.bank_group}"/>')
        out.append(f'<text x="{x + (CELL - 2) // 2}" y="{y + CELL // 2 + 3}" class="label">{c.row},{c.chunk}</text>')
    height = top + rows * CELL + 8
    out.append(f'<text x="{x0}" y="{height + 12}" class="caption">{escape(caption)}</text>')
    return out, GAP + chunks * CELL, height + 20 - y0


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def layout_svg(box: Sequence[int], elem_bytes: int, swizzle: Swizzle | str | int, base: int = 0,
               column: int = 0) -> str:
    """An SVG in the spirit of the Programming Guide's figures: the box as 16-byte chunks, each
    labelled with its logical row,chunk and coloured by its bank group (four banks), and beside it
    a warp reading chunk column ``column`` with this swizzle and with none, conflicts outlined."""
    main = chunk_cells(box, elem_bytes, swizzle, base)
    name = pattern(swizzle).swizzle.spec_name
    parts, w1, h1 = _grid_svg(10, 10, f"box {list(box)} x {elem_bytes} B, swizzle {name}, base {base}", main,
                              None, None, "colour: the group of four banks the chunk lands in")
    panels = [access_panel(box, elem_bytes, swizzle, base, column), access_panel(box, elem_bytes, "none", base, column)]
    x = 10 + w1 + 40
    width, height = x, h1
    for p in panels:
        svg, w, h = _grid_svg(x, 10, p.title, p.cells, p.conflicting, p.column,
                              _count(p.wavefronts, "wavefront") + f" for {p.ideal} ideal: "
                              + _count(p.wavefronts - p.ideal, "conflict"))
        parts += svg
        x += w + 40
        width, height = x, max(height, h)
    style = ("<style>.title{font:bold 13px sans-serif}.margin{font:11px sans-serif;fill:#555;text-anchor:middle}"
             ".label{font:10px monospace;fill:#fff;text-anchor:middle}.caption{font:12px sans-serif}"
             ".conflict{stroke:#d00;stroke-width:3}</style>")
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height + 20}" '
            f'viewBox="0 0 {width} {height + 20}">{style}' + "".join(parts) + "</svg>\n")


def layout_png(path: str, box: Sequence[int], elem_bytes: int, swizzle: Swizzle | str | int, base: int = 0,
               column: int = 0) -> None:
    """The same drawing as ``layout_svg``, as a PNG through matplotlib."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from matplotlib.patches import Rectangle
    except ImportError:
        raise ModelError("--png needs matplotlib: pip install matplotlib (or use --svg)") from None
    panels: list[tuple[str, list[ChunkCell], AccessPanel | None]] = [
        (f"swizzle {pattern(swizzle).swizzle.spec_name}", chunk_cells(box, elem_bytes, swizzle, base), None)]
    panels += [(p.title + "\n" + _count(p.wavefronts, "wavefront") + ", " + _count(p.wavefronts - p.ideal, "conflict"),
                p.cells, p)
               for p in (access_panel(box, elem_bytes, swizzle, base, column),
                         access_panel(box, elem_bytes, "none", base, column))]
    fig, axes = plt.subplots(1, 3, figsize=(15, 5.5))
    for ax, (title, cells, panel) in zip(axes, panels):
        rows = max(c.row for c in cells) + 1
        chunks = max(c.chunk for c in cells) + 1
        for c in cells:
            faded = panel is not None and c.chunk != panel.column
            conflict = panel is not None and (c.row, c.chunk) in panel.conflicting
            ax.add_patch(Rectangle((c.chunk, rows - 1 - c.row), 0.95, 0.95, color=PALETTE[c.bank_group],
                                   alpha=0.25 if faded else 1.0, ec="#d00" if conflict else "none",
                                   lw=3 if conflict else 0))
            ax.text(c.chunk + 0.47, rows - 1 - c.row + 0.45, f"{c.row},{c.chunk}", ha="center", va="center",
                    color="white", fontsize=8, family="monospace")
        ax.set_xlim(0, chunks)
        ax.set_ylim(0, rows)
        ax.set_xticks([k + 0.47 for k in range(chunks)], [str(k) for k in range(chunks)])
        ax.set_yticks([rows - 1 - r + 0.45 for r in range(rows)], [str(r) for r in range(rows)])
        ax.set_title(title, fontsize=10)
        ax.set_aspect("equal")
    fig.suptitle(f"box {list(box)} x {elem_bytes} B: 16-byte chunks (row,chunk), coloured by bank group")
    try:
        fig.savefig(path, format="png", dpi=110, bbox_inches="tight")  # the path asked for, no suffix added
    finally:
        plt.close(fig)
