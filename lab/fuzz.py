"""Random valid specs for the reliability campaign: seeded, reproducible, from every corner of the space.

`draw_case(seed, index)` is a pure function of its two integers: the spec that a campaign of
`seed` draws as its number `index`, and the runs that check it on the GPU. Candidates are drawn
until `tmagen.plan.check` accepts one; those refused on the way are counted by what refused
them, so the space the rules close off is measured too.

The space: every dtype kernels take, ranks 1 to 5, every swizzle (and on sm_100a every 128B
atomicity) and interleave the target has, element strides, both out-of-bounds fills, L2
promotion, shared-memory offsets, promised alignments, boxes from one 16-byte chunk to the
largest that fits, shapes that are no multiple of the box (and smaller than it), padded
strides, several tensors per inspect kernel, start coordinates partly or wholly outside the
tensor, L2 hints (copy, transpose, inspect) and declared reductions (inspect), and the kernels' own
parameters (stages, boxes per stage, units, tiles per stage).

A kernel kind plugs in with one function, registered in `KINDS`:
``draw(rng, target) -> (spec dict without its name, [run, ...])``. A run is
``{"call": <tmagen.verify.Verifier method>, "args": {...}}``; the first run of each kernel is
at the spec's own shape, the others at a run-time shape, strides or coordinates of their own.
"""

from __future__ import annotations

import math
import random
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tmagen.dtypes import DTYPES
from tmagen.errors import SpecError
from tmagen.limits import TARGETS
from tmagen.plan import check, resolve
from tmagen.plan import kernels as planned_kernels
from tmagen.spec import parse_spec
from tmagen.toolbox import REDUCE_OPS, reduce_ops_for
from tmagen.verify import MATMUL_EPILOGUES

Run = dict[str, Any]
Draw = Callable[[random.Random, str], tuple[dict[str, Any], list[Run]]]

KERNEL_DTYPES = tuple(name for name, d in DTYPES.items() if not d.packed)
TENSOR_BYTES_CAP = 4 << 20  # per run: keeps one verification to milliseconds
RUNTIME_TILES = 2  # a run-time shape spans up to this many boxes per dimension, ragged
# Refusals that a smaller box or fewer buffers cure: the draw shrinks instead of starting over.
SIZE_RULES = {"kernel-fits-shared-memory", "box-fits-shared-memory", "box-bytes-driver-limit"}
TARGET_WEIGHTS = {"sm_90a": 0.9, "sm_100a": 0.1}  # sm_100a: compiled, cannot run on Hopper


@dataclass(frozen=True)
class Case:
    """One accepted spec of a campaign and the runs that check it."""

    seed: int
    index: int
    spec: dict[str, Any]  # JSON that tmagen.plan.check accepts
    runs: tuple[Run, ...]
    attempts: int  # candidates drawn, this one included
    refused: dict[str, int] = field(default_factory=dict)  # rule id or "form" -> candidates refused

    @property
    def name(self) -> str:
        return str(self.spec["name"])

    @property
    def kind(self) -> str:
        return str(self.spec["kernel"]["kind"])

    @property
    def target(self) -> str:
        return str(self.spec.get("target", "sm_90a"))

    def features(self) -> dict[str, list[str]]:
        """The dimensions of the space this case covers: each value once per tensor that has it."""
        tensors = self.spec["tensors"]
        k = self.spec["kernel"]

        def per_tensor(fn: Callable[[dict[str, Any]], object]) -> list[str]:
            return [str(fn(t)) for t in tensors]

        return {
            "kind": [self.kind],
            "target": [self.target],
            "dtype": per_tensor(lambda t: t["dtype"]),
            "rank": per_tensor(lambda t: len(t["shape"])),
            "swizzle": per_tensor(_swizzle_name),
            "interleave": per_tensor(lambda t: t.get("interleave", "none")),
            "oob_fill": per_tensor(lambda t: t.get("oob_fill", "zero")),
            "l2_promotion": per_tensor(lambda t: t.get("l2_promotion", "none")),
            "l2_hint": per_tensor(lambda t: t.get("l2_hint", "normal")),
            "reduce": per_tensor(lambda t: t.get("reduce", "none")),
            "smem_offset": per_tensor(lambda t: t.get("smem_offset", 0)),
            "element_strides": per_tensor(lambda t: "strided" if any(e != 1 for e in t.get("element_strides") or [1])
                                          else "dense"),
            "strides": per_tensor(lambda t: "padded" if t.get("strides") else "contiguous"),
            "shape": per_tensor(_shape_class),
            "box_bytes": per_tensor(_box_class),
            "tensors": [str(len(tensors))],
            "coords": [_coords_class(self.spec)] if self.kind == "inspect" else [],
            "matmul_epilogue": ([str(r["args"].get("epilogue", "none")) for r in self.runs]
                                if self.kind == "matmul" else []),
            "matmul_launch": self._matmul_launches() if self.kind == "matmul" else [],
            "kernel": [f"{key}={value}" for key, value in sorted(k.items()) if key not in ("kind", "coords")],
        }


    def _matmul_launches(self) -> list[str]:
        """Each run's kernel as the family chooses it on 132 SMs with its first dispatch table (the
        H200's; an H100 launch may take another tile of the family by its own): the spec's own tile,
        another tile of the family, or a twin in pairs (rows that straddle sectors)."""
        family = resolve(parse_spec(self.spec)).kernel.detail
        launches = []
        for run in self.runs:
            variant = family.choose(*run["args"]["mnk"], MULTIPROCESSORS).variant
            launches.append("twin in pairs" if variant in family.twins else "own tile" if variant == 0
                            else "family tile")
        return launches


