"""How a matmul is launched on arrays: A [M, K] or [K, M], B [N, K] or [K, N] as the spec's a_major
and b_major say, rows of each at their own leading dimension (strides[0]), into C [M, N]; the
family's kernel and split of K chosen for M, N and K (`MatmulFamily.choose`, the C API's
arithmetic); the epilogue ``alpha * (sa A)(sb B) + beta * c + bias`` as keyword parameters (the
scales sa and sb: fp32 arrays of one value, one per row of A / column of C, or, for a
block_scales spec, per block)."""

from __future__ import annotations

import ctypes
import math
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from tmagen.errors import NoWorkspace, Violation
from tmagen.kinds.base import Call, MapBinding, Operand, Plan
from tmagen.kinds.matmul.dispatch import Choice
from tmagen.kinds.matmul.plan import SCALE_BLOCK
from tmagen.limits import MAX_SPLITS

COORDINATE_LIMIT = 1 << 31  # TMA coordinates are signed 32-bit
BIAS_ALONG = {None: 0, "n": 1, "m": 2}
PARAMETERS = ("c", "alpha", "beta", "bias", "bias_along", "scale_a", "scale_b", "choice", "b_rows")


class MatmulEpilogue(ctypes.Structure):
    """The kernel's ``matmul_epilogue`` parameter (templates/matmul/kernels.cuh.j2), field for field."""

    _fields_ = [("alpha", ctypes.c_float), ("beta", ctypes.c_float), ("c_in", ctypes.c_void_p),
                ("ldc_in", ctypes.c_int64), ("bias", ctypes.c_void_p), ("bias_along", ctypes.c_uint32),
                ("plain", ctypes.c_uint32), ("scale_a", ctypes.c_void_p), ("scale_b", ctypes.c_void_p),
                ("scale_a_ld", ctypes.c_int64), ("scale_b_ld", ctypes.c_int64), ("scale_a_kind", ctypes.c_uint32),
                ("scale_b_kind", ctypes.c_uint32)]


class MatmulSplit(ctypes.Structure):
    """The kernel's ``matmul_split`` parameter: the workspace of a launch that splits K."""

    _fields_ = [("partials", ctypes.c_void_p), ("counters", ctypes.c_void_p), ("splits", ctypes.c_uint32),
                ("split_from", ctypes.c_uint32)]


# (counter bytes, partial bytes) -> (counters, partials): the counters zero (every launch leaves them
# so) and never shared with another launch's partials; the partials anything.
# It raises NoWorkspace where none can be had (allocating while a stream is captured into a graph).
Workspace = Callable[[int, int], tuple[int, int]]



def epilogue_mode(c_in: bool, bias: bool, per_row: bool, fp8: bool, c_in_pairs: bool = False) -> int:
    """The kernel's epilogue (``matmul_epilogue.plain``; the C API decides the same): 1 multiplies
    by alpha alone, 2 (fp8) by the scales of rows and columns too, 3 adds a bias after alpha and 4
    beta * C_in (their values loaded ahead; C_in's two columns at a time, where ``c_in_pairs``: its
    pointer and row pitch keep each pair in one word), 0 is the general one. The general epilogue's
    loads, one element at a time, cost a quarter of a 4096^3 bf16 product on an H200."""
    if c_in:
        return 4 if not bias and not per_row and c_in_pairs else 0
    if bias:
        return 0 if per_row else 3
    return 1 if not per_row else 2 if fp8 else 0


