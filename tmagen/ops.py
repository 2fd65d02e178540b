"""Ready-made operations on GPU tensors, with the kernels tuned on an H200: ``transpose(x)`` (the
last two dimensions, any batch), ``copy(x)`` and ``permute(x, dims)``, on any shape and view;
``matmul(a, b, ...)`` is `tmagen.ops_matmul`'s, ``quantize_fp8(x, ...)`` `tmagen.ops_quant`'s.

The kernels move bits, so an element type borrows the kernel of any type of its size. The tuned
configurations are the specs of ``tmagen/ops_specs`` (which benchmarks/run.py times); a rank or
size none of them covers gets one derived from the nearest. Each call is one move, ``dst = src``
over a view (the transpose and permute of ``x`` are views of it), routed once per layout by
`plan_move`: the TMA copy where both are read by rows of whole 16 bytes, the TMA transpose where the
output's contiguous dimension is another of the source's, and the strided kernels
(`tmagen.kinds.strided`) for every layout TMA cannot address. The result is a new contiguous tensor
of the input's framework unless given ``out``.

With PyTorch installed, importing this module also registers ``torch.ops.tmagen.transpose`` and
``torch.ops.tmagen.copy`` (`tmagen.torch_ops`): under ``torch.compile`` and for tensors that
need gradients, these functions go through them.
"""

from __future__ import annotations

import importlib.util
import json
import math
import threading
from collections.abc import Sequence
from dataclasses import dataclass, replace
from functools import cache, lru_cache
from pathlib import Path
from typing import Any

from tmagen import limits, runtime
from tmagen.arrays import ArrayView, current_stream, describe, empty_view, merge_dims
from tmagen.dtypes import DTYPES
from tmagen.errors import ArgumentError
from tmagen.kernels import Kernel, Replayed, launch_again, replayable
from tmagen.kinds.strided import plan as sp
from tmagen.kinds.strided.plan import StridedCall
from tmagen.ops_matmul import matmul, use_gpu_copy
from tmagen.ops_quant import quantize_fp8
from tmagen.rules import Violation
from tmagen.spec import Spec, parse_spec

SPECS_DIR = Path(__file__).resolve().parent / "ops_specs"
ELEMENT_SIZES = (1, 2, 4, 8)  # what the TMA kernels move
MOVED_SIZES = (1, 2, 4, 8, 16)  # what the ops move (16 bytes: complex128, by the strided kernels or as pairs of 8)
_BY_SIZE = {1: "uint8", 2: "bfloat16", 4: "float32", 8: "float64"}  # a dtype of each size, for derived specs


@lru_cache(maxsize=1)
def tuned_specs() -> dict[str, dict]:
    """The tuned specs by name, as their JSON reads."""
    return {p.stem: json.loads(p.read_text()) for p in sorted(SPECS_DIR.glob("*.json"))}


def _facts(raw: dict) -> tuple[str, str, int, int]:
    t = raw["tensors"][0]
    return raw["kernel"]["kind"], t["dtype"], DTYPES[t["dtype"]].nbytes, len(t["shape"])


# Smaller tiles of the TMA kernels, as (rows, bytes per row), largest first: a move too small to
# give each multiprocessor the table's tma_tiles_per_sm tiles of the tuned spec takes the first of
# these that does, else the last. Measured on an H200, per launch: a 4 MiB float32 transpose
# (1024 x 1024) in the tuned 128 x 256-byte tiles 4.16 us, in 64 x 128 3.74, in 32 x 128 3.67; the
# same tensor's copy in the tuned 64 x 1 KiB tiles 5.20 us, in 8 x 1 KiB 3.30.
SMALL_TILES = {"transpose": ((64, 128), (32, 128)), "copy": ((16, 1024), (8, 1024))}


