"""tmagen.ops.matmul on the GPU, against the float64 product of the same inputs:

- every variant (bfloat16 and float16 in; bfloat16, float16 and float32 out; B as [K, N] and as
  ``w.T``; each epilogue: alpha, beta * c, a bias along N and along M, all at once) over random
  shapes with M, N and K of 1, ragged and whole tiles; 0 elements outside the bound of
  `tmagen.verify.matmul_tolerance` widened by the epilogue's own terms;
- what goes through scratch (transposed A, K = 1001, N = 13, misaligned views, strided outputs),
  batches, empty products and K = 0, a non-default stream, CuPy;
- launches that follow each other in a stream (programmatic dependent launches) reading each
  other's output and overwriting each other's input;
- CUDA graph capture and replay, torch.compile (fullgraph, and reduce-overhead), autograd against
  torch's in float64, tmagen.load of a family spec with the epilogue's keywords;
- host time per call beside torch.matmul's (the issue's target: within 3 us).

    python -m pytest -q tests/gpu/test_ops_matmul.py
"""

from __future__ import annotations

import zlib
from typing import Any

import numpy as np
import pytest

import tmagen
import tmagen.ops
from tmagen import ops_matmul
from tmagen.verify import UNIT_ROUNDOFF

from conftest import per_call_us

pytestmark = pytest.mark.gpu

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("PyTorch sees no CUDA device", allow_module_level=True)

BF16, F16, F32 = torch.bfloat16, torch.float16, torch.float32
NAMES = {BF16: "bfloat16", F16: "float16", F32: "float32"}
EDGES = [1, 2, 7, 8, 13, 64, 127, 128, 129, 255, 256, 257, 1000, 1001, 2048, 4097]


@pytest.fixture()
def gen() -> Any:
    return torch.Generator(device="cuda").manual_seed(1818)


def rand(*shape: int, dtype: Any = BF16, gen: Any = None) -> Any:
    return torch.randn(*shape, device="cuda", generator=gen).to(dtype)


def outside(got: Any, a: Any, b: Any, alpha: float = 1.0, beta: float = 0.0, c: Any = None, bias: Any = None) -> int:
    """Elements of ``got`` farther from the float64 result than rounding to its type plus K + 4
    fp32 additions of the terms' magnitudes (the accumulation, then alpha, beta * c and the bias)."""
    k = a.shape[-1]
    ref = alpha * (a.double() @ b.double())
    mag = abs(alpha) * (a.double().abs() @ b.double().abs())
    if c is not None and beta != 0:
        ref, mag = ref + beta * c.double(), mag + abs(beta) * c.double().abs()
    if bias is not None:
        cast = bias.to(got.dtype).double()  # a bias of another type is cast to the output's first
        ref, mag = ref + cast, mag + cast.abs()
    bound = UNIT_ROUNDOFF[NAMES[got.dtype]] * ref.abs() + (k + 4) * 2.0 ** -23 * mag
    return int((~((got.double() - ref).abs() <= bound)).sum())


def shapes(seed: int, count: int = 4) -> list[tuple[int, int, int]]:
    """Random (M, N, K) of the edge sizes, bounded to keep the float64 reference cheap."""
    rng = np.random.default_rng(seed)
    out = []
    while len(out) < count:
        m, n, k = (int(rng.choice(EDGES)) for _ in range(3))
        if m * n * k <= 2 ** 32:
            out.append((m, n, k))
    return out


EPILOGUES: list[dict[str, Any]] = [{}, {"alpha": -0.75}, {"c": True, "beta": 0.5}, {"bias": "n"}, {"bias": "m"},
                                   {"alpha": 1.5, "c": True, "beta": -2.0, "bias": "n32"}]


