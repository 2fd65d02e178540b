"""Ready-made operations on GPU tensors, with the kernels tuned on an H200: ``transpose(x)`` (the
last two dimensions, any batch) and ``copy(x)``; ``matmul(a, b, ...)`` is `tmagen.ops_matmul`'s.

The kernels move bits, so an element type borrows the kernel of any type of its size. The tuned
configurations are the specs of ``tmagen/ops_specs`` (which benchmarks/run.py times); a rank or
size none of them covers gets one derived from the nearest. Both read strided views in place
where TMA can (strides of whole 16 bytes, contiguous rows; a transposed view, whose columns are
contiguous, is read the other way round: its copy is a transpose and its transpose a copy), and
write a new contiguous tensor of
the input's framework unless given ``out``.

With PyTorch installed, importing this module also registers ``torch.ops.tmagen.transpose`` and
``torch.ops.tmagen.copy`` (`tmagen.torch_ops`): under ``torch.compile`` and for tensors that
need gradients, these functions go through them.
"""

from __future__ import annotations

import importlib.util
import json
from functools import cache, lru_cache
from pathlib import Path
from typing import Any

from tmagen import runtime
from tmagen.arrays import ArrayView, current_stream, describe, empty_view, merge_dims
from tmagen.dtypes import DTYPES
from tmagen.errors import ArgumentError
from tmagen.kernels import Kernel
from tmagen.ops_matmul import matmul
from tmagen.rules import Violation
from tmagen.spec import Spec, parse_spec

SPECS_DIR = Path(__file__).resolve().parent / "ops_specs"
ELEMENT_SIZES = (1, 2, 4, 8)
_BY_SIZE = {1: "uint8", 2: "bfloat16", 4: "float32", 8: "float64"}  # a dtype of each size, for derived specs


@lru_cache(maxsize=1)
def tuned_specs() -> dict[str, dict]:
    """The tuned specs by name, as their JSON reads."""
    return {p.stem: json.loads(p.read_text()) for p in sorted(SPECS_DIR.glob("*.json"))}


def _facts(raw: dict) -> tuple[str, str, int, int]:
    t = raw["tensors"][0]
    return raw["kernel"]["kind"], t["dtype"], DTYPES[t["dtype"]].nbytes, len(t["shape"])


def spec_for(kind: str, dtype: str, rank: int) -> Spec:
    """The spec whose kernel ``copy``/``transpose`` runs for elements carried as ``dtype`` in
    ``rank`` dimensions: a tuned one of that dtype, else of that size, else one derived from the
    rank-2 (or rank-1) tuned spec of that size by leading dimensions of extent 1 in the box."""
    return _spec_for(kind, dtype, rank)


