"""What TMA does to float32 bits through the TFLOAT32, TFLOAT32_FTZ and FLOAT32_FTZ types: loads one
box of chosen bit patterns with an inspect kernel and compares with candidate models (round to
nearest even, to nearest away, toward zero at 10 mantissa bits; denormals flushed or kept).

    python3 scripts/probe/tf32_probe.py OUTDIR
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

from tmagen import runtime, toolchain
from tmagen.plan import resolve
from tmagen.render import render
from tmagen.spec import parse_spec


def models(bits: np.ndarray) -> dict[str, np.ndarray]:
    low = bits & 0x1FFF
    keep = bits & ~np.uint32(0x1FFF)
    exp = (bits >> 23) & 0xFF
    special = exp == 0xFF  # inf / NaN kept as they are
    rz = keep
    half = np.uint32(0x1000)
    rne = np.where((low > half) | ((low == half) & ((bits >> 13) & 1 == 1)), keep + 0x2000, keep)
    rna = np.where(low >= half, keep + 0x2000, keep)
    out = {}
    for name, r in (("rz", rz), ("rne", rne), ("rna", rna), ("identity", bits)):
        r = np.where(special, bits, r).astype(np.uint32)
        out[name] = r
        denormal = exp == 0
        out[name + "+ftz"] = np.where(denormal, bits & 0x80000000, r).astype(np.uint32)
    return out


def main() -> None:
    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(1)
    device = runtime.Device.open()
    report = {}
    for dtype in ("tfloat32", "tfloat32_ftz", "float32_ftz", "float32"):
        spec = parse_spec({"name": f"tf_{dtype}", "tensors": [{"name": "t", "dtype": dtype, "shape": [64, 32],
                                                                "box": [64, 32], "swizzle": {"mode": "none"}}],
                           "kernel": {"kind": "inspect"}})
        result = toolchain.compile_folder(resolve(spec), render(resolve(spec), "x.json"), cubin_only=True)
        bits = rng.integers(0, 2**32, size=(64, 32), dtype=np.uint64).astype(np.uint32)
        bits[0, :16] = np.array([0x3F800FFF, 0x3F801000, 0x3F801001, 0x3F802FFF, 0x3F803000, 0x3F803001,
                                 0x00000001, 0x807FFFFF, 0x007FF000, 0x7F7FFFFF, 0x7F800000, 0x7FC00001,
                                 0xFF800000, 0x3F7FF000, 0x3F7FFFFF, 0x00800000], dtype=np.uint32)
        with runtime.Buffer.from_array(bits) as src, runtime.Buffer(64 * 32 * 4) as dst:
            dst.fill(0xA5)
            module = runtime.Module(result.cubin.read_bytes())
            import ctypes

            from tmagen.launch import array_args, encode
            m = resolve(spec).maps[0]
            view = resolve(spec).kernels[0]
            fn = module.function(view.symbol, view.smem_bytes)
            fn.launch(1, view.threads, [encode(array_args(m, src.ptr, [64, 32])), ctypes.c_int32(0), ctypes.c_int32(0),
                                        ctypes.c_uint8(0x5A), ctypes.c_uint64(dst.ptr)])
            device.synchronize()
            got = dst.download(np.uint32, (64, 32))
        verdict = {name: int(np.count_nonzero(got != model)) for name, model in models(bits).items()}
        report[dtype] = {"mismatches_by_model": verdict,
                         "first_16": [[f"{int(a):#010x}", f"{int(b):#010x}"]
                                      for a, b in zip(bits[0, :16], got[0, :16])]}
        print(dtype, verdict, flush=True)
        print("   ", report[dtype]["first_16"], flush=True)
    (out / "tf32_probe.json").write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