def epilogue_args(epilogue: dict[str, Any], m: int, n: int, out_dtype: Any, gen: Any) -> dict[str, Any]:
    """The keywords of one of EPILOGUES for an [M, N] output of ``out_dtype``: alpha and beta, c, and
    a bias along N (of the output's dtype, or float32 for "n32") or along M."""
    kw: dict[str, Any] = {"alpha": epilogue.get("alpha", 1.0), "beta": epilogue.get("beta", 0.0)}
    if epilogue.get("c"):
        kw["c"] = rand(m, n, dtype=out_dtype, gen=gen)
    if epilogue.get("bias"):
        along = epilogue["bias"]
        kw["bias"] = rand(n, dtype=F32 if along == "n32" else out_dtype, gen=gen) if along != "m" else \
            rand(m, 1, dtype=out_dtype, gen=gen)
    return kw


@pytest.mark.parametrize("b_layout", ["kn", "w.T"])
@pytest.mark.parametrize("out_dtype", [BF16, F16, F32], ids=str)
@pytest.mark.parametrize("in_dtype", [BF16, F16], ids=str)
def test_every_variant_on_random_shapes(in_dtype: Any, out_dtype: Any, b_layout: str, gen: Any, report: Any) -> None:
    rows = []
    seed = zlib.crc32(f"{in_dtype} {out_dtype} {b_layout}".encode())  # the same shapes every run
    for i, epilogue in enumerate(EPILOGUES):
        for m, n, k in [(1, 1, 1), *shapes(seed + i)]:
            a, w = rand(m, k, dtype=in_dtype, gen=gen), rand(n, k, dtype=in_dtype, gen=gen)
            b = w.T if b_layout == "w.T" else w.T.contiguous()
            kw = epilogue_args(epilogue, m, n, out_dtype, gen)
            got = tmagen.ops.matmul(a, b, out_dtype=out_dtype, **kw)
            assert got.shape == (m, n) and got.dtype == out_dtype and got.is_contiguous()
            bad = outside(got, a, b, **kw)
            rows.append({"mnk": [m, n, k], "epilogue": sorted(epilogue), "outside": bad})
            assert bad == 0, (m, n, k, epilogue)
    report(f"ops_matmul_{NAMES[in_dtype]}_{NAMES[out_dtype]}_{b_layout}", rows)


@pytest.mark.parametrize("b_layout", ["kn", "w.T"])
@pytest.mark.parametrize("in_dtype,out_dtype", [(BF16, BF16), (F16, F32)], ids=str)
def test_a_transposed_a_on_random_shapes(in_dtype: Any, out_dtype: Any, b_layout: str, gen: Any) -> None:
    """A = x.T (a weight gradient's x.T @ dy): read in place by the MN-major A kernels where x's rows
    are whole 16 bytes (M a multiple of 8), else copied; each epilogue."""
    seed = zlib.crc32(f"x.T {in_dtype} {out_dtype} {b_layout}".encode())
    for i, epilogue in enumerate(EPILOGUES):
        for m, n, k in [(8, 8, 8), (4096, 64, 4096), *shapes(seed + i)]:
            x, w = rand(k, m, dtype=in_dtype, gen=gen), rand(n, k, dtype=in_dtype, gen=gen)
            b = w.T if b_layout == "w.T" else w.T.contiguous()
            kw = epilogue_args(epilogue, m, n, out_dtype, gen)
            got = tmagen.ops.matmul(x.T, b, out_dtype=out_dtype, **kw)
            assert got.shape == (m, n) and got.dtype == out_dtype
            assert outside(got, x.T, b, **kw) == 0, (m, n, k, epilogue)


def test_scratch_paths(gen: Any) -> None:
    """What TMA cannot address in place: each result checked, and the arrays around a strided out
    untouched."""
    w = rand(13, 1001, gen=gen)
    for a in (rand(40, 1001, gen=gen), rand(1001, 40, gen=gen).T, rand(40, 1002, gen=gen)[:, 1:]):
        for b in (w.T, w.T.contiguous(), rand(1001, 24, gen=gen)[:, 3:16]):
            got = tmagen.ops.matmul(a, b, bias=rand(b.shape[1], gen=gen) if b.shape[1] == 13 else None)
            assert got.shape == (40, b.shape[1])
    a, b = rand(48, 128, gen=gen), rand(128, 64, gen=gen)
    big = torch.full((64, 100), 7.0, dtype=BF16, device="cuda")
    window = big[:48, 16:80]  # a pitch of 200 bytes: staged and copied back
    assert tmagen.ops.matmul(a, b, out=window) is window
    assert outside(window, a, b) == 0
    assert (big[:, :16] == 7).all() and (big[:, 80:] == 7).all() and (big[48:] == 7).all()
    for m, n, k in [(1, 4096, 4096), (4096, 1, 4096), (4096, 4096, 1), (3, 5, 7)]:
        a, w = rand(m, k, gen=gen), rand(n, k, gen=gen)
        for out_dtype in (BF16, F32):
            assert outside(tmagen.ops.matmul(a, w.T, out_dtype=out_dtype), a, w.T) == 0, (m, n, k)