class MatmulLauncher:
    inputs: tuple[str, ...] = ("a", "b")
    parameters: tuple[str, ...] = PARAMETERS
    parameter_dtypes = {"scale_a": ("float32", 4), "scale_b": ("float32", 4)}  # others: the output's type
    output_in_map_only = True  # C's address enters a launch only through C's map (tmagen.kernels re-encodes it alone)

    def roles(self, plan: Plan) -> tuple[tuple[str, ...], str | None]:
        return ("a", "b"), "c"

    @staticmethod
    def _mnk(plan: Plan, shapes: Sequence[tuple[int, ...]]) -> tuple[int, int, int, int]:
        """M, N, K, and B's K (which must equal A's)."""
        a, b = shapes[0], shapes[1]
        m, k = a if plan.kernel.detail.a_major == "k" else a[::-1]
        n, kb = b if plan.kernel.detail.b_major == "k" else b[::-1]
        return m, n, k, kb

    def output_shape(self, plan: Plan, shapes: Sequence[tuple[int, ...]]) -> tuple[int, ...]:
        m, n, _, _ = self._mnk(plan, shapes)
        return (m, n)

    def problems(self, plan: Plan, inputs: Sequence[Operand], out: Operand | None = None,
                 **params: Any) -> list[Violation]:
        source = f"spec {plan.name}"
        found = [Violation("array-rank", f"{name}.ndim", str(len(a.shape)), "a matmul operand is a matrix",
                           "pass a 2-D array", source) for name, a in zip(self.inputs, inputs) if len(a.shape) != 2]
        if found:
            return found
        m, n, k, kb = self._mnk(plan, [tuple(a.shape) for a in inputs])
        if kb != k:
            layout = "[N, K]" if plan.kernel.detail.b_major == "k" else "[K, N]"
            a_layout = "[M, K]" if plan.kernel.detail.a_major == "k" else "[K, M]"
            found.append(Violation("array-shape", "b.shape", str(tuple(inputs[1].shape)),
                                   f"A is {tuple(inputs[0].shape)} ({a_layout}), so B needs K = {k} ({layout} for "
                                   "this spec)",
                                   f"pass B as {layout}", source))
        for what, value in (("M", m), ("N", n), ("K", k)):
            if value >= COORDINATE_LIMIT:
                found.append(Violation("array-shape", what, str(value), "TMA addresses tiles with signed 32-bit "
                                       "coordinates: each extent is below 2^31", "split the product", source))
        scale_a, scale_b = params.pop("scale_a", None), params.pop("scale_b", None)
        b_rows = params.pop("b_rows", None)
        if b_rows is not None and (plan.kernel.detail.b_major != "k" or isinstance(b_rows, bool) or
                                   not isinstance(b_rows, int) or not 1 <= b_rows <= n):
            found.append(Violation("matmul-b-rows", "b_rows", repr(b_rows), f"B [N, K] ({plan.kernel.detail.b_major} "
                                   f"B here) holds 1 to N = {n} rows in memory, the rest read as zeros",
                                   "pass an int from 1 to N with a K-major B, or none", source))
        found += self._epilogue_problems(m, n, source, family=plan.kernel.detail, **params)
        found += self._scale_problems(m, n, k, source, plan.kernel.detail.block_scales, scale_a, scale_b)
        return found

    @staticmethod
    def _scale_problems(m: int, n: int, k: int, source: str, blocks: bool, scale_a: Operand | None,
                        scale_b: Operand | None) -> list[Violation]:
        found = []
        k_blocks = -(-k // SCALE_BLOCK)
        for name, scale, rows, block_rows, what in (("scale_a", scale_a, m, m, "row of A"),
                                                    ("scale_b", scale_b, n, -(-n // SCALE_BLOCK), "column of C")):
            if blocks:
                want = (block_rows, k_blocks)
                ok = (scale is not None and tuple(scale.shape) == want and (k_blocks <= 1 or scale.strides[1] == 1)
                      and (block_rows <= 1 or scale.strides[0] >= k_blocks))
                if not ok:
                    got = "none" if scale is None else f"shape {tuple(scale.shape)}, strides {tuple(scale.strides)}"
                    block = "1 x 128 block of A [M, K]" if name == "scale_a" else "128 x 128 block of B [N, K]"
                    found.append(Violation("matmul-scales", name, got, f"this spec has block_scales: one fp32 factor "
                                           f"per {block}, {list(want)} with contiguous rows",
                                           f"pass a float32 array of shape {list(want)}", source))
                continue
            if scale is None:
                continue
            count = math.prod(scale.shape)
            per_row = count == rows and (rows <= 1 or all(st == 1 for st, d in zip(scale.strides, scale.shape)
                                                            if d != 1))
            if count != 1 and not per_row:
                found.append(Violation("matmul-scales", name, f"shape {tuple(scale.shape)}",
                                       f"a scale is one fp32 value, or {rows} contiguous values (one per {what}); "
                                       "blocks need a spec with block_scales", f"pass 1 or {rows} values", source))
        return found

    @staticmethod
    def _epilogue_problems(m: int, n: int, source: str, c: Operand | None = None, alpha: float = 1.0,
                           beta: float = 0.0, bias: Operand | None = None, bias_along: str | None = None,
                           choice: tuple[int, int] | None = None, family: Any = None) -> list[Violation]:
        found = []
        if choice is not None and family is not None:
            kernel, splits, split_from = (*choice, 0)[:3]
            groups = family.groups(kernel, m, n) if 0 <= kernel < len(family.kernels) else 0
            valid = 0 <= kernel < len(family.kernels) and 1 <= splits <= MAX_SPLITS and 0 <= split_from <= groups
            if not valid:
                found.append(Violation("matmul-choice", "choice", repr(choice), f"a kernel of 0 .. "
                                       f"{len(family.kernels) - 1}, 1 to {MAX_SPLITS} splits, and a first split group "
                                       "of 0 .. the groups of tiles (a cluster's tiles)",
                                       "pass a valid choice, or none", source))
        if beta != 0 and c is None:
            found.append(Violation("matmul-epilogue", "beta", repr(beta), "beta scales c, and no c is given",
                                   "pass c=, or beta=0", source))
        if c is not None and (tuple(c.shape) != (m, n) or (m > 1 and n > 0 and c.strides[1] != 1)):
            found.append(Violation("matmul-epilogue", "c", f"shape {tuple(c.shape)}, strides {tuple(c.strides)}",
                                   f"c is [M, N] = [{m}, {n}] with contiguous rows", f"pass a [{m}, {n}] array",
                                   source))
        if bias_along not in BIAS_ALONG:
            found.append(Violation("matmul-epilogue", "bias_along", repr(bias_along), "bias_along is 'n' (a value "
                                   "per column, added to every row) or 'm' (a value per row)", "pass 'n' or 'm'",
                                   source))
        elif (bias is None) != (bias_along is None):
            found.append(Violation("matmul-epilogue", "bias_along", repr(bias_along), "bias and bias_along come "
                                   "together", "pass both, or neither", source))
        elif bias is not None:
            want = n if bias_along == "n" else m
            if tuple(bias.shape) != (want,) or (want > 1 and bias.strides[0] != 1):
                found.append(Violation("matmul-epilogue", "bias", f"shape {tuple(bias.shape)}",
                                       f"a bias along {bias_along} is {want} contiguous values",
                                       f"pass a contiguous ({want},) array", source))
        return found

    def bind(self, plan: Plan, inputs: Sequence[Operand], out: Operand, multiprocessors: int,
             workspace: Workspace | None = None, c: Operand | None = None, alpha: float = 1.0, beta: float = 0.0,
             bias: Operand | None = None, bias_along: str | None = None, scale_a: Operand | None = None,
             scale_b: Operand | None = None, choice: tuple[int, ...] | None = None,
             memory_bytes_per_us: int = 0, b_rows: int | None = None) -> Call:
        """``choice``: (kernel, splits[, first split tile]) to run instead of the family's own choice
        (tests, tuning); ``memory_bytes_per_us``: the GPU's DRAM peak, by which the family's choice
        takes the dispatch table of the GPU most like it (0: the first); ``b_rows``: a K-major B's
        rows in memory where they are fewer than N (an output padded to rows of whole 16 bytes):
        B's map stops there and TMA fills the rows past it with zeros, so the columns of C past
        them hold the epilogue's other terms alone, for the caller to drop, and B is read in place
        instead of copied into N rows (tmagen.ops.matmul's odd N)."""
        a, b = inputs
        m, n, k, _ = self._mnk(plan, [tuple(a.shape), tuple(b.shape)])
        if m == 0 or n == 0:
            return Call((), skip=True)
        c_in = c if beta != 0 else None
        epilogue = MatmulEpilogue(alpha, beta, c_in.ptr if c_in is not None else None,
                                  (c_in.strides[0] if c_in is not None else n), bias.ptr if bias is not None else None,
                                  BIAS_ALONG[bias_along], 0)
        family = plan.kernel.detail
        for name, scale, rows in (("a", scale_a, m), ("b", scale_b, n)):
            if scale is not None:
                kind = 2 if family.block_scales else 0 if math.prod(scale.shape) == 1 and rows != 1 else 1
                setattr(epilogue, f"scale_{name}", scale.ptr)
                setattr(epilogue, f"scale_{name}_kind", kind)
                setattr(epilogue, f"scale_{name}_ld", scale.strides[0] if kind == 2 else 0)
        per_row = any(getattr(epilogue, f"scale_{x}_kind") == 1 for x in "ab")
        pairs = c_in is not None and c_in.strides[0] % 2 == 0 and c_in.ptr % (2 * plan.map("c").elem_bytes) == 0
        epilogue.plain = epilogue_mode(c_in is not None, bias is not None, per_row, family.fp8, pairs)
        out_map = MapBinding("c", out.ptr, (m, n), tuple(out.strides))
        if k == 0 and epilogue.plain == 1 and alpha == 1.0 and scale_a is None and scale_b is None:
            # an empty sum, unscaled: TMA cannot describe an extent of 0
            return Call((out_map,), clear_output=True)
        straddle = k > 0 and any(family.operand_rows_straddle(x.ptr, x.strides[0]) for x in (a, b))
        table = family.table_for(multiprocessors, memory_bytes_per_us)
        picked = (family.choose(m, n, k, multiprocessors, straddle=straddle, table=table) if choice is None
                  else Choice(*choice))
        split = MatmulSplit(None, None, picked.splits, picked.split_from)
        if picked.splits > 1:
            try:
                if workspace is None:
                    raise NoWorkspace(f"{plan.name}: no workspace for a split of K")
                split.counters, split.partials = workspace(*family.workspace_bytes(picked, m, n))
            except NoWorkspace:
                if choice is not None:
                    raise
                # none can be had now (a stream being captured into a CUDA graph): the best unsplit kernel
                picked = family.choose(m, n, k, multiprocessors, max_splits=1, straddle=straddle, table=table)
                split = MatmulSplit(None, None, 1, 0)
        kernel = family.kernels[picked.variant]  # A and B through the maps of its loads (`load_rows`)
        if k == 0:  # the epilogue alone (beta c + bias): maps of one column that nothing loads
            a_map = (MapBinding(kernel.a_map, a.ptr, (m, 1), (8, 1)) if family.a_major == "k"
                     else MapBinding(kernel.a_map, a.ptr, (1, m), (-(-m // 8) * 8, 1)))
            b_map = (MapBinding(kernel.b_map, b.ptr, (n, 1), (8, 1)) if family.b_major == "k"
                     else MapBinding(kernel.b_map, b.ptr, (1, n), tuple(b.strides)))
        else:
            a_map = MapBinding(kernel.a_map, a.ptr, tuple(a.shape), tuple(a.strides))
            b_map = MapBinding(kernel.b_map, b.ptr, (b_rows, b.shape[1]) if b_rows is not None else tuple(b.shape),
                               tuple(b.strides))
        maps: tuple[MapBinding, ...] = (a_map, b_map, out_map)
        if family.edge_rows:  # A again in boxes of a few rows, and in its own boxes, for the tiles at M's edge
            at_edge = k and m % kernel.a_load_rows
            own_boxes = at_edge and kernel.a_map != "a"
            # else the kernel's map of A stands in, unused (encoded once)
            maps += (replace(a_map, role="a_rows") if at_edge else a_map,
                     replace(a_map, role="a") if own_boxes else a_map)
        return Call(maps, (ctypes.c_uint32(m), ctypes.c_uint32(n), ctypes.c_uint32(k), epilogue, split),
                    family.grid(picked, m, n, multiprocessors), kernel=picked.variant)
