"""``tmagen.ops.matmul``: the matmul kernel family on PyTorch tensors and CuPy arrays.

``matmul(a, b, *, bias=None, alpha=1, beta=0, c=None, out=None, out_dtype=None)`` is
``alpha * (a @ b) + beta * c + bias``, accumulated in fp32 and written as ``out_dtype``. B's layout
is read from its strides, so both ``b`` ([K, N], N contiguous: the kernel's "mn" B) and ``w.T``
(a transposed view of a [N, K] ``w``: the kernel's "k" B) run without a copy; so is A's, so that
``x.T`` (a weight gradient's ``x.T @ dy``: the kernel's "mn" A) runs without one too. One kernel
family per (input type, output type, B layout, A layout) is loaded once per process (`kernel`); it
picks its tiles per call. What TMA cannot address goes through a scratch copy (see `matmul`'s
docstring).

With PyTorch installed, `register_torch_op` (called by `tmagen.torch_ops`) registers
``torch.ops.tmagen.matmul``, with its fake implementation and autograd formula.
"""

from __future__ import annotations

import itertools
import json
import numbers
from collections.abc import Sequence
from functools import cache
from pathlib import Path
from typing import Any, NamedTuple

from tmagen import kernels
from tmagen.arrays import ArrayView, describe, empty_view, merge_dims
from tmagen.dtypes import FRAMEWORK_FP8
from tmagen.errors import ArgumentError
from tmagen.kernels import Kernel, Launch
from tmagen.ops_matmul_fp8 import check_fast_accum, is_fp8, matmul_fp8
from tmagen.rules import Violation
from tmagen.spec import Spec, parse_spec

CALL = "tmagen.ops.matmul"
IN_TYPES = ("bfloat16", "float16")  # wgmma's 16-bit inputs (the matmul kind's rule matmul-types)
OUT_TYPES = ("bfloat16", "float16", "float32")
CHUNK = 16  # TMA: a global address and every row pitch are whole 16 bytes (rules global-*-alignment, -multiple)
PAD = 8  # elements a scratch row is rounded up to: whole 16 bytes for 2-byte and 4-byte elements
_ELEMENT_BYTES = {"bfloat16": 2, "float16": 2, "float32": 4}
# How a scratch copy is made on the GPU: tmagen.ops.copy, which tmagen.ops (which imports this
# module) hands over as it loads (`use_gpu_copy`); until then, the framework's own assignment. A
# transposed view then goes as a TMA transpose: PyTorch's assignment moved a 4096 x 4096 bfloat16
# one at about 0.5 TB/s on an H200, and the product ran at 0.58 of torch.matmul's speed.
_GPU_COPY: Any = None


def use_gpu_copy(copy: Any) -> None:
    """Makes ``copy(x, out)`` the scratch copies' GPU copy."""
    global _GPU_COPY
    _GPU_COPY = copy


_COPIES = ("torch", "cupy")  # the frameworks whose arrays tmagen copies into scratch (others: pass a layout TMA takes)


# ----------------------------------------------------------------------------- the kernel family
def ops_spec(in_dtype: str, out_dtype: str, b_major: str, a_major: str = "k") -> Spec:
    """The spec of the kernel family for these types and layouts of B ("k": B is [N, K]; "mn": [K, N])
    and A ("k": A is [M, K]; "mn": [K, M]): the tuned bf16 spec (tmagen/ops_specs/
    bench_matmul_bfloat16.json: 64-row boxes, so that every tile shape of the family reads the same
    maps) with the types and layouts changed; an MN-major box is [64 K rows, 64 M or N columns]
    (the same 128-byte swizzled lines), an fp32 C box [64, 32] (128 bytes, its swizzle)."""
    return _ops_spec(in_dtype, out_dtype, b_major, a_major)


@cache  # (behind a signature of all four, so that a call that leaves a_major out shares its entry)
def _ops_spec(in_dtype: str, out_dtype: str, b_major: str, a_major: str) -> Spec:
    raw = json.loads((Path(__file__).resolve().parent / "ops_specs" / "bench_matmul_bfloat16.json").read_text())
    a, b, c = raw["tensors"]
    a["dtype"] = b["dtype"] = in_dtype
    c["dtype"] = out_dtype
    for t, major in ((a, a_major), (b, b_major)):
        if major == "mn":
            t["box"] = [64, 64]
    if out_dtype == "float32":
        c["box"] = [64, 32]
    raw["kernel"]["b_major"] = b_major
    layouts = f"{b_major}-major B"
    if a_major != "k":  # (K-major A keeps the names of the kernels built before A had a choice)
        raw["kernel"]["a_major"] = a_major
        layouts = f"{a_major}-major A, {layouts}"
    raw["name"] = f"ops_matmul_{in_dtype}_{out_dtype}_{b_major}" + ("" if a_major == "k" else f"_a{a_major}")
    raw["description"] = f"Derived by tmagen.ops.matmul from bench_matmul_bfloat16: {layouts}."
    return parse_spec(raw, "derived from tmagen/ops_specs/bench_matmul_bfloat16.json")


def kernel(in_dtype: str, out_dtype: str, b_major: str, a_major: str = "k") -> Kernel:
    """The family's kernel for these types and layouts of B and A, compiled at its first call and
    loaded once per process and device."""
    return _kernel(in_dtype, out_dtype, b_major, a_major)


@cache  # one Kernel per family, however a_major was passed
def _kernel(in_dtype: str, out_dtype: str, b_major: str, a_major: str) -> Kernel:
    return Kernel(ops_spec(in_dtype, out_dtype, b_major, a_major), caller=CALL)


# ----------------------------------------------------------------------------- messages
def _error(*problems: tuple[str, str, str, str, str]) -> ArgumentError:
    return ArgumentError(CALL, [Violation(rule, fld, value, why, fix, CALL) for rule, fld, value, why, fix in problems])


def _dtype_name(x: Any) -> str | None:
    """A framework's dtype (torch.bfloat16, numpy.float32, "float16") as tmagen names it, or None."""
    try:
        return _DTYPE_NAMES[x]
    except (KeyError, TypeError):
        pass
    text = str(x).removeprefix("torch.").removeprefix("<class 'numpy.").rstrip("'>").lower()
    name = {"half": "float16", "float": "float32", "bf16": "bfloat16", "fp16": "float16", "fp32": "float32"}.get(
        text, text)
    try:
        _DTYPE_NAMES[x] = name
    except TypeError:
        pass
    return name


_DTYPE_NAMES: dict[Any, str] = {}


def _scalar(value: Any, name: str) -> float:
    if isinstance(value, numbers.Real) and not isinstance(value, bool):
        return float(value)  # Python and numpy numbers; a tensor would make the call wait for the GPU
    raise _error(("matmul-scalar", name, repr(value), f"{name} is a Python number the kernel takes by value",
                  f"pass a float (e.g. float({name}))"))


# ----------------------------------------------------------------------------- layouts
def _rows_view(view: ArrayView, shape: tuple[int, int], pitch: int) -> ArrayView:
    """``view`` as ``shape`` rows of contiguous elements, ``pitch`` apart."""
    return view.with_layout(shape, (pitch, 1))


def _addressable(view: ArrayView, rows: int, cols: int, pitch: int) -> bool:
    """Whether TMA reads or writes the rows in place: a 16-byte aligned address and, with more than
    one row, a positive pitch of whole 16 bytes."""
    es = view.itemsize
    return view.ptr % CHUNK == 0 and (rows <= 1 or (pitch > 0 and pitch * es % CHUNK == 0))