MULTIPROCESSORS = 132  # an H100's or H200's SMs, for the choices a report tallies


def _swizzle_name(t: dict[str, Any]) -> str:
    sw = t.get("swizzle", {})
    mode, atom = sw.get("mode", "none"), sw.get("atomicity", "16B")
    return mode if atom == "16B" else f"{mode}_atom_{atom}"


def _shape_class(t: dict[str, Any]) -> str:
    shape, box = t["shape"], t["box"]
    if any(n < b for n, b in zip(shape, box)):
        return "smaller than the box"
    return "ragged" if any(n % b for n, b in zip(shape, box)) else "whole boxes"


def _box_class(t: dict[str, Any]) -> str:
    nbytes = math.prod(t["box"]) * DTYPES[t["dtype"]].nbytes
    return "16 B" if nbytes == 16 else "<= 4 KiB" if nbytes <= 4096 else "<= 64 KiB" if nbytes <= 65536 else "> 64 KiB"


def _coords_class(spec: dict[str, Any]) -> str:
    coords = spec["kernel"].get("coords")
    if coords is None:
        return "origin"
    t = spec["tensors"][0]
    if any(c < 0 or c + b > n for c, b, n in zip(coords, t["box"], t["shape"])):
        return "partly or wholly outside"
    return "inside"


# ----------------------------------------------------------------------------- drawing helpers
def _weighted(rng: random.Random, weights: dict[Any, float]) -> Any:
    return rng.choices(list(weights), weights=list(weights.values()))[0]


def _chance(rng: random.Random, p: float) -> bool:
    return rng.random() < p


