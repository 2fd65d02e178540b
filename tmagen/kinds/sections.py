"""Every kernel kind's spec section, told apart by ``kind``: the one list a new kind joins. The
spec's ``kernel`` field, its error messages and the kinds' registry all read it."""

from __future__ import annotations

from typing import get_args

from tmagen.kinds.copy.section import CopyKernel
from tmagen.kinds.inspect.section import InspectKernel
from tmagen.kinds.matmul.section import MatmulKernel
from tmagen.kinds.transpose.section import TransposeKernel

SECTIONS = (InspectKernel, CopyKernel, TransposeKernel, MatmulKernel)
NAMES: tuple[str, ...] = tuple(get_args(s.model_fields["kind"].annotation)[0] for s in SECTIONS)
