"""The driver's tensor-map enums, with their `cuda.h` values (12.8 to 13.0).

Each member's value is the integer `cuTensorMapEncodeTiled` takes. `driver_name` is the C
enumerator, `spec_name` the short name a spec uses. `parse` accepts any of the three.
"""

from __future__ import annotations

import enum
from typing import TypeVar

E = TypeVar("E", bound="DriverEnum")

# enum class -> (C prefix, {value: (enumerator suffix, spec name)})
_NAMES: dict[str, tuple[str, dict[int, tuple[str, str]]]] = {
    "Swizzle": ("CU_TENSOR_MAP_SWIZZLE_", {
        0: ("NONE", "none"), 1: ("32B", "32B"), 2: ("64B", "64B"), 3: ("128B", "128B"),
        4: ("128B_ATOM_32B", "128B_atom_32B"), 5: ("128B_ATOM_32B_FLIP_8B", "128B_atom_32B_flip_8B"),
        6: ("128B_ATOM_64B", "128B_atom_64B")}),
    "Interleave": ("CU_TENSOR_MAP_INTERLEAVE_", {0: ("NONE", "none"), 1: ("16B", "16B"), 2: ("32B", "32B")}),
    "L2Promotion": ("CU_TENSOR_MAP_L2_PROMOTION_", {
        0: ("NONE", "none"), 1: ("L2_64B", "64B"), 2: ("L2_128B", "128B"), 3: ("L2_256B", "256B")}),
    "OobFill": ("CU_TENSOR_MAP_FLOAT_OOB_FILL_", {0: ("NONE", "zero"), 1: ("NAN_REQUEST_ZERO_FMA", "nan")}),
}


class DriverEnum(enum.IntEnum):
    @property
    def driver_name(self) -> str:
        prefix, names = _NAMES[type(self).__name__]
        return prefix + names[int(self)][0]

    @property
    def spec_name(self) -> str:
        return _NAMES[type(self).__name__][1][int(self)][1]

    @classmethod
    def parse(cls: type[E], value: object) -> E:
        """The member for an integer value, a C enumerator (prefix optional) or a spec name."""
        if isinstance(value, cls):
            return value
        if isinstance(value, int) and not isinstance(value, bool) and value in cls._value2member_map_:
            return cls(value)
        if isinstance(value, str):
            prefix, names = _NAMES[cls.__name__]
            key = value.strip().upper().removeprefix(prefix)
            for number, (suffix, spec) in names.items():
                if key in (suffix, spec.upper()):
                    return cls(number)
        choices = ", ".join(f"{m.spec_name} ({int(m)})" for m in cls)
        raise ValueError(f"{value!r} is not a {cls.__name__}; choose one of {choices}")


class Swizzle(DriverEnum):
    """CUtensorMapSwizzle. The three 128B atom modes are CUDA 12.8+ and sm_100a only."""

    NONE = 0
    B32 = 1
    B64 = 2
    B128 = 3
    B128_ATOM_32B = 4
    B128_ATOM_32B_FLIP_8B = 5
    B128_ATOM_64B = 6


class Interleave(DriverEnum):
    NONE = 0
    B16 = 1
    B32 = 2


class L2Promotion(DriverEnum):
    NONE = 0
    L2_64B = 1
    L2_128B = 2
    L2_256B = 3


class OobFill(DriverEnum):
    NONE = 0
    NAN_REQUEST_ZERO_FMA = 1
