"""Element strides of a tensor laid out contiguously, outermost first (as ``torch.Tensor.stride()``)."""

from __future__ import annotations

from collections.abc import Sequence


def contiguous(shape: Sequence[int]) -> tuple[int, ...]:
    """Strides in elements of a contiguous tensor of ``shape``, outermost first."""
    out, run = [], 1
    for n in reversed(shape):
        out.append(run)
        run *= int(n)
    return tuple(out[::-1])
