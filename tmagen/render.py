"""Spec -> the text of every generated file. Pure: no I/O beyond reading the templates.

All decisions are made here, in typed views of the spec; the Jinja templates in
``templates/`` only substitute and loop. Output is deterministic: no timestamps, no
absolute paths, the same bytes for the same spec on any machine.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import jinja2

from tmagen import __version__
from tmagen.enums import Interleave, L2Promotion, OobFill
from tmagen.limits import TARGETS
from tmagen.spec import CopyKernel, InspectKernel, MapSpec, Spec, TransposeKernel, kernel_maps
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
    cpp_type: str  # element type
    unit_type: str  # type the kernel reads and writes shared memory with
    dtype_enum: str
    elem_bytes: int
    unit_bytes: int
    rank: int
    shape: tuple[int, ...]  # the spec's shape, outermost first
    box: tuple[int, ...]  # outermost first
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

    @property
    def buffer_align(self) -> int:
        """The alignment whose boundary smem_offset counts from: 1024, the longest period."""
        return 1024


def _unit_type(nbytes: int) -> str:
    return {1: "uint8_t", 2: "uint16_t", 4: "uint32_t", 8: "uint64_t", 16: "uint4"}[nbytes]


def map_view(m: MapSpec) -> MapView:
    t = m.tensor
    pat = PATTERNS[t.swizzle.driver]
    es = t.dt.nbytes
    rows = 1
    for b in t.box[:-1]:
        rows *= b
    row_bytes = t.box[-1] * es
    pitch = pat.row_pitch(row_bytes)
    return MapView(
        name=m.role, cpp_type=t.dt.cpp, unit_type=_unit_type(m.unit_bytes),
        dtype_enum=f"CU_TENSOR_MAP_DATA_TYPE_{t.dt.driver_name}", elem_bytes=es, unit_bytes=m.unit_bytes,
        rank=t.rank, shape=tuple(t.shape), box=tuple(t.box), box_driver=tuple(t.box[::-1]),
        element_strides_driver=tuple(t.element_strides_or_default[::-1]),
        interleave=Interleave.parse(t.interleave).driver_name, swizzle=t.swizzle.driver.driver_name,
        l2_promotion=L2Promotion.parse(t.l2_promotion).driver_name, oob_fill=OobFill.parse(t.oob_fill).driver_name,
        alignment=max(t.alignment, 16), swizzle_bits=pat.bits, swizzle_base=pat.base, swizzle_shift=pat.shift,
        flip_8b=pat.flip_8b, span=pat.span, period=pat.period, rows=rows, row_bytes=row_bytes, row_pitch=pitch,
        footprint=rows * pitch, tx_bytes=rows * row_bytes, smem_offset=t.smem_offset)


PATTERN_ALIGN = 1024  # the longest swizzle period: buffers start on it, boxes at smem_offset past it
INSPECT_THREADS, COPY_THREADS = 128, 32


@dataclass(frozen=True)
class TransposePlan:
    """How the transpose kernel splits its tiles: micro-tiles of k rows x 16 bytes, one per thread."""

    unit: int  # bytes of one transposed unit
    k: int  # units per 16-byte chunk, and rows per micro-tile
    micro_rows: int  # micro-tiles down a tile
    tile_chunks: int  # micro-tiles across a tile (16-byte chunks per row)
    threads_per_tile: int
    tiles_per_stage: int
    stages: int
    in_stride: int
    out_stride: int
    mapping: str  # "natural" or "xor"

    @property
    def microtiles(self) -> int:
        return self.micro_rows * self.tile_chunks

    @property
    def mapping_doc(self) -> str:
        return ("a = m / chunks, c = m % chunks (16-byte units: the swizzle keeps the writes down a column "
                "apart)" if self.mapping == "natural" else
                "a = m % rows, c = (a ^ m / rows) % chunks (the XOR keeps each phase's lanes on distinct "
                "chunks for reads and writes)")

    def microtile(self, m: int) -> tuple[int, int]:
        """(a, c) of thread m: rows k*a .. k*a+k-1, 16-byte chunk c (the kernel's formula)."""
        if self.mapping == "xor":
            a = m % self.micro_rows
            return a, (a ^ (m // self.micro_rows)) % self.tile_chunks
        return m // self.tile_chunks, m % self.tile_chunks


def _power_of_two(n: int) -> bool:
    return n > 0 and n & (n - 1) == 0


def transpose_plan(spec: Spec) -> TransposePlan:
    k = spec.kernel
    if not isinstance(k, TransposeKernel):
        raise TypeError(f"{spec.name} has a {k.kind} kernel, not a transpose")
    maps = {m.role: m for m in kernel_maps(spec)}
    src, dst = map_view(maps["src"]), map_view(maps["dst"])
    unit = maps["src"].unit_bytes
    per_chunk = 16 // unit
    micro_rows = max(src.rows // per_chunk, 1)
    chunks = max(src.row_bytes // 16, 1)
    # With one unit per chunk the natural order reads along rows and writes down a column, which
    # the swizzle spreads over the banks; with several, an XOR order does it for any swizzle.
    xor = per_chunk > 1 and _power_of_two(chunks)
    threads = _round_up(micro_rows * chunks, 32)
    in_stride = _round_up(src.smem_offset + src.footprint, PATTERN_ALIGN)
    out_stride = _round_up(dst.smem_offset + dst.footprint, PATTERN_ALIGN)
    group = k.tiles_per_stage
    if group is None:  # as many tiles as 256 threads take, while the buffers fit a block
        limit = TARGETS[spec.target].smem_per_block_optin
        group = max(1, min(8, 256 // threads))
        while group > 1 and (k.stages * in_stride + 2 * out_stride) * group + PATTERN_ALIGN > limit:
            group -= 1
    return TransposePlan(unit, per_chunk, micro_rows, chunks, threads, group, k.stages, in_stride, out_stride,
                         "xor" if xor else "natural")


@dataclass(frozen=True)
class KernelView:
    """One extern "C" kernel: its symbol, the maps it takes in order, and how to launch it."""

    symbol: str
    maps: tuple[str, ...]
    threads: int
    smem_bytes: int  # dynamic shared memory, including the slack to reach a 1024-byte boundary
    buffer_stride: int = 0  # copy: bytes between stage buffers; transpose: bytes before the dst buffer
    stages: int = 1
    blocks_per_sm: int = 1
    boxes_per_stage: int = 1
    persistent: bool = False  # takes a tiles argument and loops over tiles
    plan: TransposePlan | None = None


def _round_up(n: int, to: int) -> int:
    return -(-n // to) * to


def kernel_views(spec: Spec) -> list[KernelView]:
    maps = {m.name: m for m in (map_view(x) for x in kernel_maps(spec))}
    k = spec.kernel
    if isinstance(k, InspectKernel):
        return [KernelView(f"{spec.name}_inspect_{m.name}", (m.name,), INSPECT_THREADS,
                           m.smem_offset + m.footprint + PATTERN_ALIGN) for m in maps.values()]
    if isinstance(k, CopyKernel):
        src = maps["src"]
        stride = _round_up(src.smem_offset + src.footprint, PATTERN_ALIGN)
        return [KernelView(f"{spec.name}_copy", ("src", "dst"), COPY_THREADS,
                           stride * k.boxes_per_stage * k.stages + PATTERN_ALIGN, stride, k.stages, k.blocks_per_sm,
                           k.boxes_per_stage, persistent=True)]
    plan = transpose_plan(spec)
    smem = (plan.stages * plan.in_stride + 2 * plan.out_stride) * plan.tiles_per_stage + PATTERN_ALIGN
    return [KernelView(f"{spec.name}_transpose", ("src", "dst"), plan.threads_per_tile * plan.tiles_per_stage,
                       smem, plan.in_stride, plan.stages, k.blocks_per_sm, plan.tiles_per_stage, persistent=True,
                       plan=plan)]


def _file_header(spec: Spec, spec_file: str, comment: str) -> str:
    return (f"{comment} Generated by tmagen {__version__} from {spec_file} (spec \"{spec.name}\"): do not edit.\n"
            f"{comment} Regenerate with: tmagen build {spec_file}\n")


def context(spec: Spec, spec_file: str) -> dict[str, object]:
    target = TARGETS[spec.target]
    kernel = spec.kernel
    maps = [map_view(m) for m in kernel_maps(spec)]
    return {
        "spec": spec, "name": spec.name, "guard": f"TMAGEN_{spec.name.upper()}",
        "kind": kernel.kind, "kernel": kernel, "maps": maps, "map": {m.name: m for m in maps},
        "launch": {k.symbol: k for k in kernel_views(spec)},
        "target": target, "arch_number": target.name.removeprefix("sm_"),
        "runs_on_hopper": target.runs_here,
        "smem_limit": target.smem_per_block_optin,
        "is_inspect": isinstance(kernel, InspectKernel), "is_copy": isinstance(kernel, CopyKernel),
        "is_transpose": isinstance(kernel, TransposeKernel),
        "cpp_header": _file_header(spec, spec_file, "//"), "cmake_header": _file_header(spec, spec_file, "#"),
    }


TEMPLATES = {  # output file (``{name}`` is the spec's name) -> template
    "{name}.cuh": "device.cuh.j2",
    "{name}_kernels.cuh": "kernels.cuh.j2",
    "{name}.h": "api.h.j2",
    "{name}.cu": "host.cu.j2",
    "CMakeLists.txt": "CMakeLists.txt.j2",
}


def render(spec: Spec, spec_file: str) -> dict[str, str]:
    """Every generated file of ``spec``: relative path -> text. ``spec_file`` is the spec's path as
    the user would pass it to ``tmagen build`` (relative, so the output names no machine)."""
    env = environment()
    ctx = context(spec, spec_file)
    files = {out.format(name=spec.name): env.get_template(tpl).render(ctx) for out, tpl in TEMPLATES.items()}
    manifest = {
        "tmagen_version": __version__,
        "spec_file": spec_file,
        "spec": spec.model_dump(mode="json"),
        "files": {path: hashlib.sha256(text.encode()).hexdigest() for path, text in sorted(files.items())},
    }
    files["manifest.json"] = json.dumps(manifest, indent=2, sort_keys=True) + "\n"
    return files
