"""The 16 element types of `CUtensorMapDataType`, by the names tmagen's specs use.

Values are the driver's enum values (cuda.h 12.8 to 13.0). Sizes of the three packed
sub-byte types are fractions of a byte per element: the driver counts U4/U6 values.

Each type also names the CUDA C++ type a kernel reads one element as (`cpp`): the TF32 and FTZ
variants are stored as `float` (they change only what the copy engine or the tensor cores do
with the bits), and the packed types have no element type of their own (`uint8_t` bytes). TMA
has no signed 8-bit or fp8 type: such data travels as UINT8. The two fp8 types are spec dtypes of
their own (`FP8`: the tensor cores read them), carried by UINT8 maps; a uint8 tensor may also say
what its bytes hold (`UINT8_ELEMENT_TYPES`).
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction


@dataclass(frozen=True)
class DType:
    name: str
    driver: int  # CUtensorMapDataType value
    driver_name: str  # CU_TENSOR_MAP_DATA_TYPE_<driver_name>
    size: Fraction  # bytes per element
    cpp: str  # the C++ type one element is read as
    is_float: bool  # the driver's type is a float (NaN fill needs one; fp8 travels as UINT8, which is not)
    packed: bool = False  # a sub-byte type, sm_100a only
    ptx: str | None = None  # the tensor cores' name of the type (wgmma operands), where they take it

    @property
    def raw_cpp(self) -> str:
        """The unsigned integer of one element's size: its bits, whatever the element is."""
        return RAW_TYPES[self.nbytes]

    @property
    def nbytes(self) -> int:
        """Bytes per element for the byte-sized types (the packed ones have no whole size)."""
        if self.size.denominator != 1:
            raise ValueError(f"{self.name} packs {self.size} bytes per element")
        return int(self.size)


_ALL = (
    DType("uint8", 0, "UINT8", Fraction(1), "uint8_t", False),
    DType("uint16", 1, "UINT16", Fraction(2), "uint16_t", False),
    DType("uint32", 2, "UINT32", Fraction(4), "uint32_t", False),
    DType("int32", 3, "INT32", Fraction(4), "int32_t", False),
    DType("uint64", 4, "UINT64", Fraction(8), "uint64_t", False),
    DType("int64", 5, "INT64", Fraction(8), "int64_t", False),
    DType("float16", 6, "FLOAT16", Fraction(2), "__half", True, ptx="f16"),
    DType("float32", 7, "FLOAT32", Fraction(4), "float", True),
    DType("float64", 8, "FLOAT64", Fraction(8), "double", True),
    DType("bfloat16", 9, "BFLOAT16", Fraction(2), "__nv_bfloat16", True, ptx="bf16"),
    DType("float32_ftz", 10, "FLOAT32_FTZ", Fraction(4), "float", True),
    DType("tfloat32", 11, "TFLOAT32", Fraction(4), "float", True),
    DType("tfloat32_ftz", 12, "TFLOAT32_FTZ", Fraction(4), "float", True),
    # 16 x U4 in 8 bytes, no gaps.
    DType("u4x16_align8", 13, "16U4_ALIGN8B", Fraction(1, 2), "uint8_t", False, packed=True),
    # 16 x U4 in 16 bytes: 8 bytes of data, then 8 bytes of gap.
    DType("u4x16_align16", 14, "16U4_ALIGN16B", Fraction(1, 2), "uint8_t", False, packed=True),
    # 16 x U6 in 16 bytes: 12 bytes of data, then 4 bytes of gap.
    DType("u6x16_align16", 15, "16U6_ALIGN16B", Fraction(3, 4), "uint8_t", False, packed=True),
)

# The fp8 types (OCP 8-bit floating point: e4m3 with no infinities, largest 448; e5m2, largest
# 57344), moved by UINT8 maps. PyTorch calls them float8_e4m3fn and float8_e5m2.
FP8 = (
    DType("float8_e4m3", 0, "UINT8", Fraction(1), "__nv_fp8_e4m3", False, ptx="e4m3"),
    DType("float8_e5m2", 0, "UINT8", Fraction(1), "__nv_fp8_e5m2", False, ptx="e5m2"),
)
FP8_MAX = {"float8_e4m3": 448.0, "float8_e5m2": 57344.0}
FP8_NAMES = tuple(d.name for d in FP8)
# The frameworks' names of the two fp8 types (PyTorch's dtypes; CuPy and numpy have none) -> tmagen's.
FRAMEWORK_FP8 = {"float8_e4m3fn": "float8_e4m3", "float8_e5m2": "float8_e5m2"}

RAW_TYPES = {1: "uint8_t", 2: "uint16_t", 4: "uint32_t", 8: "uint64_t", 16: "uint4"}

# What a UINT8 map's bytes may hold besides unsigned integers -> the C++ type of one element. The
# fp8 types exist on every target tmagen generates for (sm_89 and up: sm_90a, sm_100a).
UINT8_ELEMENT_TYPES: dict[str, str] = {"int8": "int8_t", "fp8_e4m3": "__nv_fp8_e4m3", "fp8_e5m2": "__nv_fp8_e5m2"}

# The CUDA headers that declare the element types that are not built into C++ (device code only).
CUDA_TYPE_HEADERS: dict[str, str] = {"__half": "cuda_fp16.h", "__nv_bfloat16": "cuda_bf16.h",
                                     "__nv_fp8_e4m3": "cuda_fp8.h", "__nv_fp8_e5m2": "cuda_fp8.h"}

DTYPES: dict[str, DType] = {d.name: d for d in (*_ALL, *FP8)}
BY_DRIVER: dict[int, DType] = {d.driver: d for d in _ALL}  # the 16 driver types (fp8 maps read back as uint8)


def lookup(value: str | int) -> DType:
    """A dtype by tmagen name, driver value or driver name (with or without its prefix)."""
    if isinstance(value, int):
        if value in BY_DRIVER:
            return BY_DRIVER[value]
    else:
        key = value.strip()
        if key in DTYPES:
            return DTYPES[key]
        if key in FRAMEWORK_FP8:  # PyTorch's names
            return DTYPES[FRAMEWORK_FP8[key]]
        short = key.upper().removeprefix("CU_TENSOR_MAP_DATA_TYPE_")
        for d in _ALL:
            if d.driver_name == short:
                return d
    raise KeyError(value)
