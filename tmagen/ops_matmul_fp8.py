"""``tmagen.ops.matmul`` on fp8 operands: the scaled matmul of ``torch._scaled_mm``'s layout.

``matmul(a, b, scale_a=, scale_b=, ...)`` with ``a`` an fp8 [M, K] (K contiguous) and ``b`` a
[K, N] whose K is contiguous (``w.t()`` of a [N, K] ``w``, as ``torch._scaled_mm`` takes it) is
``alpha * (scale_a * a) @ (scale_b * b) + beta * c + bias`` in fp32, written as ``out_dtype``
(bfloat16 by default, float16 or float32). The scales are float32: one value for the tensor (a
0-d or 1-element tensor), one per row of ``a`` ([M, 1] or (M,)) and per column of the product
([1, N] or (N,)), or blocks: ``scale_a`` [M, ceil(K/128)], a factor per 1 x 128 block of ``a``,
and ``scale_b`` [ceil(K/128), ceil(N/128)], one per 128 x 128 block of ``b`` (DeepSeek-V3's
blocks), blocked as ``b`` is, as ``torch._scaled_mm`` takes them: for ``b = w.t()``, the
[ceil(N/128), ceil(K/128)] scales of ``w`` as ``.t()`` (the same memory, no copy); with K of one
block, ``scale_a`` [M, 1] beside ``scale_b`` [1, ceil(N/128)] of more than one block (which
``torch._scaled_mm`` 2.11 takes and multiplies wrongly: docs/misses.md). The tensor
core's accumulator keeps fewer bits than fp32 (13 fraction bits on an H200:
docs/fp8-accumulator.md), so the partial sums are promoted into fp32 every 128 of K, as cuBLASLt
does by default; ``use_fast_accum=True`` (``torch._scaled_mm``'s name) keeps them in the tensor core over
the whole of K instead, as cuBLASLt's fast accumulation and Triton's ``tl.dot`` do: faster, and
its error grows with K (block scales are applied as the sums are promoted, so they take no fast
accumulation). One kernel family per (A type, B type, output type, block scales or fast
accumulation), derived from tmagen/ops_specs/bench_matmul_fp8.json, compiled at its first call;
each call picks its tile and split of K as the bf16 family does.

wgmma reads fp8 operands K-major only. Where an operand is not (``b`` given [K, N] with N
contiguous, or ``a`` transposed) or its rows are not whole 16 bytes (K not a multiple of 16), it
goes through a scratch copy made by the framework; so does an output whose rows are not whole 16
bytes. PyTorch only: CuPy has no fp8 type (raw uint8 bytes go through ``tmagen.load`` of an fp8
spec instead). The product is not differentiated (fp8 training recipes quantize their gradients
and multiply them with matmuls of their own).
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

from tmagen.arrays import ArrayView, describe, element_type, empty_view
from tmagen.dtypes import FP8_NAMES, FRAMEWORK_FP8
from tmagen.errors import ArgumentError
from tmagen.kernels import Kernel
from tmagen.kinds.matmul.plan import SCALE_BLOCK
from tmagen.rules import Violation
from tmagen.spec import Spec, parse_spec

CALL = "tmagen.ops.matmul"
OUT_TYPES = ("bfloat16", "float16", "float32")
CHUNK = 16  # TMA: a global address and every row pitch are whole 16 bytes
_OUT_BYTES = {"bfloat16": 2, "float16": 2, "float32": 4}


def is_fp8(x: Any) -> bool:
    """Whether ``x`` is an array of a framework fp8 type (PyTorch's float8_e4m3fn or float8_e5m2)."""
    return str(getattr(x, "dtype", "")).removeprefix("torch.") in FRAMEWORK_FP8


@cache
def fp8_spec(a_type: str, b_type: str, out_dtype: str, block_scales: bool, fast_accum: bool = False) -> Spec:
    """The family's spec for these types: the tuned fp8 spec with its types changed (an fp32 C in
    boxes of [64, 32], 128 bytes), and block scales where asked, or (``fast_accum``) partial sums
    never promoted (promote_every 0)."""
    raw = json.loads((Path(__file__).resolve().parent / "ops_specs" / "bench_matmul_fp8.json").read_text())
    a, b, c = raw["tensors"]
    a["dtype"], b["dtype"], c["dtype"] = a_type, b_type, out_dtype
    if out_dtype == "float32":
        c["box"] = [64, 32]
    raw["kernel"]["block_scales"] = block_scales
    if fast_accum:
        raw["kernel"]["promote_every"] = 0
    raw["name"] = (f"ops_matmul_{a_type[7:]}_{b_type[7:]}_{out_dtype}" + ("_blocks" if block_scales else "")
                   + ("_fast" if fast_accum else ""))
    raw["description"] = "Derived by tmagen.ops.matmul from bench_matmul_fp8."
    return parse_spec(raw, "derived from tmagen/ops_specs/bench_matmul_fp8.json")


@cache
def fp8_kernel(a_type: str, b_type: str, out_dtype: str, block_scales: bool, fast_accum: bool = False) -> Kernel:
    return Kernel(fp8_spec(a_type, b_type, out_dtype, block_scales, fast_accum), caller=CALL)


def _error(*problems: tuple[str, str, str, str, str]) -> ArgumentError:
    return ArgumentError(CALL, [Violation(rule, fld, value, why, fix, CALL) for rule, fld, value, why, fix in problems])


def _whole(n: int, unit: int) -> int:
    return -(-n // unit) * unit


def _k_major(x: Any, view: ArrayView, rows: int, k: int, name: str) -> ArrayView:
    """``x`` ([rows, K] as the kernel reads it: K contiguous) in place where TMA can read it, else a
    scratch copy with rows of whole 16 bytes (TMA zero-fills past K, so the padding is never read)."""
    (s0, s1) = view.strides
    in_place = (k <= 1 or s1 == 1) and view.ptr % CHUNK == 0 and (rows <= 1 or (s0 > 0 and s0 % CHUNK == 0))
    if in_place:
        return view.with_layout((rows, k), (s0 if rows > 1 else _whole(k, CHUNK), 1))
    if view.framework != "torch":
        raise _error(("matmul-layout", f"{name}.strides", str(list(view.strides)), "wgmma reads fp8 K-major, in "
                      "rows of whole 16 bytes at a 16-byte aligned address, and tmagen copies only PyTorch arrays",
                      f"pass {name} with contiguous rows of K, K a multiple of 16"))
    pitch = _whole(k, CHUNK)
    scratch = x.new_empty((rows, pitch))
    scratch[:, :k] = x
    return describe(scratch, name).with_layout((rows, k), (pitch, 1))


def _block_scales(scale_a: Any, scale_b: Any, n: int) -> bool:
    """Whether the scales are blocks: ``scale_a`` 2-D with more than one column (one per 128 of K),
    or, where K is one block, ``scale_a`` [M, 1] (a row's one block) beside a ``scale_b`` [1,
    ceil(N/128)] of more than one block, which nothing but blocks can be."""
    def shape(x: Any) -> tuple[int, ...]:
        return tuple(getattr(x, "shape", ()))

    a, b = shape(scale_a), shape(scale_b)
    if scale_a is None or len(a) != 2:
        return False
    column_blocks = -(-n // SCALE_BLOCK)
    return a[1] != 1 or (len(b) == 2 and b == (1, column_blocks) and column_blocks > 1)


def _scale(scale: Any, name: str, count: int, block_shape: tuple[int, int] | None,
           blocked_as_b: bool = False) -> ArrayView | None:
    """The scale as the kernel reads it: one value, ``count`` contiguous values, or (blocks) a
    [rows, ceil(K/128)] array with contiguous rows; float32 on the GPU. ``blocked_as_b``: block
    scales of ``b``, [ceil(K/128), ceil(N/128)] (``block_shape``) as b [K, N] is blocked; the kernel
    reads them per row of w = b.t(), so it takes their transpose."""
    if scale is None:
        if block_shape is not None:
            raise _error(("matmul-scales", name, "None", "block scales come in pairs", f"pass {name} too"))
        return None
    v = describe(scale, name)
    if v.carrier != "float32":
        raise _error(("matmul-scales", f"{name}.dtype", v.dtype, "scales are float32 (as torch._scaled_mm's)",
                      f"pass {name}.float()"))
    size = 1
    for d in v.shape:
        size *= d
    if block_shape is not None:
        if v.shape != block_shape:
            raise _error(("matmul-scales", f"{name}.shape", str(v.shape), "block scales are one factor per "
                          + ("128 x 128 block of b [K, N], blocked as b is: [ceil(K/128), ceil(N/128)] "
                             "(torch._scaled_mm's layout)" if blocked_as_b else
                             "1 x 128 block of a: [M, ceil(K/128)]"),
                          f"pass a float32 tensor of shape {block_shape}" + (
                              " (the [ceil(N/128), ceil(K/128)] scales of a [N, K] w, for b = w.t(), as .t())"
                              if blocked_as_b else "")))
        if blocked_as_b:
            scale = scale.t() if hasattr(scale, "t") else scale.T
            v = describe(scale, name)
            block_shape = (block_shape[1], block_shape[0])
        rows_apart = block_shape[0] <= 1 or v.strides[0] >= block_shape[1]  # not a broadcast (stride 0) view
        if (v.strides[1] == 1 or block_shape[1] == 1) and rows_apart:
            return v
        return describe(scale.contiguous(), name)
    if size == 1:
        return v.with_layout((1,), (1,))
    if size != count:
        what = "row of a" if name == "scale_a" else "column of the product"
        raise _error(("matmul-scales", f"{name}.shape", str(v.shape), f"a scale is one value, or {count} (one per "
                      f"{what}); block scales are scale_a [M, ceil(K/128)] and scale_b [ceil(K/128), "
                      "ceil(N/128)]", f"pass 1 or {count} float32 values, or block scales of those shapes"))
    flat = [s for s, d in zip(v.strides, v.shape) if d != 1]
    if all(s == 1 for s in flat):
        return v.with_layout((count,), (1,))
    return describe(scale.reshape(-1).contiguous(), name).with_layout((count,), (1,))


def check_fast_accum(use_fast_accum: Any) -> None:
    """``use_fast_accum`` is a bool (before torch.compile's operator sees it, too)."""
    if not isinstance(use_fast_accum, bool):
        raise _error(("matmul-fast-accum", "use_fast_accum", repr(use_fast_accum), "it is True or False",
                      "pass a bool"))


def matmul_fp8(a: Any, b: Any, *, scale_a: Any = None, scale_b: Any = None, bias: Any = None, alpha: float = 1,
               beta: float = 0, c: Any = None, out: Any = None, out_dtype: Any = None, use_fast_accum: bool = False,
               record: list | None = None) -> Any:
    """The scaled fp8 product (see the module's notes). ``record`` (a list) receives, where the call
    was one launch on every array in place, the kernel, its A, B and C views and its parameters (what
    `tmagen.ops_matmul`'s PyTorch fast path repeats for calls of the same layouts)."""
    av, bv = describe(a, "a"), describe(b, "b")
    a_type, b_type = element_type(av), element_type(bv)
    if a_type not in FP8_NAMES or b_type not in FP8_NAMES:
        bad, view = ("a", av) if a_type not in FP8_NAMES else ("b", bv)
        raise _error(("matmul-types", f"{bad}.dtype", view.dtype, "an fp8 operand multiplies an fp8 operand",
                      f"pass {bad} as torch.float8_e4m3fn or torch.float8_e5m2"))
    if av.rank != 2 or bv.rank != 2:
        bad = "a" if av.rank != 2 else "b"
        raise _error(("array-rank", f"{bad}.ndim", str((av if bad == "a" else bv).rank), "the fp8 matmul takes "
                      "matrices (as torch._scaled_mm)", f"pass {bad} as a matrix (reshape a batch into rows)"))
    (m, k), (kb, n) = av.shape, bv.shape
    if kb != k:
        raise _error(("array-shape", "b.shape", str(bv.shape), f"a is {av.shape}, so b needs K = {k} rows ([K, N]: "
                      "a [N, K] weight w is passed as w.t())", f"pass b of shape ({k}, N)"))
    name = str(out_dtype).removeprefix("torch.") if out_dtype is not None else None
    ov = describe(out, "out") if out is not None else None
    od = name if name is not None else ov.carrier if ov is not None else "bfloat16"
    if od not in OUT_TYPES:
        raise _error(("matmul-types", "out_dtype", str(out_dtype if out_dtype is not None else od),
                      "the fp8 matmul writes bfloat16, float16 or float32", "pass one of those"))
    blocks = _block_scales(scale_a, scale_b, n)
    check_fast_accum(use_fast_accum)
    if use_fast_accum and blocks:
        raise _error(("matmul-fast-accum", "use_fast_accum", "True", "block scales are applied to the partial sums "
                      "as they are promoted into fp32 every 128 of K, and fast accumulation never promotes them",
                      "pass use_fast_accum=False with block scales, or scales per tensor or per row"))
    k_blocks = -(-k // SCALE_BLOCK)
    sa = _scale(scale_a, "scale_a", m, (m, k_blocks) if blocks else None)
    sb = _scale(scale_b, "scale_b", n, (k_blocks, -(-n // SCALE_BLOCK)) if blocks else None, blocked_as_b=True)
    if ov is None:
        out, ov = empty_view(av, (m, n), dtype=od)
    elif ov.shape != (m, n) or ov.carrier != od:
        raise _error(("array-shape", "out", f"{ov.dtype} {ov.shape}", f"the product is {od} {(m, n)}",
                      f"pass out of shape {(m, n)} and dtype {od}"))
    if m == 0 or n == 0:
        return out
    unit = CHUNK // _OUT_BYTES[od]
    n_kernel = _whole(n, unit)  # the output's rows as TMA stores them: whole 16 bytes
    params: dict[str, Any] = {}
    if alpha != 1 or beta != 0 or bias is not None or sa is not None or sb is not None:
        params = {"alpha": float(alpha), "beta": float(beta)}
    if sa is not None:
        params["scale_a"] = sa
    if sb is not None:
        if sb.shape == (n,) and n > 1 and n_kernel != n:  # per column: the padded columns read a scale too
            padded = scale_b.new_ones((n_kernel,))
            padded[:n] = scale_b.reshape(-1)
            sb = describe(padded, "scale_b")
        params["scale_b"] = sb
    if bias is not None:
        bias_v = describe(bias, "bias")
        if bias_v.shape not in ((n,), (1, n)):
            raise _error(("array-shape", "bias.shape", str(bias_v.shape), f"a bias is added to every row: ({n},)",
                          f"pass a ({n},) tensor"))
        flat = bias.reshape(-1).to(_torch_dtype(od))
        if n_kernel != n or flat.data_ptr() % CHUNK or (n > 1 and flat.stride(0) != 1):
            padded_bias = flat.new_zeros((n_kernel,))
            padded_bias[:n] = flat
            flat = padded_bias
        params.update(bias=describe(flat, "bias"), bias_along="n")
    if beta != 0:
        if c is None:
            raise _error(("matmul-scalar", "beta", repr(beta), "beta scales c, and no c is given",
                          "pass c=, or beta=0"))
        cv = describe(c, "c")
        if cv.shape != (m, n) or cv.carrier != od:
            raise _error(("array-shape", "c", f"{cv.dtype} {cv.shape}", f"beta * c is added to the {od} product "
                          f"{(m, n)}", f"pass c of dtype {od} and shape {(m, n)}"))
        if n_kernel != n or cv.strides[1] != 1 or cv.ptr % CHUNK:
            padded_c = c.new_zeros((m, n_kernel))
            padded_c[:, :n] = c
            c, cv = padded_c, describe(padded_c, "c")
        params["c"] = cv
    a_in = _k_major(a, av, m, k, "a")
    w = b.t() if hasattr(b, "t") else b.T
    b_in = _k_major(w, describe(w, "b"), n, k, "b")
    if n_kernel != n:  # B's n rows as the kernel's n_kernel: its map stops at n, TMA reads the rest as zeros
        b_in = b_in.with_layout((n_kernel, k), b_in.strides)
        params["b_rows"] = n
    direct = n_kernel == n and ov.strides[1] == 1 and ov.ptr % CHUNK == 0 and (m <= 1 or ov.strides[0] % unit == 0)
    if direct:
        o_in = ov if m > 1 else ov.with_layout((m, n), (n_kernel, 1))
        scratch = None
    else:
        scratch, o_in = empty_view(av, (m, n_kernel), dtype=od)
    if k == 0:
        o_in_obj = scratch if scratch is not None else out
        total: Any = 0
        if beta != 0:
            total = params["c"].obj[:, :n_kernel].float() * beta
        if bias is not None:
            total = total + params["bias"].obj.float()
        o_in_obj[...] = total
    else:
        kern = fp8_kernel(a_type, b_type, od, blocks, use_fast_accum)
        kern.launch([a_in, b_in], o_in, params=params or None)
        if record is not None and scratch is None:
            given = {"scale_a": scale_a, "scale_b": scale_b, "bias": bias, "c": c}
            arrays = [(name, v) for name, v in params.items() if isinstance(v, ArrayView)]
            # in place: every view at its caller's own pointer (a scratch copy has another)
            if a_in.ptr == av.ptr and b_in.ptr == bv.ptr and all(v.ptr == _address(given[name]) for name, v in arrays):
                record.append((kern, (a_in, b_in, o_in), params))
    if scratch is not None:
        out[...] = scratch[:, :n]
    return out


def _address(x: Any) -> int | None:
    return x.data_ptr() if hasattr(x, "data_ptr") else None


def _torch_dtype(name: str) -> Any:
    import torch

    return getattr(torch, name)


__all__ = ["matmul_fp8", "fp8_spec", "fp8_kernel", "is_fp8", "check_fast_accum"]
