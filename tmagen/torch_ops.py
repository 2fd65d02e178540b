"""``torch.ops.tmagen.transpose`` and ``torch.ops.tmagen.copy``: tmagen's ops as PyTorch custom
operators, so that ``torch.compile`` traces them (a fake implementation gives the output's shape
without running anything) and autograd differentiates them. Imported by `tmagen.ops` where
PyTorch is installed; tmagen itself never needs PyTorch.

Both are safe in CUDA graphs once warmed up: a call launches on PyTorch's current stream, allocates
its output with ``torch.empty`` (the graph's pool during capture) and never synchronizes.
"""

from __future__ import annotations

import torch

from tmagen import ops


@torch.library.custom_op("tmagen::transpose", mutates_args=(), device_types="cuda")
def transpose(x: torch.Tensor) -> torch.Tensor:
    """x.transpose(-2, -1).contiguous(), by tmagen's tuned TMA kernels."""
    return ops.transpose_eager(x)


@transpose.register_fake
def _transpose_fake(x: torch.Tensor) -> torch.Tensor:
    torch._check(x.dim() >= 2, lambda: f"tmagen::transpose needs 2 or more dimensions, not {x.dim()}")
    return x.new_empty((*x.shape[:-2], x.shape[-1], x.shape[-2]))


def _transpose_backward(ctx: object, grad: torch.Tensor) -> torch.Tensor:
    # the rows of grad are those of the output, which the forward wrote: TMA takes them
    return torch.ops.tmagen.transpose(grad.contiguous())


transpose.register_autograd(_transpose_backward)


@torch.library.custom_op("tmagen::copy", mutates_args=(), device_types="cuda")
def copy(x: torch.Tensor) -> torch.Tensor:
    """x.clone(memory_format=torch.contiguous_format), by tmagen's tuned TMA kernels."""
    return ops.copy_eager(x)


@copy.register_fake
def _copy_fake(x: torch.Tensor) -> torch.Tensor:
    return x.new_empty(x.shape)


def _copy_backward(ctx: object, grad: torch.Tensor) -> torch.Tensor:
    return grad


copy.register_autograd(_copy_backward)