@cache
def _spec_for(kind: str, dtype: str, rank: int) -> Spec:
    size = DTYPES[dtype].nbytes
    tuned = {name: _facts(raw) for name, raw in tuned_specs().items()}
    for exact in (True, False):
        for name, (k, d, es, r) in tuned.items():
            if k == kind and r == rank and es == size and (d == dtype or not exact):
                return parse_spec(tuned_specs()[name], f"tmagen/ops_specs/{name}.json")
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
        t["box"] = [min(256, max(1, b * base_size // size)) for b in t["box"]]
        t["dtype"] = _BY_SIZE[size]
    lead = rank - len(t["shape"])
    t["shape"], t["box"] = [1] * lead + t["shape"], [1] * lead + t["box"]
    raw["name"] = f"ops_{kind}_{t['dtype']}_r{rank}"
    raw["description"] = f"Derived by tmagen.ops from {base_name}: {kind} of {rank}-D {t['dtype']}."
    return parse_spec(raw, f"derived from tmagen/ops_specs/{base_name}.json")


_KERNELS: dict[str, Kernel] = {}


@cache
def kernel(kind: str, dtype: str, rank: int) -> Kernel:
    """The kernel of `spec_for`, one per spec (types of one size share it), compiled at its first
    call and loaded once per process."""
    spec = spec_for(kind, dtype, rank)
    if spec.name not in _KERNELS:
        _KERNELS[spec.name] = Kernel(spec, same_size_types=True, caller=f"tmagen.ops.{kind}")
    return _KERNELS[spec.name]


def _carrier(view: ArrayView, call: str) -> str:
    known = _CARRIER_OF.get((view.carrier, view.itemsize))
    if known is not None:
        return known
    if view.itemsize not in ELEMENT_SIZES:
        raise ArgumentError(call, [Violation("array-dtype", "x.dtype", f"{view.dtype} ({view.itemsize} bytes)",
                                             "tmagen's copy and transpose move elements of 1, 2, 4 or 8 bytes",
                                             "use the framework's own operation for this type", "tmagen.ops")])
    carrier = view.carrier if view.carrier is not None and DTYPES[view.carrier].nbytes == view.itemsize else \
        _BY_SIZE[view.itemsize]
    _CARRIER_OF[(view.carrier, view.itemsize)] = carrier
    return carrier


_CARRIER_OF: dict[tuple[str | None, int], str] = {}


def _merge_error(call: str, what: str, shape: tuple, strides: tuple, limit: str) -> ArgumentError:
    return ArgumentError(call, [Violation("array-layout", f"{what}.strides", f"{list(strides)} elements (shape "
                                          f"{list(shape)})", limit, f"pass {what}.contiguous(), or a view whose "
                                          "dimensions merge", "tmagen.ops")])


# ----------------------------------------------------------------------------- transpose
def transpose(x: Any, out: Any = None) -> Any:
    """``x`` with its last two dimensions exchanged, as a new contiguous tensor (or into ``out``):
    ``x.transpose(-2, -1).contiguous()``, for any batch of leading dimensions that can be viewed as
    one. Rows of both ``x`` and the result must be whole 16 bytes (TMA's stride rule)."""
    if out is None and _through_torch(x):
        return _torch().ops.tmagen.transpose(x)
    return transpose_eager(x, out)


def _turned(view: ArrayView) -> ArrayView:
    """The same memory with its last two dimensions exchanged (``x.mT``, no copy)."""
    return view.with_layout((*view.shape[:-2], view.shape[-1], view.shape[-2]),
                            (*view.strides[:-2], view.strides[-1], view.strides[-2]))


def _columns_contiguous(view: ArrayView) -> bool:
    """A transposed view (``y.mT`` of ``y`` with contiguous rows): its columns are contiguous, its
    rows are not. TMA reads rows, so the op reads the memory the other way round."""
    return view.rank >= 2 and view.shape[-1] > 1 and view.strides[-1] != 1 and view.strides[-2] == 1


def transpose_eager(x: Any, out: Any = None) -> Any:
    call = "tmagen.ops.transpose"
    src = describe(x, "x")
    if src.rank < 2:
        raise ArgumentError(call, [Violation("array-rank", "x.ndim", str(src.rank), "a transpose exchanges the last "
                                             "two "
                                             "dimensions", "pass an array of 2 or more dimensions", "tmagen.ops")])
    carrier = _carrier(src, call)
    out_shape = (*src.shape[:-2], src.shape[-1], src.shape[-2])
    if out is None:
        out, dst = empty_view(src, out_shape)
    else:
        dst = describe(out, "out")
    if dst.shape != out_shape:
        raise ArgumentError(call, [Violation("array-shape", "out.shape", str(dst.shape), f"the transpose of x has "
                                             f"shape {out_shape}", f"pass an output of shape {out_shape}",
                                             "tmagen.ops")])
    if _columns_contiguous(src):  # the transpose of a transposed view is a copy of the memory it views
        _copy_views(call, _turned(src), dst, carrier)
        return out
    _transpose_views(call, src, dst, carrier)
    return out


def _transpose_views(call: str, src: ArrayView, dst: ArrayView, carrier: str) -> None:
    """``dst`` = ``src`` with its last two dimensions exchanged, through the transpose kernel."""
    if src.rank == 2:
        kernel("transpose", carrier, 2).launch([src], dst)
        return
    batch, (src_b, dst_b) = merge_dims(src.shape[:-2], src.strides[:-2], dst.strides[:-2])
    if len(batch) > 1:
        worse = "x" if len(merge_dims(src.shape[:-2], src.strides[:-2])[0]) > 1 else "out"
        bad = src if worse == "x" else dst
        raise _merge_error(call, worse, bad.shape, bad.strides, "the batch dimensions cannot be viewed as one "
                           "(the kernel takes one batch dimension)")
    if batch == [1]:
        s = src.with_layout(src.shape[-2:], src.strides[-2:])
        d = dst.with_layout(dst.shape[-2:], dst.strides[-2:])
    else:
        s = src.with_layout([*batch, *src.shape[-2:]], [*src_b, *src.strides[-2:]])
        d = dst.with_layout([*batch, *dst.shape[-2:]], [*dst_b, *dst.strides[-2:]])
    kernel("transpose", carrier, s.rank).launch([s], d)


# ----------------------------------------------------------------------------- copy
def copy(x: Any, out: Any = None) -> Any:
    """A copy of ``x`` as a new contiguous tensor (or into ``out``), like ``x.clone()``: dimensions
    that are laid out as one are merged, so any view of at most 5 separate dimensions works."""
    if out is None and _through_torch(x):
        return _torch().ops.tmagen.copy(x)
    return copy_eager(x, out)


def copy_eager(x: Any, out: Any = None) -> Any:
    call = "tmagen.ops.copy"
    src = describe(x, "x")
    carrier = _carrier(src, call)
    if out is None:
        out, dst = empty_view(src, src.shape)
    else:
        dst = describe(out, "out")
    if dst.shape != src.shape:
        raise ArgumentError(call, [Violation("array-shape", "out.shape", str(dst.shape), f"x has shape {src.shape}",
                                             f"pass an output of shape {src.shape}", "tmagen.ops")])
    if _columns_contiguous(src) and not _columns_contiguous(dst):
        # a copy of a transposed view is the transpose of the memory it views
        _transpose_views(call, _turned(src), dst, carrier)
        return out
    _copy_views(call, src, dst, carrier)
    return out


def _copy_views(call: str, src: ArrayView, dst: ArrayView, carrier: str) -> None:
    """``dst`` = ``src``, through the copy kernel (dimensions laid out as one merged)."""
    if src.rank == 0:
        src, dst = src.with_layout([1], [1]), dst.with_layout([1], [1])
    shape, (s_strides, d_strides) = merge_dims(src.shape, src.strides, dst.strides)
    if len(shape) > 5:
        raise _merge_error(call, "x", src.shape, src.strides, f"its dimensions merge into {len(shape)}, and TMA "
                           "moves at most 5")
    s, d = src.with_layout(shape, s_strides), dst.with_layout(shape, d_strides)
    if len(shape) == 1 and s_strides == [1] and d_strides == [1]:
        # One contiguous run of bytes: its whole 16-byte chunks moved as 4-byte words by the tuned
        # float32 kernels, as rows of the 2-D one where the count allows (rank 1 boxes are at most
        # 256 elements). A TMA store writes whole 16-byte chunks, so the last bytes past the final
        # chunk go by a plain device copy on the same stream, never by TMA.
        nbytes = shape[0] * src.itemsize
        whole = nbytes // 16 * 16
        if whole < nbytes:
            device = src.device if src.device is not None else runtime.pointer_device(src.ptr)
            runtime.copy_bytes_async(d.ptr + whole, s.ptr + whole, nbytes - whole, current_stream(src), device)
        if whole == 0:
            return
        layout = contiguous_layout(whole // 4, 4)
        s, d = s.with_layout(layout, _contiguous(layout)), d.with_layout(layout, _contiguous(layout))
        carrier = "float32"
        s.itemsize = d.itemsize = 4
    kernel("copy", carrier, s.rank).launch([s], d)


def contiguous_layout(count: int, itemsize: int) -> list[int]:
    """How `copy` views ``count`` contiguous elements: rows of the largest power of two up to 64 KiB
    that divides the count, when that is at least the 2-D tuned box's row; else one dimension."""
    row = spec_for("copy", _BY_SIZE[itemsize], 2).tensors[0].box[-1]
    cols = 1
    while cols * 2 * itemsize <= 65536 and count % (cols * 2) == 0:
        cols *= 2
    return [count // cols, cols] if cols >= row and count // cols > 1 else [count]


def _contiguous(shape: list[int]) -> list[int]:
    return [shape[1], 1] if len(shape) == 2 else [1]


# ----------------------------------------------------------------------------- PyTorch
_TORCH_MODULE: Any = None


def _torch() -> Any:
    return _TORCH_MODULE


def _through_torch(x: Any) -> bool:
    """A torch tensor that torch.compile traces, or that needs gradients: the registered op, which
    those understand, runs it."""
    t = _TORCH_MODULE
    return t is not None and isinstance(x, t.Tensor) and (
        t.compiler.is_compiling() or (x.requires_grad and t.is_grad_enabled()))


def _register_torch_ops() -> None:
    global _TORCH_MODULE
    import torch

    from tmagen import torch_ops  # registers torch.ops.tmagen.*, which run the eager paths below

    torch_ops.register(transpose_eager=transpose_eager, copy_eager=copy_eager)
    _TORCH_MODULE = torch


if importlib.util.find_spec("torch") is not None:
    _register_torch_ops()

__all__ = ["transpose", "copy", "matmul", "spec_for", "kernel", "tuned_specs"]
