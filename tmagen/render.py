"""Spec -> the text of every generated file. Pure: no I/O beyond reading the templates.

All decisions are made here, in typed views of the spec; the Jinja templates in
``templates/`` only substitute and loop. Output is deterministic: no timestamps, no
absolute paths, the same bytes for the same spec on any machine.
"""

from __future__ import annotations

import hashlib
import json
import math
import shlex
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import jinja2

from tmagen import __version__, plan
from tmagen.dtypes import CUDA_TYPE_HEADERS, RAW_TYPES
from tmagen.enums import Interleave, L2Promotion, OobFill
from tmagen.limits import TARGETS
from tmagen.mma import BASE_OFFSET_FROM_ADDRESS, OperandTile
from tmagen.spec import (CopyKernel, InspectKernel, MapSpec, MatmulKernel, Spec, TransposeKernel, box_layout,
                         kernel_maps, kernel_plans, loaded_box, operand_tile)
from tmagen.swizzle import PATTERNS

_HERE = Path(__file__).resolve().parent
# In a wheel the templates sit inside the package; in a source checkout, beside it.
TEMPLATE_DIRS = [p for p in (_HERE / "templates", _HERE.parent / "templates") if p.is_dir()]


@lru_cache(maxsize=1)
def environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader([str(p) for p in TEMPLATE_DIRS]),
        undefined=jinja2.StrictUndefined, keep_trailing_newline=True,
        trim_blocks=True, lstrip_blocks=True, autoescape=False)
    return env