def test_a_staged_call_repeated_takes_each_calls_arrays(gen: Any) -> None:
    """Calls of the same layouts through scratch, the second and third through the first's decision
    (`_StagedRecipe`): each call's own product, its scratch filled from its own arrays."""
    makers = [
        lambda: (rand(40, 1001, gen=gen), rand(24, 1001, gen=gen).T, {}),  # K = 1001
        lambda: (rand(72, 41, gen=gen).T, rand(24, 72, gen=gen).T, {}),  # a transposed view of rows of 82 bytes
        lambda: (rand(40, 72, gen=gen), rand(72, 13, gen=gen), {"bias": rand(13, gen=gen)}),  # N = 13
        lambda: (rand(40, 72, gen=gen), rand(13, 72, gen=gen).T, {"c": rand(40, 13, gen=gen), "beta": 0.5,
                                                                    "alpha": 2.0}),
        lambda: (rand(40, 72, gen=gen), rand(24, 72, gen=gen).T, {"bias": rand(24, dtype=F32, gen=gen)}),
        lambda: (rand(40, 74, gen=gen)[:, 1:73], rand(24, 72, gen=gen).T, {}),  # 2 bytes off 16
    ]
    ops_matmul._RECIPES.clear()
    for make in makers:
        for _ in range(3):
            a, b, kw = make()
            assert outside(tmagen.ops.matmul(a, b, **kw), a, b, **kw) == 0
    assert sum(isinstance(r, ops_matmul._StagedRecipe) for r in ops_matmul._RECIPES.values()) == len(makers)


def test_a_batch_repeated_launches_each_matrix_of_each_call(gen: Any) -> None:
    """Batches launched a matrix at a time, repeated: with new tensors of the same layouts (the first
    call's decision, `_BatchRecipe`) and with the same tensors again (its launches made again),
    every result within the float64 bound, the same tensors overwritten in between."""
    makers = [
        lambda: (rand(4, 333, 512, gen=gen), rand(4, 512, 256, gen=gen), {}),
        lambda: (rand(3, 64, 96, gen=gen)[:, ::2], rand(3, 96, 40, gen=gen),
                 {"c": rand(32, 40, gen=gen), "beta": -1.0, "bias": rand(32, 1, gen=gen), "alpha": 0.5}),
        lambda: (rand(2, 1, 5, 64, gen=gen), rand(4, 64, 24, gen=gen), {}),
    ]
    ops_matmul._RECIPES.clear()
    for make in makers:
        for _ in range(2):
            a, b, kw = make()
            for _ in range(2):
                assert outside(tmagen.ops.matmul(a, b, **kw), a, b, **kw) == 0
                a.copy_(torch.randn(a.shape, device="cuda", generator=gen).to(a.dtype))
                b.copy_(torch.randn(b.shape, device="cuda", generator=gen).to(b.dtype))
    assert sum(isinstance(r, ops_matmul._BatchRecipe) for r in ops_matmul._RECIPES.values()) == len(makers)


