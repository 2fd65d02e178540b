"""Times ``tmagen.ops.quantize_fp8`` beside PyTorch eager doing the same arithmetic and a device copy
of the same bytes (issue 21, part 4). Not the product: a lab tool. On the GPU machine:

    python -m lab.quant_bench                  # the default shapes, JSON on stdout
    python -m lab.quant_bench 8192x8192 4096x14336 --block 128x128 --transpose

Candidates, per shape, on bfloat16 x:

* tmagen: ``quantize_fp8(x, block=..., transpose=..., out=...)`` (one fused kernel; two for a computed
  per-tensor scale);
* torch eager: the documented arithmetic in PyTorch (``reference`` of tests/gpu/test_ops_quantize.py, the
  blocks' amax by a padded view, a division, a clamp and a cast), as a user without the op writes it;
* memcpy: ``cuMemcpyDtoDAsync``-class copy (``torch.Tensor.copy_``) of as many bytes as the op reads and
  writes together, halved (a copy reads and writes each byte): the bandwidth bound.

Each case goes through `tmagen.bench.time_case` (interleaved rounds behind a sleep kernel), and its
GB/s count x read once and q written once (scales are under 1%).
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from tmagen.bench import Candidate, Method, time_case

SHAPES = ((4096, 4096), (8192, 8192), (16384, 4096), (4096, 14336), (1000, 4104))


def torch_reference(x: Any, fp8: Any, block: tuple[int, int] | None, transpose: bool) -> tuple[Any, Any, Any]:
    """quantize_fp8's documented arithmetic in PyTorch eager."""
    import torch

    top = torch.finfo(fp8).max
    xq = (x.t() if transpose else x).float()
    rows, cols = xq.shape
    amax = xq.abs().amax()
    if block is None:
        s = torch.where(amax == 0, torch.ones_like(amax), amax / torch.full_like(amax, top))
        per = s
    else:
        br, bc = block
        nr, nc = -(-rows // br), -(-cols // bc)
        padded = torch.nn.functional.pad(xq.abs(), (0, nc * bc - cols, 0, nr * br - rows))
        m = padded.view(nr, br, nc, bc).amax(dim=(1, 3))
        s = torch.where(m == 0, torch.ones_like(m), m / torch.full_like(m, top))
        per = s.repeat_interleave(br, 0).repeat_interleave(bc, 1)[:rows, :cols]
    q = (xq / per).clamp(-top, top).to(fp8)
    return q.contiguous(), s, amax


def case(shape: tuple[int, int], block: tuple[int, int] | None, transpose: bool, method: Method) -> dict[str, Any]:
    import torch

    import tmagen.ops

    rows, cols = shape
    x = torch.randn(shape, device="cuda", dtype=torch.bfloat16)
    fp8 = torch.float8_e4m3fn
    out = tmagen.ops.quantize_fp8(x, block=block, transpose=transpose)
    moved = x.numel() * (x.element_size() + 1)
    half = torch.empty(moved // 2, dtype=torch.uint8, device="cuda")
    half_dst = torch.empty_like(half)

    def check() -> str | None:
        want = torch_reference(x, fp8, block, transpose)
        got = tmagen.ops.quantize_fp8(x, block=block, transpose=transpose)
        same = torch.equal(got[0].view(torch.uint8), want[0].view(torch.uint8)) and torch.equal(got[1], want[1])
        return None if same else "differs from the torch reference"

    candidates = [
        Candidate("tmagen.quantize_fp8", "tmagen",
                  lambda i: tmagen.ops.quantize_fp8(x, block=block, transpose=transpose, out=out), check),
        Candidate("torch eager", "peer", lambda i: torch_reference(x, fp8, block, transpose)),
        Candidate("memcpy (same bytes)", "limit", lambda i: half_dst.copy_(half)),
    ]
    record = time_case(candidates, method, shape=shape, dtype="bfloat16", bytes_moved=moved)
    record.update(block=None if block is None else list(block), transpose=transpose)
    return record


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m lab.quant_bench", description=__doc__.split("\n")[0])
    parser.add_argument("shapes", nargs="*", help="RxC, e.g. 8192x8192 (default: a set of five)")
    parser.add_argument("--block", default="1x128", help="1x128, 128x128 or tensor")
    parser.add_argument("--transpose", action="store_true")
    parser.add_argument("--rounds", type=int, default=20)
    args = parser.parse_args(argv)
    shapes = [tuple(int(v) for v in s.split("x")) for s in args.shapes] or list(SHAPES)
    block = None if args.block == "tensor" else tuple(int(v) for v in args.block.split("x"))
    method = Method(rounds=args.rounds)
    records = [case((s[0], s[1]), block, args.transpose, method) for s in shapes]  # type: ignore[arg-type]
    print(json.dumps(records, indent=1))


if __name__ == "__main__":
    main()
