"""Every rule of `tmagen.rules.RULES`: at least one breaking case and one passing boundary case.

Driver-level rules go through `diagnose_encode_tiled` (the driver's order, innermost first): its
errors and warnings together, each with the severity its rule has for the driver;
the rules only a spec can break go through `parse_spec` + `check_spec` (outermost first).
Each case states the exact set of rule ids it must produce, so a case that trips a second
rule by accident, or a boundary that moves by one, fails. Breaking cases also state
fragments the message must contain: the field, the offending value and the fix's number.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

import pytest

from tmagen.enums import Swizzle
from tmagen.plan import check
from tmagen.rules import RULES, Violation, check_encode_tiled, diagnose_encode_tiled
from tmagen.spec import parse_spec

ADDR = 0x7F0000000000  # 4096-aligned, so every alignment rule passes

# A valid call: 2-D float32, 32 x 8 box (128-byte rows), 128B swizzle.
DRV = dict(dtype="FLOAT32", rank=2, global_address=ADDR, global_dim=[64, 64], global_strides=[256],
           box_dim=[32, 8], element_strides=[1, 1], interleave=0, swizzle="128B", l2_promotion=0,
           oob_fill=0, arch="sm_90a")

# A valid 3-D call, for the interleaved layouts (rank >= 3).
DRV3 = dict(DRV, rank=3, global_dim=[64, 64, 4], global_strides=[256, 16384], box_dim=[32, 8, 2],
            element_strides=[1, 1, 1], swizzle="none")

# NC/32HWC32-like: float16, 16 channels = 32 bytes per innermost row; 32-byte aligned strides.
DRV_I32 = dict(DRV, dtype="FLOAT16", rank=3, global_dim=[16, 10, 10], global_strides=[32, 320],
               box_dim=[16, 10, 10], element_strides=[1, 1, 1], interleave="32B", swizzle="32B")

# Packed sub-byte types (sm_100a): 16U4_ALIGN16B needs boxDim[0] = 128, 32-byte alignment.
DRV_U4A16 = dict(DRV, dtype="16U4_ALIGN16B", global_dim=[256, 64], global_strides=[128],
                 box_dim=[128, 8], arch="sm_100a")
DRV_U4A8 = dict(DRV, dtype=13, global_dim=[64, 64], global_strides=[32], box_dim=[32, 8], arch="sm_100a")
DRV_U6 = dict(DRV, dtype=15, rank=3, global_dim=[128, 8, 4], global_strides=[96, 768],
              box_dim=[128, 8, 4], element_strides=[1, 1, 1], swizzle="none", arch="sm_100a")

# Big uint8 boxes for the byte limits (no swizzle: rows are packed).
DRV_U8_BIG = dict(DRV, dtype="UINT8", rank=3, global_dim=[256, 256, 8], global_strides=[256, 65536],
                  element_strides=[1, 1, 1], swizzle="none")
DRV_U8_4D = dict(DRV_U8_BIG, rank=4, global_dim=[256, 256, 8, 4], global_strides=[256, 65536, 524288])

# Narrow float16 rows (16 bytes) that each take the full 128-byte span in shared memory.
DRV_NARROW = dict(DRV, dtype="FLOAT16", rank=3, global_dim=[64, 256, 16], global_strides=[128, 32768],
                  element_strides=[1, 1, 1])

SPEC = {
    "name": "rule_case",
    "target": "sm_90a",
    "tensors": [{"name": "t", "dtype": "float32", "shape": [64, 64], "box": [8, 16],
                 "swizzle": {"mode": "64B"}}],
    "kernel": {"kind": "inspect"},
}


@dataclass(frozen=True)
class Case:
    rule: str  # the rule under test
    breaks: bool  # True: the case breaks the rule
    via: str  # "driver" (check_encode_tiled kwargs) or "spec" (changes to SPEC)
    args: dict
    expect: frozenset  # the exact set of rule ids the call reports
    fragments: tuple = ()  # each must appear in the message of the rule's violation
    field_name: str | None = None  # the violation's exact field
    id: str = ""


def drv(rule, breaks, base, *, expect=None, fragments=(), field_name=None, id="", **over):
    expect = frozenset({rule} if breaks else set()) if expect is None else frozenset(expect)
    return Case(rule, breaks, "driver", {**base, **over}, expect, tuple(fragments), field_name, id)


def spec(rule, breaks, *, tensor=None, expect=None, fragments=(), field_name=None, id="", **top):
    expect = frozenset({rule} if breaks else set()) if expect is None else frozenset(expect)
    return Case(rule, breaks, "spec", {"tensor": tensor or {}, **top}, expect, tuple(fragments), field_name, id)


def build_spec(case_args: dict):
    data = copy.deepcopy(SPEC)
    data["tensors"][0].update(case_args["tensor"])
    for k, v in case_args.items():
        if k == "tensors_extra":
            data["tensors"] += v
        elif k != "tensor":
            data[k] = v
    return parse_spec(data)


RANK6 = dict(DRV, rank=6, global_dim=[64] * 6, global_strides=[256 * 64 ** k for k in range(5)],
             box_dim=[32, 1, 1, 1, 1, 1], element_strides=[1] * 6)
RANK5 = dict(RANK6, rank=5, global_dim=[64] * 5, global_strides=[256 * 64 ** k for k in range(4)],
             box_dim=[32, 1, 1, 1, 1], element_strides=[1] * 5)

CASES = [
    # --- rank-range: 5 ok, 6 bad (and 0 bad)
    drv("rank-range", True, RANK6, fragments=("tensorRank = 6", "1 to 5 dimensions"), field_name="tensorRank",
        id="rank6"),
    drv("rank-range", False, RANK5, id="rank5"),
    drv("rank-range", False, DRV, rank=1, global_dim=[64], global_strides=[], box_dim=[32], element_strides=[1],
        id="rank1"),
    drv("rank-range", True, DRV, rank=0, global_dim=[64], global_strides=[], box_dim=[32], element_strides=[1],
        fragments=("tensorRank = 0", "1 to 5"), id="rank0"),
    # --- global-address-not-null: a warning for the driver (it encodes nullptr, CUTLASS relies on it)
    drv("global-address-not-null", True, DRV, global_address=0, fragments=("globalAddress = 0 (null)",
        "cuTensorMapReplaceAddress"), field_name="globalAddress", id="null"),
    drv("global-address-not-null", False, DRV, global_address=16, id="16"),
    # --- interleave-rank: interleave needs rank >= 3
    drv("interleave-rank", True, DRV, interleave="16B", swizzle="none",
        fragments=("interleave = CU_TENSOR_MAP_INTERLEAVE_16B", "rank >= 3", "(rank is 2)",
                   "CU_TENSOR_MAP_INTERLEAVE_NONE"), field_name="interleave", id="16B-rank2"),
    drv("interleave-rank", False, DRV3, interleave="16B", id="16B-rank3"),
    drv("interleave-rank", False, DRV3, interleave=1, id="16B-as-int-rank3"),
    # --- global-address-alignment: 16 bytes, 32 with INTERLEAVE_32B / ALIGN16B packed types
    drv("global-address-alignment", True, DRV, global_address=ADDR + 8,
        fragments=("globalAddress = 0x7f0000000008", "16-byte boundary", "(it is 8 past one)", "multiple of 16"),
        field_name="globalAddress", id="addr+8"),
    drv("global-address-alignment", True, DRV, global_address=8,
        fragments=("globalAddress = 8,", "multiple of 16"), id="small-address-decimal"),
    drv("global-address-alignment", False, DRV, global_address=ADDR + 16, id="addr+16"),
    drv("global-address-alignment", True, DRV_I32, global_address=ADDR + 16,
        fragments=("globalAddress = 0x7f0000000010", "32-byte boundary", "(it is 16 past one)", "multiple of 32"),
        id="interleave32-addr+16"),
    drv("global-address-alignment", False, DRV_I32, global_address=ADDR + 32, id="interleave32-addr+32"),
    drv("global-address-alignment", True, DRV_U4A16, global_address=ADDR + 16,
        fragments=("32-byte boundary", "multiple of 32"), id="u4align16-addr+16"),
    # --- global-dim-range: 1 .. 2**32
    drv("global-dim-range", False, DRV, global_dim=[64, 2 ** 32], id="dim-2^32"),
    drv("global-dim-range", True, DRV, global_dim=[64, 2 ** 32 + 1],
        fragments=("globalDim[1] = 4294967297", "1 to 2^32", "split the tensor"), field_name="globalDim[1]",
        id="dim-2^32+1"),
    drv("global-dim-range", True, DRV, global_dim=[0, 64],
        fragments=("globalDim[0] = 0", "1 to 2^32", "drop empty tensors"), field_name="globalDim[0]", id="dim-0"),
    drv("global-dim-range", False, DRV, global_dim=[1, 1], id="dim-1"),
    # --- packed-dim-multiple: 128 (ALIGN16B) or 2 (ALIGN8B)
    drv("packed-dim-multiple", True, DRV_U4A16, global_dim=[192, 64],
        fragments=("globalDim[0] = 192", "multiple of 128 values", "pad the innermost dimension to 256"),
        field_name="globalDim[0]", id="u4align16-192"),
    drv("packed-dim-multiple", False, DRV_U4A16, global_dim=[128, 64], id="u4align16-128"),
    drv("packed-dim-multiple", True, DRV_U4A8, global_dim=[63, 64],
        fragments=("globalDim[0] = 63", "multiple of 2 values", "pad the innermost dimension to 64"),
        id="u4align8-63"),
    drv("packed-dim-multiple", False, DRV_U4A8, global_dim=[62, 64], id="u4align8-62"),
    # --- global-stride-multiple: 16 bytes, 32 wide
    drv("global-stride-multiple", True, DRV, global_strides=[264],
        fragments=("globalStrides[0] = 264 bytes", "multiples of 16 bytes", "pad each row to 272 bytes"),
        field_name="globalStrides[0]", id="264"),
    drv("global-stride-multiple", False, DRV, global_strides=[272], id="272"),
    drv("global-stride-multiple", True, DRV_I32, global_strides=[48, 480],
        fragments=("globalStrides[0] = 48 bytes", "multiples of 32 bytes", "pad each row to 64 bytes"),
        field_name="globalStrides[0]", id="interleave32-48"),
    drv("global-stride-multiple", True, DRV3, global_strides=[256, 16392],
        fragments=("globalStrides[1] = 16392 bytes", "pad each row to 16400 bytes"), field_name="globalStrides[1]",
        id="second-stride"),
    # --- global-stride-limit: below 2**40
    drv("global-stride-limit", False, DRV, global_strides=[2 ** 40 - 16], id="2^40-16"),
    drv("global-stride-limit", True, DRV, global_strides=[2 ** 40],
        fragments=("globalStrides[0] = 1099511627776 bytes", "2^40"), field_name="globalStrides[0]", id="2^40"),
    drv("global-stride-limit", True, DRV, global_strides=[-16],
        fragments=("globalStrides[0] = -16 bytes", "0 to 2^40 - 1", "positive strides"), id="negative"),
    # --- global-stride-nonzero: the driver encodes a zero stride (a warning of diagnose, measured)
    drv("global-stride-limit", False, DRV, global_strides=[0], expect={"global-stride-nonzero"}, id="0-in-range"),
    drv("global-stride-nonzero", True, DRV, global_strides=[0],
        fragments=("globalStrides[0] = 0 bytes", "repeats one row", "contiguous copy"), id="0"),
    drv("global-stride-nonzero", False, DRV, global_strides=[256], id="256"),
    # --- box-dim-range: 1 .. 256
    drv("box-dim-range", False, DRV, dtype="UINT8", swizzle="none", global_dim=[1024, 1024], global_strides=[1024],
        box_dim=[256, 256], id="256"),
    drv("box-dim-range", True, DRV, dtype="UINT8", swizzle="none", global_dim=[1024, 1024], global_strides=[1024],
        box_dim=[256, 257], fragments=("boxDim[1] = 257", "1 to 256 elements", "use boxDim[1] <= 256"),
        field_name="boxDim[1]", id="257"),
    drv("box-dim-range", True, DRV, box_dim=[32, 0], fragments=("boxDim[1] = 0", "<= 256"), id="0"),
    # --- box-inner-bytes-multiple-of-16, with and without interleave
    drv("box-inner-bytes-multiple-of-16", True, DRV, dtype="FLOAT16", swizzle="none", box_dim=[12, 8],
        fragments=("boxDim[0] = 12 float16 = 24 bytes", "multiple of 16 bytes", "use boxDim[0] a multiple of 8"),
        field_name="boxDim[0]", id="fp16-12"),
    drv("box-inner-bytes-multiple-of-16", False, DRV, dtype="FLOAT16", swizzle="none", box_dim=[8, 8], id="fp16-8"),
    drv("box-inner-bytes-multiple-of-16", True, DRV3, dtype="FLOAT16", interleave="16B", box_dim=[12, 8, 2],
        fragments=("boxDim[0] = 12 float16 = 24 bytes", "a multiple of 8"), id="fp16-12-interleaved"),
    drv("box-inner-bytes-multiple-of-16", False, DRV3, dtype="FLOAT16", interleave="16B", box_dim=[8, 8, 2],
        id="fp16-8-interleaved"),
    drv("box-inner-bytes-multiple-of-16", True, DRV_U4A8, box_dim=[24, 8],
        fragments=("boxDim[0] = 24 u4x16_align8 = 12 bytes", "a multiple of 32"), id="u4align8-24"),
    # --- packed-box-inner: ALIGN16B types move rows of exactly 128 values
    drv("packed-box-inner", True, DRV_U4A16, box_dim=[64, 8],
        fragments=("boxDim[0] = 64", "exactly 128 values", "use boxDim[0] = 128"), field_name="boxDim[0]",
        id="u4align16-64"),
    drv("packed-box-inner", False, DRV_U4A16, id="u4align16-128"),
    drv("packed-box-inner", False, DRV_U4A8, box_dim=[64, 8], id="u4align8-any"),
    # --- element-stride-range: 1 .. 8
    drv("element-stride-range", False, DRV, element_strides=[1, 8], id="8"),
    drv("element-stride-range", True, DRV, element_strides=[1, 9],
        fragments=("elementStrides[1] = 9", "1 to 8", "use 1"), field_name="elementStrides[1]", id="9"),
    drv("element-stride-range", True, DRV, element_strides=[0, 1], fragments=("elementStrides[0] = 0", "1 to 8"),
        id="0"),
    # --- interleave-32b-needs-swizzle-32b
    drv("interleave-32b-needs-swizzle-32b", True, DRV_I32, swizzle="none",
        fragments=("swizzle = CU_TENSOR_MAP_SWIZZLE_NONE", "INTERLEAVE_32B", "use CU_TENSOR_MAP_SWIZZLE_32B"),
        field_name="swizzle", id="none"),
    drv("interleave-32b-needs-swizzle-32b", False, DRV_I32, id="32B"),
    drv("interleave-32b-needs-swizzle-32b", False, DRV3, interleave="16B", swizzle="64B", id="interleave16-64B"),
    # --- box-inner-within-swizzle-span (no interleave)
    drv("box-inner-within-swizzle-span", True, DRV, dtype="BFLOAT16", box_dim=[96, 8],
        fragments=("boxDim[0] = 96 bfloat16 = 192 bytes", "at most 128 bytes per row", "<= 64"),
        field_name="boxDim[0]", id="bf16-96-128B"),
    drv("box-inner-within-swizzle-span", False, DRV, dtype="BFLOAT16", box_dim=[64, 8], id="bf16-64-128B"),
    drv("box-inner-within-swizzle-span", True, DRV, swizzle="32B", box_dim=[12, 8],
        fragments=("boxDim[0] = 12 float32 = 48 bytes", "the 32B swizzle holds at most 32 bytes per row", "<= 8"),
        id="f32-12-32B"),
    drv("box-inner-within-swizzle-span", False, DRV, swizzle="32B", box_dim=[8, 8], id="f32-8-32B"),
    drv("box-inner-within-swizzle-span", False, DRV, swizzle="none", box_dim=[64, 8], id="no-swizzle-no-span"),
    drv("box-inner-within-swizzle-span", False, DRV3, interleave="16B", swizzle="32B", id="interleaved-exempt"),
    # --- u6-no-interleave
    drv("u6-no-interleave", True, DRV_U6, interleave="16B",
        fragments=("interleave = CU_TENSOR_MAP_INTERLEAVE_16B", "u6x16_align16 cannot be interleaved",
                   "use CU_TENSOR_MAP_INTERLEAVE_NONE"), field_name="interleave", id="u6-16B"),
    drv("u6-no-interleave", False, DRV_U6, id="u6-none"),
    # --- packed-swizzle (check_encode_tiled assumes the map is used to load)
    drv("packed-swizzle", True, DRV_U4A16, swizzle="64B",
        fragments=("swizzle = CU_TENSOR_MAP_SWIZZLE_64B", "u4x16_align16 allows none (load), 128B (load), "
                   "128B_atom_32B (load)", "used to load"), field_name="swizzle", id="u4align16-64B"),
    drv("packed-swizzle", False, DRV_U4A16, swizzle="128B_atom_32B", id="u4align16-atom32B"),
    drv("packed-swizzle", True, DRV_U6, swizzle=6,
        fragments=("CU_TENSOR_MAP_SWIZZLE_128B_ATOM_64B", "128B_atom_64B (store)", "used to load"),
        id="u6-atom64B-is-store-only"),
    drv("packed-swizzle", False, DRV_U6, swizzle=4, id="u6-atom32B"),
    drv("packed-swizzle", False, DRV_U4A8, swizzle="64B", id="u4align8-unrestricted"),
    # --- oob-nan-float-only
    drv("oob-nan-float-only", True, DRV, dtype="UINT8", box_dim=[128, 8], oob_fill="nan",
        fragments=("oobFill = CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA", "uint8 is not a floating-point",
                   "use CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE"), field_name="oobFill", id="uint8-nan"),
    drv("oob-nan-float-only", False, DRV, oob_fill=1, id="float32-nan"),
    drv("oob-nan-float-only", True, DRV_U4A8, oob_fill="NAN_REQUEST_ZERO_FMA", fragments=("u4x16_align8",),
        id="packed-nan"),
    # --- target-atom-swizzle: 4..6 bad on sm_90a, fine on sm_100a
    *[drv("target-atom-swizzle", True, DRV, swizzle=s,
          fragments=(f"swizzle = {Swizzle(s).driver_name}", "sm_90a has no 128B atom swizzles", "sm_100a"),
          field_name="swizzle", id=f"{s}-sm_90a") for s in (4, 5, 6)],
    *[drv("target-atom-swizzle", False, DRV, swizzle=s, arch="sm_100a", id=f"{s}-sm_100a") for s in (4, 5, 6)],
    drv("target-atom-swizzle", False, DRV, swizzle=3, id="3-sm_90a"),
    # --- target-packed-dtype
    *[drv("target-packed-dtype", True, base, arch="sm_90a",
          fragments=(f"tensorDataType = CU_TENSOR_MAP_DATA_TYPE_{name}", "sm_90a has no packed", "sm_100a"),
          field_name="tensorDataType", id=f"{name}-sm_90a")
      for base, name in ((DRV_U4A8, "16U4_ALIGN8B"), (DRV_U4A16, "16U4_ALIGN16B"), (DRV_U6, "16U6_ALIGN16B"))],
    *[drv("target-packed-dtype", False, base, id=f"{name}-sm_100a")
      for base, name in ((DRV_U4A8, "16U4_ALIGN8B"), (DRV_U4A16, "16U4_ALIGN16B"), (DRV_U6, "16U6_ALIGN16B"))],
    # --- box-bytes-driver-limit: prod(floor(box / estride)) * esize <= 233472 (measured)
    # 256 * 228 * 4 = 233472 bytes: the driver accepts it; it does not fit a block's shared memory.
    drv("box-bytes-driver-limit", False, DRV_U8_BIG, box_dim=[256, 228, 4], expect={"box-fits-shared-memory"},
        id="233472"),
    drv("box-bytes-driver-limit", True, DRV_U8_BIG, box_dim=[256, 229, 4],
        expect={"box-bytes-driver-limit", "box-fits-shared-memory"},
        fragments=("boxDim = [256, 229, 4] = 234496 bytes as the driver counts", "over 233472 bytes"),
        field_name="boxDim", id="234496"),
    drv("box-bytes-driver-limit", True, DRV_U8_BIG, box_dim=[256, 229, 4], arch="sm_100a",
        expect={"box-bytes-driver-limit", "box-fits-shared-memory"}, fragments=("234496",), id="234496-sm_100a"),
    # The floor quirk: a box smaller than its element stride counts 0 for the driver ...
    drv("box-bytes-driver-limit", False, DRV_U8_4D, box_dim=[256, 256, 4, 1], element_strides=[1, 1, 1, 2],
        expect={"box-fits-shared-memory"}, id="floor-box1-estride2-counts-0"),
    drv("box-bytes-driver-limit", True, DRV_U8_4D, box_dim=[256, 256, 4, 1], element_strides=[1, 1, 1, 1],
        expect={"box-bytes-driver-limit", "box-fits-shared-memory"}, fragments=("262144 bytes as the driver",),
        id="same-box-estride1"),
    # ... and floor(7 / 2) = 3, not ceil's 4: 256 * 256 * 3 = 196608 passes.
    drv("box-bytes-driver-limit", False, DRV_U8_BIG, box_dim=[256, 256, 7], element_strides=[1, 1, 2],
        expect={"box-fits-shared-memory"}, id="floor-7-over-2"),
    # --- box-fits-shared-memory: narrow rows take the full 128-byte span
    drv("box-fits-shared-memory", False, DRV_NARROW, box_dim=[8, 227, 8], id="1816-rows-232448"),
    drv("box-fits-shared-memory", True, DRV_NARROW, box_dim=[8, 228, 8],
        fragments=("boxDim = [8, 228, 8] = 233472 bytes of shared memory", "at most 232448 bytes"),
        field_name="boxDim", id="1824-rows-233472"),
    drv("box-fits-shared-memory", False, DRV_NARROW, box_dim=[8, 228, 8], swizzle="none", id="unswizzled-packed"),
    # --- atomicity-needs-128B (spec only)
    spec("atomicity-needs-128B", True, tensor={"swizzle": {"mode": "64B", "atomicity": "32B"}},
         fragments=("tensors[0].swizzle.atomicity = 32B", "(mode is 64B)", 'atomicity "16B"', 'mode "128B"'),
         field_name="tensors[0].swizzle.atomicity", id="64B-atom32B"),
    spec("atomicity-needs-128B", True, tensor={"swizzle": {"mode": "none", "atomicity": "64B"}},
         fragments=("tensors[0].swizzle.atomicity = 64B", "(mode is none)"), id="none-atom64B"),
    spec("atomicity-needs-128B", False, tensor={"swizzle": {"mode": "64B", "atomicity": "16B"}}, id="64B-atom16B"),
    spec("atomicity-needs-128B", False, tensor={"box": [8, 32], "swizzle": {"mode": "128B", "atomicity": "32B"}},
         target="sm_100a", id="128B-atom32B-sm_100a"),
    # --- smem-offset-alignment (spec only)
    spec("smem-offset-alignment", True, tensor={"smem_offset": 200},
         fragments=("tensors[0].smem_offset = 200", "128-byte boundary", "multiple of 128, e.g. 128"),
         field_name="tensors[0].smem_offset", id="200"),
    spec("smem-offset-alignment", True, tensor={"smem_offset": 64}, fragments=("= 64", "e.g. 0"), id="64"),
    spec("smem-offset-alignment", False, tensor={"smem_offset": 384}, id="384"),
    # --- smem-offset-in-pattern (spec only): 0 .. 896
    # --- kernel-fits-shared-memory (spec only): every stage of the kernel's buffers in one block
    spec("kernel-fits-shared-memory", False, tensor={"shape": [256, 256], "box": [128, 128], "dtype": "uint8",
                                                     "swizzle": {"mode": "128B"}},
         kernel={"kind": "transpose", "stages": 8, "tiles_per_stage": 1, "tiles_per_block": None},
         id="uint8-8-stages-1-tile"),
    spec("kernel-fits-shared-memory", True, tensor={"shape": [256, 256], "box": [128, 128], "dtype": "uint8",
                                                    "swizzle": {"mode": "128B"}},
         kernel={"kind": "transpose", "stages": 8, "tiles_per_stage": 2, "tiles_per_block": None},
         fragments=("kernel = 328768 bytes of shared memory", "at most 232448 bytes", "fewer stages"),
         field_name="kernel", id="uint8-8-stages-2-tiles"),
    spec("smem-offset-in-pattern", False, tensor={"smem_offset": 896}, id="896"),
    spec("smem-offset-in-pattern", True, tensor={"smem_offset": 1024},
         fragments=("tensors[0].smem_offset = 1024", "1024-byte pattern", "use 0"),
         field_name="tensors[0].smem_offset", id="1024"),
    spec("smem-offset-in-pattern", True, tensor={"smem_offset": 1152}, fragments=("= 1152", "use 128"), id="1152"),
    spec("smem-offset-in-pattern", True, tensor={"smem_offset": -128}, fragments=("= -128", "use 896"), id="-128"),
    # --- flip-8b-load-only (spec only): a copy kernel stores through the map
    spec("flip-8b-load-only", True, target="sm_100a", kernel={"kind": "copy"},
         tensor={"box": [8, 32], "swizzle": {"mode": "128B", "atomicity": "32B_flip_8B"}},
         fragments=('tensors[0].swizzle = {"mode": "128B", "atomicity": "32B_flip_8B"}', "stores through the map",
                    "use 128B_atom_32B"), field_name="tensors[0].swizzle", id="copy"),
    spec("flip-8b-load-only", False, target="sm_100a",
         tensor={"box": [8, 32], "swizzle": {"mode": "128B", "atomicity": "32B_flip_8B"}}, id="inspect"),
    spec("flip-8b-load-only", False, target="sm_100a", kernel={"kind": "copy"},
         tensor={"box": [8, 32], "swizzle": {"mode": "128B", "atomicity": "32B"}}, id="copy-atom32B"),
    # --- start-coordinate-16-bytes (spec only): the innermost coordinate is coords[-1]
    spec("start-coordinate-16-bytes", True, kernel={"kind": "inspect", "coords": [0, 2]},
         fragments=("kernel.coords[-1] = 2", "2 float32 = 8 bytes is not a multiple of 16", "multiple of 4"),
         field_name="kernel.coords[-1]", id="f32-2"),
    spec("start-coordinate-16-bytes", False, kernel={"kind": "inspect", "coords": [3, 4]}, id="f32-4-outer-3"),
    spec("start-coordinate-16-bytes", True, tensor={"dtype": "uint8", "box": [8, 64]},
         kernel={"kind": "inspect", "coords": [0, 24]},
         fragments=("kernel.coords[-1] = 24", "24 uint8 = 24 bytes", "multiple of 16"), id="u8-24"),
    spec("start-coordinate-16-bytes", False, tensor={"dtype": "uint8", "box": [8, 64]},
         kernel={"kind": "inspect", "coords": [0, 32]}, id="u8-32"),
    # --- kernel-threads-per-block (spec only): a transpose of many micro-tiles per stage
    spec("kernel-threads-per-block", True,
         kernel={"kind": "transpose", "unit_bytes": 16, "tiles_per_stage": 3, "stages": 1},
         tensor={"shape": [128, 128], "box": [64, 32], "swizzle": {"mode": "none"}},
         fragments=("kernel = 1536 threads", "at most 1024 threads", "tiles_per_stage"), field_name="kernel",
         id="transpose-3x512"),
    spec("kernel-threads-per-block", False,
         kernel={"kind": "transpose", "unit_bytes": 16, "tiles_per_stage": 2, "stages": 1},
         tensor={"shape": [128, 128], "box": [64, 32], "swizzle": {"mode": "none"}}, id="transpose-2x512"),
    # --- store-inner-extent-16-bytes: a TMA store writes whole 16-byte chunks (measured)
    spec("store-inner-extent-16-bytes", True, kernel={"kind": "copy"},
         tensor={"shape": [1001], "box": [256], "swizzle": {"mode": "none"}},
         fragments=("tensors[0].shape[-1] = 1001 float32 = 4004 bytes", "whole 16-byte chunks", "4 elements"),
         field_name="tensors[0].shape[-1]", id="copy-rank1-4004B"),
    spec("store-inner-extent-16-bytes", False, kernel={"kind": "copy"},
         tensor={"shape": [1000], "box": [256], "swizzle": {"mode": "none"}}, id="copy-rank1-4000B"),
    spec("store-inner-extent-16-bytes", False, tensor={"shape": [1001], "box": [256], "swizzle": {"mode": "none"}},
         id="inspect-loads-only"),
    # --- interleave-unmeasured (spec only): what tmagen's layout model covers
    spec("interleave-unmeasured", True,
         tensor={"dtype": "uint32", "shape": [4, 9, 264], "box": [3, 4, 8], "interleave": "32B", "alignment": 32,
                 "swizzle": {"mode": "32B"}},
         fragments=("tensors[0].interleave = 32B", "not what tmagen's model says", "tmagen diagnose"),
         field_name="tensors[0].interleave", id="32B"),
    spec("interleave-unmeasured", False,
         tensor={"dtype": "uint32", "shape": [4, 9, 264], "box": [3, 4, 8], "alignment": 32,
                 "swizzle": {"mode": "32B"}}, id="none"),
    # --- the wgmma operand rules (spec only: a tensor marked "mma")
    spec("mma-dtype", True, tensor={"box": [8, 16], "mma": {"operand": "a"}},
         fragments=("tensors[0].dtype = float32", "bfloat16, float16, float8_e4m3, float8_e5m2"),
         field_name="tensors[0].dtype", id="f32"),
    spec("mma-dtype", False, tensor={"dtype": "bfloat16", "box": [8, 32], "mma": {"operand": "a"}}, id="bf16"),
    spec("mma-dtype", False, tensor={"dtype": "float8_e4m3", "box": [8, 64], "mma": {"operand": "a"}}, id="fp8-k"),
    spec("mma-dtype", True, tensor={"dtype": "float8_e5m2", "box": [64, 32], "swizzle": {"mode": "32B"},
                                    "mma": {"operand": "b", "major": "mn"}},
         fragments=("'mn'", "K-major only", "tmagen.ops.transpose"), field_name="tensors[0].mma.major",
         id="fp8-mn"),
    spec("mma-layout-for-target", True, target="sm_100a",
         tensor={"dtype": "bfloat16", "box": [8, 64], "swizzle": {"mode": "128B", "atomicity": "64B"},
                 "mma": {"operand": "a"}},
         fragments=('{"mode": "128B", "atomicity": "64B"}', "tcgen05 descriptor of sm_100a has no such layout"),
         field_name="tensors[0].swizzle", id="atom64-sm100a"),
    spec("mma-layout-for-target", False, target="sm_100a",
         tensor={"dtype": "bfloat16", "box": [8, 64], "swizzle": {"mode": "128B", "atomicity": "32B"},
                 "mma": {"operand": "a"}}, id="atom32-sm100a"),
    spec("mma-plain-layout", True, tensor={"dtype": "bfloat16", "box": [8, 32], "element_strides": [2, 1],
                                           "mma": {"operand": "b"}},
         fragments=("tensors[0].element_strides[0] = 2", "gaps"), field_name="tensors[0].element_strides[0]",
         id="strided"),
    spec("mma-plain-layout", False, tensor={"dtype": "bfloat16", "box": [8, 32], "element_strides": [1, 1],
                                            "mma": {"operand": "b"}}, id="unit-strides"),
    spec("mma-core-matrix-width", True, tensor={"dtype": "bfloat16", "box": [8, 16], "swizzle": {"mode": "none"},
                                                "mma": {"operand": "a"}},
         fragments=("tensors[0].box[-1] = 16 bfloat16 = 32 bytes", "16 packed bytes", "box[-1] = 8"),
         field_name="tensors[0].box[-1]", id="none-32B"),
    spec("mma-core-matrix-width", True, tensor={"dtype": "bfloat16", "box": [16, 16],
                                                "mma": {"operand": "a", "major": "mn"}},
         fragments=("32 bytes", "64 bytes of M/N wide", "box[-1] = 32"), id="mn-narrow"),
    spec("mma-core-matrix-width", False, tensor={"dtype": "bfloat16", "box": [8, 8], "swizzle": {"mode": "none"},
                                                 "mma": {"operand": "a"}}, id="none-16B"),
    spec("mma-instruction-k", True, tensor={"dtype": "bfloat16", "box": [8, 8], "mma": {"operand": "a"}},
         fragments=("16 bytes", "steps of 32 bytes", "multiple of 16 elements"), field_name="tensors[0].box[-1]",
         id="k-major-16B"),
    spec("mma-instruction-k", True,
         tensor={"dtype": "bfloat16", "box": [8, 32], "mma": {"operand": "b", "major": "mn"}},
         fragments=("8 rows of K", "16 rows of K"), field_name="tensors[0].box[0]", id="mn-8-rows"),
    spec("mma-instruction-k", False,
         tensor={"dtype": "bfloat16", "box": [16, 32], "mma": {"operand": "b", "major": "mn"}},
         id="mn-16-rows"),
    spec("mma-core-matrix-rows", True, tensor={"dtype": "bfloat16", "box": [4, 32], "mma": {"operand": "a"}},
         fragments=("4 rows of M/N", "multiple of 8 rows"), field_name="tensors[0].box[0]", id="4-rows"),
    spec("mma-core-matrix-rows", False, tensor={"dtype": "bfloat16", "box": [24, 32], "mma": {"operand": "a"}},
         id="24-rows"),
    spec("mma-k-major-boxes-contiguous", True, tensor={"dtype": "bfloat16", "box": [8, 32],
                                                       "mma": {"operand": "a", "mn_boxes": 2}},
         fragments=("mn_boxes: 2", "512 bytes", "gaps"), field_name="tensors[0].mma", id="512-byte-boxes"),
    spec("mma-k-major-boxes-contiguous", True, tensor={"dtype": "bfloat16", "box": [16, 32], "smem_offset": 128,
                                                       "mma": {"operand": "a", "mn_boxes": 2}},
         fragments=("smem_offset 128",), id="offset"),
    spec("mma-k-major-boxes-contiguous", False, tensor={"dtype": "bfloat16", "box": [16, 32],
                                                        "mma": {"operand": "a", "mn_boxes": 2}}, id="1024-byte-boxes"),
    # --- reduce-op-for-type (spec only): the PTX ISA's table of reductions and element types, less what faults
    # on the H200 (and, or, xor on int64: tests/data/hw_h200/reduce_ops.json)
    spec("reduce-op-for-type", True, tensor={"reduce": "min"}, kernel=None,
         fragments=("tensors[0].reduce = 'min'", "no .min on float32", "use one of add on float32"),
         field_name="tensors[0].reduce", id="min-f32"),
    spec("reduce-op-for-type", True, tensor={"dtype": "uint8", "box": [8, 16], "reduce": "add"}, kernel=None,
         fragments=("no .add on uint8", "no reduction takes uint8"), id="add-u8"),
    spec("reduce-op-for-type", True, tensor={"dtype": "float16", "box": [8, 16], "reduce": "xor"}, kernel=None,
         fragments=("no .xor on float16", "use one of add, min, max on float16"), id="xor-f16"),
    spec("reduce-op-for-type", True, tensor={"dtype": "int32", "reduce": "inc"}, kernel=None,
         fragments=("no .inc on int32",), id="inc-s32"),
    spec("reduce-op-for-type", True, tensor={"dtype": "float32_ftz", "reduce": "add"}, kernel=None, id="add-ftz"),
    spec("reduce-op-for-type", False, tensor={"reduce": "add"}, kernel=None, id="add-f32"),
    spec("reduce-op-for-type", False, tensor={"dtype": "bfloat16", "box": [8, 16], "reduce": "max"}, kernel=None,
         id="max-bf16"),
    spec("reduce-op-for-type", True, tensor={"dtype": "int64", "box": [8, 4], "reduce": "xor"}, kernel=None,
         fragments=("tensors[0].reduce = 'xor'", ".xor on int64 elements faults on the GPU (illegal instruction)",
                    "table allows .xor on .b64", "split the 64-bit values into two uint32 halves",
                    "measured on an NVIDIA H200"), field_name="tensors[0].reduce", id="xor-s64"),
    spec("reduce-op-for-type", False, tensor={"dtype": "uint64", "box": [8, 4], "reduce": "xor"}, kernel=None,
         id="xor-u64"),
    spec("reduce-op-for-type", False, tensor={"dtype": "int64", "box": [8, 4], "reduce": "min"}, kernel=None,
         id="min-s64"),
    spec("reduce-op-for-type", False, tensor={"dtype": "uint32", "reduce": "dec"}, kernel=None, id="dec-u32"),
    # --- reduce-in-kernel (spec only): tmagen's storing kernels store plainly; inspect only loads
    spec("reduce-in-kernel", True, tensor={"reduce": "add"}, kernel={"kind": "copy"},
         fragments=("tensors[0].reduce = 'add'", "the copy kernel writes with plain TMA stores", "drop kernel"),
         field_name="tensors[0].reduce", id="copy"),
    spec("reduce-in-kernel", False, tensor={"reduce": "add"}, id="inspect"),
    spec("reduce-in-kernel", False, tensor={"reduce": "add"}, kernel=None, id="maps-only"),
    # --- l2-hint-in-kernel (spec only): the matmul does not pass hints yet
    spec("l2-hint-in-kernel", True, tensor={"name": "a", "dtype": "bfloat16", "shape": [1000, 520], "box": [128, 64],
                                            "swizzle": {"mode": "128B"}, "l2_hint": "evict_last"},
         tensors_extra=[{"name": "b", "dtype": "bfloat16", "shape": [1000, 520], "box": [256, 64],
                         "swizzle": {"mode": "128B"}},
                        {"name": "c", "dtype": "bfloat16", "shape": [1000, 1000], "box": [64, 64],
                         "swizzle": {"mode": "128B"}}],
         kernel={"kind": "matmul", "tile": [128, 256, 64], "consumers": 2, "stages": 4},
         fragments=("tensors[0].l2_hint = 'evict_last'", "the matmul kernel issues its copies without a cache policy",
                    'use "normal"'), field_name="tensors[0].l2_hint", id="matmul"),
    spec("l2-hint-in-kernel", False, tensor={"l2_hint": "evict_first"}, kernel={"kind": "copy"}, id="copy"),
    spec("l2-hint-in-kernel", False, tensor={"l2_hint": "evict_last"}, id="inspect"),
    spec("l2-hint-in-kernel", False, tensor={"l2_hint": "evict_last"}, kernel=None, id="maps-only"),
]


def _run(case: Case) -> list[Violation]:
    if case.via == "driver":
        found = diagnose_encode_tiled(**case.args)
        assert [v.severity for v in found.errors] == ["error"] * len(found.errors)
        assert [v.severity for v in found.warnings] == ["warning"] * len(found.warnings)
        assert check_encode_tiled(**case.args) == found.errors
        return found.errors + found.warnings
    return check(build_spec(case.args))


@pytest.mark.parametrize("case", CASES, ids=[f"{c.rule}:{'bad' if c.breaks else 'ok'}:{c.id}" for c in CASES])
def test_rule_case(case: Case) -> None:
    found = _run(case)
    assert {v.rule for v in found} == case.expect, [v.message for v in found]
    if not case.breaks:
        assert case.rule not in {v.rule for v in found}
        return
    mine = [v for v in found if v.rule == case.rule]
    assert len(mine) == 1, [v.message for v in mine]
    v = mine[0]
    if case.via == "driver":
        assert v.severity == RULES[case.rule].encode_severity
    else:
        assert v.severity == "error"  # a spec's map is for a kernel: every rule stops it
    for fragment in case.fragments:
        assert fragment in v.message, f"{fragment!r} not in {v.message!r}"
    if case.field_name is not None:
        assert v.field == case.field_name
        assert v.message.startswith(f"{case.field_name} = ")
    assert v.source == RULES[case.rule].source
    assert f"[{case.rule}; {RULES[case.rule].source}]" in v.message


def test_every_rule_has_a_breaking_and_a_passing_case() -> None:
    breaking = {c.rule for c in CASES if c.breaks}
    passing = {c.rule for c in CASES if not c.breaks}
    assert set(RULES) - breaking == set(), "rules without a breaking case"
    assert set(RULES) - passing == set(), "rules without a passing case"
    assert {c.rule for c in CASES} <= set(RULES), "cases for rules that do not exist"


def test_spec_only_rules_are_not_encode_rules() -> None:
    from tmagen.rules import ENCODE_RULES

    spec_only = {"atomicity-needs-128B", "kernel-fits-shared-memory", "smem-offset-alignment", "smem-offset-in-pattern",
                 "flip-8b-load-only", "start-coordinate-16-bytes", "interleave-unmeasured",
                 "kernel-threads-per-block", "reduce-op-for-type", "reduce-in-kernel", "l2-hint-in-kernel"} \
        | {r for r in RULES if r.startswith("mma-")}
    # encode rules that only a store through the map breaks: a spec or a Python call on arrays knows
    # that, check_encode_tiled (the driver's arguments alone) does not, so their cases are specs
    stores_only = {"store-inner-extent-16-bytes"}
    assert {r.id for r in ENCODE_RULES} == set(RULES) - spec_only
    for c in CASES:
        assert (c.via == "spec") == (c.rule in spec_only | stores_only), c


def test_only_box_bytes_driver_limit_is_undocumented() -> None:
    assert {r.id for r in RULES.values() if not r.documented} == {"box-bytes-driver-limit"}


# ----------------------------------------------------------------------------- argument forms
@pytest.mark.parametrize("dtype", [7, "FLOAT32", "float32", "CU_TENSOR_MAP_DATA_TYPE_FLOAT32", " FLOAT32 "])
@pytest.mark.parametrize("swizzle", [3, "128B", "CU_TENSOR_MAP_SWIZZLE_128B", "cu_tensor_map_swizzle_128b",
                                     Swizzle.B128])
def test_enums_as_ints_or_names(dtype, swizzle) -> None:
    assert check_encode_tiled(**{**DRV, "dtype": dtype, "swizzle": swizzle}) == []
    # The same spellings still see the rules: a 64-float row is too wide for 128B.
    found = check_encode_tiled(**{**DRV, "dtype": dtype, "swizzle": swizzle, "box_dim": [64, 8]})
    assert [v.rule for v in found] == ["box-inner-within-swizzle-span"]


MALFORMED = [
    pytest.param(dict(dtype=99), "tensorDataType", "99", id="dtype-99"),
    pytest.param(dict(dtype=-1), "tensorDataType", "-1", id="dtype-negative"),
    pytest.param(dict(dtype="FLOAT8"), "tensorDataType", "'FLOAT8'", id="dtype-unknown-name"),
    pytest.param(dict(dtype=7.0), "tensorDataType", "7.0", id="dtype-float"),
    pytest.param(dict(dtype=None), "tensorDataType", "None", id="dtype-none"),
    pytest.param(dict(swizzle="96B"), "swizzle", "'96B'", id="swizzle-96B"),
    pytest.param(dict(swizzle=7), "swizzle", "7", id="swizzle-7"),
    pytest.param(dict(swizzle=True), "swizzle", "True", id="swizzle-bool"),
    pytest.param(dict(interleave="64B"), "interleave", "'64B'", id="interleave-64B"),
    pytest.param(dict(l2_promotion=9), "l2Promotion", "9", id="l2-9"),
    pytest.param(dict(oob_fill="x"), "oobFill", "'x'", id="oob-x"),
    pytest.param(dict(arch="sm_80"), "arch", "'sm_80'", id="arch-sm_80"),
    pytest.param(dict(rank="2"), "tensorRank", "'2'", id="rank-str"),
    pytest.param(dict(rank=2.0), "tensorRank", "2.0", id="rank-float"),
    pytest.param(dict(rank=True), "tensorRank", "True", id="rank-bool"),
    pytest.param(dict(global_address=-16), "globalAddress", "-16", id="address-negative"),
    pytest.param(dict(global_address="0x10"), "globalAddress", "'0x10'", id="address-str"),
    pytest.param(dict(global_dim=[64]), "globalDim", "1 entries and tensorRank = 2 needs 2", id="globalDim-short"),
    pytest.param(dict(global_strides=[]), "globalStrides", "0 entries and tensorRank = 2 needs 1",
                 id="globalStrides-short"),
    pytest.param(dict(global_strides=[256, 256]), "globalStrides", "2 entries and tensorRank = 2 needs 1",
                 id="globalStrides-long"),
    pytest.param(dict(box_dim=[32, 8, 1]), "boxDim", "3 entries and tensorRank = 2 needs 2", id="boxDim-long"),
    pytest.param(dict(element_strides=[1]), "elementStrides", "1 entries", id="elementStrides-short"),
    pytest.param(dict(global_dim=[64.0, 64]), "globalDim", "[64.0, 64]", id="globalDim-float-entry"),
    pytest.param(dict(box_dim=["32", 8]), "boxDim", "['32', 8]", id="boxDim-str-entry"),
    pytest.param(dict(box_dim=[True, 8]), "boxDim", "[True, 8]", id="boxDim-bool-entry"),
    pytest.param(dict(element_strides=None), "elementStrides", "None", id="elementStrides-none"),
    pytest.param(dict(global_dim="64,64"), "globalDim", "'64,64'", id="globalDim-str"),
]


@pytest.mark.parametrize("over, fld, shown", MALFORMED)
def test_malformed_calls_are_argument_form_violations(over, fld, shown) -> None:
    found = check_encode_tiled(**{**DRV, **over})  # must not raise
    assert found, "a malformed call must not pass"
    assert {v.rule for v in found} == {"argument-form"}, [v.message for v in found]
    assert [v.field for v in found] == [fld]
    assert shown in found[0].message
    assert found[0].message.startswith(f"{fld} = ")


def test_several_malformed_arguments_are_all_reported() -> None:
    found = check_encode_tiled(**{**DRV, "dtype": 99, "swizzle": "96B", "box_dim": [32]})
    assert [(v.rule, v.field) for v in found] == [
        ("argument-form", "tensorDataType"), ("argument-form", "swizzle"), ("argument-form", "boxDim")]


def test_malformed_call_with_out_of_range_rank_also_reports_rank_range() -> None:
    found = check_encode_tiled(**{**DRV, "rank": 7, "swizzle": "96B"})
    assert [v.rule for v in found] == ["argument-form", "rank-range"]
    assert "tensorRank = 7" in found[1].message


def test_rank_zero_with_empty_lists_does_not_raise() -> None:
    found = check_encode_tiled(**{**DRV, "rank": 0, "global_dim": [], "global_strides": [], "box_dim": [],
                                  "element_strides": []})
    assert "rank-range" in {v.rule for v in found}


def test_unhashable_arch_does_not_raise() -> None:
    found = check_encode_tiled(**{**DRV, "arch": ["sm_90a"]})
    assert [v.rule for v in found] == ["argument-form"]


def test_bool_dtype_is_argument_form() -> None:
    found = check_encode_tiled(**{**DRV, "dtype": True})
    assert [v.rule for v in found] == ["argument-form"]
