"""Hardware probe: what the driver accepts and where TMA puts each byte.

Run on a GPU machine:  python3 scripts/probe/probe_hw.py OUTDIR
Writes OUTDIR/encode.jsonl.gz (random cuTensorMapEncodeTiled argument sets and the
driver's answer), OUTDIR/inspect.npz (raw shared memory after one TMA load per
configuration) and OUTDIR/probe.txt (a summary). The analysis runs elsewhere, on a CPU.
"""

from __future__ import annotations

import ctypes
import gzip
import itertools
import json
import os
import subprocess
import sys
import time

import numpy as np
from cuda.bindings import driver as cu

HERE = os.path.dirname(os.path.abspath(__file__))
ESIZE = {0: 1, 1: 2, 2: 4, 3: 4, 4: 8, 5: 8, 6: 2, 7: 4, 8: 8, 9: 2, 10: 4, 11: 4, 12: 4}
SPAN = {0: 0, 1: 32, 2: 64, 3: 128, 4: 128, 5: 128, 6: 128}


def _load_encoder():
    enc = ctypes.CDLL("libcuda.so.1").cuTensorMapEncodeTiled
    enc.restype = ctypes.c_int
    enc.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_uint32, ctypes.c_void_p,
                 ctypes.POINTER(ctypes.c_uint64), ctypes.POINTER(ctypes.c_uint64),
                 ctypes.POINTER(ctypes.c_uint32), ctypes.POINTER(ctypes.c_uint32),
                    ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_int]
    return enc


_enc = None
_store = (ctypes.c_uint8 * 1024)()
_store_addr = ctypes.addressof(_store)


def encode(a: dict, misalign: int = 0) -> tuple[int, bytes]:
    """Encode through libcuda directly into 128-byte-aligned storage (+ misalign)."""
    rank = a["rank"]
    dst = ((_store_addr + 127) & ~127) + misalign
    ctypes.memset(dst, 0, 128)
    dims = (ctypes.c_uint64 * 5)(*a["dim"])
    strides = (ctypes.c_uint64 * 5)(*(a["stride"] or [0]))
    box = (ctypes.c_uint32 * 5)(*a["box"])
    es = (ctypes.c_uint32 * 5)(*a["estride"])
    r = _enc(dst, a["dtype"], rank, a["addr"], dims, strides, box, es,
             a["interleave"], a["swizzle"], a["l2"], a["oob"])
    return r, ctypes.string_at(dst, 128)


# ----------------------------------------------------------------------------- encode fuzz
def rand_dims(rng, rank):
    dims = []
    for _ in range(rank):
        k = rng.random()
        if k < 0.6:
            dims.append(int(rng.integers(1, 300)))
        elif k < 0.9:
            dims.append(int(rng.integers(1, 70000)))
        elif k < 0.97:
            dims.append(int(rng.integers(1, 2**32 + 1)))
        else:
            dims.append(int(rng.choice([1, 2**32, 2**32 + 1, 0])))
    return dims


