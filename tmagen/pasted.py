"""What a user pastes into `tmagen diagnose`: the arguments of a failed ``cuTensorMapEncodeTiled``
call, read from the descriptor dump a library printed, from JSON in the driver's camelCase or
tmagen's snake_case names, and the ``CUresult`` the call returned.

The dumps read here, as their sources print them (innermost first, as the driver takes them):

CuTe / CUTLASS (``make_tma_copy_desc`` in cute/atom/copy_traits_sm90_tma.hpp; FlashAttention-3
and flashinfer's CUTLASS kernels build their maps through it)::

    TMA Desc Addr:   0x7ffc...          <- the descriptor's own address, not the tensor's
    format         9                    <- CUtensorMapDataType as an integer
    dim            2                    <- tensorRank
    gmem_address   0x7f8a00000000
    globalDim      (4096,4096,1,1,1)    <- always 5 entries, padded with 1
    globalStrides  (2,8192,0,0,0)       <- 5 entries: [0] is the element size (the driver gets [1:])
    boxDim         (64,64,1,1,1)
    elementStrides (1,1,1,1,1)
    interleave     0
    swizzle        3
    l2Promotion    2
    oobFill        0
    Error: Failed to initialize the TMA descriptor 1

flashinfer / TensorRT-LLM (``buildNdTmaDescriptor``; no interleave, l2Promotion or oobFill)::

    Error: Failed to initialize the TMA descriptor 1      (TRT-LLM: "... descriptor. invalid argument")
    tmaFormat: 9 dim: 2 gmem: 0x7f8a00000000
    Shape: 4096 4096
    Stride: 8192
    tileShapes: 64 64
    tileStrides: 1 1
    swizzleType: 3

Any ``name value`` or ``name: value`` lines with the driver's own names (``globalDim``,
``tensorRank``, ...) read the same way. Parsing is pure: nothing here prints or exits.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from tmagen.errors import SpecError

ARGUMENTS = ("dtype", "rank", "global_address", "global_dim", "global_strides", "box_dim",
             "element_strides", "interleave", "swizzle", "l2_promotion", "oob_fill", "arch")
LISTS = ("global_dim", "global_strides", "box_dim", "element_strides")
DEFAULTS = {"interleave": 0, "swizzle": 0, "l2_promotion": 0, "oob_fill": 0, "arch": "sm_90a"}

# The driver's parameter names, as `check_encode_tiled` names fields in messages.
DRIVER_NAMES = {"dtype": "tensorDataType", "rank": "tensorRank", "global_address": "globalAddress",
                "global_dim": "globalDim", "global_strides": "globalStrides", "box_dim": "boxDim",
                "element_strides": "elementStrides", "interleave": "interleave", "swizzle": "swizzle",
                "l2_promotion": "l2Promotion", "oob_fill": "oobFill", "arch": "arch"}

# Every spelling read, lower case without "_": tmagen's, the driver's, CuTe's dump, flashinfer's dump.
_ALIASES = {
    "dtype": ("dtype", "tensordatatype", "format", "tmaformat"),
    "rank": ("rank", "tensorrank", "dim"),
    "global_address": ("globaladdress", "gmemaddress", "gmem"),
    "global_dim": ("globaldim", "shape"),
    "global_strides": ("globalstrides", "stride"),
    "box_dim": ("boxdim", "tileshapes"),
    "element_strides": ("elementstrides", "tilestrides"),
    "interleave": ("interleave",),
    "swizzle": ("swizzle", "swizzletype"),
    "l2_promotion": ("l2promotion",),
    "oob_fill": ("oobfill",),
    "arch": ("arch",),
    "result": ("result", "curesult"),
}
_ARGUMENT_OF = {alias: arg for arg, aliases in _ALIASES.items() for alias in aliases}

# CUresult values an encode call can return (cuda.h), and what each means for it.
_STICKY = ("an earlier kernel faulted and left the context unusable: every later CUDA call returns this "
           "error, whatever its arguments. Find the kernel with compute-sanitizer, or synchronize and "
           "check errors after each launch")
CU_RESULTS: dict[int, tuple[str, str]] = {
    0: ("CUDA_SUCCESS", "the driver encoded the map: the failure is not in this call"),
    1: ("CUDA_ERROR_INVALID_VALUE", "the driver's checks of the arguments refused them"),
    2: ("CUDA_ERROR_OUT_OF_MEMORY", "no memory for the call: not the arguments"),
    3: ("CUDA_ERROR_NOT_INITIALIZED", "cuInit was not called (or failed) before the encode: not the arguments"),
    4: ("CUDA_ERROR_DEINITIALIZED", "the driver is shutting down (a call from a destructor at exit): "
                                    "not the arguments"),
    34: ("CUDA_ERROR_STUB_LIBRARY", "the program loaded the toolkit's stub libcuda.so instead of the "
                                    "driver's: not the arguments"),
    46: ("CUDA_ERROR_DEVICE_UNAVAILABLE", "the GPU is busy or unavailable (exclusive mode): not the arguments"),
    100: ("CUDA_ERROR_NO_DEVICE", "no CUDA GPU is visible (CUDA_VISIBLE_DEVICES?): not the arguments"),
    101: ("CUDA_ERROR_INVALID_DEVICE", "the current device is not a valid one: not the arguments"),
    201: ("CUDA_ERROR_INVALID_CONTEXT", "no valid CUDA context is current on the calling thread: "
                                        "not the arguments"),
    214: ("CUDA_ERROR_ECC_UNCORRECTABLE", "the GPU reported an uncorrectable ECC error: not the arguments"),
    500: ("CUDA_ERROR_NOT_FOUND", "the driver entry point was not found (a driver older than CUDA 12.0): "
                                  "not the arguments"),
    700: ("CUDA_ERROR_ILLEGAL_ADDRESS", _STICKY),
    702: ("CUDA_ERROR_LAUNCH_TIMEOUT", _STICKY),
    709: ("CUDA_ERROR_CONTEXT_IS_DESTROYED", "the context was destroyed before the call: not the arguments"),
    710: ("CUDA_ERROR_ASSERT", _STICKY),
    714: ("CUDA_ERROR_HARDWARE_STACK_ERROR", _STICKY),
    715: ("CUDA_ERROR_ILLEGAL_INSTRUCTION", _STICKY),
    716: ("CUDA_ERROR_MISALIGNED_ADDRESS", _STICKY),
    717: ("CUDA_ERROR_INVALID_ADDRESS_SPACE", _STICKY),
    718: ("CUDA_ERROR_INVALID_PC", _STICKY),
    719: ("CUDA_ERROR_LAUNCH_FAILED", _STICKY),
    800: ("CUDA_ERROR_NOT_PERMITTED", "the operation is not permitted here: not the arguments"),
    801: ("CUDA_ERROR_NOT_SUPPORTED", "this GPU or driver has no tensor maps (TMA needs compute capability "
                                     "9.0 and a CUDA 12 driver): not the arguments"),
    999: ("CUDA_ERROR_UNKNOWN", "the driver gave no reason; often a sticky error of an earlier kernel or a "
                                "broken driver install, rarely the arguments"),
}
# cuGetErrorString's texts, which TensorRT-LLM's dump prints instead of the number
_ERROR_STRINGS = {"invalid argument": 1, "out of memory": 2, "initialization error": 3,
                  "driver shutting down": 4, "an illegal memory access was encountered": 700,
                  "unknown error": 999, "operation not supported": 801, "invalid device context": 201}


@dataclass(frozen=True)
class ResultCode:
    code: int
    name: str
    meaning: str

    @property
    def refusal(self) -> bool:
        """True for the one code the driver's argument checks return."""
        return self.code == 1