def _padded(n: int) -> int:
    return -(-n // PAD) * PAD


class _Operand:
    """A 2-D operand the kernel takes: the framework array holding its data and the data's
    (rows, cols) as the kernel reads them (B's memory order; ``source`` is then ``b.T`` for a "k" B)."""

    __slots__ = ("source", "view", "rows", "cols", "pitch", "contiguous_rows", "transposed")

    def __init__(self, source: Any, view: ArrayView, rows: int, cols: int, pitch: int, contiguous_rows: bool,
                 transposed: bool) -> None:
        self.source, self.view, self.rows, self.cols, self.pitch = source, view, rows, cols, pitch
        self.contiguous_rows, self.transposed = contiguous_rows, transposed


def _as_rows(source: Any, view: ArrayView, transposed: bool) -> _Operand:
    """``view`` (2-D) as the kernel reads it: its own rows, or with ``transposed`` the rows of the
    memory it views (a ``w.T`` view read as ``w``)."""
    (r, c), (s0, s1) = view.shape, view.strides
    if transposed:
        r, c, s0, s1 = c, r, s1, s0
        source = _t(source)
    ok = c <= 1 or s1 == 1
    pitch = s0 if r > 1 else _padded(c)
    return _Operand(source, _rows_view(view, (r, c), pitch) if ok else view, r, c, pitch, ok, transposed)


def _t(x: Any) -> Any:
    return x.T


class _Staging:
    """How an array reaches the kernel through scratch, decided once for the call's layouts: a new
    ``(rows, pitch)`` array (a ``pitch`` of whole 16 bytes) of ``dtype`` (None: the array's own)
    holding the array's ``data`` (rows, columns; read transposed for a "k" B) in its first rows and
    columns, seen by the kernel as ``(rows, cols)``. What lies past the data is never read into the
    result (TMA zero-fills past the kernel's K; columns past N give columns of C that are dropped)."""

    __slots__ = ("rows", "cols", "pitch", "dtype", "transposed", "data")

    def __init__(self, shape: tuple[int, int], dtype: str | None, transposed: bool, data: tuple[int, int]) -> None:
        self.rows, self.cols = shape
        self.pitch, self.dtype, self.transposed, self.data = _padded(self.cols), dtype, transposed, data


def _stage(op: _Operand, like: ArrayView, shape: tuple[int, int], dtype: str | None, name: str,
           why: str) -> tuple[ArrayView, _Staging]:
    """A scratch copy of ``op`` for the kernel (`_Staging`), and how it was made."""
    if like.framework not in _COPIES:
        raise _error(("matmul-layout", f"{name}.strides", f"{list(op.view.strides)} elements (shape "
                      f"{list(op.view.shape)}, address {op.view.ptr:#x})", f"{why}, and tmagen copies only PyTorch "
                      f"and CuPy arrays", f"pass {name} with contiguous rows of whole 16 bytes, 16-byte aligned"))
    staging = _Staging(shape, dtype, op.transposed, (op.rows, op.cols))
    return _fill(staging, op.source, like, op.view.device != -1), staging


def _fill(staging: _Staging, source: Any, like: ArrayView, on_gpu: bool) -> ArrayView:
    """`_Staging`'s scratch array (in ``like``'s framework and device), ``source`` (the data, as the
    kernel reads it; ``on_gpu``: where it is) copied in."""
    scratch, view = empty_view(like, (staging.rows, staging.pitch), dtype=staging.dtype)
    rows, cols = staging.data
    if _GPU_COPY is not None and on_gpu and scratch.dtype == source.dtype:
        _GPU_COPY(source, scratch[:rows, :cols])
    else:
        scratch[:rows, :cols] = source
    return view.with_layout((staging.rows, staging.cols), (staging.pitch, 1))


def _take(op: _Operand, like: ArrayView, shape: tuple[int, int], dtype: str | None,
          name: str) -> tuple[ArrayView, _Staging | None]:
    """``op`` as the kernel reads it, in place where TMA can and ``shape`` is the data's (no
    `_Staging`), else staged."""
    if op.contiguous_rows and shape == (op.rows, op.cols) and _addressable(op.view, op.rows, op.cols, op.pitch):
        return op.view, None
    if not op.contiguous_rows:
        why = "its rows are not contiguous (a transposed view is copied first)"
    elif shape != (op.rows, op.cols):
        why = "the output's rows are not whole 16 bytes, so N is padded"
    else:
        why = "TMA needs a 16-byte aligned address and a row pitch of whole 16 bytes"
    return _stage(op, like, shape, dtype, name, why)


# ----------------------------------------------------------------------------- the call
def matmul(a: Any, b: Any, *, bias: Any = None, alpha: float = 1, beta: float = 0, c: Any = None, out: Any = None,
           out_dtype: Any = None, scale_a: Any = None, scale_b: Any = None, use_fast_accum: bool = False) -> Any:
    """``alpha * (a @ b) + beta * c + bias``: products of bfloat16 or float16 ``a`` and ``b``, summed in
    fp32, written as ``out_dtype`` (bfloat16, float16 or float32; default ``out``'s dtype, else
    ``a``'s) into a new contiguous array of ``a``'s framework, or into ``out``.

    - ``a`` is [M, K] (or [..., M, K]); ``b`` is [K, N] (or [..., K, N], batch dimensions broadcast as
      torch.matmul does) with N contiguous, or K contiguous: a transposed view ``w.T`` of a [N, K]
      ``w`` is read as ``w``, no copy.
    - ``c`` is [M, N] (or the output's shape, or [M, N] for every batch), of the output's dtype;
      with ``beta = 0`` (the default) it is not read. ``bias`` is (N,) or (1, N), added to every
      row, or (M, 1), added along each row; another dtype than the output's is cast first.
    - ``alpha`` and ``beta`` are Python numbers. ``M``, ``N`` or ``K`` may be 0 (K = 0 gives
      ``beta * c + bias``) or 1.

    Where TMA cannot address an array in place, it goes through a scratch copy of PyTorch or CuPy
    (one extra pass over that array): ``a`` whose rows and columns are both not contiguous (a
    transposed view ``x.T`` is read in place as x, where x's rows are whole 16 bytes); any array
    whose row pitch is not whole 16 bytes (K = 1001 in bfloat16) or whose address is not
    16-byte aligned; and where the output's rows are not whole 16 bytes (N not a multiple of 8 for
    16-bit outputs, of 4 for float32), C and the bias are padded to a multiple of 8 columns (B
    too where it is [K, N]; a ``w.T`` is read in place, its map stopping at its N rows) and the
    result copied out. A batch [B, M, K] @ [K, N] whose rows lie evenly is one product of
    B*M rows; other batches are one launch per matrix.

    fp8 ``a`` and ``b`` (torch.float8_e4m3fn, float8_e5m2) take ``scale_a`` and ``scale_b``,
    ``use_fast_accum`` and torch._scaled_mm's layout: see `tmagen.ops_matmul_fp8`.
    """
    t = _TORCH
    if scale_a is not None or scale_b is not None or (a.dtype in _FP8_TORCH if t is not None and isinstance(
            a, t.Tensor) else is_fp8(a)):
        check_fast_accum(use_fast_accum)
        if t is not None and isinstance(a, t.Tensor) and out is None and t.compiler.is_compiling():
            return t.ops.tmagen.scaled_matmul(a, b, scale_a, scale_b, bias, c, float(alpha), float(beta),
                                              _torch_dtype(out_dtype), use_fast_accum)
        if t is not None and type(a) is t.Tensor and type(b) is t.Tensor:
            return _torch_fp8_call(a, b, scale_a, scale_b, bias, alpha, beta, c, out, out_dtype, use_fast_accum)
        return matmul_fp8(a, b, scale_a=scale_a, scale_b=scale_b, bias=bias, alpha=alpha, beta=beta, c=c, out=out,
                          out_dtype=out_dtype, use_fast_accum=use_fast_accum)
    if use_fast_accum is not False:
        raise _error(("matmul-fast-accum", "use_fast_accum", repr(use_fast_accum), "fast accumulation is fp8's "
                      "(16-bit products are summed in fp32 throughout)",
                      "leave use_fast_accum out for 16-bit operands"))
    if t is not None and isinstance(a, t.Tensor):
        if out is None and t.compiler.is_compiling():
            return t.ops.tmagen.matmul(a, b, bias, c, float(alpha), float(beta), _torch_dtype(out_dtype))
        if out is None and _needs_grad(a, b, bias, c):
            return _FUNCTION.apply(a, b, bias, c, float(alpha), float(beta), _torch_dtype(out_dtype))
        if type(a) is t.Tensor and type(b) is t.Tensor:
            return _torch_call(t, a, b, bias, alpha, beta, c, out, out_dtype)
    return matmul_eager(a, b, bias=bias, alpha=alpha, beta=beta, c=c, out=out, out_dtype=out_dtype)


def matmul_eager(a: Any, b: Any, *, bias: Any = None, alpha: float = 1, beta: float = 0, c: Any = None,
                 out: Any = None, out_dtype: Any = None) -> Any:
    """`matmul` without going through ``torch.ops.tmagen.matmul`` (what that operator runs)."""
    return _eager(a, b, bias, alpha, beta, c, out, out_dtype, None)


# ----------------------------------------------------------------------------- the fast path
class _Recipe:
    """A PyTorch call whose arrays all go to the kernel in place, as one launch: what the call of the
    same dtypes, shapes, strides, 16-byte alignments and devices decided, to repeat without deciding;
    and per pointers, scalars and stream the launch it made, to make again as it is (``runs``:
    `kernels.Replayed`, with the Launch that owns its parameters)."""

    __slots__ = ("kernel", "out_shape", "out_dtype", "layouts", "along", "dtypes", "device", "runs")

    def __init__(self, kern: Kernel, out_shape: tuple[int, ...] | None, out_dtype: Any,
                 layouts: tuple[tuple[tuple[int, ...], tuple[int, ...]] | None, ...], along: str | None,
                 dtypes: tuple[tuple[str, str | None, int | None, int], ...]) -> None:
        self.kernel, self.out_shape, self.out_dtype, self.layouts = kern, out_shape, out_dtype, layouts
        self.along, self.dtypes = along, dtypes
        self.device = dtypes[0][2]
        self.runs: dict[tuple, kernels.Replayed] = {}


_RECIPES: dict[tuple, _Recipe | _StagedRecipe | _BatchRecipe | None] = {}
_RECIPE_LIMIT = 256
_RUNS_LIMIT = 64  # launches kept per recipe: pointer sets seen lately


def _sig(x: Any) -> tuple | None:
    return None if x is None else (x.dtype, x.shape, x.stride(), x.data_ptr() & 15, x.get_device())


def _torch_call(t: Any, a: Any, b: Any, bias: Any, alpha: Any, beta: Any, c: Any, out: Any, out_dtype: Any) -> Any:
    """PyTorch tensors: a call like one seen before (the same layouts) launches what that one decided;
    others take the general path, which leaves its decision here when it is one launch: `_Recipe`
    with every array in place, `_StagedRecipe` for two matrices some of which go through scratch."""
    try:
        key = (_sig(a), _sig(b), _sig(out), None if c is None else _sig(c), beta == 0, _sig(bias), alpha == 1,
               out_dtype)
        recipe = _RECIPES.get(key)
    except (AttributeError, TypeError):  # an argument that is not a tensor, or an unhashable out_dtype
        return matmul_eager(a, b, bias=bias, alpha=alpha, beta=beta, c=c, out=out, out_dtype=out_dtype)
    if recipe is None:
        record: list = []
        result = _eager(a, b, bias, alpha, beta, c, out, out_dtype, record)
        if len(_RECIPES) >= _RECIPE_LIMIT:
            _RECIPES.clear()
        _RECIPES[key] = _recipe(record, out is None, result, a.dim() == 2 and b.dim() == 2,
                                (a, b, result, c if beta != 0 else None, bias))
        return result
    if not isinstance(recipe, _Recipe):
        return recipe.run(a, b, bias, alpha, beta, c, out)
    if out is None:
        out = a.new_empty(recipe.out_shape, dtype=recipe.out_dtype)
    lay = recipe.layouts
    stream = _STREAM(recipe.device)
    seen = (a.data_ptr(), b.data_ptr(), out.data_ptr(), alpha, stream, None if lay[3] is None else c.data_ptr(),
            None if lay[3] is None else beta, None if lay[4] is None else bias.data_ptr())
    if _launch_again(recipe, seen, stream):
        return out
    d = recipe.dtypes
    av, bv, ov = _view(a, lay[0], d[0]), _view(b, lay[1], d[1]), _view(out, lay[2], d[2])
    if recipe.along is None and lay[3] is None:
        if alpha == 1:
            launch = recipe.kernel.launch([av, bv], ov, stream)
        else:
            launch = recipe.kernel.launch([av, bv], ov, stream, {"alpha": _scalar(alpha, "alpha"), "beta": 0.0})
    else:
        params: dict[str, Any] = {"alpha": _scalar(alpha, "alpha"), "beta": 0.0 if lay[3] is None else
                                  _scalar(beta, "beta")}
        if lay[3] is not None:
            params["c"] = _view(c, lay[3], d[3])
        if lay[4] is not None:
            params.update(bias=_view(bias, lay[4], d[4]), bias_along=recipe.along)
        launch = recipe.kernel.launch([av, bv], ov, stream, params)
    _keep_run(recipe, seen, launch)
    return out


class _Fp8Recipe:
    """The fp8 product's `_Recipe`: what a call of the same layouts launched, every array in place
    (``slots``: A, B and C, then the parameters' arrays, each as its layout and element type), and
    the launches made per pointers, scalars and stream."""

    __slots__ = ("kernel", "out_shape", "out_dtype", "device", "slots", "scalars", "runs")

    def __init__(self, kern: Kernel, out_shape: tuple[int, ...] | None, out_dtype: Any,
                 views: tuple[ArrayView, ...], params: dict[str, Any]) -> None:
        self.kernel, self.out_shape, self.out_dtype = kern, out_shape, out_dtype
        self.device = views[0].device
        arrays = [(name, v) for name, v in params.items() if isinstance(v, ArrayView)]
        self.slots = tuple((name, (v.shape, v.strides), (v.dtype, v.carrier, v.device, v.itemsize))
                           for name, v in [("a", views[0]), ("b", views[1]), ("out", views[2]), *arrays])
        self.scalars = {name: v for name, v in params.items() if not isinstance(v, ArrayView)}
        self.runs: dict[tuple, kernels.Replayed] = {}


_FP8_RECIPES: dict[tuple, _Fp8Recipe | None] = {}


def _torch_fp8_call(a: Any, b: Any, scale_a: Any, scale_b: Any, bias: Any, alpha: Any, beta: Any, c: Any, out: Any,
                    out_dtype: Any, use_fast_accum: Any = False) -> Any:
    """The fp8 product of PyTorch tensors: a call like one seen before (the same layouts, scalars
    and kinds of scale) launches what that one decided, as `_torch_call` does for 16-bit types."""
    key: tuple | None = None
    try:
        key = (_sig(a), _sig(b), _sig(out), _sig(scale_a), _sig(scale_b), _sig(bias), _sig(c), float(alpha),
               float(beta), out_dtype, use_fast_accum)
        recipe = _FP8_RECIPES.get(key)
    except (AttributeError, TypeError, ValueError):  # an argument that is not a tensor, or a scalar that is no number
        key, recipe = None, None
    if recipe is None:
        record: list | None = [] if key is not None and key not in _FP8_RECIPES else None
        result = matmul_fp8(a, b, scale_a=scale_a, scale_b=scale_b, bias=bias, alpha=alpha, beta=beta, c=c, out=out,
                            out_dtype=out_dtype, use_fast_accum=use_fast_accum, record=record)
        if record is not None and key is not None:  # the first call of these layouts: is there a launch to repeat?
            if len(_FP8_RECIPES) >= _RECIPE_LIMIT:
                _FP8_RECIPES.clear()
            _FP8_RECIPES[key] = None if len(record) != 1 else _Fp8Recipe(
                record[0][0], tuple(result.shape) if out is None else None, result.dtype, record[0][1], record[0][2])
        return result
    if out is None:
        out = a.new_empty(recipe.out_shape, dtype=recipe.out_dtype)
    arrays = {"a": a, "b": b, "out": out, "scale_a": scale_a, "scale_b": scale_b, "bias": bias, "c": c}
    stream = _STREAM(recipe.device)
    seen = (stream, *(arrays[name].data_ptr() for name, _, _ in recipe.slots))
    if _launch_again(recipe, seen, stream):
        return out
    views = {name: _view(arrays[name], layout, d) for name, layout, d in recipe.slots}
    params = {**recipe.scalars, **{name: v for name, v in views.items() if name not in ("a", "b", "out")}}
    launch = recipe.kernel.launch([views["a"], views["b"]], views["out"], stream, params or None)
    _keep_run(recipe, seen, launch)
    return out


def _launch_again(recipe: _Recipe | _Fp8Recipe, seen: tuple, stream: int) -> bool:
    """Makes again the launch kept for ``seen`` (the call's pointers, scalars and stream), if there
    is one; False where there is none, or the driver refused it (another context current, say)."""
    run = recipe.runs.get(seen)
    return run is not None and kernels.launch_again((run,), stream)


def _replayed(kern: Kernel, launch: Launch) -> kernels.Replayed | None:
    """The kernel launch ``launch`` just made, its arguments built once (`kernels.replayable`), with
    the Launch that owns its parameters; None where it made none (nothing to launch, or a clear)."""
    last = kern.last_launch
    if launch.context and last is not None and last[4] is launch.params:  # a kernel launch, this call's
        head, params, _ = kernels.replayable(*last)
        return head, params, launch
    return None


def _keep_run(recipe: _Recipe | _Fp8Recipe, seen: tuple, launch: Launch) -> None:
    """Keeps the kernel launch just made for ``seen`` (the call's pointers, scalars and stream)."""
    run = _replayed(recipe.kernel, launch)
    if run is not None:
        if len(recipe.runs) >= _RUNS_LIMIT:
            recipe.runs.clear()
        recipe.runs[seen] = run


def _view(x: Any, layout: Any, d: tuple[str, str | None, int | None, int]) -> ArrayView:
    return ArrayView(x, "torch", x.data_ptr(), layout[0], layout[1], d[3], d[0], d[1], d[2])


def _recipe(record: list, new_out: bool, result: Any, two_d: bool,
            arrays: tuple[Any, ...]) -> _Recipe | _StagedRecipe | _BatchRecipe | None:
    """The recipe of a call that made one launch: with every array in place, `_Recipe`; with some
    through scratch, `_StagedRecipe` where the call was of two matrices (a batch merged into one
    product reads its arrays reshaped); a batch launched matrix by matrix, every array in place,
    `_BatchRecipe` (``arrays``: the call's a, b, out, c and bias, whose pointers its offsets are
    taken from); else None."""
    if len(record) > 1:
        if not all(plan.in_place for plan, _ in record):
            return None
        return _BatchRecipe(record, tuple(result.shape) if new_out else None, result.dtype, arrays)
    if len(record) != 1:
        return None
    plan, views = record[0]
    dtypes = tuple(("", None, None, 0) if v is None else (v.dtype, v.carrier, v.device, v.itemsize) for v in views)
    out_shape = tuple(result.shape) if new_out else None
    if plan.in_place:
        layouts = tuple(None if v is None else (v.shape, v.strides) for v in views)
        return _Recipe(plan.kernel, out_shape, result.dtype, layouts, plan.along, dtypes)
    return _StagedRecipe(plan, out_shape, result.dtype, dtypes) if two_d else None


_SLOTS = ("a", "b", "out", "c", "bias")  # a recipe's arrays, in the order of its views and dtypes


class _StagedRecipe:
    """A PyTorch call of two matrices of which some go to the kernel through scratch, as one launch:
    the `_ProductPlan` the first call of the same dtypes, shapes, strides, 16-byte alignments and
    devices decided, made again on each call's tensors (its scratch made anew, from PyTorch's
    allocator) without deciding."""

    __slots__ = ("plan", "out_shape", "out_dtype", "dtypes")

    def __init__(self, plan: _ProductPlan, out_shape: tuple[int, ...] | None, out_dtype: Any,
                 dtypes: tuple[tuple[str, str | None, int | None, int], ...]) -> None:
        self.plan, self.out_shape, self.out_dtype, self.dtypes = plan, out_shape, out_dtype, dtypes

    def run(self, a: Any, b: Any, bias: Any, alpha: Any, beta: Any, c: Any, out: Any) -> Any:
        p, d = self.plan, self.dtypes
        if out is None:
            out = a.new_empty(self.out_shape, dtype=self.out_dtype)
        arrays = {"a": a, "b": b, "out": out, "c": c, "bias": bias}
        views: dict[str, ArrayView | None] = {}
        for i, name in enumerate(_SLOTS):
            slot = getattr(p, name)
            if slot is not None and not isinstance(slot, (_Staging, _BiasStaging)):
                views[name] = _view(arrays[name], slot, d[i])
        like = views.get("a") or ArrayView(a, "torch", a.data_ptr(), (), (), d[0][3], d[0][0], d[0][1], d[0][2])
        _run_product(p, like, arrays, views, _scalar(alpha, "alpha"), _scalar(beta, "beta"))
        return out


class _BatchRecipe:
    """A PyTorch batch launched a matrix at a time, every array in place: per matrix, its product's
    plan and each array's place (its offset in elements from the call's tensor's pointer, and its
    layout), made again on each call's tensors without deciding; and per pointers, scalars and
    stream the launches made, to make again as they are (`kernels.launch_again`, one run each)."""

    __slots__ = ("matrices", "out_shape", "out_dtype", "dtypes", "device", "runs")

    def __init__(self, record: list, out_shape: tuple[int, ...] | None, out_dtype: Any,
                 arrays: tuple[Any, ...]) -> None:
        self.out_shape, self.out_dtype = out_shape, out_dtype
        bases = [None if x is None else x.data_ptr() for x in arrays]
        self.matrices = tuple((plan, tuple(None if v is None else ((v.ptr - bases[i]) // v.itemsize, v.shape, v.strides)
                                           for i, v in enumerate(views)))
                              for plan, views in record)
        self.dtypes = tuple(("", None, None, 0) if v is None else (v.dtype, v.carrier, v.device, v.itemsize)
                            for v in record[0][1])
        self.device = self.dtypes[0][2]
        self.runs: dict[tuple, tuple[kernels.Replayed, ...]] = {}

    def run(self, a: Any, b: Any, bias: Any, alpha: Any, beta: Any, c: Any, out: Any) -> Any:
        if out is None:
            out = a.new_empty(self.out_shape, dtype=self.out_dtype)
        arrays = (a, b, out, c, bias)
        stream = _STREAM(self.device)
        seen = (stream, alpha, beta, *(0 if x is None else x.data_ptr() for x in arrays))
        runs = self.runs.get(seen)
        if runs is not None and kernels.launch_again(runs, stream):
            return out
        alpha_f, beta_f = _scalar(alpha, "alpha"), _scalar(beta, "beta")
        made: list[kernels.Replayed] = []
        d = self.dtypes
        named = dict(zip(_SLOTS, arrays))
        for plan, places in self.matrices:
            views: dict[str, ArrayView | None] = {}
            for i, (name, place) in enumerate(zip(_SLOTS, places)):
                if place is not None:
                    x = arrays[i]
                    views[name] = ArrayView(x, "torch", x.data_ptr() + place[0] * d[i][3], place[1], place[2],
                                            d[i][3], d[i][0], d[i][1], d[i][2])
            launch, _ = _run_product(plan, views["a"], named, views, alpha_f, beta_f)  # type: ignore[arg-type]
            run = _replayed(plan.kernel, launch)
            if run is not None:
                made.append(run)
        if len(made) == len(self.matrices):  # every matrix a kernel launch of this call's: kept to make again
            if len(self.runs) >= _RUNS_LIMIT:
                self.runs.clear()
            self.runs[seen] = tuple(made)
        return out


def _eager(a: Any, b: Any, bias: Any, alpha: Any, beta: Any, c: Any, out: Any, out_dtype: Any,
           record: list | None) -> Any:
    av, bv = describe(a, "a"), describe(b, "b")
    in_dtype = av.carrier
    if in_dtype not in IN_TYPES or bv.carrier != in_dtype:
        raise _dtype_error(av, bv)
    if av.rank < 2 or bv.rank < 2:
        bad = "a" if av.rank < 2 else "b"
        raise _error(("array-rank", f"{bad}.ndim", str((av if bad == "a" else bv).rank),
                      "a matmul operand is a matrix or a batch of matrices (torch.matmul's vector forms are not "
                      "taken)", f"pass {bad} as a matrix: {bad}.reshape(1, -1) or {bad}.reshape(-1, 1)"))
    ov = describe(out, "out") if out is not None else None
    od = _dtype_name(out_dtype) if out_dtype is not None else ov.carrier if ov is not None else in_dtype
    if od not in OUT_TYPES:
        raise _error(("matmul-types", "out_dtype" if out_dtype is not None else "out.dtype",
                      str(out_dtype if out_dtype is not None else ov.dtype if ov else od),
                      "the matmul writes bfloat16, float16 or float32", "pass one of those"))
    alpha_f, beta_f = _scalar(alpha, "alpha"), _scalar(beta, "beta")
    m, k = av.shape[-2:]
    kb, n = bv.shape[-2:]
    batch = _batch(av, bv)
    if kb != k:
        raise _error(("array-shape", "b.shape", str(bv.shape), f"a is {av.shape}, so b needs K = {k} rows "
                      "([K, N]; a [N, K] weight w is passed as w.T)", f"pass b of shape ({k}, N)"))
    shape = (*batch, m, n)
    if ov is None:
        out, ov = empty_view(av, shape, dtype=od if od != in_dtype else None)
    elif ov.shape != shape or ov.carrier != od:
        raise _error(("array-shape", "out", f"{ov.dtype} {ov.shape}", f"the product is {od} {shape}",
                      f"pass out of shape {shape} and dtype {od} (or out_dtype= its dtype)"))
    cv = None
    if c is not None and beta_f != 0.0:
        cv = describe(c, "c")
        if cv.shape[-2:] != (m, n) or len(cv.shape) > len(shape) or cv.carrier != od or \
                any(x not in (1, y) for x, y in zip(cv.shape[-3::-1], batch[::-1])):
            raise _error(("array-shape", "c", f"{cv.dtype} {cv.shape}", f"beta * c is added to the {od} product of "
                          f"shape {shape}", f"pass c of dtype {od} and shape ({m}, {n})"
                          + (f" or {shape}" if batch else "") + " (a vector is a bias)"))
    elif c is None and beta_f != 0.0:
        raise _error(("matmul-scalar", "beta", repr(beta), "beta scales c, and no c is given", "pass c=, or beta=0"))
    unit = CHUNK // _ELEMENT_BYTES[od]
    n_kernel = n if n % unit == 0 else _padded(n)  # the output's rows as TMA stores them: whole 16 bytes
    bias_v, along, bias_staging = _bias(bias, av, m, n, n_kernel, od) if bias is not None and 0 not in shape else \
        (None, "n", None)
    if 0 in shape:
        return out
    if k == 0:
        _empty_sum(out, ov, c if cv is not None else None, bias, beta_f, in_dtype, od)
        return out
    args = _Args(in_dtype, od, n_kernel, alpha_f, beta_f, bias_v, along, bias_staging, record)
    if not batch:
        _product(args, a, av, b, bv, out, ov, c if cv is not None else None, cv)
    else:
        _batched(args, a, av, b, bv, out, ov, c if cv is not None else None, cv, batch)
    return out


def _dtype_error(av: ArrayView, bv: ArrayView) -> ArgumentError:
    if av.carrier not in IN_TYPES:
        return _error(("matmul-types", "a.dtype", av.dtype, "the tensor cores take bfloat16 or float16 here",
                       "pass a and b of one of those (PyTorch: a.to(torch.bfloat16); CuPy: a.astype('float16'))"))
    return _error(("matmul-types", "b.dtype", bv.dtype, f"b must have a's type ({av.dtype})",
                   f"pass b of {av.dtype}"))


def _batch(av: ArrayView, bv: ArrayView) -> tuple[int, ...]:
    """The batch shape, a's and b's leading dimensions broadcast as torch.matmul does."""
    a_batch, b_batch = av.shape[:-2], bv.shape[:-2]
    if not a_batch and not b_batch:
        return ()
    out = []
    for x, y in itertools.zip_longest(a_batch[::-1], b_batch[::-1], fillvalue=1):
        if x != y and 1 not in (x, y):
            raise _error(("array-shape", "a.shape, b.shape", f"{av.shape}, {bv.shape}", "their batch dimensions "
                          "must broadcast (equal, or 1)", "pass batches that broadcast"))
        out.append(max(x, y) if 0 not in (x, y) else 0)
    return tuple(out[::-1])


def _bias(bias: Any, av: ArrayView, m: int, n: int, n_kernel: int,
          od: str) -> tuple[ArrayView, str, _BiasStaging | None]:
    """The bias as the kernel takes it (1-D, contiguous, 16-byte aligned, the output's dtype, as long
    as the kernel's N where that is padded), the dimension it runs along ("n" for (N,) and (1, N),
    "m" for (M, 1)), and how it was staged (`_fill_bias`; None: in place)."""
    v = describe(bias, "bias")
    if v.shape in ((n,), (1, n)):
        along, length, want = "n", n, n_kernel
    elif v.shape == (m, 1):
        along, length, want = "m", m, m
    else:
        raise _error(("array-shape", "bias.shape", str(v.shape), f"a bias is added to every row ({n},) or (1, {n}), "
                      f"or along each row ({m}, 1)", "pass one of those shapes"))
    stride = v.strides[-1] if along == "n" else v.strides[0]
    if v.carrier == od and (length <= 1 or stride == 1) and v.ptr % CHUNK == 0 and want == length:
        return v.with_layout((length,), (1,)), along, None
    if v.framework not in _COPIES:
        raise _error(("matmul-layout", "bias", f"{v.dtype} {v.shape}", f"the kernel takes a contiguous, 16-byte "
                      f"aligned {od} bias, and tmagen copies only PyTorch and CuPy arrays", "pass such a bias"))
    staged = _BiasStaging(want, length, od)
    return _fill_bias(staged, bias, av), along, staged


class _BiasStaging(NamedTuple):
    """A bias through scratch: ``want`` values of type ``dtype``, the bias's ``length`` first (cast to
    ``dtype``; past them, values of columns that are dropped)."""

    want: int
    length: int
    dtype: str


def _fill_bias(staged: _BiasStaging, bias: Any, like: ArrayView) -> ArrayView:
    """`_BiasStaging`'s scratch (in ``like``'s framework and device), ``bias`` copied in."""
    scratch, view = empty_view(like, (_padded(staged.want),), dtype=staged.dtype)
    scratch[: staged.length] = bias.reshape(-1)
    return view.with_layout((staged.want,), (1,))


class _Args:
    """What every product of one call shares."""

    __slots__ = ("in_dtype", "out_dtype", "n_kernel", "alpha", "beta", "bias", "along", "bias_staging", "record")

    def __init__(self, in_dtype: str, out_dtype: str, n_kernel: int, alpha: float, beta: float,
                 bias: ArrayView | None, along: str, bias_staging: _BiasStaging | None,
                 record: list | None) -> None:
        self.in_dtype, self.out_dtype, self.n_kernel, self.alpha, self.beta = in_dtype, out_dtype, n_kernel, alpha, beta
        self.bias, self.along, self.bias_staging, self.record = bias, along, bias_staging, record


def _a_major(av: ArrayView) -> str:
    """"mn" where A's columns ([M, K] seen as [K, M], M contiguous: a transposed view such as x.T)
    lie as TMA reads them in place, else "k" (its own rows, in place or through scratch, as the
    kernels tuned for decoding's few rows take them)."""
    (m, k), (s0, s1) = av.shape, av.strides
    if k <= 1 or s1 == 1 or not (m <= 1 or s0 == 1):
        return "k"
    return "mn" if _addressable(av, k, m, s1) else "k"


def _b_major(bv: ArrayView) -> str:
    """"mn" where B's rows ([K, N], N contiguous) lie as TMA reads them, "k" where its columns do
    (a transposed view of a [N, K] array); where both or neither, the one TMA takes in place, else "k"."""
    (k, n), (s0, s1) = bv.shape, bv.strides
    mn = n <= 1 or s1 == 1
    km = k <= 1 or s0 == 1
    if mn and km:  # a single row or column: whichever pitch TMA takes
        if _addressable(bv, k, n, s0 if k > 1 else _padded(n)):
            return "mn"
        return "k"
    return "mn" if mn else "k"


Layout = tuple[tuple[int, ...], tuple[int, ...]]  # a view's (shape, strides), in elements
Slot = Layout | _Staging | None  # how an array reaches the kernel: its own memory, seen so; a scratch; absent


class _ProductPlan:
    """One 2-D product as decided for its arrays' layouts, dtypes and alignments: its kernel, and
    how A, B, the output and C each reach it (`Slot`: a layout of the array's own memory, or a
    `_Staging`, the output's copied back into its first ``n`` columns), and the bias (its layout, or
    `_fill_bias`'s staging). ``b_rows``: a K-major B read in place where N is padded (its N rows of
    the kernel's padded N; the launcher's ``b_rows``). `_run_product` makes it on any arrays of those
    layouts."""

    __slots__ = ("kernel", "a", "b", "out", "c", "bias", "along", "n", "epilogue", "b_rows")

    def __init__(self, kern: Kernel, a: Slot, b: Slot, out: Slot, c: Slot, bias: Layout | _BiasStaging | None,
                 along: str | None, n: int, epilogue: bool, b_rows: int | None) -> None:
        self.kernel, self.a, self.b, self.out, self.c, self.bias = kern, a, b, out, c, bias
        self.along, self.n, self.epilogue, self.b_rows = along, n, epilogue, b_rows

    @property
    def in_place(self) -> bool:
        return not any(isinstance(x, (_Staging, _BiasStaging)) for x in (self.a, self.b, self.out, self.c, self.bias))


def _product(args: _Args, a: Any, av: ArrayView, b: Any, bv: ArrayView, out: Any, ov: ArrayView, c: Any,
             cv: ArrayView | None) -> None:
    """One 2-D product into ``out``: the operands as the kernel takes them, staged where they must be."""
    arrays = {"a": a, "b": b, "out": out, "c": c}
    plan, views = _plan_product(args, arrays, av, bv, ov, cv)
    _, launched = _run_product(plan, av, arrays, views, args.alpha, args.beta)
    if args.record is not None:
        args.record.append((plan, launched))


def _plan_product(args: _Args, arrays: dict[str, Any], av: ArrayView, bv: ArrayView, ov: ArrayView,
                  cv: ArrayView | None) -> tuple[_ProductPlan, dict[str, ArrayView | None]]:
    """`_ProductPlan` of a product of ``arrays`` (a, b, out, c: the framework arrays of the views),
    with the views the kernel takes them as (a staged one's scratch is made as it is decided: `_take`);
    scratch takes A's framework and device."""
    m, k = av.shape
    n = bv.shape[1]
    a_major, b_major = _a_major(av), _b_major(bv)
    np_ = args.n_kernel
    made: dict[str, ArrayView | None] = {}

    def slot(name: str, op: _Operand, shape: tuple[int, int], dtype: str | None) -> Slot:
        view, staging = _take(op, av, shape, dtype, name)
        made[name] = view
        return staging if staging is not None else (view.shape, view.strides)

    a_slot = slot("a", _as_rows(arrays["a"], av, a_major == "mn"), (m, k) if a_major == "k" else (k, m), None)
    b_op = _as_rows(arrays["b"], bv, b_major == "k")
    b_rows = None
    if b_major == "k" and np_ != n and b_op.contiguous_rows and _addressable(b_op.view, n, k, b_op.pitch):
        # N padded for the output's stores: B's own n rows, read in place as the kernel's np_ (its map
        # stops at n, and TMA reads the rest as zeros), not copied whole into np_ rows
        b_layout: Layout = ((np_, k), (b_op.pitch, 1))
        made["b"] = b_op.view.with_layout(*b_layout)
        b_slot: Slot = b_layout
        b_rows = n
    else:
        b_slot = slot("b", b_op, (np_, k) if b_major == "k" else (k, np_), None)
    o_op = _as_rows(arrays["out"], ov, False)
    out_slot: Slot
    if o_op.contiguous_rows and np_ == n and _addressable(o_op.view, m, n, o_op.pitch):
        out_slot = (o_op.view.shape, o_op.view.strides)
        made["out"] = o_op.view
    else:
        if ov.framework not in _COPIES:
            raise _error(("matmul-layout", "out.strides", f"{list(ov.strides)} elements (shape {list(ov.shape)})",
                          "TMA writes rows of whole 16 bytes at a 16-byte aligned address with a pitch of whole 16 "
                          "bytes, and tmagen copies only PyTorch and CuPy arrays",
                          "pass out with such rows (N a multiple of 8)"))
        out_slot = _Staging((m, np_), args.out_dtype, False, (m, n))
    epilogue = args.alpha != 1.0 or cv is not None or args.bias is not None
    c_slot: Slot = None
    if epilogue and cv is not None:
        c_slot = slot("c", _as_rows(arrays["c"], cv, False), (m, np_), args.out_dtype)
    bias_slot: Layout | _BiasStaging | None = None
    if args.bias is not None:
        bias_slot = args.bias_staging or (args.bias.shape, args.bias.strides)
        made["bias"] = args.bias
    plan = _ProductPlan(kernel(args.in_dtype, args.out_dtype, b_major, a_major), a_slot, b_slot, out_slot, c_slot,
                        bias_slot, args.along if args.bias is not None else None, n, epilogue, b_rows)
    return plan, made


def _run_product(plan: _ProductPlan, like: ArrayView, arrays: dict[str, Any], views: dict[str, ArrayView | None],
                 alpha: float, beta: float) -> tuple[Launch, tuple[ArrayView | None, ...]]:
    """Launches ``plan`` on a call's ``arrays`` (a, b, out, c; framework arrays) seen as ``views``
    (an array's own ArrayView, or, for a staged one whose scratch is made already, the scratch's),
    staging those ``views`` lacks (in ``like``'s framework and device) and copying a staged output
    back; returns the launch, and the views it was made on: A, B, the output, C and the bias (None
    where absent)."""

    def operand(name: str) -> ArrayView:
        view = views.get(name)
        staging = getattr(plan, name)
        if isinstance(staging, _Staging):
            if view is not None:
                return view
            x = arrays[name]
            return _fill(staging, _t(x) if staging.transposed else x, like, like.device != -1)
        assert view is not None
        return view.with_layout(*staging)

    a_in, b_in = operand("a"), operand("b")
    scratch = None
    if isinstance(plan.out, _Staging):
        st = plan.out
        scratch, o_in = empty_view(like, (st.rows, st.pitch), dtype=st.dtype)
        o_in = o_in.with_layout((st.rows, st.cols), (st.pitch, 1))
    else:
        o_in = operand("out")
    params: dict[str, Any] = {}
    if plan.epilogue:
        params = {"alpha": alpha, "beta": beta if plan.c is not None else 0.0}
        if plan.c is not None:
            params["c"] = operand("c")
        if plan.bias is not None:
            bias_view = views.get("bias")
            if bias_view is None:  # a replay: the bias in place has its view, a staged one is made here
                assert isinstance(plan.bias, _BiasStaging)
                bias_view = _fill_bias(plan.bias, arrays["bias"], like)
            params.update(bias=bias_view, bias_along=plan.along)
    if plan.b_rows is not None:
        params["b_rows"] = plan.b_rows
    launch = _launch(plan.kernel, a_in, b_in, o_in, params)
    if scratch is not None:
        arrays["out"][...] = scratch[:, : plan.n]
    return launch, (a_in, b_in, o_in, params.get("c"), params.get("bias"))


def _launch(kern: Kernel, a: ArrayView, b: ArrayView, out: ArrayView, params: dict[str, Any]) -> Launch:
    """The contract with the matmul family: A [M, K], B [N, K] ("k") or [K, N] ("mn"), C [M, N], and
    the epilogue's alpha, beta, c, bias (1-D) and bias_along as keywords."""
    if params:
        return kern.launch([a, b], out, params=params)
    return kern.launch([a, b], out)


def _batched(args: _Args, a: Any, av: ArrayView, b: Any, bv: ArrayView, out: Any, ov: ArrayView, c: Any,
             cv: ArrayView | None, batch: tuple[int, ...]) -> None:
    """A batch: one product of all rows where B is one matrix and A's, C's and the output's rows lie
    evenly (a bias along M differs per matrix), else one product per matrix."""
    m, n = ov.shape[-2:]
    if bv.rank == 2 and av.rank == len(batch) + 2 and args.along == "n" and (cv is None or cv.shape == ov.shape):
        views = [av, ov] + ([cv] if cv is not None else [])
        merged, strides = merge_dims(ov.shape[:-1], *(v.strides[:-1] for v in views))
        if len(merged) == 1:
            rows = merged[0]
            a2 = av.with_layout((rows, av.shape[-1]), (strides[0][0], av.strides[-1]))
            o2 = ov.with_layout((rows, n), (strides[1][0], ov.strides[-1]))
            c2 = cv.with_layout((rows, n), (strides[2][0], cv.strides[-1])) if cv is not None else None
            _product(args, _flat(a, a2), a2, b, bv, _flat(out, o2), o2, _flat(c, c2), c2)
            return
    for index in itertools.product(*(range(x) for x in batch)):
        sub = [_at(x, v, index) for x, v in ((a, av), (b, bv), (out, ov))]
        c_i = _at(c, cv, index) if cv is not None else (None, None)
        _product(args, *sub[0], *sub[1], *sub[2], *c_i)


def _flat(x: Any, view: ArrayView | None) -> Any:
    """The framework array of a merged view (for a scratch copy or a copy back), or None."""
    if view is None:
        return None
    if view.framework not in _COPIES:
        return x
    return x.reshape(view.shape)


def _at(x: Any, view: ArrayView, index: tuple[int, ...]) -> tuple[Any, ArrayView]:
    """Matrix ``index`` of the batch (broadcast: a dimension of 1, or a missing one, is index 0)."""
    lead = view.shape[:-2]
    own = tuple(0 if extent == 1 else i for extent, i in zip(lead, index[len(index) - len(lead):]))
    offset = sum(i * s for i, s in zip(own, view.strides))
    sub = view.with_layout(view.shape[-2:], view.strides[-2:])
    sub.ptr = view.ptr + offset * view.itemsize
    return (x[own] if view.framework in _COPIES else x), sub


def _empty_sum(out: Any, ov: ArrayView, c: Any, bias: Any, beta: float, in_dtype: str, od: str) -> None:
    """K = 0: ``beta * c + bias`` (an empty sum of products is 0), by the framework."""
    if c is None and bias is None:
        if ov.framework in _COPIES:
            out[...] = 0
            return
        raise _error(("matmul-layout", "a.shape", "K = 0", "tmagen writes the zeros of an empty product with "
                      "PyTorch or CuPy", "pass PyTorch or CuPy arrays"))
    if ov.framework not in _COPIES:
        raise _error(("matmul-layout", "a.shape", "K = 0", "tmagen adds c and bias to an empty product with "
                      "PyTorch or CuPy", "pass PyTorch or CuPy arrays"))
    total: Any = 0
    if c is not None:
        total = _float32(c) * beta
    if bias is not None:
        total = total + _float32(bias)
    out[...] = total


def _float32(x: Any) -> Any:
    return x.float() if hasattr(x, "float") and callable(x.float) else x.astype("float32")


# ----------------------------------------------------------------------------- PyTorch
_TORCH: Any = None
# Eager calls that autograd records go through a torch.autograd.Function of the same forward and
# backward as the operator's (`_make_function`): the operator's Python autograd wrapper cost a
# training step of 4096 x 2048 x 2048 bf16 (fwd + bwd of y = x w^T) about 300 us of host time,
# against 160 through the Function and 120 for torch.matmul (H100, 2026-11-27). torch.compile
# traces the operator.
_FUNCTION: Any = None
_FP8_TORCH: frozenset = frozenset()  # PyTorch's fp8 dtypes (a set lookup: the bf16 path's host time counts)
_STREAM: Any = None  # PyTorch's current stream of a device, as an integer


def _needs_grad(a: Any, b: Any, bias: Any, c: Any) -> bool:
    """Tensors whose product autograd records (`_FUNCTION`)."""
    return (a.requires_grad or b.requires_grad or (bias is not None and bias.requires_grad) or
            (c is not None and c.requires_grad)) and _TORCH.is_grad_enabled()


def _torch_dtype(x: Any) -> Any:
    if x is None or isinstance(x, _TORCH.dtype):
        return x
    name = _dtype_name(x)
    if name not in OUT_TYPES:
        raise _error(("matmul-types", "out_dtype", str(x), "the matmul writes bfloat16, float16 or float32",
                      "pass one of those"))
    return getattr(_TORCH, name)


def register_torch_op() -> None:
    """Registers ``torch.ops.tmagen.matmul`` (`tmagen.torch_ops` calls this once): the eager path as
    a custom operator, its fake implementation (shapes and dtype for torch.compile) and its autograd
    formula."""
    global _TORCH, _STREAM, _FP8_TORCH, _FUNCTION
    import torch

    _FP8_TORCH = frozenset(getattr(torch, name) for name in FRAMEWORK_FP8 if hasattr(torch, name))
    op = torch.library.custom_op(
        "tmagen::matmul", _torch_eager, mutates_args=(), device_types="cuda",
        schema="(Tensor a, Tensor b, Tensor? bias=None, Tensor? c=None, float alpha=1., float beta=0., "
               "ScalarType? out_dtype=None) -> Tensor")
    op.register_fake(_torch_fake)
    op.register_autograd(_torch_backward, setup_context=_torch_setup)
    scaled = torch.library.custom_op(
        "tmagen::scaled_matmul", _torch_scaled_eager, mutates_args=(), device_types="cuda",
        schema="(Tensor a, Tensor b, Tensor? scale_a=None, Tensor? scale_b=None, Tensor? bias=None, Tensor? c=None, "
               "float alpha=1., float beta=0., ScalarType? out_dtype=None, bool use_fast_accum=False) -> Tensor")
    scaled.register_fake(_torch_scaled_fake)
    _TORCH = torch
    _FUNCTION = _make_function(torch)
    _STREAM = getattr(torch._C, "_cuda_getCurrentRawStream", None) or (
        lambda d: torch.cuda.current_stream(d).cuda_stream)


# tmagen::matmul's bias, c, alpha, beta and out_dtype where a call leaves them out, as its schema says
_OP_DEFAULTS: tuple[Any, ...] = (None, None, 1.0, 0.0, None)


def _torch_eager(a: Any, b: Any, bias: Any = None, c: Any = None, alpha: float = 1.0, beta: float = 0.0,
                 out_dtype: Any = None) -> Any:
    """The operator's eager body (autograd's forward and backward products, torch.compile's graphs):
    the fast path of plain tensors, which repeats a layout's decision (`_torch_call`); deciding
    anew on every call cost a training step of 4096 x 2048 x 2048 bf16 3.6 times torch's time
    (H100, 2026-11-27: 966 against 267 us)."""
    name = None if out_dtype is None else str(out_dtype).removeprefix("torch.")
    if type(a) is _TORCH.Tensor and type(b) is _TORCH.Tensor:
        return _torch_call(_TORCH, a, b, bias, alpha, beta, c, None, name)
    return matmul_eager(a, b, bias=bias, c=c, alpha=alpha, beta=beta, out_dtype=name)


def _torch_fake(a: Any, b: Any, bias: Any = None, c: Any = None, alpha: float = 1.0, beta: float = 0.0,
                out_dtype: Any = None) -> Any:
    torch = _TORCH
    torch._check(a.dim() >= 2 and b.dim() >= 2, lambda: "tmagen::matmul takes matrices or batches of them")
    torch._check(a.shape[-1] == b.shape[-2], lambda: f"tmagen::matmul: a is {tuple(a.shape)}, b {tuple(b.shape)}")
    batch = torch.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    return a.new_empty((*batch, a.shape[-2], b.shape[-1]), dtype=out_dtype if out_dtype is not None else a.dtype)


def _torch_scaled_eager(a: Any, b: Any, scale_a: Any = None, scale_b: Any = None, bias: Any = None, c: Any = None,
                        alpha: float = 1.0, beta: float = 0.0, out_dtype: Any = None,
                        use_fast_accum: bool = False) -> Any:
    return matmul_fp8(a, b, scale_a=scale_a, scale_b=scale_b, bias=bias, c=c, alpha=alpha, beta=beta,
                      out_dtype=out_dtype, use_fast_accum=use_fast_accum)


def _torch_scaled_fake(a: Any, b: Any, scale_a: Any = None, scale_b: Any = None, bias: Any = None, c: Any = None,
                       alpha: float = 1.0, beta: float = 0.0, out_dtype: Any = None,
                       use_fast_accum: bool = False) -> Any:
    torch = _TORCH
    torch._check(a.dim() == 2 and b.dim() == 2, lambda: "tmagen::scaled_matmul takes matrices")
    torch._check(a.shape[1] == b.shape[0], lambda: f"tmagen::scaled_matmul: a is {tuple(a.shape)}, b {tuple(b.shape)}")
    return a.new_empty((a.shape[0], b.shape[1]), dtype=out_dtype if out_dtype is not None else torch.bfloat16)


def _make_function(torch: Any) -> Any:
    class TmagenMatmul(torch.autograd.Function):
        """tmagen.ops.matmul as autograd records it in eager mode: the operator's formulas."""

        @staticmethod
        def forward(ctx: Any, a: Any, b: Any, bias: Any, c: Any, alpha: float, beta: float, out_dtype: Any) -> Any:
            name = None if out_dtype is None else str(out_dtype).removeprefix("torch.")
            result = _torch_call(torch, a, b, bias, alpha, beta, c, None, name)
            _torch_setup(ctx, (a, b, bias, c, alpha, beta, out_dtype), result)
            return result

        @staticmethod
        def backward(ctx: Any, grad: Any) -> Any:
            return _torch_backward(ctx, grad)

    return TmagenMatmul


def _torch_setup(ctx: Any, inputs: Sequence[Any], output: Any) -> None:
    given: list[Any] = [*inputs, *_OP_DEFAULTS[len(inputs) - 2:]]  # the defaults of those the call left out
    a, b, bias, c, alpha, beta, _ = given
    ctx.save_for_backward(a, b)
    ctx.alpha, ctx.beta = alpha, beta
    ctx.bias_meta = None if bias is None else (tuple(bias.shape), bias.dtype)
    ctx.c_meta = None if c is None else (tuple(c.shape), c.dtype)


def _torch_backward(ctx: Any, grad: Any) -> tuple[Any, ...]:
    """grad_a = alpha grad b^T, grad_b = alpha a^T grad (by the op itself where the types let it;
    for a transposed view, the transpose of the product in its memory's layout), grad_c = beta
    grad, grad_bias = grad summed along the bias's broadcast dimensions."""
    a, b = ctx.saved_tensors
    given = len(ctx.needs_input_grad)  # a call may leave out the arguments after b (`_OP_DEFAULTS`)
    need = (*ctx.needs_input_grad, *(False,) * (len(_OP_DEFAULTS) + 2 - given))
    ga = gb = g_bias = g_c = None
    if need[0]:
        if a.dim() == b.dim() == 2 and _transposed(a):
            # a transposed view (x.T): its gradient made in its memory's layout, (b grad^T)^T, as b's below
            ga = _grad_product(b, grad.mT, ctx.alpha, a.dtype).mT
        else:
            ga = _grad_product(grad, b.mT, ctx.alpha, a.dtype).sum_to_size(a.shape)
    if need[1]:
        if b.dim() == 2 and a.dim() > 2:  # one product over every row of the batch
            gb = _grad_product(a.reshape(-1, a.shape[-1]).mT, grad.reshape(-1, grad.shape[-1]), ctx.alpha, b.dtype)
        elif a.dim() == b.dim() == 2 and _transposed(b):
            # b a transposed view (w.T): its gradient made in w's layout, (grad^T a)^T, so that autograd
            # hands w a contiguous gradient instead of copying a transposed one (as torch's mm does)
            gb = _grad_product(grad.mT, a, ctx.alpha, b.dtype).mT
        else:
            gb = _grad_product(a.mT, grad, ctx.alpha, b.dtype).sum_to_size(b.shape)
    if need[2] and ctx.bias_meta is not None:
        shape, dtype = ctx.bias_meta
        g_bias = grad.sum_to_size(shape).to(dtype)
    if need[3] and ctx.c_meta is not None:
        shape, dtype = ctx.c_meta
        g_c = (grad * ctx.beta).sum_to_size(shape).to(dtype)
    return (ga, gb, g_bias, g_c, None, None, None)[:given]  # one per argument the call gave


def _transposed(x: Any) -> bool:
    """Whether a matrix is a transposed view: its columns contiguous, its rows not."""
    return bool(x.stride(0) == 1 and x.stride(1) != 1)


def _grad_product(x: Any, y: Any, alpha: float, dtype: Any) -> Any:
    torch = _TORCH
    if x.dtype == y.dtype and x.dtype in (torch.bfloat16, torch.float16):
        if type(x) is torch.Tensor and type(y) is torch.Tensor and not torch.is_grad_enabled():
            return _torch_call(torch, x, y, None, alpha, 0.0, None, None, str(dtype).removeprefix("torch."))
        # a double backward (grad enabled), or a traced one (AOTAutograd's fake or functional tensors,
        # where torch.compiler.is_compiling() is False): the operator, which they record
        return torch.ops.tmagen.matmul(x, y, None, None, alpha, 0.0, dtype)
    # an fp32 gradient (out_dtype float32): the tensor cores take 16-bit inputs, so torch's product
    return (torch.matmul(x.float(), y.float()) * alpha).to(dtype)


__all__ = ["matmul", "matmul_eager", "kernel", "ops_spec", "register_torch_op"]