@dataclass(frozen=True)
class MapView:
    """One CUtensorMap the generated code builds and one box layout in shared memory."""

    name: str  # C identifier: the role of the map in the kernel (src, dst, ...)
    dtype_name: str  # tmagen's name of the element type
    cpp_type: str  # the element's CUDA type, what at() gives
    raw_type: str  # the unsigned integer of the element's size, what raw_at() gives
    unit_type: str  # type the kernel reads and writes shared memory with
    dtype_enum: str
    elem_bytes: int
    unit_bytes: int
    rank: int
    shape: tuple[int, ...]  # the spec's shape, outermost first
    box: tuple[int, ...]  # outermost first
    smem_shape: tuple[int, ...]  # the elements one load brings, outermost first: the box in shared memory
    box_driver: tuple[int, ...]  # innermost first
    element_strides_driver: tuple[int, ...]
    interleave: str
    swizzle: str
    l2_promotion: str
    oob_fill: str
    alignment: int
    swizzle_bits: int
    swizzle_base: int
    swizzle_shift: int
    flip_8b: bool
    span: int
    period: int
    rows: int
    row_bytes: int
    row_pitch: int
    footprint: int
    tx_bytes: int
    smem_offset: int
    buffer_stride: int  # from the box's pattern boundary to the first boundary after the box
    stores: bool  # the kernel stores through the map
    mma: OperandTile | None = None  # a wgmma reads the box: its descriptors go in the header
    mma_operand: str = ""

    @property
    def pattern_lines(self) -> int:
        """128-byte lines in one period of the pattern: what the descriptor's base offset counts."""
        return max(self.period // 128, 1)

    @property
    def buffer_align(self) -> int:
        """The alignment whose boundary smem_offset counts from: 1024, the longest period."""
        return 1024


def map_view(m: MapSpec) -> MapView:
    t = m.tensor
    pat = PATTERNS[t.swizzle.driver]
    es = t.dt.nbytes
    smem_shape = loaded_box(t)[0]  # with element strides, fewer elements than the box
    rows = math.prod(smem_shape[:-1])
    row_bytes = smem_shape[-1] * es
    pitch = pat.row_pitch(row_bytes)
    return MapView(
        name=m.role, dtype_name=t.dtype, cpp_type=t.cpp_type, raw_type=RAW_TYPES[es], unit_type=RAW_TYPES[m.unit_bytes],
        dtype_enum=f"CU_TENSOR_MAP_DATA_TYPE_{t.dt.driver_name}", elem_bytes=es, unit_bytes=m.unit_bytes,
        rank=t.rank, shape=tuple(t.shape), box=tuple(t.box), smem_shape=smem_shape, box_driver=tuple(t.box[::-1]),
        element_strides_driver=tuple(t.element_strides_or_default[::-1]),
        interleave=Interleave.parse(t.interleave).driver_name, swizzle=t.swizzle.driver.driver_name,
        l2_promotion=L2Promotion.parse(t.l2_promotion).driver_name, oob_fill=OobFill.parse(t.oob_fill).driver_name,
        alignment=max(t.alignment, 16), swizzle_bits=pat.bits, swizzle_base=pat.base, swizzle_shift=pat.shift,
        flip_8b=pat.flip_8b, span=pat.span, period=pat.period, rows=rows, row_bytes=row_bytes, row_pitch=pitch,
        footprint=rows * pitch, tx_bytes=rows * row_bytes, smem_offset=t.smem_offset,
        buffer_stride=plan.box_stride(box_layout(m)), stores=m.stores, mma=operand_tile(m), mma_operand=m.mma.operand if m.mma else "")


def shell_word(path: str) -> str:
    """``path`` as one shell word that is printable and inert in a ``//`` or ``#`` comment: shlex's
    quoting, or bash's $'...' with escapes where the path holds a newline or another character
    that is not printable (a path must never end a comment line and become code)."""
    if all(c.isprintable() for c in path):
        return shlex.quote(path)
    out = []
    for c in path:
        if c in "\\'":
            out.append("\\" + c)
        elif c.isprintable():
            out.append(c)
        else:
            n = ord(c)
            out.append(f"\\x{n:02x}" if n < 0x80 else f"\\u{n:04x}" if n < 0x10000 else f"\\U{n:08x}")
    return "$'" + "".join(out) + "'"


def _file_header(spec: Spec, spec_file: str, comment: str) -> str:
    shown = shell_word(spec_file).replace("*/", "*'/'")  # copy-pasted into a /* */ block, it stays inside
    return (f"{comment} Generated by tmagen {__version__} from {shown} (spec \"{spec.name}\"): do not edit.\n"
            f"{comment} Regenerate with: tmagen build {shown}\n")


def _wgmma(maps: list[MapView]) -> tuple[int, str]:
    """N of the wgmma instruction the header offers (the B tile's N), and the PTX operand type;
    (0, "") where the spec has no A and B operand boxes."""
    by_operand = {m.mma_operand: m for m in maps if m.mma}
    if not {"a", "b"} <= by_operand.keys():
        return 0, ""
    b = by_operand["b"]
    return b.mma.mn if b.mma else 0, {"bfloat16": "bf16", "float16": "f16"}[b.dtype_name]


def context(spec: Spec, spec_file: str) -> dict[str, object]:
    target = TARGETS[spec.target]
    kernel = spec.kernel
    maps = [map_view(m) for m in kernel_maps(spec)]
    wgmma_n, mma_ptx_type = _wgmma(maps)
    return {
        "spec": spec, "name": spec.name, "guard": f"TMAGEN_{spec.name.upper()}",
        "kind": kernel.kind if kernel else None, "kernel": kernel, "has_kernel": kernel is not None,
        "maps": maps, "map": {m.name: m for m in maps},
        "cuda_headers": sorted({CUDA_TYPE_HEADERS[m.cpp_type] for m in maps if m.cpp_type in CUDA_TYPE_HEADERS}),
        "launch": {k.symbol: k for k in kernel_plans(spec)},
        "target": target, "arch_number": target.name.removeprefix("sm_"),
        "runs_on_hopper": target.runs_here,
        "smem_limit": target.smem_per_block_optin, "flat_row_align": plan.FLAT_COPY_ROW_ALIGN,
        "flat_narrow_row": plan.FLAT_COPY_NARROW_ROW,
        "base_offset_from_address": BASE_OFFSET_FROM_ADDRESS,
        "wgmma_n": wgmma_n, "mma_ptx_type": mma_ptx_type,
        "is_inspect": isinstance(kernel, InspectKernel), "is_copy": isinstance(kernel, CopyKernel),
        "is_transpose": isinstance(kernel, TransposeKernel), "is_matmul": isinstance(kernel, MatmulKernel),
        "cpp_header": _file_header(spec, spec_file, "//"), "cmake_header": _file_header(spec, spec_file, "#"),
    }


TEMPLATES = {  # output file (``{name}`` is the spec's name) -> template
    "{name}.cuh": "device.cuh.j2",
    "{name}_kernels.cuh": "kernels.cuh.j2",
    "{name}.h": "api.h.j2",
    "{name}.cu": "host.cu.j2",
    "CMakeLists.txt": "CMakeLists.txt.j2",
}
# A spec without a kernel gets no kernels file at all rather than an empty one: an
# `#include "NAME_kernels.cuh"` then fails where it is written instead of bringing nothing.
KERNEL_FILES = frozenset({"{name}_kernels.cuh"})


def render(spec: Spec, spec_file: str) -> dict[str, str]:
    """Every generated file of ``spec``: relative path -> text. ``spec_file`` is the spec's path as
    the user would pass it to ``tmagen build`` (relative, so the output names no machine)."""
    env = environment()
    ctx = context(spec, spec_file)
    files = {out.format(name=spec.name): env.get_template(tpl).render(ctx) for out, tpl in TEMPLATES.items()
             if spec.kernel is not None or out not in KERNEL_FILES}
    manifest = {
        "tmagen_version": __version__,
        "spec_file": spec_file,
        "spec": spec.model_dump(mode="json"),
        "files": {path: hashlib.sha256(text.encode()).hexdigest() for path, text in sorted(files.items())},
    }
    files["manifest.json"] = json.dumps(manifest, indent=2, sort_keys=True) + "\n"
    return files