def test_batches_empty_products_and_k_zero(gen: Any) -> None:
    a, w = rand(4, 100, 72, gen=gen), rand(40, 72, gen=gen)
    bias = rand(40, gen=gen)
    got = tmagen.ops.matmul(a, w.T, bias=bias)
    assert got.shape == (4, 100, 40) and outside(got, a, w.T, bias=bias) == 0
    b3, c = rand(4, 72, 24, gen=gen), rand(50, 24, gen=gen)
    got = tmagen.ops.matmul(a[:, ::2], b3, c=c, beta=1.0, bias=rand(50, 1, gen=gen))
    assert got.shape == (4, 50, 24)
    x, y = rand(2, 1, 5, 72, gen=gen), rand(3, 72, 8, gen=gen)
    assert outside(tmagen.ops.matmul(x, y), x, y) == 0
    assert tmagen.ops.matmul(rand(0, 64), rand(64, 32)).shape == (0, 32)
    assert tmagen.ops.matmul(rand(64, 64), rand(64, 0)).shape == (64, 0)
    assert torch.equal(tmagen.ops.matmul(rand(8, 0), rand(0, 16)), torch.zeros(8, 16, dtype=BF16, device="cuda"))
    c, bias = rand(8, 16, dtype=F32, gen=gen), rand(16, gen=gen)
    got = tmagen.ops.matmul(rand(8, 0), rand(0, 16), c=c, beta=3.0, bias=bias, out_dtype=F32)
    assert torch.equal(got, c * 3 + bias.float())


def test_non_default_stream(gen: Any) -> None:
    """Behind a long sleep on the current stream, a launch on any other stream would read A before
    it is written."""
    a, w = rand(512, 1024, gen=gen), rand(768, 1024, gen=gen)
    src = torch.zeros_like(a)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        torch.cuda._sleep(200_000_000)
        src.copy_(a)
        got = tmagen.ops.matmul(src, w.T)
    s.synchronize()
    assert outside(got, a, w.T) == 0


def test_cuda_graph_capture_and_replay(gen: Any) -> None:
    a, w, bias = rand(300, 520, gen=gen), rand(264, 520, gen=gen), rand(264, gen=gen)
    b13 = rand(520, 13, gen=gen)  # N = 13: scratch, allocated in the graph's pool
    tmagen.ops.matmul(a, w.T, bias=bias)  # warm-up: compiles and loads, which a capture does not allow
    tmagen.ops.matmul(a, b13, out_dtype=F32)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        y = tmagen.ops.matmul(a, w.T, bias=bias)
        z = tmagen.ops.matmul(a, b13, out_dtype=F32)
    for seed in (5, 6):
        a.copy_(rand(*a.shape, gen=torch.Generator(device="cuda").manual_seed(seed)))
        g.replay()
        torch.cuda.synchronize()
        assert outside(y, a, w.T, bias=bias) == 0 and outside(z, a, b13) == 0


@pytest.mark.parametrize("m, n", [(256, 256), (64, 4096)])  # whole tiles; split over K (counters and partials)
def test_back_to_back_launches_wait_for_each_other(m: int, n: int) -> None:
    """A matmul launch may start while the one before it in the stream finishes (a programmatic
    dependent launch): it must read what that one wrote (a chain through buffers poisoned with NaN)
    and must not overwrite what that one still reads (two buffers in turn). Permutation matrices
    keep every product exact, so the results are compared bit for bit."""
    g = torch.Generator(device="cuda").manual_seed(7)
    x = torch.randint(-8, 9, (m, n), device="cuda", generator=g).to(BF16)
    perms = [torch.randperm(n, device="cuda", generator=g) for _ in range(6)]
    eye = torch.eye(n, device="cuda", dtype=BF16)
    ws = [eye[p] for p in perms]  # row j of W is e_p[j]: column j of x W^T is column p[j] of x
    tmagen.ops.matmul(x, ws[0].T)  # compiled and loaded before the launches that follow each other
    outs = [torch.full((m, n), float("nan"), device="cuda", dtype=BF16) for _ in perms]
    torch.cuda.synchronize()
    current = x
    for w, o in zip(ws, outs):
        tmagen.ops.matmul(current, w.T, out=o)
        current = o
    ping, pong = x.clone(), torch.empty_like(x)
    for w in ws:
        tmagen.ops.matmul(ping, w.T, out=pong)
        ping, pong = pong, ping
    torch.cuda.synchronize()
    want = x
    for p, o in zip(perms, outs):
        want = want[:, p]
        assert torch.equal(o, want)
    assert torch.equal(ping, want)


