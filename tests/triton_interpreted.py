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

from lab import triton_peers as tp  # noqa: E402

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

# The same on sliced views (rows of A and B K + 8 long, as the benchmark's odd-leading-dimension
# shapes), and the pointer-tile matmul: one row (M = 1), partial tiles, K not a multiple of its step.
def operand(rows: int, k: int, ld: int | None) -> torch.Tensor:
    if ld is None:
        return torch.randn(rows, k).to(torch.float16)
    base = torch.full((rows, ld), float("nan"), dtype=torch.float16)
    base[:, :k] = torch.randn(rows, k).to(torch.float16)
    return base[:, :k]


def matmul_ok(fn: object, m: int, n: int, k: int, ld: int | None, what: str) -> None:
    a, b = operand(m, k, ld), operand(n, k, ld)
    c = torch.full((m, n), float("nan"), dtype=torch.float16)
    fn(a, b, c)  # type: ignore[operator]
    ref = a.double() @ b.double().T
    err = (c.double() - ref).abs().max().item()
    expect(err <= 2.0 ** -7 * ref.abs().max().item(), f"{what} {m}x{n}x{k} ld {ld}: max error {err:.3g}")


only(tp.matmul_kernel, triton.Config({"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 32, "GROUP_M": 2},
                                     pre_hook=tp._matmul_blocks))
matmul_ok(lambda a, b, c: tp.matmul(a, b, c, num_sms=3), 72, 136, 96, 104, "matmul TMA on views")
# transposed operands (a weight gradient's x^T dy, and each alone): descriptors over x [K, M], dy [K, N]
only(tp.matmul_mn_kernel, triton.Config({"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 32, "GROUP_M": 2},
                                        pre_hook=tp._matmul_mn_blocks))
for a_t, b_t in ((True, True), (True, False), (False, True)):
    m, n, k = 136, 200, 96
    a = torch.randn(k, m).to(torch.float16).T if a_t else torch.randn(m, k).to(torch.float16)
    b = torch.randn(k, n).to(torch.float16).T if b_t else torch.randn(n, k).to(torch.float16)
    c = torch.full((m, n), float("nan"), dtype=torch.float16)
    tp.matmul_mn(a, b, c, num_sms=3)
    ref = a.double() @ b.double().T
    err = (c.double() - ref).abs().max().item()
    expect(err <= 2.0 ** -7 * ref.abs().max().item(), f"matmul TMA, A {'x.T' if a_t else '[M, K]'}, B "
                                                       f"{'dy.T' if b_t else '[N, K]'}: max error {err:.3g}")
for bm, bn, bk in ((16, 32, 64), (32, 64, 32)):
    only(tp.matmul_pointer_kernel, triton.Config({"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "GROUP_M": 8}))
    for m, n, k, ld in ((1, 72, 200, None), (33, 136, 104, None), (40, 96, 72, 80)):
        matmul_ok(tp.matmul_pointer, m, n, k, ld, f"matmul pointer tiles {bm}x{bn}x{bk}")

# The benchmark's glue around the peers (lab.peers: the candidates, their checks against
# PyTorch, the poisoned outputs), on CPU tensors. CuPy is left out: it would move them to a GPU.
sys.modules["cupy"] = None  # type: ignore[assignment] - makes `import cupy` fail
from lab import peers  # noqa: E402

only(tp.copy_kernel, triton.Config({"BLOCK": 256}, num_warps=4))
only(tp.transpose_kernel, triton.Config({"BLOCK_M": 32, "BLOCK_N": 32}, num_warps=4))
only(tp.transpose_tma_kernel, triton.Config({"BLOCK_M": 32, "BLOCK_N": 64}, num_warps=4, pre_hook=tp._transpose_blocks))
x = values((2, 48, 80), torch.float32)
out = torch.empty(2, 80, 48)
ref = x.transpose(-2, -1).contiguous()
transposes = peers.transpose_peers(x, out, lambda: ref)
expect([c.name for c in transposes] == ["torch .transpose(-2,-1).contiguous()",
                                        "Triton tl.trans, pointer tiles (autotuned)",
                                        "Triton tl.trans, TMA descriptors (autotuned)"], "the transpose peers")
for c in transposes:
    expect(c.check() is None, f"{c.name}: passes its check")
    if c.name.startswith("Triton"):  # the timed launch writes the same output
        peers.poison(out)
        c.launch(0)
        expect(torch.equal(out, ref), f"{c.name}: its timed launch writes the transpose")
wrong = ref.clone()
wrong[1, 2, 3] += 1
for c in peers.transpose_peers(x, out, lambda: wrong):
    problem = c.check()
    expect(problem is not None and problem.endswith("output differs from PyTorch's"), f"{c.name}: fails a wrong check")
copies = peers.copy_peers(x, out.view(x.shape))
expect([c.name for c in copies] == ["torch clone()", "Triton copy (autotuned)"], "the copy peers")
for c in copies:
    expect(c.check() is None, f"{c.name}: passes its check")
    expect("num_warps=4" in c.note() or c.name.startswith("torch"), f"{c.name}: reports its configuration")

# The ops section's Triton peers (lab.ops_bench, issue 19): the row permute and the strided gather
# themselves, then every layout ops_bench gives a case, through the launcher it times, on small
# CPU tensors of the case's structure (views, bool as uint8, complex128 as pairs of float64).
from lab import ops_bench  # noqa: E402

for block_s, warps in ((4, 4), (16, 8)):
    only(tp.permute_rows_kernel, triton.Config({"BLOCK_S": block_s}, num_warps=warps))
    for shape, dtype in (((2, 5, 3, 7), torch.bfloat16), ((1, 33, 4, 2), torch.float64), ((3, 6, 5, 16), torch.uint8)):
        x = values(shape, dtype)
        out = torch.zeros(shape[0], shape[2], shape[1], shape[3], dtype=dtype)
        tp.permute_rows(x, out)
        expect(torch.equal(out, x.permute(0, 2, 1, 3).contiguous()), f"permute_rows {shape} {dtype} rows {block_s}")
only(tp.permute_kernel, triton.Config({"BLOCK": 256}, num_warps=4))
base = values((6, 9), torch.float32)
for name, view in (("x.mT", base.mT), ("x[:, 1:]", base[:, 1:]), ("x[1:, ::2]", base[1:, ::2])):
    out = torch.zeros(view.shape)
    tp.gather(view, out)
    expect(torch.equal(out, view.contiguous()), f"gather {name}")

only(tp.transpose_kernel, triton.Config({"BLOCK_M": 32, "BLOCK_N": 32}, num_warps=4))
only(tp.transpose_tma_kernel, triton.Config({"BLOCK_M": 32, "BLOCK_N": 32}, num_warps=4, pre_hook=tp._transpose_blocks))
only(tp.copy_kernel, triton.Config({"BLOCK": 256}, num_warps=4))
only(tp.permute_rows_kernel, triton.Config({"BLOCK_S": 16}, num_warps=4))


def small_of(case: ops_bench.OpsCase) -> ops_bench.OpsCase:
    """The case on small extents of its structure, rows whole 16 bytes where TMA needs them."""
    import dataclasses

    shape = [48 if i >= len(case.shape) - 2 else 3 for i in range(len(case.shape))]
    if case.view == "[:, 1:]":
        shape[1] += 1
    return dataclasses.replace(case, shape=tuple(shape))


def cpu_values(case: ops_bench.OpsCase) -> torch.Tensor:
    dtype = getattr(torch, case.dtype)
    if dtype == torch.bool:
        return torch.randint(0, 2, case.shape).bool()
    if dtype.is_complex:
        return torch.randn(case.shape, dtype=dtype)
    return values(case.shape, dtype)


for case in ops_bench.ops_cases():
    small = small_of(case)
    x = cpu_values(small)
    want = ops_bench.torch_op(small, ops_bench.view_of(x, small.view))
    for layout in ops_bench.triton_layouts(small):
        out = torch.zeros(small.source[0], dtype=x.dtype)
        ops_bench._triton_launch(tp, layout, x, out)()
        expect(torch.equal(out, want), f"ops_bench {small.describe()} {small.shape} {small.dtype}: {layout.kernel}")

sys.exit(1 if failures else 0)