def small_tile_box(tile: tuple[int, int], itemsize: int) -> tuple[int, int]:
    """The box (rows, elements per row) of one of SMALL_TILES for elements of ``itemsize`` bytes."""
    rows, row_bytes = tile
    return rows, min(limits.MAX_BOX_DIM, row_bytes // itemsize)


def spec_for(kind: str, dtype: str, rank: int, tile: tuple[int, int] | None = None) -> Spec:
    """The spec whose kernel ``copy``/``transpose`` runs for elements carried as ``dtype`` in
    ``rank`` dimensions: a tuned one of that dtype, else of that size, else one derived from the
    rank-2 (or rank-1) tuned spec of that size by leading dimensions of extent 1 in the box. With
    ``tile`` (one of SMALL_TILES), that spec with the tile's box and one tile per block."""
    return _spec_for(kind, dtype, rank, tile)


@cache
def _spec_for(kind: str, dtype: str, rank: int, tile: tuple[int, int] | None) -> Spec:
    raw, source = _raw_for(kind, dtype, rank)
    if tile is None:
        return parse_spec(raw, source)
    raw = json.loads(json.dumps(raw))
    t = raw["tensors"][0]
    rows, cols = small_tile_box(tile, DTYPES[t["dtype"]].nbytes)
    t["box"] = [1] * (rank - 2) + [rows, cols]
    # one tile a block, many blocks a multiprocessor: the block scheduler spreads a small move over all
    raw["kernel"].update({"transpose": {"stages": 1, "tiles_per_stage": 1, "tiles_per_block": 1, "blocks_per_sm": 8},
                          "copy": {"stages": 2, "tiles_per_block": 1}}[kind])
    raw["name"] = f"{raw['name']}_t{tile[0]}x{tile[1]}"
    raw["description"] = f"{raw['description']} Tiles of {rows} x {cols} for small moves."
    return parse_spec(raw, f"{source}, tiles of {rows} x {cols}")


@cache
def _raw_for(kind: str, dtype: str, rank: int) -> tuple[dict, str]:
    size = DTYPES[dtype].nbytes
    tuned = {name: _facts(raw) for name, raw in tuned_specs().items()}
    for exact in (True, False):
        for name, (k, d, es, r) in tuned.items():
            if k == kind and r == rank and es == size and (d == dtype or not exact):
                return tuned_specs()[name], f"tmagen/ops_specs/{name}.json"
    base_rank = 1 if rank == 1 else 2
    bases = [(abs(es - size), d != dtype, name) for name, (k, d, es, r) in tuned.items()
             if k == kind and r == base_rank]
    if not bases:
        raise ValueError(f"no tuned {kind} spec of rank {base_rank} to derive from")
    base_name = min(bases)[2]
    raw = json.loads(json.dumps(tuned_specs()[base_name]))
    t = raw["tensors"][0]
    base_size = DTYPES[t["dtype"]].nbytes
    if base_size != size:  # the same bytes per box row and column, within TMA's 256 elements
        t["box"] = [min(limits.MAX_BOX_DIM, max(1, b * base_size // size)) for b in t["box"]]
        t["dtype"] = _BY_SIZE[size]
    lead = rank - len(t["shape"])
    t["shape"], t["box"] = [1] * lead + t["shape"], [1] * lead + t["box"]
    raw["name"] = f"ops_{kind}_{t['dtype']}_r{rank}"
    raw["description"] = f"Derived by tmagen.ops from {base_name}: {kind} of {rank}-D {t['dtype']}."
    return raw, f"derived from tmagen/ops_specs/{base_name}.json"


_KERNELS: dict[str, Kernel] = {}


@cache
def kernel(kind: str, dtype: str, rank: int, tile: tuple[int, int] | None = None) -> Kernel:
    """The kernel of `spec_for`, one per spec (types of one size share it), compiled at its first
    call and loaded once per process."""
    spec = spec_for(kind, dtype, rank, tile)
    if spec.name not in _KERNELS:
        _KERNELS[spec.name] = Kernel(spec, same_size_types=True, caller=f"tmagen.ops.{kind}")
    return _KERNELS[spec.name]


def _carrier(itemsize: int, carrier: str | None) -> str:
    """The tmagen dtype whose TMA kernels move elements of ``itemsize`` bytes (the array's own
    type where TMA has it); elements of 16 bytes have none (the strided kernels move them)."""
    known = _CARRIER_OF.get((carrier, itemsize))
    if known is not None:
        return known
    found = carrier if carrier is not None and DTYPES[carrier].nbytes == itemsize else _BY_SIZE.get(itemsize, "")
    _CARRIER_OF[(carrier, itemsize)] = found
    return found


_CARRIER_OF: dict[tuple[str | None, int], str] = {}


def _size_problem(view: ArrayView, call: str) -> ArgumentError | None:
    if view.itemsize not in MOVED_SIZES:
        return ArgumentError(call, [Violation("array-dtype", "x.dtype", f"{view.dtype} ({view.itemsize} bytes)",
                                              "tmagen's ops move elements of 1, 2, 4, 8 or 16 bytes",
                                              "use the framework's own operation for this type", "tmagen.ops")])
    return None


def _shape_error(call: str, got: tuple, want: tuple, what: str) -> ArgumentError:
    return ArgumentError(call, [Violation("array-shape", "out.shape", str(got), f"{what} has shape {want}",
                                          f"pass an output of shape {want}", "tmagen.ops")])


def _on_gpu(view: ArrayView, call: str, name: str) -> ArrayView:
    """``view``, refused where it is off the GPU (a CPU tensor, a numpy array): checked on every
    eager call, before the route cache, which is keyed by layout and not by device."""
    if view.device is not None and view.device < 0:
        raise ArgumentError(call, [Violation("array-device", f"{name}.device", view.where,
                                             "tmagen's ops run on the GPU",
                                             f"move {name} to the GPU first (e.g. {name}.cuda(), cupy.asarray({name}))",
                                             "tmagen.ops")])
    return view


def _source(x: Any, call: str) -> ArrayView:
    return _on_gpu(describe(x, "x"), call, "x")


def _output(call: str, src: ArrayView, shape: tuple[int, ...], out: Any, what: str) -> tuple[Any, ArrayView]:
    if out is None:
        return empty_view(src, shape)
    dst = _on_gpu(describe(out, "out"), call, "out")
    if dst.shape != shape:
        raise _shape_error(call, dst.shape, shape, what)
    if dst.itemsize != src.itemsize:
        raise ArgumentError(call, [Violation("array-dtype", "out.dtype", f"{dst.dtype} ({dst.itemsize} bytes)",
                                             f"x's elements are {src.itemsize} bytes", "pass an output of x's dtype",
                                             "tmagen.ops")])
    return out, dst


# ----------------------------------------------------------------------------- transpose
def transpose(x: Any, out: Any = None) -> Any:
    """``x`` with its last two dimensions exchanged, as a new contiguous tensor (or into ``out``):
    ``x.transpose(-2, -1).contiguous()``, for any shape and view of 2 or more dimensions."""
    if type(x) is _TENSOR:
        return (_replay("transpose", x, (), transpose_eager) if out is None
                else _replay_into("transpose", x, (), out, transpose_eager))
    return transpose_eager(x, out)


def transpose_eager(x: Any, out: Any = None) -> Any:
    call = "tmagen.ops.transpose"
    src = _source(x, call)
    if src.rank < 2:
        raise ArgumentError(call, [Violation("array-rank", "x.ndim", str(src.rank), "a transpose exchanges the last "
                                             "two dimensions", "pass an array of 2 or more dimensions",
                                             "tmagen.ops")])
    shape, strides = src.shape, src.strides
    turned = src.with_layout((*shape[:-2], shape[-1], shape[-2]), (*strides[:-2], strides[-1], strides[-2]))
    out, dst = _output(call, src, turned.shape, out, "the transpose of x")
    move(call, turned, dst)
    return out


# ----------------------------------------------------------------------------- copy
def copy(x: Any, out: Any = None) -> Any:
    """A copy of ``x`` as a new contiguous tensor (or into ``out``), like ``x.clone()``: any shape
    and any view."""
    if type(x) is _TENSOR:
        return (_replay("copy", x, (), copy_eager) if out is None
                else _replay_into("copy", x, (), out, copy_eager))
    return copy_eager(x, out)


def copy_eager(x: Any, out: Any = None) -> Any:
    call = "tmagen.ops.copy"
    src = _source(x, call)
    out, dst = _output(call, src, src.shape, out, "x")
    move(call, src, dst)
    return out


# ----------------------------------------------------------------------------- permute
def permute(x: Any, dims: Sequence[int], out: Any = None) -> Any:
    """``x.permute(dims).contiguous()`` as a new tensor (or into ``out``): NCHW <-> NHWC,
    [B, S, H, D] <-> [B, H, S, D], any permutation of any rank."""
    if type(x) is _TENSOR:
        return (_replay("permute", x, tuple(dims), permute_eager) if out is None
                else _replay_into("permute", x, tuple(dims), out, permute_eager))
    return permute_eager(x, dims, out)


def permute_eager(x: Any, dims: Sequence[int], out: Any = None) -> Any:
    call = "tmagen.ops.permute"
    src = _source(x, call)
    order = [int(d) + src.rank if int(d) < 0 else int(d) for d in dims]
    if sorted(order) != list(range(src.rank)):
        raise ArgumentError(call, [Violation("permute-dims", "dims", str(list(dims)), f"a permutation of the "
                                             f"{src.rank} dimensions of x (each of 0..{src.rank - 1}, or -{src.rank}"
                                             "..-1, once)", f"pass {src.rank} distinct dimensions",
                                             "tmagen.ops")])
    view = src.with_layout(tuple(src.shape[d] for d in order), tuple(src.strides[d] for d in order))
    out, dst = _output(call, src, view.shape, out, "x.permute(dims)")
    move(call, view, dst)
    return out


# ----------------------------------------------------------------------------- moving elements
@dataclass(frozen=True)
class Move:
    """How `move` moves one layout: ``how`` is "none" (no elements), "flat" (one contiguous run,
    by the TMA copy as 4-byte words, any last bytes by a device copy), "copy" (the TMA copy kernel
    over ``shape``), "transpose" (the TMA transpose kernel: ``shape`` = [*batch, R, C] of the source,
    the output [*batch, C, R]), "gather", "plane", "tile" or "narrow" (the strided kernels, `StridedCall` in
    ``strided``), "split" (more than 5 dimensions that do not merge: one move per index of the
    outermost). ``itemsize`` is the element size the kernel moves (16-byte elements contiguous in
    both are moved as pairs of 8). ``tile``: the TMA kernels' tile (one of SMALL_TILES), None for
    the tuned spec's."""

    how: str
    itemsize: int
    shape: tuple[int, ...] = ()
    src: tuple[int, ...] = ()
    dst_shape: tuple[int, ...] = ()
    dst: tuple[int, ...] = ()
    strided: StridedCall | None = None
    tile: tuple[int, int] | None = None


TABLE = Path(__file__).resolve().parent / "ops_table.json"
CLASSES = ("small", "batched", "ragged", "odd_rows", "large")


@lru_cache(maxsize=1)
def table() -> dict[str, Any]:
    """The configuration per shape class (tmagen/ops_table.json, written by ``python -m lab.tune_ops``)."""
    data: dict[str, Any] = json.loads(TABLE.read_text())
    return data


def shape_class(shape: Sequence[int], itemsize: int) -> str:
    """The class of a move over ``shape`` (merged dimensions, the output's order): small (at most
    the table's small_bytes), odd_rows (output rows not whole 16 bytes), batched (3 or more
    dimensions), ragged (an extent of the last two no multiple of 64), or large."""
    if math.prod(shape) * itemsize <= table()["small_bytes"]:
        return "small"
    if shape[-1] * itemsize % 16:
        return "odd_rows"
    if len(shape) >= 3:
        return "batched"
    if any(n % 64 for n in shape[-2:]):
        return "ragged"
    return "large"


def tile_for(kind: str, shape: Sequence[int], itemsize: int, multiprocessors: int,
             tiles_per_sm: int) -> tuple[int, int] | None:
    """The tile of the TMA ``kind`` kernel over ``shape`` (the source's, rows and columns last): the
    tuned spec's (None) where it gives every multiprocessor ``tiles_per_sm`` tiles, else the first
    of SMALL_TILES that does, else the smallest. A few large tiles leave most multiprocessors idle
    and each one's tile a long chain of load, move and store; a small move wants many short ones."""
    if len(shape) < 2:
        return None
    want = tiles_per_sm * multiprocessors
    tuned = spec_for(kind, _BY_SIZE[itemsize], len(shape)).tensors[0].box[-2:]
    boxes: list[tuple[tuple[int, int] | None, Sequence[int]]] = [(None, tuned)]
    boxes += [(tile, small_tile_box(tile, itemsize)) for tile in SMALL_TILES[kind]]
    outer = math.prod(shape[:-2])
    for tile, (rows, cols) in boxes:
        if outer * -(-shape[-2] // rows) * -(-shape[-1] // cols) >= want:
            return tile
    return boxes[-1][0]


NARROW_TMA_ROWS = 64  # rows of the TMA transpose's tiles fitted to a plane narrower than its tuned box
NARROW_TMA_MAX_ROW_BYTES = 128  # and the rows they fit, shorter than this (wider ones were not measured)


def fitted_tile(shape: Sequence[int], itemsize: int) -> tuple[int, int] | None:
    """The TMA transpose's tile for a plane of ``shape`` ([*batch, R, C], the source's) whose rows are
    narrower than the tuned box and than NARROW_TMA_MAX_ROW_BYTES: NARROW_TMA_ROWS rows as wide as the
    rows (their bytes rounded up to 16), not a box mostly outside the tensor; None (the tuned tile)
    for wider planes. On an H100 (2026-11-27, lab.narrow_routes, tests/data/hw_h100/narrow_routes.json),
    500000 x 48 uint8 took 21.2 us a launch in 64 x 48-byte tiles against 24.8 in the tuned 256 x 128;
    500000 x 48 bfloat16 35.3 against 39.1; 300000 x 20 float32 19.7 against 22.6 (Triton 19.3, 35.7
    and 19.1). Each width is a kernel of its own, compiled at its first call like every tile's."""
    if itemsize not in _BY_SIZE or shape[-1] * itemsize >= NARROW_TMA_MAX_ROW_BYTES:
        return None
    if shape[-1] >= spec_for("transpose", _BY_SIZE[itemsize], len(shape)).tensors[0].box[-1]:
        return None
    return NARROW_TMA_ROWS, -(-shape[-1] * itemsize // 16) * 16


def _whole_16(strides: Sequence[int], itemsize: int) -> bool:
    """Strides TMA takes: positive whole 16 bytes, the innermost 1."""
    return all(s > 0 and s * itemsize % 16 == 0 for s in strides[:-1]) and strides[-1] == 1


def plan_move(shape: Sequence[int], src: Sequence[int], dst: Sequence[int], itemsize: int, src_align: int,
              dst_align: int, multiprocessors: int = 132) -> Move:
    """How ``dst = src`` goes for views of ``shape`` with element strides ``src`` and ``dst`` whose
    pointers are ``src_align`` and ``dst_align`` bytes past a 16-byte boundary: TMA where it can
    address both (strides of whole 16 bytes, aligned pointers, contiguous rows), the strided kernels
    for everything else. Pure: the decision `move` caches per layout."""
    if 0 in shape:
        return Move("none", itemsize)
    merged, (ms, md) = merge_dims(shape, src, dst)
    if itemsize == 16 and ms[-1] == 1 and md[-1] == 1:  # contiguous 16-byte elements: pairs of 8 bytes
        merged, (ms, md) = merge_dims([*merged, 2], [s * 2 for s in ms] + [1], [s * 2 for s in md] + [1])
        itemsize = 8
    if len(merged) > sp.MAX_RANK:
        return Move("split", itemsize, tuple(merged), tuple(ms), tuple(merged), tuple(md))
    config = table()["classes"][shape_class(merged, itemsize)]
    min_row, min_plane, per_sm = config["tma_min_row_bytes"], config["tma_min_plane"], config["strided_blocks_per_sm"]
    tiles_per_sm = config["tma_tiles_per_sm"]
    aligned = src_align == 0 and dst_align == 0 and itemsize in ELEMENT_SIZES
    m, s_, d_ = tuple(merged), tuple(ms), tuple(md)
    transposed = not (ms[-1] == 1 and md[-1] == 1)
    if math.prod(merged) * itemsize <= config["gather_max_bytes_transposed" if transposed else "gather_max_bytes"]:
        # few bytes: the gather kernel's one load and store per element (no tensor map, no barrier, no
        # shared memory) ends sooner than any tiled kernel; the table says up to where, per class,
        # for copies and for moves that transpose
        return Move("gather", itemsize, m, s_, m, d_, sp.gather(merged, ms, md, itemsize, multiprocessors, per_sm))
    if ms[-1] == 1 and md[-1] == 1:
        if len(merged) == 1:
            if aligned and merged[0] * itemsize >= 16:
                return Move("flat", itemsize, m, s_, m, d_,
                            tile=tile_for("copy", flat_layout(merged[0] * itemsize), 4, multiprocessors, tiles_per_sm))
        elif aligned and merged[-1] * itemsize >= min_row and _whole_16(ms, itemsize) \
                and _whole_16(md, itemsize):
            return Move("copy", itemsize, m, s_, m, d_, tile=tile_for("copy", m, itemsize, multiprocessors,
                                                                        tiles_per_sm))
        return Move("gather", itemsize, m, s_, m, d_, sp.gather(merged, ms, md, itemsize, multiprocessors, per_sm))
    inner = [p for p in range(len(merged) - 1) if ms[p] == 1]
    if md[-1] == 1 and inner:
        p = inner[-1]
        batch = [i for i in range(len(merged) - 1) if i != p]
        rows, cols = merged[-1], merged[p]
        shape_t = (*(merged[i] for i in batch), rows, cols)
        src_t = (*(ms[i] for i in batch), ms[-1], 1)
        dst_t = (*(md[i] for i in batch), md[p], 1)
        # the plane kernel's layout: [*batch, R, C] with the output's strides of R (1) and C
        dst_plane = (*(md[i] for i in batch), 1, md[p])
        tma = aligned and min(rows, cols) >= min_plane and _whole_16(src_t, itemsize) and _whole_16(dst_t, itemsize)
        nbytes = math.prod(merged) * itemsize
        if itemsize in sp.TILE_SIDE and nbytes <= config["tile_max_bytes" if tma else "tile_max_bytes_strided"]:
            tiled = sp.tile(shape_t[:-2], rows, cols, src_t, dst_plane, itemsize, src_align, dst_align,
                            multiprocessors)
            if sp.tile_fits(tiled):
                # every tile in flight at once, moved by plain words: a small move ends sooner so than
                # through tensor maps and barriers, and rows of odd bytes move in wider words than the
                # plane kernel's (the table says up to where, per class and for each)
                return Move("tile", itemsize, shape_t, src_t, shape_t, dst_plane, tiled)
        in_bytes = sp.narrow_fits(rows, cols, src_t, itemsize)
        in_words = sp.narrow_words_fit(cols, src_t, itemsize, src_align)

        def narrow(words: bool) -> Move:
            return Move("narrow", itemsize, shape_t, src_t, shape_t, dst_plane,
                        sp.narrow(shape_t[:-2], rows, cols, src_t, dst_plane, itemsize, multiprocessors,
                                  src_align=src_align, words=words))
        plane = sp.plane(shape_t[:-2], rows, cols, src_t, dst_plane, itemsize, multiprocessors, per_sm, src_align)
        words = in_words and bool(config["narrow_words"])
        if tma and not (words and sp.narrow_words_over_tma(plane)):
            tile = tile_for("transpose", shape_t, itemsize, multiprocessors, tiles_per_sm)
            return Move("transpose", itemsize, shape_t, src_t, (*shape_t[:-2], cols, rows), dst_t,
                        tile=fitted_tile(shape_t, itemsize) if tile is None else tile)
        if nbytes <= config["narrow_max_bytes"] and (in_bytes or words):
            # a small plane of short contiguous rows: tiles of whole rows, each one span of the source (the
            # table says up to where: on an H100, 16385 x 8 bfloat16 2.23 us a launch against the plane's
            # 2.94, tests/data/hw_h100/ops_routes.json), in words where the rows are whole words on words
            # (40000 x 12 uint8 2.5 us against 3.0 in bytes, tests/data/hw_h100/narrow_routes.json) and the
            # table lets them
            return narrow(words)
        if words and sp.narrow_words_pays(plane):
            return narrow(True)
        return Move("plane", itemsize, shape_t, src_t, shape_t, dst_plane, plane)
    return Move("gather", itemsize, m, s_, m, d_, sp.gather(merged, ms, md, itemsize, multiprocessors, per_sm))


_MOVES: dict[tuple, Move] = {}
_MOVES_LIMIT = 4096


def move(call: str, src: ArrayView, dst: ArrayView) -> None:
    """``dst = src`` element by element (the same shape), by the kernel `plan_move` picks for their
    layout (decided once per layout and alignment)."""
    key = (src.shape, src.strides, dst.strides, src.itemsize, src.ptr & 15, dst.ptr & 15)
    m = _MOVES.get(key)
    if m is None:
        problem = _size_problem(src, call)
        if problem is not None:
            raise problem
        m = plan_move(src.shape, src.strides, dst.strides, src.itemsize, src.ptr & 15, dst.ptr & 15,
                      _sms(src) if 0 not in src.shape else 132)
        if len(_MOVES) >= _MOVES_LIMIT:
            _MOVES.clear()
        _MOVES[key] = m
    _RUN[m.how](call, m, src, dst)


def _sms(view: ArrayView) -> int:
    device = view.device if view.device is not None else runtime.pointer_device(view.ptr)
    from tmagen.kernels import multiprocessors

    return multiprocessors(device)


def _device(view: ArrayView) -> int:
    return view.device if view.device is not None else runtime.pointer_device(view.ptr)


def _as(view: ArrayView, shape: Sequence[int], strides: Sequence[int], itemsize: int) -> ArrayView:
    v = view.with_layout(shape, strides)
    if itemsize != view.itemsize:
        v.itemsize, v.carrier = itemsize, _BY_SIZE[itemsize]
    return v


def _run_none(call: str, m: Move, src: ArrayView, dst: ArrayView) -> None:
    return None


def _run_tma(call: str, m: Move, src: ArrayView, dst: ArrayView) -> None:
    carrier = _carrier(m.itemsize, src.carrier if src.itemsize == m.itemsize else None)
    s, d = _as(src, m.shape, m.src, m.itemsize), _as(dst, m.dst_shape, m.dst, m.itemsize)
    try:
        launch_kernel(m.how, carrier, len(m.shape), s, d, m.tile)
    except ArgumentError:  # a layout past the TMA kernel's limits (extents, the tile walk): the strided kernels
        fallback = _pointer_move(m, src)
        _MOVES[(src.shape, src.strides, dst.strides, src.itemsize, src.ptr & 15, dst.ptr & 15)] = fallback
        _RUN[fallback.how](call, fallback, src, dst)


def _pointer_move(m: Move, src: ArrayView) -> Move:
    sms = _sms(src)
    if m.how == "transpose":
        dst_plane = (*m.dst[:-2], 1, m.dst[-2])
        return replace(m, how="plane", dst_shape=m.shape, dst=dst_plane,
                       strided=sp.plane(m.shape[:-2], m.shape[-2], m.shape[-1], m.src, dst_plane, m.itemsize, sms))
    return replace(m, how="gather", strided=sp.gather(m.shape, m.src, m.dst, m.itemsize, sms))


def _run_flat(call: str, m: Move, src: ArrayView, dst: ArrayView) -> None:
    # One contiguous run of bytes: its whole 16-byte chunks moved as 4-byte words by the tuned
    # float32 kernels, as rows of the 2-D one where the count allows (rank 1 boxes are at most
    # 256 elements). A TMA store writes whole 16-byte chunks, so the last bytes past the final
    # chunk go by a plain device copy on the same stream, never by TMA.
    nbytes = m.shape[0] * m.itemsize
    whole = nbytes // 16 * 16
    if whole < nbytes:
        copy_bytes(dst.ptr + whole, src.ptr + whole, nbytes - whole, current_stream(src), _device(src))
    layout = flat_layout(nbytes)
    strides = _contiguous(layout)
    launch_kernel("copy", "float32", len(layout), _as(src, layout, strides, 4), _as(dst, layout, strides, 4),
                  m.tile)


def _run_strided(call: str, m: Move, src: ArrayView, dst: ArrayView) -> None:
    assert m.strided is not None
    key = (m.strided, src.ptr, dst.ptr)
    prepared = _PREPARED.get(key)
    device = _device(src)
    stream = current_stream(src)
    if prepared is None:
        prepared = prepare_strided(m.strided, src.ptr, dst.ptr, device, stream)
        if len(_PREPARED) >= _MOVES_LIMIT:
            _PREPARED.clear()
        _PREPARED[key] = prepared
    run_strided(prepared, stream, device)


_PREPARED: dict[tuple, Any] = {}


def _run_split(call: str, m: Move, src: ArrayView, dst: ArrayView) -> None:
    for i in range(m.shape[0]):
        s, d = _as(src, m.shape[1:], m.src[1:], m.itemsize), _as(dst, m.dst_shape[1:], m.dst[1:], m.itemsize)
        s.ptr, d.ptr = src.ptr + i * m.src[0] * m.itemsize, dst.ptr + i * m.dst[0] * m.itemsize
        move(call, s, d)


_RUN = {"none": _run_none, "flat": _run_flat, "copy": _run_tma, "transpose": _run_tma, "gather": _run_strided,
        "plane": _run_strided, "tile": _run_strided, "narrow": _run_strided, "split": _run_split}


# The edges of a move, one function each (the CPU tests put a numpy GPU in their place).
def launch_kernel(kind: str, carrier: str, rank: int, src: ArrayView, dst: ArrayView,
                  tile: tuple[int, int] | None = None) -> None:
    """The TMA kernel of ``kind`` (the tuned spec's, or with ``tile``) on ``src`` into ``dst``."""
    k = kernel(kind, carrier, rank, tile)
    k.last_launch = None
    k.launch([src], dst)
    recording = getattr(_LOCAL, "recording", None)
    if recording is not None:
        recording.append(None if k.last_launch is None else ("launch", *k.last_launch))


def prepare_strided(call: StridedCall, src: int, dst: int, device: int, stream: int) -> Any:
    from tmagen import strided

    return strided.prepare(call, src, dst, device, stream)


def run_strided(prepared: Any, stream: int, device: int) -> None:
    from tmagen import strided

    if runtime.current_context() != runtime.primary_context(device):
        with runtime.OnDevice(device):
            strided.run(prepared, stream)
    else:
        strided.run(prepared, stream)
    recording = getattr(_LOCAL, "recording", None)
    if recording is not None:
        recording.append(("launch", prepared.function, prepared.grid, prepared.block, 0, prepared.params,
                          sp.DEPENDENT_LAUNCH))


def copy_bytes(dst: int, src: int, nbytes: int, stream: int, device: int) -> None:
    runtime.copy_bytes_async(dst, src, nbytes, stream, device)
    recording = getattr(_LOCAL, "recording", None)
    if recording is not None:
        recording.append(None)  # not replayed: the slow path runs such calls


# ----------------------------------------------------------------------------- the per-call path of PyTorch
# A call on a torch tensor whose layout, pointer and output pointer were seen before replays the
# launches the first such call made: no ArrayView, no route, no check, no tensor map is built again
# (PyTorch's caching allocator hands a loop the same output block call after call). The key is
# everything the launches were derived from: the input's pointer, shape, strides, dtype and device,
# the op and its dims, and the output's pointer; the stream is read per call. The per-call work is
# a dict lookup, torch.empty_strided and one cuLaunchKernel per launch through ctypes with its
# arguments built once (c_void_p and c_uint values: ctypes converts nothing). Measured on the CPU
# with the launch stubbed (64 x 64 float32): 3.8 us per call with a context query through ctypes,
# torch.empty with keywords and the arguments converted per call; 2.2 us so.
_LOCAL = threading.local()  # .recording: the launches of the call this thread is making, or None
_TENSOR: Any = None  # torch.Tensor, where PyTorch is installed
_REPLAYS_LIMIT = 1024
_OUTPUTS_LIMIT = 16  # output pointers remembered per input layout
_Launch = Replayed  # one replayed launch (kernels.replayable)


@dataclass(slots=True)
class _Replay:
    """What calls on one input layout made: the output's shape, strides, dtype and torch device, and
    per output pointer the launches (`_Launch`)."""

    shape: tuple[int, ...]
    strides: tuple[int, ...]
    dtype: Any
    device: Any
    launches: dict[int, tuple[_Launch, ...]]


_REPLAYS: dict[tuple, _Replay] = {}


def _replay(op: str, x: Any, dims: tuple[int, ...], eager: Any) -> Any:
    if (x.requires_grad and _GRAD_ENABLED()) or _IS_COMPILING():  # autograd and torch.compile: the custom op
        return _TORCH_OPS[op](x, list(dims)) if op == "permute" else _TORCH_OPS[op](x)
    return _replay_call(op, x, dims, eager)


def _replay_call(op: str, x: Any, dims: tuple[int, ...], eager: Any) -> Any:
    """`_replay` below autograd and torch.compile: what the custom operators run, so that a call
    through ``torch.ops.tmagen`` (a compiled graph's, autograd's) repeats its launches too."""
    ordinal = x.get_device()
    key = (op, x.data_ptr(), x.shape, x.stride(), x.dtype, ordinal, dims)
    seen = _REPLAYS.get(key)
    if seen is not None:
        out = _EMPTY_STRIDED(seen.shape, seen.strides, dtype=seen.dtype, device=seen.device)
        runs = seen.launches.get(out.data_ptr())
        if runs is not None and _TORCH_DEVICE() == ordinal and launch_again(runs, _TORCH_STREAM(ordinal)):
            return out
    elif ordinal < 0:  # off the GPU: refused by the eager path, before anything is allocated
        return eager(*_eager_args(op, x, dims))
    else:
        out = _TORCH_MODULE.empty(_out_shape(op, tuple(x.shape), dims), dtype=x.dtype, device=x.device)
    result, recorded = _recorded(op, x, dims, out, eager, ordinal)
    if recorded is None:
        return result
    if seen is None:
        if len(_REPLAYS) >= _REPLAYS_LIMIT:
            _REPLAYS.clear()
        seen = _REPLAYS[key] = _Replay(tuple(result.shape), tuple(result.stride()), result.dtype, result.device, {})
    if len(seen.launches) >= _OUTPUTS_LIMIT:
        seen.launches.clear()
    seen.launches[result.data_ptr()] = recorded
    return result


# Calls with ``out``: the same, keyed by the output's pointer, shape, strides and dtype too. A call
# that passes out= to spare an allocation must not take the slow path every time.
_REPLAYS_INTO: dict[tuple, tuple[_Launch, ...]] = {}


def _replay_into(op: str, x: Any, dims: tuple[int, ...], out: Any, eager: Any) -> Any:
    if (type(out) is not _TENSOR or ((x.requires_grad or out.requires_grad) and _GRAD_ENABLED())
            or _IS_COMPILING()):
        return eager(*_eager_args(op, x, dims), out=out)
    ordinal = x.get_device()
    key = (op, x.data_ptr(), x.shape, x.stride(), x.dtype, ordinal, dims, out.data_ptr(), out.shape, out.stride(),
           out.dtype, out.get_device())
    runs = _REPLAYS_INTO.get(key)
    if runs is not None and _TORCH_DEVICE() == ordinal and launch_again(runs, _TORCH_STREAM(ordinal)):
        return out
    if ordinal < 0:  # off the GPU: the eager path refuses it
        return eager(*_eager_args(op, x, dims), out=out)
    result, recorded = _recorded(op, x, dims, out, eager, ordinal)
    if recorded is not None:
        if len(_REPLAYS_INTO) >= _REPLAYS_LIMIT:
            _REPLAYS_INTO.clear()
        _REPLAYS_INTO[key] = recorded
    return result


def _eager_args(op: str, x: Any, dims: tuple[int, ...]) -> tuple[Any, ...]:
    """The positional arguments of ``op``'s eager function: the input, and a permute's dims."""
    return (x, dims) if op == "permute" else (x,)


def _forget_replays() -> None:
    """Forgets every call's launches (tests that change the table or the tiles between calls)."""
    _REPLAYS.clear()
    _REPLAYS_INTO.clear()


def _recorded(op: str, x: Any, dims: tuple[int, ...], out: Any, eager: Any,
              ordinal: int) -> tuple[Any, tuple[_Launch, ...] | None]:
    """The eager call's result, and its launches ready to replay, or None where they cannot be (a
    launch that is not replayed, or another context than the device's primary one current)."""
    recorded: list[Any] = []
    _LOCAL.recording = recorded
    try:
        result = eager(*_eager_args(op, x, dims), out=out)
    finally:
        _LOCAL.recording = None
    if not all(r is not None for r in recorded):
        return result, None
    if runtime.current_context() != runtime.primary_context(ordinal):  # under a pushed context: not replayed here
        return result, None
    return result, tuple(replayable(*r[1:]) for r in recorded)


def _out_shape(op: str, shape: tuple[int, ...], dims: tuple[int, ...]) -> tuple[int, ...]:
    if op == "transpose" and len(shape) >= 2:
        return (*shape[:-2], shape[-1], shape[-2])
    if op == "permute" and len(dims) == len(shape) and all(-len(shape) <= d < len(shape) for d in dims):
        return tuple(shape[d] for d in dims)
    return shape  # copy, and calls the eager path refuses with its message


@lru_cache(maxsize=1024)
def flat_layout(nbytes: int) -> tuple[int, ...]:
    """How a flat copy of ``nbytes`` views its whole 16-byte chunks (the last bytes go apart): as
    4-byte words in `contiguous_layout`'s rows. Decided once per size, for the plan and the launch."""
    return tuple(contiguous_layout(nbytes // 16 * 4, 4))


def contiguous_layout(count: int, itemsize: int) -> list[int]:
    """How `copy` views ``count`` contiguous elements: rows of the largest power of two up to 64 KiB
    that divides the count, when that is at least the 2-D tuned box's row; else one dimension."""
    row = spec_for("copy", _BY_SIZE[itemsize], 2).tensors[0].box[-1]
    cols = 1
    while cols * 2 * itemsize <= 65536 and count % (cols * 2) == 0:
        cols *= 2
    return [count // cols, cols] if cols >= row and count // cols > 1 else [count]


def _contiguous(shape: Sequence[int]) -> list[int]:
    return [shape[1], 1] if len(shape) == 2 else [1]


# ----------------------------------------------------------------------------- PyTorch
_TORCH_MODULE: Any = None
_TORCH_STREAM: Any = None  # device -> its current stream handle
_TORCH_DEVICE: Any = None  # () -> the current device
_EMPTY_STRIDED: Any = None
_GRAD_ENABLED: Any = None
_IS_COMPILING: Any = None
_TORCH_OPS: dict[str, Any] = {}  # op -> torch.ops.tmagen.<op>


def _op_body(op: str, x: Any, dims: tuple[int, ...], eager: Any) -> Any:
    """The body of ``torch.ops.tmagen.<op>``: plain tensors through `_replay_call`, the rest (a
    Parameter, a subclass) through the eager path."""
    return _replay_call(op, x, dims, eager) if type(x) is _TENSOR else eager(*_eager_args(op, x, dims))


def _torch() -> Any:
    return _TORCH_MODULE


def _register_torch_ops() -> None:
    global _TORCH_MODULE, _TENSOR, _TORCH_STREAM, _TORCH_DEVICE, _EMPTY_STRIDED, _GRAD_ENABLED, _IS_COMPILING
    import torch

    from tmagen import torch_ops  # registers torch.ops.tmagen.*, which run the eager paths below

    # the operators' bodies replay a seen layout's launches, as tmagen.ops's own calls do: running the
    # eager path on every call cost torch.ops.tmagen.transpose 52 us of host time against
    # tmagen.ops.transpose's 13.7 (16 x 16 float32, H200, 2026-11-29)
    torch_ops.register(
        transpose_eager=lambda x: _op_body("transpose", x, (), transpose_eager),
        copy_eager=lambda x: _op_body("copy", x, (), copy_eager),
        permute_eager=lambda x, dims: _op_body("permute", x, tuple(dims), permute_eager))
    _TORCH_MODULE = torch
    _TENSOR = torch.Tensor
    _TORCH_STREAM = getattr(torch._C, "_cuda_getCurrentRawStream", None) or (
        lambda d: torch.cuda.current_stream(d).cuda_stream)
    _TORCH_DEVICE = getattr(torch._C, "_cuda_getDevice", None) or torch.cuda.current_device
    _EMPTY_STRIDED = torch.empty_strided
    _GRAD_ENABLED = torch.is_grad_enabled
    _IS_COMPILING = torch.compiler.is_compiling
    _TORCH_OPS.update(transpose=torch.ops.tmagen.transpose, copy=torch.ops.tmagen.copy,
                      permute=torch.ops.tmagen.permute)


if importlib.util.find_spec("torch") is not None:
    _register_torch_ops()
use_gpu_copy(lambda x, out: copy(x, out=out))  # ops_matmul's scratch copies: transposed views as TMA transposes

__all__ = ["transpose", "copy", "permute", "matmul", "quantize_fp8", "spec_for", "kernel", "tuned_specs", "plan_move",
           "Move"]
