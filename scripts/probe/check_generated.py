"""First GPU check of generated code: render each example spec, build it as a shared library
with nvcc, call its C API through ctypes on torch tensors, and compare with numpy.

Run on a GPU machine from the repository root:  python3 scripts/probe/check_generated.py OUTDIR
"""

from __future__ import annotations

import ctypes
import glob
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch

from tmagen.render import map_view, render
from tmagen.spec import load_checked_spec, kernel_maps
from tmagen.swizzle import smem_offsets

TORCH = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}


def build(spec_path: str, work: str) -> tuple[ctypes.CDLL, object]:
    spec = load_checked_spec(spec_path)
    folder = os.path.join(work, spec.name)
    os.makedirs(folder, exist_ok=True)
    for rel, text in render(spec, spec_path).items():
        with open(os.path.join(folder, rel), "w") as f:
            f.write(text)
    lib = os.path.join(folder, f"lib{spec.name}.so")
    subprocess.run(["nvcc", "-gencode=arch=compute_90a,code=sm_90a", "-std=c++17", "-O3", "-shared",
                    "-Xcompiler", "-fPIC", "-o", lib, os.path.join(folder, f"{spec.name}.cu")], check=True)
    return ctypes.CDLL(lib), spec


def u64(xs):
    return (ctypes.c_uint64 * len(xs))(*xs)


def i32(xs):
    return (ctypes.c_int32 * len(xs))(*xs)


def rand(shape, es):
    return torch.randint(-(2**31), 2**31 - 1, (int(np.prod(shape)) * es // 4 + 1,), dtype=torch.int32,
                         device="cuda").view(torch.uint8)[: int(np.prod(shape)) * es].view(TORCH[es]).view(*shape)


def check_inspect(lib, spec, say):
    for m in kernel_maps(spec):
        t = m.tensor
        es = t.dt.nbytes
        src = rand(t.shape, es)
        view = map_view(m)
        out = torch.full((view.footprint,), 0xA5, dtype=torch.uint8, device="cuda")
        coords = spec.kernel.coords or [0] * t.rank
        fn = getattr(lib, f"{spec.name}_inspect_{m.role}_launch")
        st = fn(ctypes.c_void_p(src.data_ptr()), u64(t.shape), None, i32(coords), ctypes.c_uint8(0x5A),
                ctypes.c_void_p(out.data_ptr()), None)
        torch.cuda.synchronize()
        assert st == 0, st
        host = src.cpu().numpy()
        sl = tuple(slice(c, c + b) for c, b in zip(coords, t.box))
        box = np.zeros(t.box, dtype=host.dtype)
        part = host[sl]
        box[tuple(slice(0, n) for n in part.shape)] = part
        expected = np.full(view.footprint, 0x5A, np.uint8)
        off = smem_offsets(t.box, es, t.swizzle.driver, 1024 * 7 + t.smem_offset)
        raw = box.reshape(-1).view(np.uint8).reshape(-1, es)
        for k in range(es):
            expected[off.reshape(-1) + k] = raw[:, k]
        got = out.cpu().numpy()
        ok = np.array_equal(got, expected)
        say(f"inspect {spec.name}/{m.role}: {'MATCH' if ok else 'MISMATCH'} ({view.footprint} bytes)")
        if not ok:
            bad = np.nonzero(got != expected)[0]
            say(f"   first bad bytes {bad[:8]} got {got[bad[:8]]} want {expected[bad[:8]]}")


def check_copy(lib, spec, say, shape=None):
    t = spec.tensors[0]
    es = t.dt.nbytes
    shape = shape or t.shape
    src = rand(shape, es)
    dst = torch.full_like(src, -7)
    fn = getattr(lib, f"{spec.name}_copy_launch")
    ev = [torch.cuda.Event(enable_timing=True) for _ in range(2)]
    st = fn(ctypes.c_void_p(src.data_ptr()), ctypes.c_void_p(dst.data_ptr()), u64(shape), None, None)
    torch.cuda.synchronize()
    assert st == 0, st
    ok = torch.equal(src, dst)
    ev[0].record()
    for _ in range(5):
        fn(ctypes.c_void_p(src.data_ptr()), ctypes.c_void_p(dst.data_ptr()), u64(shape), None, None)
    ev[1].record()
    torch.cuda.synchronize()
    ms = ev[0].elapsed_time(ev[1]) / 5
    gbs = 2 * src.numel() * es / ms / 1e6
    say(f"copy {spec.name} {list(shape)}: {'MATCH' if ok else 'MISMATCH'} {ms:.3f} ms {gbs:.0f} GB/s")


def check_transpose(lib, spec, say, shape=None):
    t = spec.tensors[0]
    es = t.dt.nbytes
    unit = spec.kernel.unit_bytes or es
    shape = list(shape or t.shape)
    src = rand(shape, es)
    per = unit // es
    rows, cols = shape[-2], shape[-1] // per
    dst = torch.full((*shape[:-2], cols, rows * per), -7, dtype=TORCH[es], device="cuda")
    fn = getattr(lib, f"{spec.name}_transpose_launch")
    st = fn(ctypes.c_void_p(src.data_ptr()), ctypes.c_void_p(dst.data_ptr()), u64(shape), None)
    torch.cuda.synchronize()
    assert st == 0, st
    h = src.cpu().numpy()
    units = h.reshape(*shape[:-1], cols, per)
    ref = np.swapaxes(units, -2, -3).reshape(*shape[:-2], cols, rows * per)
    ok = np.array_equal(dst.cpu().numpy(), ref)
    say(f"transpose {spec.name} {shape} unit {unit}: {'MATCH' if ok else 'MISMATCH'}")


def main() -> None:
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    log = open(os.path.join(out, "generated.txt"), "w")

    def say(s):
        print(s, flush=True)
        log.write(s + "\n")

    work = tempfile.mkdtemp()
    for path in sorted(glob.glob("specs/*.json")):
        lib, spec = build(path, work)
        lib_err = getattr(lib, f"{spec.name}_last_error")
        lib_err.restype = ctypes.c_char_p
        try:
            if spec.kernel.kind == "inspect":
                check_inspect(lib, spec, say)
            elif spec.kernel.kind == "copy":
                check_copy(lib, spec, say)
                check_copy(lib, spec, say, shape=[3, 999, 1001 - 1001 % 4])
                check_copy(lib, spec, say, shape=[64, 2048, 2048])
            else:
                check_transpose(lib, spec, say)
        except AssertionError as e:
            say(f"FAILED {spec.name}: {e} {lib_err()}")


if __name__ == "__main__":
    main()