def sample(rng, base_addr):
    rank = int(rng.integers(1, 6))
    dtype = int(rng.integers(0, 13)) if rng.random() < 0.96 else int(rng.integers(13, 16))
    es = ESIZE.get(dtype, 1)
    interleave = 0
    if rank >= 3 and rng.random() < 0.35:
        interleave = int(rng.integers(1, 3))
    elif rng.random() < 0.02:
        interleave = int(rng.integers(1, 3))
    swizzle = int(rng.integers(0, 4)) if rng.random() < 0.95 else int(rng.integers(4, 7))
    dims = rand_dims(rng, rank)
    # strides: usually packed-ish and 16-aligned, sometimes arbitrary
    strides = []
    run = dims[0] * es
    for i in range(1, rank):
        k = rng.random()
        if k < 0.55:
            s = -(-run // 16) * 16 + 16 * int(rng.integers(0, 3))
        elif k < 0.8:
            s = 16 * int(rng.integers(1, 2**12))
        elif k < 0.9:
            s = 32 * int(rng.integers(1, 2**20))
        elif k < 0.97:
            s = 16 * int(rng.integers(1, 2**36))
        else:
            s = int(rng.integers(1, 2**41))
        strides.append(int(s))
        run = s * dims[i]
    box = []
    for i in range(rank):
        k = rng.random()
        if i == 0 and interleave == 0 and k < 0.8:
            span = SPAN[swizzle] or 256 * es
            chunks = max(1, min(span, 256 * es) // 16)
            b = (16 * int(rng.integers(1, chunks + 1))) // es if es <= 16 else 1
            b = max(b, 1)
        elif k < 0.9:
            b = int(rng.integers(1, 33))
        else:
            b = int(rng.integers(0, 300))
        box.append(int(b))
    estride = [int(rng.integers(1, 9)) if rng.random() < 0.7 else 1 for _ in range(rank)]
    if rng.random() < 0.03:
        estride[int(rng.integers(0, rank))] = int(rng.choice([0, 9]))
    k = rng.random()
    off = 0 if k < 0.8 else int(rng.choice([8, 16, 32, 48, 64, 4]))
    return {
        "dtype": dtype, "rank": rank, "addr": base_addr + off, "dim": dims,
        "stride": strides, "box": box, "estride": estride, "interleave": interleave,
        "swizzle": swizzle, "l2": int(rng.integers(0, 4)), "oob": int(rng.integers(0, 2)),
    }


def run_encode_fuzz(out, base_addr, n, seed):
    rng = np.random.default_rng(seed)
    t0 = time.time()
    counts = {}
    with gzip.open(os.path.join(out, "encode.jsonl.gz"), "wt") as f:
        for _ in range(n):
            a = sample(rng, base_addr)
            r, _ = encode(a)
            a["result"] = r
            counts[r] = counts.get(r, 0) + 1
            f.write(json.dumps(a) + "\n")
    return counts, time.time() - t0


# ----------------------------------------------------------------------------- inspect
POISON = 0xDEADBEEF
DUMP_BYTES = 16384


def inspect_configs(rng):
    cfgs = []
    widths = {0: [16, 32, 48, 64, 80, 96, 112, 128, 256], 1: [16, 32], 2: [16, 32, 48, 64],
              3: [16, 32, 48, 64, 80, 96, 112, 128]}
    for swz, es, rank3, off in itertools.product(range(4), (1, 2, 4, 8), (False, True), range(0, 1024, 128)):
        for w in widths[swz]:
            if w // es > 256:
                continue
            if rank3:
                outer = [int(rng.integers(2, 4)), int(rng.integers(3, 8))]
            else:
                outer = [int(rng.integers(1, 21))]
            cfgs.append({"swizzle": swz, "esize": es, "inner_bytes": w, "offset": off, "outer": outer})
    return cfgs


def run_inspect(out, mod_fn, stream, rng):
    cfgs = inspect_configs(rng)
    dt = {1: 0, 2: 1, 4: 2, 8: 4}
    # global buffer of uint32 word ids (1-based), big enough for any config
    g_words = 1 << 22
    host = np.arange(1, g_words + 1, dtype=np.uint32)
    err, dglob = cu.cuMemAlloc(host.nbytes)
    assert err == 0
    assert cu.cuMemcpyHtoD(dglob, host.ctypes.data, host.nbytes)[0] == 0
    err, dout = cu.cuMemAlloc(DUMP_BYTES + 1024)
    assert err == 0
    dumps, meta = [], []
    for c in cfgs:
        es, w = c["esize"], c["inner_bytes"]
        box0 = w // es
        rank = 1 + len(c["outer"])
        # global tensor: inner extent box0*3 elements, rows padded to 16 bytes + 32 extra
        g0 = box0 * 3 + int(rng.integers(0, 5)) * (16 // es if es < 16 else 1)
        row_bytes = -(-(g0 * es) // 16) * 16 + 32
        outer_dims = [b * 3 for b in c["outer"]]
        dims = [g0] + outer_dims[::-1]  # innermost first
        strides = [row_bytes]
        for d in outer_dims[::-1][:-1]:
            strides.append(strides[-1] * d)
        box = [box0] + c["outer"][::-1]
        c0 = (16 // es) * int(rng.integers(0, 3)) if es <= 16 else 0
        coords = [c0] + [int(rng.integers(0, 2 * b + 1)) for b in c["outer"][::-1]]
        a = {"dtype": dt[es], "rank": rank, "addr": int(dglob), "dim": dims, "stride": strides,
             "box": box, "estride": [1] * rank, "interleave": 0, "swizzle": c["swizzle"], "l2": 0, "oob": 0}
        r, mapbytes = encode(a)
        rec = dict(c, dims=dims, strides=strides, box=box, coords=coords, encode=r)
        if r != 0:
            meta.append(rec)
            dumps.append(np.zeros(DUMP_BYTES // 4, np.uint32))
            continue
        tx = int(np.prod(box)) * es
        mapbuf = (ctypes.c_uint8 * 128).from_buffer_copy(mapbytes)
        cc = coords + [0] * (5 - len(coords))
        vals = [mapbuf, ctypes.c_int32(rank)] + [ctypes.c_int32(x) for x in cc] + [
            ctypes.c_uint32(c["offset"]), ctypes.c_uint32(DUMP_BYTES // 4), ctypes.c_uint32(tx),
            ctypes.c_uint32(POISON), ctypes.c_uint64(int(dout))]
        params = (ctypes.c_void_p * len(vals))(*[ctypes.addressof(v) for v in vals])
        r = cu.cuLaunchKernel(mod_fn, 1, 1, 1, 256, 1, 1, DUMP_BYTES + 2048, stream, ctypes.addressof(params), 0)[0]
        r2 = cu.cuStreamSynchronize(stream)[0]
        rec["launch"] = int(r)
        rec["sync"] = int(r2)
        buf = np.empty(DUMP_BYTES // 4, np.uint32)
        if r2 == 0:
            cu.cuMemcpyDtoH(buf.ctypes.data, dout, DUMP_BYTES)
        else:
            meta.append(rec)
            dumps.append(np.zeros_like(buf))
            break
        meta.append(rec)
        dumps.append(buf)
    np.savez_compressed(os.path.join(out, "inspect.npz"), dumps=np.stack(dumps))
    with open(os.path.join(out, "inspect_meta.json"), "w") as f:
        json.dump(meta, f)
    return len(cfgs), sum(1 for m in meta if m.get("sync") == 0)


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    log = open(os.path.join(out, "probe.txt"), "w")

    def say(*a):
        s = " ".join(str(x) for x in a)
        print(s, flush=True)
        log.write(s + "\n")
        log.flush()

    global _enc
    _enc = _load_encoder()
    assert cu.cuInit(0)[0] == 0
    err, dev = cu.cuDeviceGet(0)
    err, name = cu.cuDeviceGetName(128, dev)
    err, drv = cu.cuDriverGetVersion()
    say("device", name.split(b"\0")[0].decode(), "driver", drv)
    err, ctx = cu.cuDevicePrimaryCtxRetain(dev)
    assert err == 0
    assert cu.cuCtxSetCurrent(ctx)[0] == 0
    err, base = cu.cuMemAlloc(1 << 20)
    assert err == 0
    say("base addr mod 4096:", int(base) % 4096)

    # cuda-bindings' own CUtensorMap storage alignment, and misaligned storage
    m = cu.CUtensorMap()
    say("cuda-bindings CUtensorMap ptr mod 128:", m.getPtr() % 128)
    a = {"dtype": 7, "rank": 2, "addr": int(base), "dim": [64, 64], "stride": [256], "box": [32, 8],
         "estride": [1, 1], "interleave": 0, "swizzle": 3, "l2": 0, "oob": 0}
    ref = encode(a)
    for mis in (0, 16, 32, 48, 64, 96):
        r, b = encode(a, mis)
        say(f"encode into storage at 128k+{mis}: result {r}, bytes equal to aligned: {b == ref[1]}")
    try:
        u64, u32 = cu.cuuint64_t, cu.cuuint32_t
        res = cu.cuTensorMapEncodeTiled(cu.CUtensorMapDataType(7), u32(2), int(base), [u64(64), u64(64)],
                                        [u64(256)], [u32(32), u32(8)], [u32(1), u32(1)],
                                        cu.CUtensorMapInterleave(0), cu.CUtensorMapSwizzle(3),
                                        cu.CUtensorMapL2promotion(0), cu.CUtensorMapFloatOOBfill(0))
        say("cuda-bindings encode result:", int(res[0]), "ptr mod 64:", res[1].getPtr() % 64,
            "bytes equal:", ctypes.string_at(res[1].getPtr(), 128) == ref[1])
    except Exception as e:  # noqa: BLE001 - a probe reports and goes on
        say("cuda-bindings encode failed:", repr(e))
    counts, secs = run_encode_fuzz(out, int(base), int(os.environ.get("PROBE_N", "60000")), 1234)
    say("encode fuzz:", counts, f"{secs:.1f}s")

    cubin = os.path.join(out, "inspect_probe.cubin")
    subprocess.run(["nvcc", "-gencode=arch=compute_90a,code=sm_90a", "-cubin", "-o", cubin,
                    os.path.join(HERE, "inspect_probe.cu")], check=True)
    data = open(cubin, "rb").read()
    err, mod = cu.cuModuleLoadData(data)
    assert err == 0, err
    err, fn = cu.cuModuleGetFunction(mod, b"inspect_probe")
    assert err == 0
    assert cu.cuFuncSetAttribute(fn, cu.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                 DUMP_BYTES + 2048)[0] == 0
    err, stream = cu.cuStreamCreate(0)
    t0 = time.time()
    n, ok = run_inspect(out, fn, stream, np.random.default_rng(99))
    say(f"inspect: {ok}/{n} configs ran, {time.time() - t0:.1f}s")
    os.remove(cubin)


if __name__ == "__main__":
    main()
