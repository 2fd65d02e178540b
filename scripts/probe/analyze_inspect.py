"""Fit the swizzle placement to the raw dumps of probe_hw.py (CPU only)."""
import json, sys, numpy as np
d = sys.argv[1]
dumps = np.load(f"{d}/inspect.npz")["dumps"]
meta = json.load(open(f"{d}/inspect_meta.json"))
POISON = 0xDEADBEEF

def swz(a, mode):
    bits = {0: 0, 1: 1, 2: 2, 3: 3}[mode]
    return a ^ (((a >> 7) & ((1 << bits) - 1)) << 4)

def predict(m, pitch_rule):
    es, w, off = m["esize"], m["inner_bytes"], m["offset"]
    span = {0: 0, 1: 32, 2: 64, 3: 128}[m["swizzle"]]
    box = m["box"]; coords = m["coords"]; strides = m["strides"]
    pitch = pitch_rule(w, span)
    img = np.full(dumps.shape[1], POISON, np.uint32)
    # outer box positions, innermost-first box dims[1:]
    outer = box[1:]
    rows = int(np.prod(outer)) if outer else 1
    for r in range(rows):
        idx = []; rr = r
        for b in outer:
            idx.append(rr % b); rr //= b
        gbyte = coords[0] * es
        for k, i in enumerate(idx):
            gbyte += (coords[k + 1] + i) * strides[k]
        for wb in range(0, w, 4):
            a = off + r * pitch + wb
            img[swz(a, m["swizzle"]) // 4] = (gbyte + wb) // 4 + 1
    return img

rules = {
    "packed": lambda w, span: w,
    "span_pitch": lambda w, span: max(w, span) if span else w,
}
for name, rule in rules.items():
    bad = []
    for i, m in enumerate(meta):
        if m.get("sync") != 0:
            continue
        p = predict(m, rule)
        if not np.array_equal(p, dumps[i]):
            bad.append(i)
    print(name, "mismatches", len(bad), "of", len(meta))
    by = {}
    for i in bad:
        m = meta[i]; k = (m["swizzle"], m["inner_bytes"])
        by[k] = by.get(k, 0) + 1
    print("  by (swizzle, inner_bytes):", dict(sorted(by.items())))
