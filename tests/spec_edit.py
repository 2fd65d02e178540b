"""A spec with some fields changed, for the tests of rules: ``edited(spec, tensors__1__box=[4, 64])``
sets ``spec["tensors"][1]["box"]`` in a deep copy (``__`` separates the path, digits index lists)."""

from __future__ import annotations

import copy
from typing import Any


def edited(spec: dict[str, Any], **changes: Any) -> dict[str, Any]:
    data = copy.deepcopy(spec)
    for path, value in changes.items():
        node: Any = data
        *parts, last = path.split("__")
        for p in parts:
            node = node[int(p)] if p.isdigit() else node[p]
        node[int(last) if last.isdigit() else last] = value
    return data
