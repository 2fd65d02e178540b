"""tmagen: validated TMA tensor maps, swizzle models and CUDA code for Hopper and Blackwell.

The Python path, imported on first use (none of it needs PyTorch or CuPy to import):
``tmagen.load(spec)`` a spec's kernel as a callable on framework arrays, ``tmagen.ops.transpose``
and ``tmagen.ops.copy`` with tuned kernels, ``tmagen.tensor_map(x, box=...)`` a checked
``CUtensorMap`` for a kernel of your own.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

_LAZY = {"load": ("tmagen.kernels", "load"), "Kernel": ("tmagen.kernels", "Kernel"),
         "tensor_map": ("tmagen.tensor_maps", "tensor_map"), "ops": ("tmagen.ops", None)}


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module 'tmagen' has no attribute {name!r}")
    module, attr = _LAZY[name]
    value = importlib.import_module(module)
    return value if attr is None else getattr(value, attr)


def __dir__() -> list[str]:
    return sorted([*globals(), *_LAZY])
