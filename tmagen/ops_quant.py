"""``tmagen.ops.quantize_fp8``: a bf16/fp16/fp32 matrix cast to fp8 with its dequantization scales and
its amax, optionally transposed, in one generated kernel (`tmagen.kinds.quantize`), laid out as the
fp8 matmul (`tmagen.ops.matmul`, ``torch._scaled_mm``) takes its operands. PyTorch only (fp8 tensors
are PyTorch's)."""

from __future__ import annotations

from typing import Any

from tmagen import quantize as launcher
from tmagen.arrays import ArrayView, current_stream, describe
from tmagen.dtypes import FRAMEWORK_FP8
from tmagen.errors import ArgumentError, Violation
from tmagen.kinds.quantize import plan as qp

CALL = "tmagen.ops.quantize_fp8"
SOURCE = "tmagen.ops.quantize_fp8"


def _problem(rule: str, field: str, value: object, why: str, fix: str) -> ArgumentError:
    return ArgumentError(CALL, [Violation(rule, field, str(value), why, fix, SOURCE)])


def _fp8_name(dtype: Any) -> str:
    name = str(dtype).removeprefix("torch.")
    found = FRAMEWORK_FP8.get(name)
    if found is None:
        raise _problem("quantize-fp8-dtype", "dtype", dtype, "the fp8 types are float8_e4m3fn and float8_e5m2",
                       "pass dtype=torch.float8_e4m3fn or torch.float8_e5m2")
    return found


def _block(block: Any) -> tuple[int, int] | None:
    key = None if block is None else tuple(int(b) for b in block)
    if key not in qp.BLOCKS:
        raise _problem("quantize-block", "block", block, "the blocks are (1, 128) (a scale per 128 elements of a "
                       "row), (128, 128) and None (one scale for the tensor)", "pass one of them")
    return key


def _checked_input(x: Any) -> ArrayView:
    src = describe(x, "x")
    if src.framework != "torch":
        raise _problem("quantize-framework", "x", type(x).__name__, "fp8 tensors are PyTorch's",
                       "pass a torch.Tensor")
    if src.device is None or src.device < 0:
        raise _problem("array-device", "x.device", src.where, "tmagen's ops run on the GPU", "move x to the GPU first")
    if src.rank != 2:
        raise _problem("array-rank", "x.ndim", src.rank, "quantize_fp8 takes a matrix",
                       "pass a 2-D tensor (reshape a batch to [rows, cols] first)")
    if src.carrier not in qp.INPUTS:
        raise _problem("quantize-input-dtype", "x.dtype", src.dtype, "quantize_fp8 reads bfloat16, float16 or "
                       "float32", "cast x to one of them")
    return src


def _checked_scale(scale_inv: Any, block: tuple[int, int] | None, x: Any) -> Any:
    if scale_inv is None:
        return None
    torch = _torch()
    if block is not None:
        raise _problem("quantize-scale", "scale_inv", "given", "a given scale is one scale for the tensor",
                       "pass block=None with scale_inv, or leave scale_inv out")
    if not isinstance(scale_inv, torch.Tensor):
        scale_inv = torch.full((), float(scale_inv), dtype=torch.float32, device=x.device)
    if scale_inv.dtype != torch.float32 or scale_inv.numel() != 1 or scale_inv.device != x.device:
        raise _problem("quantize-scale", "scale_inv", f"{scale_inv.dtype} {tuple(scale_inv.shape)} on "
                       f"{scale_inv.device}", f"a given scale is one float32 value on {x.device}",
                       "pass a float or a float32 tensor of one element on x's device")
    return scale_inv


def _checked_out(out: Any, shapes: tuple[tuple[int, ...], ...], dtypes: tuple[Any, ...], x: Any) -> tuple[Any, ...]:
    if not isinstance(out, (tuple, list)) or len(out) != 3:
        raise _problem("quantize-out", "out", type(out).__name__, "out is (q, scale_inv, amax)",
                       "pass three tensors, or leave out out")
    for name, t, shape, dtype in zip(("q", "scale_inv", "amax"), out, shapes, dtypes):
        if tuple(t.shape) != shape or t.dtype != dtype or not t.is_contiguous() or t.device != x.device:
            raise _problem("quantize-out", f"out.{name}", f"{t.dtype} {tuple(t.shape)} on {t.device}",
                           f"{name} is a contiguous {dtype} tensor of shape {shape} on {x.device}",
                           f"pass such a tensor as out's {name}")
    return tuple(out)


