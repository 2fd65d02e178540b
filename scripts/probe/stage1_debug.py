"""Why do per-block transposes with one stage go wrong? Runs each variant on small and large shapes in
its own process (a fault kills the context) and prints which dst tiles differ and how.
    python3 scripts/probe/stage1_debug.py            # all
    python3 scripts/probe/stage1_debug.py NAME SHAPE # one (for compute-sanitizer)"""

from __future__ import annotations

import subprocess
import sys

VARIANTS = {  # name: (dtype, box, stages, tiles_per_block or None, blocks_per_sm)
    "f32_s1_t2": ("float32", [64, 64], 1, 2, 2),
    "f32_s1_t1": ("float32", [64, 64], 1, 1, 2),
    "f32_s1_p": ("float32", [64, 64], 1, None, 2),
    "f32_s2_t2": ("float32", [64, 64], 2, 2, 2),
    "bf16_s1_t1": ("bfloat16", [64, 128], 1, 1, 2),
    "bf16_s1_p": ("bfloat16", [64, 128], 1, None, 2),
    "bf16_s2_t2": ("bfloat16", [64, 128], 2, 2, 2),
    "u8_s1_t1": ("uint8", [128, 128], 1, 1, 2),
}
SHAPES = [[256, 256], [8192, 8192]]


def one(name: str, shape: list[int]) -> None:
    import torch

    from lab import peers
    from tmagen import runtime, toolchain
    from tmagen.render import render
    from tmagen.spec import parse_spec

    dtype, box, stages, tpb, bps = VARIANTS[name]
    k = {"kind": "transpose", "stages": stages, "tiles_per_stage": 1, "blocks_per_sm": bps}
    if tpb:
        k["tiles_per_block"] = tpb
    s = parse_spec({"name": "d_" + name, "tensors": [{"name": "m", "dtype": dtype, "shape": [256, 256], "box": box,
                                                      "swizzle": {"mode": "none"}}], "kernel": k})
    cubin = toolchain.compile_folder(s, render(s, "x.json"), toolchain.find_toolchain(), cubin_only=True).cubin.read_bytes()
    kern = peers.TmagenKernel(s, cubin, runtime.Device.open())
    x = peers.random_tensor(shape, dtype)
    out = torch.empty(shape[::-1], dtype=x.dtype, device="cuda")
    out.view(torch.uint8).fill_(0xAB)
    cand = kern.candidate([x], [out], lambda: None)
    cand.launch(0)
    torch.cuda.synchronize()
    ref = x.transpose(0, 1).contiguous()
    ob, rb = out.view(torch.uint8).reshape(shape[1], -1), ref.view(torch.uint8).reshape(shape[1], -1)
    bad = ob != rb
    es = x.element_size()
    th, tw = box[1], box[0] * es  # a dst tile: box[1] rows of box[0] elements
    tiles = bad.reshape(shape[1] // th, th, -1, tw).any(3).any(1).nonzero().tolist()
    poison = int(((ob == 0xAB) & bad).sum())
    print(f"{name} {shape}: {int(bad.sum())} bad bytes ({poison} still poison) in {len(tiles)} of "
          f"{(shape[1] // th) * (shape[0] * es // tw)} dst tiles: {tiles[:6]}", flush=True)


def main() -> None:
    if len(sys.argv) > 2:
        one(sys.argv[1], [int(v) for v in sys.argv[2].split("x")])
        return
    for name in VARIANTS:
        for shape in SHAPES:
            r = subprocess.run([sys.executable, __file__, name, "x".join(map(str, shape))], capture_output=True,
                               text=True, timeout=60)
            print(r.stdout.strip() or f"{name} {shape}: FAILED {r.stderr.strip().splitlines()[-1][:150]}", flush=True)


if __name__ == "__main__":
    main()