def _inner_box_bytes(rng: random.Random, limit: int) -> int:
    """A multiple of 16 bytes from one chunk to ``limit``, the ends drawn often."""
    chunks = max(limit // 16, 1)
    r = rng.random()
    return 16 * (1 if r < 0.25 else chunks if r < 0.5 else rng.randint(1, chunks))


def _outer_box_dim(rng: random.Random) -> int:
    r = rng.random()
    return 1 if r < 0.2 else rng.randint(2, 8) if r < 0.5 else rng.randint(9, 64) if r < 0.75 else rng.randint(65, 256)


def _swizzle(rng: random.Random, target: str) -> dict[str, str]:
    """Every mode the target has, equally likely (the 128B atomicities count as modes)."""
    modes = [{"mode": m} for m in ("none", "32B", "64B", "128B")]
    if TARGETS[target].atom_swizzles:
        modes += [{"mode": "128B", "atomicity": a} for a in ("32B", "32B_flip_8B", "64B")]
    return dict(rng.choice(modes))


SPANS = {"none": 0, "32B": 32, "64B": 64, "128B": 128}


def _alignment(rng: random.Random) -> int:
    # 8 is refused by the rules (global-address-alignment): a candidate the filter must catch
    return _weighted(rng, {16: 4, 32: 2, 64: 1, 128: 1, 256: 1, 4096: 1, 8: 0.1})


def _smem_offset(rng: random.Random) -> int:
    if _chance(rng, 0.4):
        return 0
    return 64 if _chance(rng, 0.02) else 128 * rng.randint(1, 7)  # 64: refused (smem-offset-alignment)


def _oob_fill(rng: random.Random, dtype: str) -> str:
    return "nan" if _chance(rng, 0.35 if DTYPES[dtype].is_float else 0.03) else "zero"


def _base_tensor(rng: random.Random, name: str, dtype: str, box: list[int], swizzle: dict[str, str]) -> dict[str, Any]:
    return {"name": name, "dtype": dtype, "shape": list(box), "box": box, "swizzle": swizzle,
            "alignment": _alignment(rng), "l2_promotion": rng.choice(["none", "64B", "128B", "256B"]),
            "oob_fill": _oob_fill(rng, dtype), "smem_offset": _smem_offset(rng), "l2_hint": _l2_hint(rng)}


def _l2_hint(rng: random.Random) -> str:
    """The L2 eviction priority the copy, transpose and inspect kernels pass to their copies."""
    return _weighted(rng, {"normal": 0.5, "evict_first": 0.25, "evict_last": 0.25})


def _reduce(rng: random.Random, dtype: str) -> str | None:
    """A reduction declared on an inspect spec's tensor (inspect only loads it; the header prints it):
    one its type has, or rarely any op, to count the refusals of rule reduce-op-for-type."""
    if not _chance(rng, 0.2):
        return None
    allowed = reduce_ops_for(dtype)
    return rng.choice(allowed) if allowed and not _chance(rng, 0.1) else rng.choice(list(REDUCE_OPS))


def _extent(rng: random.Random, box: int, max_tiles: int = 3) -> int:
    """An extent that is rarely a multiple of ``box``, sometimes smaller than it."""
    tiles = _weighted(rng, {0: 0.15, 1: 0.35, 2: 0.3, 3: 0.2}) if max_tiles >= 3 else rng.randint(0, max_tiles)
    return max(1, tiles * box + rng.randrange(box))


def _round_up(n: int, to: int) -> int:
    return -(-n // to) * to


def _shape(rng: random.Random, box: list[int], es: int, quantum: int, max_tiles: int = 3) -> list[int]:
    """A shape for ``box``; the innermost extent a multiple of ``quantum`` elements (1: free)."""
    shape = [_extent(rng, b, max_tiles) for b in box]
    shape[-1] = _round_up(shape[-1], quantum)
    return _cap(shape, es, quantum)


def _cap(shape: list[int], es: int, quantum: int) -> list[int]:
    """Halves extents, outermost first, until the tensor holds at most TENSOR_BYTES_CAP bytes."""
    d = 0
    while math.prod(shape) * es > TENSOR_BYTES_CAP:
        if d == len(shape) - 1:
            shape[d] = max(quantum, _round_up(shape[d] // 2, quantum))
        else:
            shape[d] = max(1, shape[d] // 2)
        d = (d + 1) % len(shape)
    return shape


def _padded_strides(rng: random.Random, shape: list[int], es: int, align: int) -> list[int]:
    """Element strides, outermost first, each outer one a multiple of ``align`` bytes with some
    padding; outer extents halved until the padded tensor fits TENSOR_BYTES_CAP."""
    quantum = align // math.gcd(align, es)
    pads = [quantum * rng.randint(0, 3) for _ in shape[1:]]
    while True:
        strides = [1]
        for n, pad in zip(reversed(shape[1:]), reversed(pads)):
            strides.insert(0, _round_up(strides[0] * n + pad, quantum))
        if _strides_span(shape, strides) * es <= TENSOR_BYTES_CAP:
            return strides
        d = next((d for d in range(len(shape) - 1) if shape[d] > 1), len(shape) - 1)
        shape[d] = max(1, shape[d] // 2)


def _strides_span(shape: list[int], strides: list[int] | None) -> int:
    if strides is None:
        return math.prod(shape)
    return 1 + sum((n - 1) * s for n, s in zip(shape, strides))


def _fit(rng: random.Random, spec: dict[str, Any], shrinkable: Callable[[dict[str, Any]], list[tuple[int, int, int]]],
         kernel_knobs: dict[str, int] | None = None) -> bool:
    """Shrinks boxes (then ``kernel_knobs``, down to their minimum) until no size rule refuses
    ``spec``; False if it cannot.

    ``shrinkable(spec)`` lists (tensor, dimension, quantum): box dimensions that may be halved,
    each kept a multiple of its quantum."""
    for _ in range(64):
        try:
            refused = {v.rule for v in check(parse_spec({"name": "fit", **spec}))}
        except SpecError:
            return True  # a form error: the final check counts it
        if not refused & SIZE_RULES:
            return True
        dims = [(spec["tensors"][i]["box"][d], i, d, q) for i, d, q in shrinkable(spec)
                if spec["tensors"][i]["box"][d] > q]
        if dims:
            _, i, d, q = max(dims)
            box = spec["tensors"][i]["box"]
            box[d] = max(q, box[d] // 2 // q * q)
            continue
        knobs = {k: low for k, low in (kernel_knobs or {}).items() if spec["kernel"].get(k, low) > low}
        if not knobs:
            return False
        knob = rng.choice(sorted(knobs))
        spec["kernel"][knob] = max(knobs[knob], spec["kernel"][knob] // 2)
    return False


# ----------------------------------------------------------------------------- inspect
def draw_inspect(rng: random.Random, target: str) -> tuple[dict[str, Any], list[Run]]:
    """One to three tensors, each its own load; element strides, interleave and start coordinates."""
    count = _weighted(rng, {1: 0.6, 2: 0.25, 3: 0.15})
    shared_rank = rng.randint(1, 5) if _chance(rng, 0.6) else None
    tensors = []
    for i in range(count):
        dtype = rng.choice(KERNEL_DTYPES)
        es = DTYPES[dtype].nbytes
        rank = shared_rank or rng.randint(1, 5)
        # interleaved boxes are refused (rule interleave-unmeasured): drawn rarely, to count the refusals
        interleave = rng.choice(["16B", "32B"]) if rank >= 3 and _chance(rng, 0.03) else "none"
        swizzle = {"mode": "32B"} if interleave == "32B" and _chance(rng, 0.9) else _swizzle(rng, target)
        span = SPANS[swizzle["mode"]]
        limit = 256 * es if not span else min(span, 256 * es)
        # an interleaved row is one chunk, as NC/8HWC8 and NC/16HWC16 have it
        inner = _inner_box_bytes(rng, limit) if interleave == "none" else int(interleave[:-1])
        box = [_outer_box_dim(rng) for _ in range(rank - 1)] + [max(1, inner // es)]
        t = _base_tensor(rng, f"t{i}", dtype, box, swizzle)
        t["interleave"] = interleave
        if interleave == "32B" and t["alignment"] % 32:
            t["alignment"] = 32
        if _chance(rng, 0.2):
            t["element_strides"] = [1 if _chance(rng, 0.5) else rng.randint(1, 8) for _ in range(rank)]
            if interleave != "none":
                t["element_strides"][-1] = 1
        reduce = _reduce(rng, dtype)
        if reduce is not None:
            t["reduce"] = reduce
        tensors.append(t)
    spec: dict[str, Any] = {"target": target, "tensors": tensors, "kernel": {"kind": "inspect"}}
    _fit(rng, spec, lambda s: [(i, d, 1) for i, t in enumerate(s["tensors"]) for d in range(len(t["box"]) - 1)])
    for t in tensors:
        es = DTYPES[t["dtype"]].nbytes
        align = 32 if t["interleave"] == "32B" else 16
        padded = len(t["box"]) > 1 and _chance(rng, 0.3)
        t["shape"] = _shape(rng, t["box"], es, 1 if padded or len(t["box"]) == 1 else align // math.gcd(align, es))
        if padded:
            t["strides"] = _padded_strides(rng, t["shape"], es, align)
    if shared_rank is not None and _chance(rng, 0.5):
        spec["kernel"]["coords"] = _coords(rng, tensors)
    runs: list[Run] = []
    for t in tensors:
        runs.append({"call": "inspect", "args": {"role": t["name"], "coords": spec["kernel"].get("coords"),
                                                 "shape": t["shape"], "strides": t.get("strides")}})
    for t in tensors:
        es = DTYPES[t["dtype"]].nbytes
        align = 32 if t["interleave"] == "32B" else 16
        shape, strides = _runtime_layout(rng, t["box"], es, align)
        runs.append({"call": "inspect", "args": {"role": t["name"], "coords": _coords(rng, [{**t, "shape": shape}]),
                                                 "shape": shape, "strides": strides}})
    return spec, runs


def _coords(rng: random.Random, tensors: list[dict[str, Any]]) -> list[int]:
    """Start coordinates, outermost first, valid for every tensor: the innermost on a 16-byte
    step of each, some outside the tensor (TMA fills what lies outside)."""
    quantum = max(16 // DTYPES[t["dtype"]].nbytes for t in tensors)
    first = tensors[0]
    coords = []
    for d, (n, b) in enumerate(zip(first["shape"], first["box"])):
        r = rng.random()
        c = (-rng.randint(1, b) if r < 0.1 else n + rng.randint(0, b) if r < 0.15
             else n - rng.randint(1, b) if r < 0.35 else rng.randrange(n))
        if d == len(first["shape"]) - 1:
            c = c // quantum * quantum
        coords.append(c)
    return coords


def _runtime_layout(rng: random.Random, box: list[int], es: int, align: int,
                    stored: bool = False) -> tuple[list[int], list[int] | None]:
    """A shape (and strides) for a run other than the spec's own, of up to RUNTIME_TILES boxes per
    dimension; rows of whole 16 bytes where a kernel stores them (rule store-inner-extent-16-bytes)."""
    padded = len(box) > 1 and _chance(rng, 0.5)
    quantum = 1 if (padded or len(box) == 1) and not stored else align // math.gcd(align, es)
    shape = _shape(rng, box, es, quantum, RUNTIME_TILES)
    return shape, _padded_strides(rng, shape, es, align) if padded else None


# ----------------------------------------------------------------------------- copy
def draw_copy(rng: random.Random, target: str) -> tuple[dict[str, Any], list[Run]]:
    """Ranks 1 to 5, stages and boxes per stage, padded strides; checked at a second shape."""
    dtype = rng.choice(KERNEL_DTYPES)
    es = DTYPES[dtype].nbytes
    rank = rng.randint(1, 5)
    swizzle = _swizzle(rng, target)
    span = SPANS[swizzle["mode"]]
    inner_limit = min(span, 256 * es) if span else 256 * es
    box = [_outer_box_dim(rng) for _ in range(rank - 1)] + [_inner_box_bytes(rng, inner_limit) // es]
    t = _base_tensor(rng, "data", dtype, box, swizzle)
    kernel = {"kind": "copy", "stages": _weighted(rng, {2: 3, 3: 2, 4: 2, rng.randint(5, 16): 1}),
              "boxes_per_stage": 1 if _chance(rng, 0.6) else rng.randint(2, 32),
              "blocks_per_sm": _weighted(rng, {1: 4, 2: 2, rng.randint(3, 32): 1}),
              "tiles_per_block": _tiles_per_block(rng)}
    spec: dict[str, Any] = {"target": target, "tensors": [t], "kernel": kernel}
    _fit(rng, spec, lambda s: [(0, d, 1) for d in range(rank - 1)], {"boxes_per_stage": 1, "stages": 2})
    padded = rank > 1 and _chance(rng, 0.3)
    t["shape"] = _shape(rng, t["box"], es, 16 // math.gcd(16, es))  # the copy stores whole 16-byte rows
    if padded:
        t["strides"] = _padded_strides(rng, t["shape"], es, 16)
    shape, strides = _runtime_layout(rng, t["box"], es, 16, stored=True)
    runs = [{"call": "copy", "args": {"shape": t["shape"], "strides": t.get("strides")}},
            {"call": "copy", "args": {"shape": shape, "strides": strides}}]
    return spec, runs


def _tiles_per_block(rng: random.Random) -> int | None:
    """A persistent grid (None), or one block per 1 to 64 tiles."""
    return _weighted(rng, {None: 2, 1: 2, 2: 2, rng.randint(3, 64): 1})


# ----------------------------------------------------------------------------- transpose
def draw_transpose(rng: random.Random, target: str) -> tuple[dict[str, Any], list[Run]]:
    """2-D and batched, units of 1 to 16 bytes, interleaved batches; checked at a second shape."""
    dtype = rng.choice(KERNEL_DTYPES)
    es = DTYPES[dtype].nbytes
    rank = rng.choice([2, 3])
    unit = rng.choice([u for u in (1, 2, 4, 8, 16) if u >= es and u % es == 0])
    interleave = rng.choice(["16B", "32B"]) if rank == 3 and _chance(rng, 0.02) else "none"  # refused: rare
    swizzle = {"mode": "32B"} if interleave == "32B" else _swizzle(rng, target)
    span = SPANS[swizzle["mode"]]
    rows_per_block = 16 // unit
    inner = _inner_box_bytes(rng, span if span else 256 * es)
    # the output's rows are box[-2] units: the same limits apply to them
    row_limit = (span // unit) if span else 256 * es // unit
    rows = rows_per_block * rng.randint(1, max(1, row_limit // rows_per_block))
    if _chance(rng, 0.3):
        rows = rows_per_block * max(1, row_limit // rows_per_block)
    if interleave != "none":  # both maps' rows are one chunk
        inner, rows = int(interleave[:-1]), int(interleave[:-1]) // unit
    box = ([1] if rank == 3 else []) + [rows, inner // es]
    t = _base_tensor(rng, "matrix", dtype, box, swizzle)
    t["interleave"] = interleave
    if interleave == "32B":
        t["alignment"] = max(t["alignment"], 32)
    kernel: dict[str, Any] = {"kind": "transpose", "stages": rng.randint(1, 8),
                              "blocks_per_sm": _weighted(rng, {1: 4, 2: 2, rng.randint(3, 32): 1}),
                              "tiles_per_block": _tiles_per_block(rng),
                              "raster_group": _weighted(rng, {1024: 3, 1: 1, rng.randint(2, 64): 1})}
    if unit != es or _chance(rng, 0.3):
        kernel["unit_bytes"] = unit
    if _chance(rng, 0.3):
        kernel["tiles_per_stage"] = rng.randint(1, 8)
    spec: dict[str, Any] = {"target": target, "tensors": [t], "kernel": kernel}
    _fit(rng, spec, lambda s: [(0, rank - 2, rows_per_block)], {"tiles_per_stage": 1, "stages": 1})
    align = 32 if interleave == "32B" else 16
    t["shape"] = _transpose_shape(rng, t["box"], es, unit, align, 3)
    other = _transpose_shape(rng, t["box"], es, unit, align, RUNTIME_TILES)
    runs = [{"call": "transpose", "args": {"shape": t["shape"]}}, {"call": "transpose", "args": {"shape": other}}]
    return spec, runs


def _transpose_shape(rng: random.Random, box: list[int], es: int, unit: int, align: int, max_tiles: int) -> list[int]:
    """Rows that make whole ``align``-byte output rows, columns of whole units and ``align``-byte
    rows: both tensors contiguous; a batch of 1 to 4 matrices where the box has one."""
    shape = [_extent(rng, b, max_tiles) for b in box]
    if len(box) == 3:
        shape[0] = rng.randint(1, 4)
    shape[-2] = _round_up(shape[-2], max(1, align // unit))
    shape[-1] = _round_up(shape[-1], align // math.gcd(align, es))
    return _cap(shape, es, align // math.gcd(align, es))


# ----------------------------------------------------------------------------- matmul
def draw_matmul(rng: random.Random, target: str) -> tuple[dict[str, Any], list[Run]]:
    """bf16/fp16 (or fp8, K-major, promoted or not, block-scaled or not) in, bf16/fp16/fp32 out,
    K-major or MN-major A and B, every swizzle of the operands and of
    C, 1 to 3 consumer warpgroups, tiles, stages, raster groups and shared-memory offsets; checked
    at its own ragged M, N, K and at another, K below one tile among them. sm_90a only (wgmma)."""
    fp8 = _chance(rng, 0.3)
    dtype = rng.choice(["float8_e4m3", "float8_e5m2"] if fp8 else ["bfloat16", "float16"])
    b_dtype = rng.choice(["float8_e4m3", "float8_e5m2"]) if fp8 else dtype
    out = rng.choice(["bfloat16", "float16", "float32"])
    b_major = "k" if fp8 else rng.choice(["k", "mn"])  # wgmma reads fp8 K-major only
    consumers = _weighted(rng, {1: 3, 2: 4, 3: 1})
    bm = 64 * consumers * _weighted(rng, {1: 4, 2: 1})
    swizzle = _weighted(rng, {"128B": 6, "64B": 2, "32B": 2, "none": 1})
    es = 1 if fp8 else 2
    atom = (SPANS[swizzle] or 16) // es  # elements of one box row: a span, or one 16-byte core-matrix column
    k_step = 32 if fp8 else 16  # the wgmma K
    if atom >= k_step:
        bk = atom * rng.randint(1, max(1, 128 // atom))
    else:  # unswizzled fp8: 16-element boxes, two per instruction K
        bk = k_step * rng.randint(1, 4)
    bn = 8 * rng.randint(1, 32) if b_major == "k" else atom * rng.randint(1, 256 // atom)
    a_rows = rng.choice([r for r in (64, 128, 192, 256) if bm % r == 0])
    # a family's boxes (plan.family_tiles: 64 rows of one 128-byte swizzled line, one box of K per
    # stage, B K-major), where a launch chooses among the family's tiles and their twins in pairs.
    # A family compiles 6 to 11 kernels: with a quarter of matmuls drawn so, a 300 s campaign on an
    # H100 checked 605 specs (12 twin launches) against 2,288 before (2026-11-27), its batches
    # three times slower to compile. One in ten: 450 draws of seed 5 plan 540 kernels instead of
    # 671 (3 twin launches instead of 6)
    family = _chance(rng, 0.10)
    if family:
        swizzle, b_major = "128B", "k"
        atom = SPANS[swizzle] // es
        bk, a_rows, bn = atom, 64, 64 * rng.randint(1, 4)
    k_rows = rng.choice([r for r in range(16, bk + 1, 16) if bk % r == 0])
    c_swizzle = _weighted(rng, {"128B": 4, "64B": 1, "32B": 1, "none": 1})
    c_es = DTYPES[out].nbytes
    c_limit = min(SPANS[c_swizzle] or 256, bn * c_es)
    c_cols = rng.choice([c for c in range(8, c_limit // c_es + 1, 8) if bn % c == 0] or [8])
    offset = (lambda: _smem_offset(rng)) if _chance(rng, 0.2) else (lambda: 0)
    a = {"name": "a", "dtype": dtype, "box": [a_rows, atom], "swizzle": {"mode": swizzle}, "smem_offset": offset()}
    b_rows = 64 if family else bn  # B's box along N (K-major B): a family's tile is several boxes
    b = {"name": "b", "dtype": b_dtype, "box": [b_rows, atom] if b_major == "k" else [k_rows, atom],
         "swizzle": {"mode": swizzle}, "smem_offset": offset()}
    c = {"name": "c", "dtype": out, "box": [64, c_cols], "swizzle": {"mode": c_swizzle}, "smem_offset": offset()}
    for t in (a, b, c):
        t["l2_promotion"] = rng.choice(["none", "64B", "128B", "256B"])
    kernel = {"kind": "matmul", "b_major": b_major, "tile": [bm, bn, bk], "consumers": consumers,
              "stages": rng.randint(2, 6), "raster_group": rng.choice([1, 2, 4, 8, 16])}
    if fp8:  # promotion every stage or two, or never; block scales where a stage divides 128 of K
        kernel["promote_every"] = rng.choice([0, bk, 2 * bk])
        if 128 % bk == 0 and _chance(rng, 0.3):
            kernel.update(promote_every=128, block_scales=True)
    # Tiles in pairs (B multicast, the boxes taken in turns: three are two and one) or alone; 2 only where
    # the stage has two B boxes or more (rule matmul-cluster).
    b_mn, b_k = (b_rows, atom) if b_major == "k" else (atom, k_rows)  # b's box along N and along K
    b_loads = bn // b_mn * (bk // b_k)
    clusters = [None] if family else [None, 1, 2] if b_loads >= 2 else [None, 1]
    if (cluster := rng.choice(clusters)) is not None:
        kernel["cluster"] = cluster
    mnk = [_matmul_sizes(rng, bm, bn, bk) for _ in range(2)]
    m, n, k = mnk[0]
    a["shape"], c["shape"] = [m, k], [m, n]
    b["shape"] = [n, k] if b_major == "k" else [k, n]
    spec: dict[str, Any] = {"target": "sm_90a", "tensors": [a, b, c], "kernel": kernel}
    _fit_stages(spec)
    # each run with an epilogue or none: alpha, a bias along N or M, beta C_in in pairs of columns,
    # of an odd pitch, or everything (verify.MATMUL_EPILOGUES: each of the kernel's epilogues)
    epilogues = [rng.choice([None, None, None, *MATMUL_EPILOGUES[1:]]) for _ in mnk]
    if family or _chance(rng, 0.35):  # where a family's launch takes a twin in pairs (MatmulFamily.candidates):
        # rows 16 bytes off whole 32-byte sectors, M over one tile, K of 16 steps and more
        mnk.append((rng.randint(bm + 1, 3 * bm), _round_up(_extent(rng, bn), 16), 16 * bk + 16 // es))
        epilogues.append(None)
    # An MN-major A ([K, M], as x^T in a weight gradient), drawn last so that the draws above stay
    # those of the campaigns before it: boxes of k_rows of K (a family's: one box along K a stage) by
    # one span (or core-matrix column) of M, which the wgmma's 64 rows of M take side by side; M a
    # multiple of 8, so that A's rows are whole 16 bytes, as TMA needs. 16-bit types only.
    if not fp8 and _chance(rng, 0.3):
        kernel["a_major"] = "mn"
        mnk = [(_round_up(mm, 8), nn, kk) for mm, nn, kk in mnk]
        a["box"], a["shape"] = [bk if family else k_rows, atom], [k, mnk[0][0]]
        c["shape"] = [mnk[0][0], n]
        _fit_stages(spec)
    return spec, [{"call": "matmul", "args": {"mnk": list(s), **({"epilogue": e} if e else {})}}
                  for s, e in zip(mnk, epilogues)]


def _matmul_sizes(rng: random.Random, bm: int, bn: int, bk: int) -> tuple[int, int, int]:
    """M anything; N and K multiples of 16 (rows of whole 16 bytes, as TMA needs, for 1-byte
    elements too), up to about three tiles each, K sometimes below one tile."""
    m = _extent(rng, bm)
    n = _round_up(_extent(rng, bn), 16)
    k = _round_up(_extent(rng, bk) if _chance(rng, 0.7) else rng.randint(1, bk), 16)
    return m, n, k


def _fit_stages(spec: dict[str, Any]) -> None:
    """Fewer stages (down to 2) until the spec's kernel fits a block's shared memory."""
    kernel = spec["kernel"]
    while kernel["stages"] > 2 and _matmul_smem(spec) > TARGETS["sm_90a"].smem_per_block_optin:
        kernel["stages"] -= 1


def _matmul_smem(spec: dict[str, Any]) -> int:
    try:
        return planned_kernels(parse_spec({"name": "x", **spec}))[0].total_smem_bytes
    except (SpecError, ValueError):
        return 0  # the form is wrong: tmagen.plan.check refuses the candidate anyway


KINDS: dict[str, Draw] = {"inspect": draw_inspect, "copy": draw_copy, "transpose": draw_transpose,
                          "matmul": draw_matmul}


# ----------------------------------------------------------------------------- the generator
def case_name(seed: int, index: int) -> str:
    return f"fz{seed}_{index}"


def draw_case(seed: int, index: int, kinds: tuple[str, ...] | None = None, max_attempts: int = 200) -> Case:
    """The spec number ``index`` of the campaign ``seed``: candidates drawn until one passes every rule."""
    rng = random.Random(f"tmagen.fuzz/{seed}/{index}")  # the name it had when the seeds were recorded
    chosen = kinds or tuple(KINDS)
    refused: Counter[str] = Counter()
    for attempt in range(1, max_attempts + 1):
        target = _weighted(rng, TARGET_WEIGHTS)
        kind = rng.choice(chosen)
        body, runs = KINDS[kind](rng, target)
        raw = {"name": case_name(seed, index), **body}
        try:
            violations = check(parse_spec(raw))
        except SpecError:
            refused["form"] += 1
            continue
        if violations:
            refused.update({v.rule for v in violations})
            continue
        return Case(seed, index, raw, tuple(runs), attempt, dict(refused))
    raise RuntimeError(f"no valid spec in {max_attempts} candidates for seed {seed}, index {index}: {dict(refused)}")


def draw_cases(seed: int, start: int, count: int, kinds: tuple[str, ...] | None = None) -> list[Case]:
    return [draw_case(seed, i, kinds) for i in range(start, start + count)]


# ----------------------------------------------------------------------------- tmagen.ops calls
# The campaign's draws for tmagen.ops (issue 19): calls on views a PyTorch user makes, checked bit
# for bit against PyTorch by `lab.campaign.run_ops_calls` (``python -m lab.campaign ops``).
OPS_DTYPES = {"bool": 1, "uint8": 1, "float16": 2, "bfloat16": 2, "float32": 4, "int32": 4, "float64": 8,
              "complex64": 8, "complex128": 16}
OPS_WEIGHTS = {"copy": 0.3, "transpose": 0.3, "permute": 0.4}
_RAGGED = (1, 2, 3, 5, 7, 9, 15, 17, 31, 33, 63, 65, 127, 129, 255, 257)
OPS_MAX_ELEMENTS = 1 << 20


@dataclass(frozen=True)
class OpsCall:
    """One tmagen.ops call: ``op`` on the view of a contiguous ``base`` of ``dtype`` whose first
    element is ``offset`` elements into its allocation, sliced by ``slices`` (start, stop, step per
    dimension) and then permuted by ``order`` (a view); ``dims`` is the permute's."""

    name: str
    op: str
    dtype: str
    base: tuple[int, ...]
    offset: int
    slices: tuple[tuple[int, int, int], ...]
    order: tuple[int, ...]
    dims: tuple[int, ...]

    @property
    def itemsize(self) -> int:
        return OPS_DTYPES[self.dtype]

    @property
    def view_shape(self) -> tuple[int, ...]:
        sliced = [len(range(a, b, c)) for a, b, c in self.slices]
        return tuple(sliced[d] for d in self.order)

    def classes(self) -> dict[str, str]:
        """What the call exercises: the output's rows (whole 16 bytes or ragged), the view, the rank."""
        shape = self.view_shape
        if self.op == "transpose":
            out = (*shape[:-2], shape[-1], shape[-2])
        elif self.op == "permute":
            out = tuple(shape[d] for d in self.dims)
        else:
            out = shape
        view = ("transposed" if list(self.order) != sorted(self.order) else
                "stepped" if any(c > 1 for _, _, c in self.slices) else
                "sliced" if any((a, b) != (0, n) for (a, b, _), n in zip(self.slices, self.base)) else "contiguous")
        return {"op": self.op, "rows": "ragged" if out[-1] * self.itemsize % 16 else "whole 16 bytes",
                "view": view, "pointer": "misaligned" if self.offset * self.itemsize % 16 else "aligned",
                "rank": str(len(shape)), "bytes": str(self.itemsize)}


def _ops_extent(rng: random.Random) -> int:
    return rng.choice(_RAGGED) if _chance(rng, 0.6) else 16 * rng.randint(1, 16)


def draw_ops_call(seed: int, index: int) -> OpsCall:
    """The tmagen.ops call number ``index`` of the campaign ``seed``: a pure function of the two."""
    rng = random.Random(f"tmagen.fuzz.ops/{seed}/{index}")
    op = _weighted(rng, OPS_WEIGHTS)
    rank = rng.randint(1 if op == "copy" else 2, 5)
    base = [_ops_extent(rng) for _ in range(rank)]
    while math.prod(base) > OPS_MAX_ELEMENTS:
        i = base.index(max(base))
        base[i] = max(1, base[i] // 2)
    slices = []
    for n in base:
        if n > 2 and _chance(rng, 0.35):
            start = rng.randint(0, n // 3)
            slices.append((start, rng.randint(start + 1, n), rng.choice((1, 1, 2, 3))))
        else:
            slices.append((0, n, 1))
    order = list(range(rank))
    if rank >= 2 and _chance(rng, 0.3):
        rng.shuffle(order)
    dims = list(range(rank))
    if op == "permute":
        while dims == sorted(dims) and rank > 1:
            rng.shuffle(dims)
    return OpsCall(f"op{seed}_{index}", op, rng.choice(sorted(OPS_DTYPES)), tuple(base),
                   rng.randint(1, 7) if _chance(rng, 0.25) else 0, tuple(slices), tuple(order), tuple(dims))


def ops_view(call: OpsCall, base: Any) -> Any:
    """The call's input: ``base`` (a numpy array or a torch tensor of shape ``call.base``) sliced and permuted."""
    v = base[tuple(slice(a, b, c) for a, b, c in call.slices)]
    return v.permute(*call.order) if hasattr(v, "permute") else v.transpose(call.order)


def ops_expected(call: OpsCall, view: Any) -> Any:
    """What the call must return, by the framework's own operations (not yet contiguous)."""
    if call.op == "transpose":
        return view.swapaxes(-1, -2)
    if call.op == "permute":
        return view.permute(*call.dims) if hasattr(view, "permute") else view.transpose(call.dims)
    return view


__all__ = ["Case", "KINDS", "KERNEL_DTYPES", "draw_case", "draw_cases", "case_name",
           "draw_inspect", "draw_copy", "draw_transpose", "OpsCall", "draw_ops_call", "ops_view", "ops_expected"]