def parse_result(value: object, source: str = "--result") -> ResultCode:
    """A CUresult given as a number (1, 0x1) or a name (CUDA_ERROR_INVALID_VALUE, INVALID_VALUE)."""
    code: int | None = None
    if isinstance(value, int) and not isinstance(value, bool):
        code = value
    elif isinstance(value, str):
        text = value.strip()
        try:
            code = int(text, 0)
        except ValueError:
            key = text.upper()
            for number, (name, _) in CU_RESULTS.items():
                if key in (name, name.removeprefix("CUDA_ERROR_"), name.removeprefix("CUDA_")):
                    code = number
            code = _ERROR_STRINGS.get(text.lower(), code)
    if code is None or code not in CU_RESULTS:
        known = ", ".join(f"{n} ({c})" for c, (n, _) in CU_RESULTS.items() if c in (0, 1, 3, 201, 700, 999))
        raise SpecError(source, [f"result = {value!r}, but tmagen knows no such CUresult of an encode call: "
                                 f"give the number or name the call returned, e.g. {known}"])
    name, meaning = CU_RESULTS[code]
    return ResultCode(code, name, meaning)


@dataclass
class Pasted:
    """Arguments read from what the user gave, with how they were read."""

    values: dict[str, Any]
    result: object = None  # the CUresult the dump or JSON states, not yet checked
    notes: list[str] = field(default_factory=list)  # what was assumed or adjusted, for the user to see


def _key(name: str) -> str:
    return name.replace("_", "").replace("-", "").lower()


def from_mapping(data: dict[str, Any], source: str) -> Pasted:
    """A JSON object of the arguments, in tmagen's snake_case or the driver's camelCase names
    (``tensorDataType``, ``globalDim``, ...), with an optional ``result``."""
    values: dict[str, Any] = {}
    given: dict[str, str] = {}
    problems = []
    result = None
    for name, value in data.items():
        arg = _ARGUMENT_OF.get(_key(name)) if isinstance(name, str) else None
        if arg is None:
            problems.append(f"{name} is not an argument of cuTensorMapEncodeTiled: use {', '.join(ARGUMENTS)} "
                            f"or the driver's names ({', '.join(DRIVER_NAMES.values())}), and result")
        elif arg in given:
            problems.append(f"{name} and {given[arg]} name one argument: give it once")
        else:
            given[arg] = name
            if arg == "result":
                result = value
            elif arg == "global_address" and isinstance(value, str):  # "0x7f...", as pointers print
                values[arg] = _address(value, source)
            else:
                values[arg] = value
    if problems:
        raise SpecError(source, problems)
    return Pasted(values, result)