def _torch() -> Any:
    import torch

    return torch


_PLANS: dict[tuple, tuple[qp.QuantizePlan, qp.Geometry]] = {}
_PLANS_LIMIT = 1024


def quantize_fp8(x: Any, *, dtype: Any = None, block: Any = (1, 128), transpose: bool = False,
                 scale_inv: Any = None, out: Any = None) -> tuple[Any, Any, Any]:
    """``(q, scale_inv, amax)``: ``x`` (a bfloat16, float16 or float32 matrix on the GPU, any strides)
    cast to fp8 in blocks, each block scaled into fp8's range, in one pass over x.

    - ``q``: the fp8 tensor (``dtype``: torch.float8_e4m3fn, the default, or torch.float8_e5m2),
      contiguous, shaped like ``x`` or, with ``transpose=True``, like ``x.T`` (``[C, R]`` for x
      ``[R, C]``): the K-major operand the fp8 matmul takes from an MN-major one.
    - ``scale_inv``: float32 dequantization factors, ``x ~= q * s`` blockwise, in q's orientation (a
      block is rows x columns of q): ``block=(1, 128)`` gives ``[rows, ceil(cols / 128)]`` (A's scales
      of the fp8 matmul), ``(128, 128)`` gives ``[ceil(rows / 128), ceil(cols / 128)]`` (B's, q being
      ``[N, K]``), ``None`` one 0-d value for the tensor (``torch._scaled_mm``'s per-tensor scale),
      computed from the amax or, given ``scale_inv=`` (a float or a float32 tensor of one element, e.g.
      a delayed-scaling recipe's), that one.
    - ``amax``: a 0-d float32 tensor, ``x.abs().max()`` over the whole tensor (NaN if x holds one).

    Per block ``s = amax_block / fp8_max`` (448 for e4m3, 57344 for e5m2; 1 for a block of zeros; blocks
    at the edges are clipped), then ``q = fp8(x / s)``, both divisions in float32, rounded to nearest
    even and saturated to +-fp8_max (PTX ``cvt.rn.satfinite``); NaN stays NaN. PyTorch's own cast
    differs past the range: ``.to(torch.float8_e5m2)`` gives +-inf, and ``.to(torch.float8_e4m3fn)``
    saturates (PyTorch 2.14); within the range the two agree bit for bit.

    ``out=(q, scale_inv, amax)``: contiguous tensors of those shapes and types to write. The kernel for
    each configuration (types, block, transpose, how x's layout is read) is generated and compiled at
    its first call; the plan of each layout is kept for repeat calls.
    """
    torch = _torch()
    fp8 = _fp8_name(torch.float8_e4m3fn if dtype is None else dtype)
    fp8_dtype = getattr(torch, "float8_e4m3fn" if fp8 == "float8_e4m3" else "float8_e5m2")
    blk = _block(block)
    src = _checked_input(x)
    given = _checked_scale(scale_inv, blk, x)
    shape = (src.shape[0], src.shape[1])
    strides = (src.strides[0], src.strides[1])
    key = (src.carrier, fp8, blk, bool(transpose), given is not None, shape, strides, src.ptr & 15)
    found = _PLANS.get(key)
    if found is None:
        config = qp.configure(src.carrier or "", fp8, blk, bool(transpose), given is not None, shape, strides,
                              src.ptr & 15)
        p = qp.plan(config)
        found = (p, qp.geometry(p, shape, strides))
        if len(_PLANS) >= _PLANS_LIMIT:
            _PLANS.clear()
        _PLANS[key] = found
    p, g = found
    shapes = (qp.q_shape(shape, bool(transpose)), qp.scale_shape(shape, blk, bool(transpose)), ())
    if out is None:
        q = torch.empty(shapes[0], dtype=fp8_dtype, device=x.device)
        s = torch.empty(shapes[1], dtype=torch.float32, device=x.device)
        amax = torch.empty((), dtype=torch.float32, device=x.device)
    else:
        q, s, amax = _checked_out(out, shapes, (fp8_dtype, torch.float32, torch.float32), x)
    if given is not None and g.grid == 0:
        s.copy_(given.reshape(()))
    pointers = launcher.Pointers(src.ptr, q.data_ptr(), s.data_ptr(), amax.data_ptr(),
                                 0 if given is None else given.data_ptr())
    device = src.device
    assert device is not None
    launcher.launch(p, g, pointers, device, current_stream(src))
    if g.grid == 0 and given is None and s.numel():
        s.fill_(1.0)
    return q, s, amax
