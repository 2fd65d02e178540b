"""The kernel kinds. Each lives in one folder, ``tmagen/kinds/<kind>/``: ``section.py`` (its part of
the spec), ``rules.py`` (its named rules), ``plan.py`` (its maps and kernels), ``launch.py`` (how it
is called) and ``kind.py`` (the `Kind` that gathers them); its templates are ``templates/<kind>/``.

A new kind is a new folder and its section in `tmagen/kinds/sections.py`.
Kinds are imported when first asked for, so that the spec (which needs only the sections) does
not import the planning that needs the spec."""

from __future__ import annotations

import importlib
from functools import cache
from typing import TYPE_CHECKING

from tmagen.kinds.sections import NAMES

if TYPE_CHECKING:
    from tmagen.kinds.base import Kind


@cache
def get(name: str) -> Kind:
    """The kind called ``name``."""
    if name not in NAMES:
        raise KeyError(f"no kernel kind {name!r}: the kinds are {', '.join(NAMES)}")
    kind: Kind = importlib.import_module(f"tmagen.kinds.{name}.kind").KIND
    return kind


def all_kinds() -> list[Kind]:
    return [get(n) for n in NAMES]