@pytest.mark.parametrize("mode", [None, "reduce-overhead"])
def test_torch_compile(mode: Any, gen: Any) -> None:
    def f(x: Any, w: Any, bias: Any) -> Any:
        return tmagen.ops.matmul(x * 2, w.T, bias=bias, alpha=0.5)

    compiled = torch.compile(f, fullgraph=True, mode=mode)
    w, bias = rand(192, 256, gen=gen), rand(192, gen=gen)
    for _ in range(3):  # reduce-overhead records a CUDA graph after warm-up runs
        x = rand(130, 256, gen=gen)
        got = compiled(x, w, bias)
        assert got.shape == (130, 192) and outside(got, x * 2, w.T, alpha=0.5, bias=bias) == 0


def test_autograd_against_torch(gen: Any) -> None:
    for a_shape, b_shape, bias_shape, c_shape, out_dtype in [
            ((64, 96), (96, 40), (40,), (64, 40), BF16), ((3, 64, 96), (96, 40), (64, 1), None, BF16),
            ((64, 96), (96, 40), (1, 40), (64, 40), F32)]:
        a = rand(*a_shape, gen=gen).requires_grad_()
        w = rand(b_shape[1], b_shape[0], gen=gen).requires_grad_()
        bias = rand(*bias_shape, dtype=out_dtype, gen=gen).requires_grad_()
        c = rand(*c_shape, dtype=out_dtype, gen=gen).requires_grad_() if c_shape else None
        y = tmagen.ops.matmul(a, w.T, bias=bias, c=c, alpha=0.75, beta=-1.25 if c is not None else 0,
                              out_dtype=out_dtype)
        seed = torch.randn(y.shape, device="cuda", generator=gen)
        (y.double() * seed).sum().backward()
        leaves = [t.detach().double().requires_grad_() for t in (a, w, bias)] + \
            ([c.detach().double().requires_grad_()] if c is not None else [])
        ref = 0.75 * (leaves[0] @ leaves[1].T) + leaves[2] + (-1.25 * leaves[3] if c is not None else 0)
        (ref * seed).sum().backward()
        for mine, theirs in zip((a, w, bias, c), leaves):
            assert mine.grad.shape == mine.shape and mine.grad.dtype == mine.dtype
            assert (mine.grad.double() - theirs.grad).abs().max() <= 2 ** -6 * theirs.grad.abs().max()


@pytest.mark.parametrize("layout", ["x @ w.T", "x.T @ dy"])
def test_a_compiled_training_step_takes_the_operators_backward(layout: str, gen: Any) -> None:
    """torch.compile (AOTAutograd) of a step whose product is tmagen's, its backward traced from the
    operator's formulas (the transposed views' gradients made in their memory's layout): each leaf's
    gradient against float64."""
    x = rand(96, 128, gen=gen).requires_grad_()
    w = rand(64, 128, gen=gen).requires_grad_() if layout == "x @ w.T" else rand(96, 64, gen=gen).requires_grad_()

    def step(x: Any, w: Any) -> Any:
        y = tmagen.ops.matmul(x, w.T) if layout == "x @ w.T" else tmagen.ops.matmul(x.T, w)
        return (y.float() * y.float()).sum()

    compiled = torch.compile(step, fullgraph=True, backend="aot_eager")
    for _ in range(2):
        x.grad = w.grad = None
        compiled(x, w).backward()
        x64, w64 = x.detach().double().requires_grad_(), w.detach().double().requires_grad_()
        y64 = x64 @ w64.T if layout == "x @ w.T" else x64.T @ w64
        (y64 * y64).sum().backward()
        for mine, theirs in ((x, x64), (w, w64)):
            assert mine.grad is not None and mine.grad.shape == mine.shape and mine.grad.is_contiguous()
            assert (mine.grad.double() - theirs.grad).abs().max() <= 2 ** -5 * theirs.grad.abs().max()


