"""Runs tmagen's Triton peers in Triton's interpreter on small CPU tensors (TRITON_INTERPRET=1, set
by tests/test_triton_peers.py before this process imports Triton) and exits 1 on the first output
that differs from PyTorch's. It catches indexing, masking, grid and descriptor mistakes; what
only the GPU shows (speed, the lowering) is for tests/gpu/test_peers.py.

Each autotuned kernel is given one configuration at a time: with a single configuration the
autotuner runs it without timing anything, through the same wrapper a benchmark calls.
"""

from __future__ import annotations

import os
import sys

assert os.environ.get("TRITON_INTERPRET") == "1", "run through tests/test_triton_peers.py"

import torch  # noqa: E402
import triton  # noqa: E402
from triton.runtime import interpreter  # noqa: E402

from tmagen import triton_peers as tp  # noqa: E402

# Triton 3.6's interpreter turns loop bounds into Python ints with int() on one-element arrays,
# which NumPy 2.4 refuses; the same value, taken as the array's only element.
_patch_tensor = interpreter._patch_lang_tensor


def _patch(tensor: object, scope: object) -> None:
    _patch_tensor(tensor, scope)
    scope.set_attr(tensor, "__index__", lambda self: int(self.handle.data.reshape(-1)[0]))  # type: ignore[attr-defined]


interpreter._patch_lang_tensor = _patch

failures: list[str] = []


def expect(ok: bool, what: str) -> None:
    print(("ok      " if ok else "WRONG   ") + what, flush=True)
    if not ok:
        failures.append(what)


def only(kernel: triton.runtime.Autotuner, config: triton.Config) -> None:
    kernel.configs = [config]
    kernel.cache.clear()


def values(shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
    if dtype.is_floating_point:
        return torch.randn(shape).to(dtype)
    return torch.randint(0, 250, shape).to(dtype)


torch.manual_seed(0)
TRANSPOSES = [((40, 72), torch.float32), ((3, 48, 80), torch.bfloat16), ((2, 64, 48), torch.uint8),
              ((96, 34), torch.float64), ((16, 16), torch.float16)]
for bm, bn, warps in ((32, 64, 4), (64, 32, 8)):
    only(tp.transpose_kernel, triton.Config({"BLOCK_M": bm, "BLOCK_N": bn}, num_warps=warps))
    only(tp.transpose_tma_kernel, triton.Config({"BLOCK_M": bm, "BLOCK_N": bn}, num_warps=warps,
                                                pre_hook=tp._transpose_blocks))
    for shape, dtype in TRANSPOSES:
        x = values(shape, dtype)
        ref = x.transpose(-2, -1).contiguous()
        for name, fn in (("tl.trans", tp.transpose), ("TMA", tp.transpose_tma)):
            if name == "TMA" and (shape[-1] * x.element_size() % 16 or shape[-2] * x.element_size() % 16):
                continue  # TMA needs 16-byte rows (the benchmark's shapes have them)
            out = torch.full_like(ref, 7)
            fn(x, out)
            expect(torch.equal(out, ref), f"transpose {name} {shape} {dtype} tiles {bm}x{bn}")

for block in (256, 1024):
    only(tp.copy_kernel, triton.Config({"BLOCK": block}, num_warps=4))
    for shape, dtype in (((1000,), torch.float32), ((3, 5, 7, 11), torch.uint8), ((2, 513), torch.bfloat16)):
        x = values(shape, dtype)
        out = torch.zeros_like(x)
        tp.copy(x, out)
        expect(torch.equal(out, x), f"copy {shape} {dtype} block {block}")

# The matmul in float16: the interpreter computes bfloat16 through NumPy, which has no bfloat16,
# and gets it wrong. Shapes with partial tiles on every side, more tiles than programs
# (persistent), and groups of rows that do not divide the tile rows.
for (m, n, k), (bm, bn, bk, group, sms) in (((200, 136, 104), (64, 64, 32, 2, 3)),
                                            ((128, 256, 192), (64, 128, 64, 8, 5)),
                                            ((64, 64, 64), (64, 64, 64, 1, 4))):
    only(tp.matmul_kernel, triton.Config({"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "GROUP_M": group},
                                         pre_hook=tp._matmul_blocks))
    a, b = torch.randn(m, k).to(torch.float16), torch.randn(n, k).to(torch.float16)
    c = torch.full((m, n), float("nan"), dtype=torch.float16)
    tp.matmul(a, b, c, num_sms=sms)
    ref = a.double() @ b.double().T
    err = (c.double() - ref).abs().max().item()
    expect(err <= 2.0 ** -7 * ref.abs().max().item(), f"matmul {m}x{n}x{k} tiles {bm}x{bn}x{bk} on {sms} programs: "
                                                       f"max error {err:.3g}")

sys.exit(1 if failures else 0)