_RESULT_LINE = re.compile(r"Failed to initialize the TMA descriptor[ ,.:]*(?:error code:?\s*)?(.*)$", re.I)
_KEYS = re.compile(r"(?<![A-Za-z0-9_])(" + "|".join(sorted(
    {a for aliases in _ALIASES.values() for a in aliases} | {"tensor_data_type", "tensor_rank", "global_address",
                                                             "gmem_address", "global_dim", "global_strides",
                                                             "box_dim", "element_strides", "l2_promotion",
                                                             "oob_fill", "swizzle_type", "tile_shapes",
                                                             "tile_strides", "tma_format"},
    key=len, reverse=True)) + r")(?![A-Za-z0-9_])\s*[:=]?", re.I)
_NUMBER = re.compile(r"0[xX][0-9a-fA-F]+|-?\d+")


def looks_like_a_dump(text: str) -> bool:
    return not text.lstrip().startswith(("{", "[")) and bool(_KEYS.search(text))


def from_dump(text: str, source: str) -> Pasted:
    """The arguments in a descriptor dump (see the module's docstring), innermost first."""
    found: dict[str, str] = {}
    result: object = None
    problems = []
    for line in text.splitlines():
        m = _RESULT_LINE.search(line)
        if m:
            result = m.group(1).strip() or None
            continue
        if "desc addr" in line.lower():  # the descriptor's own address, not an argument
            continue
        keys = list(_KEYS.finditer(line))
        for k, nxt in zip(keys, [*keys[1:], None]):
            arg = _ARGUMENT_OF[_key(k.group(1))]
            raw = line[k.end():nxt.start() if nxt else len(line)].strip()
            if arg in found and found[arg] != raw:
                problems.append(f"{k.group(1)} is given twice ({found[arg]!r} and {raw!r}): paste one failure")
            found[arg] = raw
    if problems:
        raise SpecError(source, problems)
    values: dict[str, Any] = {}
    notes: list[str] = []
    for arg, raw in found.items():
        if arg == "result":
            result = raw
        elif arg in LISTS:
            values[arg] = [int(t, 0) for t in _NUMBER.findall(raw)]
        elif arg == "global_address":
            values[arg] = _address(raw, source)
        elif arg == "arch":
            values[arg] = raw
        else:
            tokens = _NUMBER.findall(raw)
            values[arg] = int(tokens[0], 0) if tokens and re.fullmatch(r"\(?\s*" + re.escape(tokens[0]) + r"\s*\)?",
                                                                        raw) else raw
    missing = [DRIVER_NAMES[a] for a in ARGUMENTS if a not in values and a not in DEFAULTS]
    if missing:
        raise SpecError(source, [f"{', '.join(missing)} not found in the pasted text: paste the whole dump "
                                 "(the lines after 'TMA Desc Addr' or 'tmaFormat'), or give the arguments as "
                                 "flags or JSON"])
    assumed = [DRIVER_NAMES[a] for a in ("interleave", "swizzle", "l2_promotion", "oob_fill") if a not in values]
    if assumed:
        notes.append(f"{', '.join(assumed)} not in the dump: taken as 0 (NONE)")
    _trim_padding(values, notes)
    return Pasted(values, result, notes)


def _address(raw: str, source: str) -> int:
    text = raw.strip().strip("()").strip()
    if text.lower() in ("nil", "null", "nullptr", ""):
        return 0
    if re.fullmatch(r"0[xX][0-9a-fA-F]+", text):
        return int(text, 16)
    if re.fullmatch(r"[0-9A-Fa-f]{16}", text):  # MSVC prints pointers as 16 hex digits without 0x
        return int(text, 16)
    if re.fullmatch(r"\d+", text):
        return int(text)
    raise SpecError(source, [f"globalAddress = {raw!r}, but it is not an address: paste the pointer as printed "
                             "(0x7f...)"])


def _trim_padding(values: dict[str, Any], notes: list[str]) -> None:
    """CuTe prints 5 entries whatever the rank, padded with 1 (0 for strides), and the element size
    first among the strides. Keep what the driver read: ``rank`` entries, ``rank - 1`` strides."""
    rank = values.get("rank")
    if not isinstance(rank, int) or not 1 <= rank <= 5:
        return
    for arg, pad in (("global_dim", 1), ("box_dim", 1), ("element_strides", 1)):
        seq = values.get(arg)
        if isinstance(seq, list) and len(seq) > rank and all(x == pad for x in seq[rank:]):
            values[arg] = seq[:rank]
    strides = values.get("global_strides")
    if isinstance(strides, list) and len(strides) == 5 != rank - 1:  # CuTe's five, not the driver's rank - 1
        notes.append(f"globalStrides: {len(strides)} entries for tensorRank {rank}; the first ({strides[0]}) read "
                     "as the element size CuTe prints there, the driver gets the next "
                     f"{rank - 1}")
        rest = strides[1:]
        values["global_strides"] = rest[:rank - 1] if all(x == 0 for x in rest[rank - 1:]) else rest