def test_load_of_a_family_spec_takes_the_epilogue(gen: Any) -> None:
    """The contract tmagen.ops.matmul calls: B as the spec lays it out, the epilogue as keywords."""
    for b_major in ("k", "mn"):
        k = tmagen.load(ops_matmul.ops_spec("bfloat16", "float32", b_major))
        a, w = rand(200, 72, gen=gen), rand(136, 72, gen=gen)
        c, bias = rand(200, 136, dtype=F32, gen=gen), rand(136, dtype=F32, gen=gen)
        got = k(a, w if b_major == "k" else w.T.contiguous(), c=c, alpha=2.0, beta=0.5, bias=bias, bias_along="n")
        assert outside(got, a, w.T, alpha=2.0, beta=0.5, c=c, bias=bias) == 0


def test_cupy(gen: Any) -> None:
    cp = pytest.importorskip("cupy")
    rng = np.random.default_rng(9)
    for m, n, k in [(130, 264, 72), (1, 13, 1001), (64, 8, 1)]:
        a = cp.asarray(rng.standard_normal((m, k)).astype(np.float16))
        w = cp.asarray(rng.standard_normal((n, k)).astype(np.float16))
        bias = cp.asarray(rng.standard_normal(n).astype(np.float32))
        for b in (w.T, cp.ascontiguousarray(w.T)):
            got = tmagen.ops.matmul(a, b, bias=bias, out_dtype="float32")
            assert isinstance(got, cp.ndarray) and got.shape == (m, n) and got.dtype == np.float32
            ta, tb = (torch.as_tensor(cp.asnumpy(x), device="cuda") for x in (a, b))
            assert outside(torch.as_tensor(cp.asnumpy(got), device="cuda"), ta, tb,
                           bias=torch.as_tensor(cp.asnumpy(bias), device="cuda")) == 0


def test_host_time_beside_torch_matmul(gen: Any, report: Any) -> None:
    """The issue's target: tmagen.ops.matmul's host time per call within 3 us of torch.matmul's."""
    a, w = rand(64, 64, gen=gen), rand(64, 64, gen=gen)
    out = torch.empty(64, 64, dtype=BF16, device="cuda")
    bias = rand(64, gen=gen)
    kern = ops_matmul.kernel("bfloat16", "bfloat16", "k")
    encodes = kern.encodes
    figures = {
        "torch.matmul(a, w.T)": per_call_us(lambda: torch.matmul(a, w.T)),
        "tmagen.ops.matmul(a, w.T)": per_call_us(lambda: tmagen.ops.matmul(a, w.T)),
        # maps encoded per call of the loop above: above 0, the allocator hands new outputs (one map each)
        "maps encoded per call without out=": (kern.encodes - encodes) / (50 + 7 * 2000),
        "torch.matmul(a, w.T, out=)": per_call_us(lambda: torch.matmul(a, w.T, out=out)),
        "tmagen.ops.matmul(a, w.T, out=)": per_call_us(lambda: tmagen.ops.matmul(a, w.T, out=out)),
        "torch.addmm(bias, a, w.T)": per_call_us(lambda: torch.addmm(bias, a, w.T)),
        "tmagen.ops.matmul(a, w.T, bias=)": per_call_us(lambda: tmagen.ops.matmul(a, w.T, bias=bias)),
    }
    report("ops_matmul_host_us", figures)
    print(figures)
    assert figures["tmagen.ops.matmul(a, w.T)"] <= figures["torch.matmul(a, w.T)"] + 3.0, figures
    assert figures["tmagen.ops.matmul(a, w.T, out=)"] <= figures["torch.matmul(a, w.T, out=)"] + 3.0, figures


def test_a_new_output_each_call_encodes_only_its_map(gen: Any) -> None:
    """Outputs kept alive (so each call gets another block): one tensor map encoded per call, C's,
    and every result right."""
    a, w = rand(96, 128, gen=gen), rand(80, 128, gen=gen)
    kern = ops_matmul.kernel("bfloat16", "bfloat16", "k")
    tmagen.ops.matmul(a, w.T)
    tmagen.ops.matmul(a, w.T)
    encodes = kern.encodes
    results = [tmagen.ops.matmul(a, w.T) for _ in range(20)]
    assert len({r.data_ptr() for r in results}) == 20
    assert kern.encodes - encodes <= 20, "C's map alone for each new output"
    for r in results:
        assert outside(r, a, w.T) == 0
