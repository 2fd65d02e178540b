"""``torch.ops.tmagen.transpose``, ``.copy`` and ``.permute``: tmagen's ops as PyTorch custom
operators, so that ``torch.compile`` traces them (a fake implementation gives the output's shape
without running anything) and autograd differentiates them. `tmagen.ops` imports this module where
PyTorch is installed and hands it the functions the operators run (`register`), so that this
module imports nothing of tmagen.ops and the two do not form an import circle; tmagen itself never
needs PyTorch. ``torch.ops.tmagen.matmul`` is defined beside ``tmagen.ops.matmul``, in
`tmagen.ops_matmul`, and registered from here.

Both are safe in CUDA graphs once warmed up: a call launches on PyTorch's current stream, allocates
its output with ``torch.empty`` (the graph's pool during capture) and never synchronizes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

Eager = Callable[[torch.Tensor], torch.Tensor]
_EAGER: dict[str, Callable[..., torch.Tensor]] = {}


def register(*, transpose_eager: Eager, copy_eager: Eager, permute_eager: Callable[..., torch.Tensor] | None = None
             ) -> None:
    """The functions ``torch.ops.tmagen.transpose``, ``.copy`` and ``.permute`` run (tmagen.ops's
    per-call paths, which replay a seen layout's launches and run the eager path otherwise): the
    operators themselves are registered once, when this module is imported."""
    _EAGER.update(transpose=transpose_eager, copy=copy_eager)
    if permute_eager is not None:
        _EAGER["permute"] = permute_eager


def _eager(name: str) -> Callable[..., torch.Tensor]:
    try:
        return _EAGER[name]
    except KeyError:
        raise RuntimeError(f"torch.ops.tmagen.{name} has no implementation: import tmagen.ops, which "
                           "registers it") from None


@torch.library.custom_op("tmagen::transpose", mutates_args=(), device_types="cuda")
def transpose(x: torch.Tensor) -> torch.Tensor:
    """x.transpose(-2, -1).contiguous(), by tmagen's tuned TMA kernels."""
    return _eager("transpose")(x)


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
    return _eager("copy")(x)


@copy.register_fake
def _copy_fake(x: torch.Tensor) -> torch.Tensor:
    return x.new_empty(x.shape)


def _copy_backward(ctx: object, grad: torch.Tensor) -> torch.Tensor:
    return grad


copy.register_autograd(_copy_backward)


@torch.library.custom_op("tmagen::permute", mutates_args=(), device_types="cuda")
def permute(x: torch.Tensor, dims: list[int]) -> torch.Tensor:
    """x.permute(dims).contiguous(), by tmagen's kernels."""
    return _eager("permute")(x, dims)


@permute.register_fake
def _permute_fake(x: torch.Tensor, dims: list[int]) -> torch.Tensor:
    torch._check(len(dims) == x.dim(), lambda: f"tmagen::permute needs {x.dim()} dims, not {len(dims)}")
    return x.new_empty([x.shape[d] for d in dims])


def _permute_setup(ctx: Any, inputs: tuple[Any, ...], output: torch.Tensor) -> None:
    ctx.dims = list(inputs[1])


def inverse_dims(dims: list[int]) -> list[int]:
    """The permutation that undoes ``dims``: ``x.permute(dims).permute(inverse_dims(dims))`` is ``x``."""
    inverse = [0] * len(dims)
    for i, d in enumerate(dims):
        inverse[d % len(dims)] = i
    return inverse


def _permute_backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None]:
    return torch.ops.tmagen.permute(grad, inverse_dims(ctx.dims)), None


permute.register_autograd(_permute_backward, setup_context=_permute_setup)


# torch.ops.tmagen.matmul: defined beside tmagen.ops.matmul, which it runs
from tmagen.ops_matmul import register_torch_op  # noqa: E402

register_torch_op()
