"""tmagen.ops.matmul without a GPU: its arguments and messages, the layouts it hands the kernel
(each one TMA can address, staged into scratch where the user's cannot), its results through a
stand-in kernel that computes on the CPU what the kernel family is contracted to compute, the
fast path of a repeated call, and torch.ops.tmagen.matmul (fake, torch.compile, autograd).

The stand-in kernel (`FakeFamily`) reads PyTorch CPU tensors at the pointers, shapes and strides
it is given, as TMA would read device memory, and asserts what TMA needs of each array first: a
16-byte aligned address, contiguous rows, a row pitch of whole 16 bytes, and for the output rows of
whole 16 bytes. The GPU side is tests/gpu/test_ops_matmul.py."""

from __future__ import annotations

import ctypes
import os
from typing import Any

import numpy as np
import pytest

import tmagen
from tmagen import arrays, nvrtc, ops_matmul
from tmagen.errors import ArgumentError
from tmagen.kernels import Launch
from tmagen.plan import resolve

torch = pytest.importorskip("torch")

from tmagen import ops  # noqa: E402  (registers torch.ops.tmagen.*)

BF16, F16, F32 = torch.bfloat16, torch.float16, torch.float32
_NAMES = {BF16: "bfloat16", F16: "float16", F32: "float32"}


def _read(v: Any) -> np.ndarray:
    """The elements of an ArrayView over CPU memory, as raw integers of their size."""
    es = v.itemsize
    span = sum((n - 1) * s for n, s in zip(v.shape, v.strides)) + 1
    raw = np.frombuffer((ctypes.c_uint8 * (span * es)).from_address(v.ptr), dtype={2: np.uint16, 4: np.uint32}[es])
    return np.lib.stride_tricks.as_strided(raw, v.shape, [s * es for s in v.strides])


def _values(bits: np.ndarray, dtype: str) -> np.ndarray:
    with np.errstate(invalid="ignore", over="ignore"):  # scratch padding is never initialised
        if dtype == "bfloat16":
            return (bits.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
        if dtype == "float16":
            return bits.view(np.float16).astype(np.float64)
        return bits.view(np.float32).astype(np.float64)


def _tma_addressable(v: Any, name: str, stores: bool = False) -> None:
    assert v.ptr % 16 == 0, f"{name}: address {v.ptr:#x} is not 16-byte aligned"
    assert v.strides[-1] == 1 or v.shape[-1] == 1, f"{name}: rows are not contiguous ({v.strides})"
    if len(v.shape) == 2:
        assert v.strides[0] > 0 and v.strides[0] * v.itemsize % 16 == 0, f"{name}: row pitch {v.strides}"
    if stores:
        assert v.shape[-1] * v.itemsize % 16 == 0, f"{name}: a TMA store writes rows of whole 16 bytes ({v.shape})"


class FakeFamily:
    """The matmul family's contract, computed on the CPU: A [M, K] ("k") or [K, M] ("mn"), B [N, K]
    ("k") or [K, N] ("mn"), C [M, N]; alpha, beta, c, bias (1-D) and bias_along as keywords."""

    def __init__(self, in_dtype: str, out_dtype: str, b_major: str, a_major: str = "k") -> None:
        self.in_dtype, self.out_dtype, self.b_major, self.a_major = in_dtype, out_dtype, b_major, a_major
        self.calls: list[tuple] = []
        self.last_launch = None

    def launch(self, inputs: list, out: Any, stream: Any = None, params: dict[str, Any] | None = None) -> Any:
        params = params or {}
        a, b = inputs
        for v, name in ((a, "a"), (b, "b"), (out, "out")):
            _tma_addressable(v, name, stores=name == "out")
        assert out.carrier == self.out_dtype and a.carrier == b.carrier == self.in_dtype
        m, k = a.shape if self.a_major == "k" else a.shape[::-1]
        n, kb = b.shape if self.b_major == "k" else b.shape[::-1]
        assert kb == k and out.shape == (m, n), (a.shape, b.shape, out.shape, self.a_major, self.b_major)
        b_rows = params.get("b_rows")
        x = _values(_read(a), self.in_dtype)
        if self.a_major == "mn":
            x = x.T
        if b_rows is None:
            y = _values(_read(b), self.in_dtype)
        else:  # as TMA reads it: B's first b_rows rows from memory, zeros past them
            assert self.b_major == "k" and 1 <= b_rows <= n
            y = np.zeros((n, k))
            y[:b_rows] = _values(_read(b.with_layout((b_rows, k), b.strides)), self.in_dtype)
        with np.errstate(invalid="ignore", over="ignore"):  # NaN in scratch padding gives columns of C dropped
            product = params.get("alpha", 1.0) * (x @ (y.T if self.b_major == "k" else y))
        if "c" in params:
            _tma_addressable(params["c"], "c")
            assert params["c"].shape == (m, n) and params["c"].carrier == self.out_dtype
            with np.errstate(invalid="ignore", over="ignore"):
                product += params["beta"] * _values(_read(params["c"]), self.out_dtype)
        if "bias" in params:
            bias = params["bias"]
            along = params["bias_along"]
            assert len(bias.shape) == 1 and (bias.strides == (1,) or bias.shape[0] == 1) and bias.ptr % 16 == 0
            assert bias.carrier == self.out_dtype and bias.shape[0] == (n if along == "n" else m)
            values = _values(_read(bias), self.out_dtype)
            product += values[None, :] if along == "n" else values[:, None]
        result = torch.from_numpy(product).to(getattr(torch, self.out_dtype))
        target = _read(out)
        target[...] = result.view({2: torch.int16, 4: torch.int32}[out.itemsize]).numpy().view(target.dtype)
        self.calls.append((a, b, out, params))
        return Launch(-1, 0, (ctypes.c_void_p * 0)(), (), skip=True)  # nothing on a GPU to launch again


@pytest.fixture()
def family(monkeypatch: pytest.MonkeyPatch) -> dict:
    """The stand-in family, on PyTorch CPU tensors (tmagen allocates its scratch there too)."""
    kernels: dict[tuple, FakeFamily] = {}

    def kernel(in_dtype: str, out_dtype: str, b_major: str, a_major: str = "k") -> FakeFamily:
        key = (in_dtype, out_dtype, b_major, a_major)
        return kernels.setdefault(key, FakeFamily(*key))

    def empty(like: Any, shape: Any, name: str = "out", dtype: str | None = None) -> Any:
        return like.obj.new_empty(tuple(shape), dtype=getattr(torch, dtype) if dtype else None)

    monkeypatch.setattr(ops_matmul, "kernel", kernel)
    monkeypatch.setattr(arrays, "empty", empty)
    monkeypatch.setattr(ops_matmul, "_RECIPES", {})
    monkeypatch.setattr(ops_matmul, "_STREAM", lambda device: 0)  # PyTorch's stream of a CPU "device"
    return kernels


def _launches(kernels: dict) -> list[tuple]:
    return [(key, call) for key, k in kernels.items() for call in k.calls]


def _reference(a: Any, b: Any, alpha: float = 1, beta: float = 0, c: Any = None, bias: Any = None,
               out_dtype: Any = None) -> Any:
    """In float64; a bias of another dtype than the output's is cast to it first, as the op does."""
    r = alpha * (a.double() @ b.double())
    if c is not None and beta:
        r = r + beta * c.double()
    if bias is not None:
        r = r + bias.to(out_dtype or a.dtype).double()
    return r


def _close(got: Any, ref: Any, dtype: Any) -> None:
    """Within one rounding of the output type (the stand-in sums in float64, then rounds once)."""
    assert got.dtype == dtype and got.shape == ref.shape and got.is_contiguous()
    eps = {BF16: 2.0 ** -8, F16: 2.0 ** -11, F32: 2.0 ** -24}[dtype]
    assert torch.all((got.double() - ref).abs() <= eps * ref.abs() + 1e-30), (got, ref)


def _rand(*shape: int, dtype: Any = BF16, gen: Any = None) -> Any:
    return torch.randn(*shape, generator=gen).to(dtype)


@pytest.fixture()
def gen() -> Any:
    return torch.Generator().manual_seed(18)


# ----------------------------------------------------------------------------- layouts and results
SHAPES = [(64, 48, 32), (1, 1, 1), (1, 4096 // 64, 8), (7, 9, 33), (5, 13, 1001), (130, 264, 72), (3, 1, 16),
          (16, 8, 1)]


@pytest.mark.parametrize("m,n,k", SHAPES)
@pytest.mark.parametrize("b_layout", ["kn", "w.T"])
@pytest.mark.parametrize("in_dtype,out_dtype", [(BF16, BF16), (F16, F16), (BF16, F32), (F16, BF16)])
def test_results_and_the_layouts_the_kernel_gets(family: dict, gen: Any, m: int, n: int, k: int, b_layout: str,
                                                 in_dtype: Any, out_dtype: Any) -> None:
    a = _rand(m, k, dtype=in_dtype, gen=gen)
    w = _rand(n, k, dtype=in_dtype, gen=gen)
    b = w.T if b_layout == "w.T" else w.T.contiguous()
    got = ops.matmul(a, b, out_dtype=out_dtype if out_dtype != in_dtype else None)
    _close(got, _reference(a, b), out_dtype)
    ((key, (a_in, b_in, out_in, params)),) = _launches(family)
    assert key[:2] == (_NAMES[in_dtype], _NAMES[out_dtype]) and set(params) <= {"b_rows"}
    assert params.get("b_rows", n) == n, "B's own N rows, where the kernel's N is padded"
    if k * 2 % 16 == 0 or k == 1 or (b_layout == "kn" and n > 1):
        # B's own memory, read in place: a w.T view as the K-major kernel's [N, K], a [K, N] as the MN-major one's
        assert key[2] == ("k" if b_layout == "w.T" and k > 1 else "mn" if b_layout == "kn" and n > 1 else key[2])
    if (n * out_dtype.itemsize) % 16 == 0 and (k * 2 % 16 == 0 or m == 1):
        assert a_in.ptr == a.data_ptr(), "A read in place"
        assert out_in.ptr == got.data_ptr(), "the result written in place"


def test_a_weight_passed_as_w_T_is_read_in_place_by_the_k_major_kernel(family: dict, gen: Any) -> None:
    a, w = _rand(64, 128, gen=gen), _rand(256, 128, gen=gen)
    got = ops.matmul(a, w.T)
    ((key, (a_in, b_in, _, _)),) = _launches(family)
    assert key == ("bfloat16", "bfloat16", "k", "k")
    assert (b_in.ptr, b_in.shape, b_in.strides) == (w.data_ptr(), (256, 128), (128, 1))
    assert (a_in.ptr, a_in.shape, a_in.strides) == (a.data_ptr(), (64, 128), (128, 1))
    _close(got, _reference(a, w.T), BF16)
    b = _rand(128, 256, gen=gen)
    ops.matmul(a, b)
    key, (_, b_in, _, _) = _launches(family)[-1]
    assert key[2] == "mn" and (b_in.ptr, b_in.shape, b_in.strides) == (b.data_ptr(), (128, 256), (256, 1))


@pytest.mark.parametrize("m,k", [(64, 128), (40, 1001), (8, 3), (4096, 1)])
def test_a_transposed_a_is_read_in_place_by_the_mn_major_kernel(family: dict, gen: Any, m: int, k: int) -> None:
    """A = x.T (x [K, M], as a weight gradient's x.T @ dy reads it): the MN-major A kernel reads x
    itself, whatever B's layout, where x's rows are whole 16 bytes; else (below) A is copied."""
    x = _rand(k, m, gen=gen)
    for b in (_rand(k, 24, gen=gen), _rand(24, k, gen=gen).T):
        got = ops.matmul(x.T, b)
        _close(got, _reference(x.T, b), BF16)
        key, (a_in, _, _, _) = _launches(family)[-1]
        if k == 1:  # A [M, 1]: K-major too, and that kernel takes it
            assert key[3] == "k"
            continue
        assert key[3] == "mn" and (a_in.ptr, a_in.shape, a_in.strides) == (x.data_ptr(), (k, m), (m, 1))
        assert key[2] == ("mn" if b.stride(1) == 1 else "k")


def test_a_transposed_a_whose_rows_are_not_whole_16_bytes_is_copied(family: dict, gen: Any) -> None:
    """M of 13 (a pitch of 26 bytes) or a view 2 bytes off alignment: the K-major kernel, on a copy."""
    for x in (_rand(64, 13, gen=gen), _rand(64, 41, gen=gen)[:, 1:33]):
        b = _rand(64, 16, gen=gen)
        got = ops.matmul(x.T, b)
        _close(got, _reference(x.T, b), BF16)
        key, (a_in, _, _, _) = _launches(family)[-1]
        assert key[3] == "k" and a_in.ptr != x.data_ptr() and a_in.strides[1] == 1


@pytest.mark.parametrize("n", [13, 1, 777])
def test_an_odd_n_reads_a_weight_passed_as_w_T_in_place(family: dict, gen: Any, n: int) -> None:
    """N whose output rows are not whole 16 bytes: the output goes through scratch (N padded to 8),
    but B = w.T is read in place, its map stopping at w's N rows (``b_rows``), not copied whole."""
    a, w, bias = _rand(40, 64, gen=gen), _rand(n, 64, gen=gen), _rand(n, gen=gen)
    for kw in ({}, {"bias": bias}):
        got = ops.matmul(a, w.T, **kw)
        _close(got, _reference(a, w.T, **kw), BF16)
        key, (_, b_in, out_in, params) = _launches(family)[-1]
        assert key[2] == "k" and params["b_rows"] == n
        assert (b_in.ptr, b_in.shape, b_in.strides) == (w.data_ptr(), (-(-n // 8) * 8, 64), (64, 1))
        assert out_in.shape == (40, -(-n // 8) * 8) and out_in.ptr != got.data_ptr()


def test_what_tma_cannot_address_goes_through_scratch(family: dict, gen: Any) -> None:
    # K = 1001 bfloat16: rows of 2002 bytes; a transposed A; a view 2 bytes off alignment; an out of
    # N = 13 (rows of 26 bytes); a strided out that is fine as it is
    a, w = _rand(40, 1001, gen=gen), _rand(13, 1001, gen=gen)
    _close(ops.matmul(a, w.T), _reference(a, w.T), BF16)
    (_, (a_in, b_in, out_in, _)), = _launches(family)
    assert a_in.strides == (1008, 1) and a_in.shape == (40, 1001), "A padded to rows of 1008"
    assert b_in.shape == (16, 1001) and out_in.shape == (40, 16), "N = 13 padded to 16 for the store"
    at = _rand(1001, 41, gen=gen).T  # a transposed view of rows of 82 bytes: copied
    _close(ops.matmul(at, w.T), _reference(at, w.T), BF16)
    key, (a_in, _, _, _) = _launches(family)[-1]
    assert key[3] == "k" and a_in.ptr != at.data_ptr() and a_in.shape == (41, 1001)
    base = _rand(48, 130, gen=gen)
    off = base[:, 1:129]  # 2 bytes past a 16-byte boundary
    b = _rand(128, 64, gen=gen)
    _close(ops.matmul(off, b), _reference(off, b), BF16)
    big = torch.full((64, 100), 7.0, dtype=BF16)
    window = big[:48, 16:80]  # a pitch of 200 bytes: no whole 16, so staged and copied back
    got = ops.matmul(_rand(48, 128, gen=gen), b, out=window)
    assert got is window and torch.all(big[:, :16] == 7) and torch.all(big[:, 80:] == 7) and torch.all(big[48:] == 7)
    wide = torch.full((64, 128), 7.0, dtype=BF16)
    x = _rand(48, 128, gen=gen)
    ops.matmul(x, b, out=wide[:48, 32:96])  # a pitch of 256 bytes, aligned: in place
    assert _launches(family)[-1][1][2].ptr == wide[:48, 32:96].data_ptr()
    _close(wide[:48, 32:96].contiguous(), _reference(x, b), BF16)


@pytest.mark.parametrize("out_dtype", [BF16, F16, F32])
@pytest.mark.parametrize("n", [64, 13])
def test_every_epilogue(family: dict, gen: Any, out_dtype: Any, n: int) -> None:
    m, k = 24, 40
    a, w = _rand(m, k, gen=gen), _rand(n, k, gen=gen)
    c = _rand(m, n, dtype=out_dtype, gen=gen)
    cases = [dict(alpha=0.5), dict(c=c, beta=2.0), dict(bias=_rand(n, dtype=out_dtype, gen=gen)),
             dict(bias=_rand(1, n, dtype=F32, gen=gen)), dict(bias=_rand(m, 1, dtype=out_dtype, gen=gen)),
             dict(alpha=-1.5, c=c, beta=0.25, bias=_rand(n, dtype=BF16, gen=gen)),
             dict(c=c)]  # beta = 0: c is not read (as torch.addmm with beta=0)
    for kw in cases:
        got = ops.matmul(a, w.T, out_dtype=out_dtype, **kw)
        _close(got, _reference(a, w.T, out_dtype=out_dtype, **kw), out_dtype)
        _, (_, _, _, params) = _launches(family)[-1]
        assert ("c" in params) == ("c" in kw and kw.get("beta", 0) != 0)
        assert ("bias" in params) == ("bias" in kw)
        if "bias" in kw:
            assert params["bias_along"] == ("m" if kw["bias"].shape == (m, 1) else "n")


def test_batches_flatten_where_rows_lie_evenly_and_loop_elsewhere(family: dict, gen: Any) -> None:
    a, w = _rand(3, 20, 32, gen=gen), _rand(24, 32, gen=gen)
    bias = _rand(24, gen=gen)
    got = ops.matmul(a, w.T, bias=bias)
    assert got.shape == (3, 20, 24)
    _close(got, _reference(a, w.T, bias=bias), BF16)
    ((_, (a_in, _, out_in, _)),) = _launches(family)
    assert a_in.shape == (60, 32) and out_in.shape == (60, 24), "one product of 60 rows"
    for k in family.values():
        k.calls.clear()
    b3, c, bias = _rand(3, 32, 24, gen=gen), _rand(10, 24, gen=gen), _rand(10, 1, gen=gen)
    got = ops.matmul(a[:, ::2], b3, c=c, beta=1.0, bias=bias)  # every other row, a batch of B, c for every matrix
    assert got.shape == (3, 10, 24) and len(_launches(family)) == 3
    _close(got, _reference(a[:, ::2], b3, c=c, beta=1.0, bias=bias), BF16)
    x, y = _rand(2, 1, 5, 32, gen=gen), _rand(4, 32, 8, gen=gen)
    got = ops.matmul(x, y)  # batches broadcast as torch's
    assert got.shape == (2, 4, 5, 8)
    _close(got, _reference(x, y), BF16)


def test_a_batch_launched_matrix_by_matrix_repeats_its_decision(family: dict, gen: Any,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """A batch of B matrices (one launch each) repeated with new tensors of the same layouts: the
    first call decides (`_BatchRecipe`), the others launch each matrix of their own tensors, c and a
    bias along M too, broadcast batches too."""
    planned: list[int] = []
    eager = ops_matmul._eager
    monkeypatch.setattr(ops_matmul, "_eager", lambda *args: planned.append(1) or eager(*args))
    makers = [
        lambda: (_rand(3, 20, 32, gen=gen), _rand(3, 32, 24, gen=gen), {}),
        lambda: (_rand(3, 20, 32, gen=gen)[:, ::2], _rand(3, 32, 24, gen=gen),
                 {"c": _rand(10, 24, gen=gen), "beta": 1.0, "bias": _rand(10, 1, gen=gen), "alpha": 0.5}),
        lambda: (_rand(2, 1, 5, 32, gen=gen), _rand(4, 32, 8, gen=gen), {}),
    ]
    for make in makers:
        planned.clear()
        for _ in range(3):
            for k in family.values():
                k.calls.clear()
            x, y, kw = make()
            got = ops.matmul(x, y, **kw)
            _close(got, _reference(x, y, **kw), BF16)
            assert len(_launches(family)) == got.shape[:-2].numel()
        assert planned == [1], "the first call decided; the others repeated it"
    assert sum(isinstance(r, ops_matmul._BatchRecipe) for r in ops_matmul._RECIPES.values()) == len(makers)


def test_empty_and_zero_k(family: dict, gen: Any) -> None:
    assert ops.matmul(_rand(0, 32), _rand(32, 16)).shape == (0, 16)
    assert ops.matmul(_rand(8, 32), _rand(32, 0)).shape == (8, 0)
    assert ops.matmul(_rand(0, 4, 32), _rand(32, 16)).shape == (0, 4, 16)
    z = ops.matmul(_rand(8, 0), _rand(0, 16))
    assert torch.equal(z, torch.zeros(8, 16, dtype=BF16))
    c, bias = _rand(8, 16, dtype=F32, gen=gen), _rand(16, gen=gen)
    got = ops.matmul(_rand(8, 0), _rand(0, 16), c=c, beta=3.0, bias=bias, out_dtype=F32)
    assert torch.equal(got, c.float() * 3 + bias.float())
    assert _launches(family) == []


# ----------------------------------------------------------------------------- messages
def _fields(info: pytest.ExceptionInfo) -> list[tuple[str, str]]:
    return [(v.rule, v.field) for v in info.value.violations]


def test_bad_arguments_say_what_to_pass(family: dict) -> None:
    a, b = _rand(8, 32), _rand(32, 16)
    cases = [
        (lambda: ops.matmul(a.float(), b), [("matmul-types", "a.dtype")], "bfloat16 or float16"),
        (lambda: ops.matmul(a, b.half()), [("matmul-types", "b.dtype")], "b must have a's type"),
        (lambda: ops.matmul(a, _rand(16, 32)), [("array-shape", "b.shape")], "w.T"),
        (lambda: ops.matmul(a, _rand(32)), [("array-rank", "b.ndim")], "reshape"),
        (lambda: ops.matmul(a, b, out_dtype=torch.int32), [("matmul-types", "out_dtype")], "float32"),
        (lambda: ops.matmul(a, b, out=_rand(8, 16, dtype=F32), out_dtype=BF16), [("array-shape", "out")], "out_dtype="),
        (lambda: ops.matmul(a, b, out=_rand(8, 15)), [("array-shape", "out")], "(8, 16)"),
        (lambda: ops.matmul(a, b, bias=_rand(8)), [("array-shape", "bias.shape")], "(8, 1)"),
        (lambda: ops.matmul(a, b, beta=1.0), [("matmul-scalar", "beta")], "pass c="),
        (lambda: ops.matmul(a, b, c=_rand(8, 16, dtype=F32), beta=1.0), [("array-shape", "c")], "bfloat16"),
        (lambda: ops.matmul(a, b, alpha=torch.tensor(2.0)), [("matmul-scalar", "alpha")], "float(alpha)"),
        (lambda: ops.matmul(_rand(2, 8, 32), _rand(3, 32, 16)), [("array-shape", "a.shape, b.shape")], "broadcast"),
    ]
    for call, fields, words in cases:
        with pytest.raises(ArgumentError) as info:
            call()
        assert _fields(info) == fields and words in str(info.value), str(info.value)
        assert str(info.value).startswith("tmagen.ops.matmul: 1 problem")
    assert _launches(family) == []


def test_arrays_tmagen_cannot_copy_must_come_addressable() -> None:
    class Raw:
        def __init__(self, shape: tuple, strides: tuple, typestr: str = "<f2", ptr: int = 0x7F0000000000) -> None:
            self.__cuda_array_interface__ = {"shape": shape, "typestr": typestr, "data": (ptr, False),
                                             "strides": strides, "version": 3}

    with pytest.raises(ArgumentError) as info:  # K = 1001: rows of 2002 bytes, and no framework to copy with
        ops_matmul.matmul_eager(Raw((8, 1001), (2002, 2)), Raw((1001, 16), (32, 2)), out=Raw((8, 16), (32, 2)))
    assert _fields(info) == [("matmul-layout", "a.strides")] and "tmagen copies only PyTorch and CuPy" in str(
        info.value)


# ----------------------------------------------------------------------------- the fast path
def test_a_repeated_call_repeats_its_decision_without_re_deciding(family: dict, gen: Any,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    planned: list[int] = []
    eager = ops_matmul._eager
    monkeypatch.setattr(ops_matmul, "_eager", lambda *args: planned.append(1) or eager(*args))
    a, w, bias = _rand(64, 128, gen=gen), _rand(96, 128, gen=gen), _rand(96, gen=gen)
    for kw in ({}, {"alpha": 2.0}, {"bias": bias}):
        planned.clear()
        first = ops.matmul(a, w.T, **kw)
        a2, w2 = _rand(64, 128, gen=gen), _rand(96, 128, gen=gen)  # new tensors of the same layouts
        second = ops.matmul(a2, w2.T, **kw)
        assert planned == [1], "the second call launched what the first decided"
        _close(first, _reference(a, w.T, **kw), BF16)
        _close(second, _reference(a2, w2.T, **kw), BF16)
        assert _launches(family)[-1][1][3].keys() == _launches(family)[-2][1][3].keys()
    planned.clear()
    base = _rand(64, 136, gen=gen)
    ops.matmul(base[:, :128], w.T)
    ops.matmul(base[:, 8:], w.T)  # 16 bytes on: the same decision
    ops.matmul(base[:, 1:129], w.T)  # 2 bytes on: TMA cannot read it in place, so decided anew (and staged)
    assert planned == [1, 1]
    planned.clear()
    out = torch.empty(64, 96, dtype=BF16)
    ops.matmul(a, w.T, out=out)
    ops.matmul(a, w.T, out=out)
    assert planned == [1]
    x, y = _rand(64, 8, gen=gen), _rand(8, 13, gen=gen)
    first = ops.matmul(x, y)  # N = 13: B and the output through scratch
    x2, y2 = _rand(64, 8, gen=gen), _rand(8, 13, gen=gen)
    second = ops.matmul(x2, y2)
    assert planned == [1, 1], "a staged call repeats its decision too"
    _close(first, _reference(x, y), BF16)
    _close(second, _reference(x2, y2), BF16)


# Calls of two matrices that TMA cannot take in place, each kind of scratch: (a, b, keywords) makers.
STAGED = {
    "K = 1001 (rows of 2002 bytes)": lambda g: (_rand(40, 1001, gen=g), _rand(24, 1001, gen=g).T, {}),
    "a transposed view, M = 41": lambda g: (_rand(72, 41, gen=g).T, _rand(24, 72, gen=g).T, {}),
    "N = 13, B [K, N] and a bias": lambda g: (_rand(40, 72, gen=g), _rand(72, 13, gen=g),
                                               {"bias": _rand(13, gen=g)}),
    "N = 13, B as w.T, c and alpha": lambda g: (_rand(40, 72, gen=g), _rand(13, 72, gen=g).T,
                                                 {"c": _rand(40, 13, gen=g), "beta": 0.5, "alpha": 2.0}),
    "a float32 bias": lambda g: (_rand(40, 72, gen=g), _rand(24, 72, gen=g).T, {"bias": _rand(24, dtype=F32, gen=g)}),
    "a float16 bias along M": lambda g: (_rand(40, 72, gen=g), _rand(24, 72, gen=g).T,
                                         {"bias": _rand(40, 1, dtype=F16, gen=g)}),
    "A 2 bytes off 16": lambda g: (_rand(40, 74, gen=g)[:, 1:73], _rand(24, 72, gen=g).T, {}),
    "c of rows 2 bytes off": lambda g: (_rand(40, 72, gen=g), _rand(24, 72, gen=g).T,
                                        {"c": _rand(40, 25, gen=g)[:, 1:], "beta": -1.0}),
    "float32 out, N = 7": lambda g: (_rand(40, 72, gen=g), _rand(7, 72, gen=g).T, {"out_dtype": F32}),
}


@pytest.mark.parametrize("case", list(STAGED))
def test_a_staged_call_repeated_stages_the_new_arrays_without_re_deciding(family: dict, gen: Any, case: str,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """The second call of the same layouts (new tensors, new values) takes the first one's decision
    (`_StagedRecipe`), stages its own arrays, and gives its own product; the kernel sees what it saw
    the first time (every array TMA-addressable, the same shapes and parameters)."""
    planned: list[int] = []
    eager = ops_matmul._eager
    monkeypatch.setattr(ops_matmul, "_eager", lambda *args: planned.append(1) or eager(*args))
    results = []
    for _ in range(3):
        a, b, kw = STAGED[case](gen)
        out_dtype = kw.get("out_dtype", BF16)
        results.append((ops.matmul(a, b, **kw), _reference(a, b, **kw), out_dtype))
    assert planned == [1], "the first call decided; the others repeated it"
    assert isinstance(next(iter(ops_matmul._RECIPES.values())), ops_matmul._StagedRecipe)
    for got, ref, out_dtype in results:
        _close(got, ref, out_dtype)
    launches = [call for _, call in _launches(family)]
    assert len(launches) == 3
    for a_in, b_in, out_in, params in launches[1:]:
        first = launches[0]
        assert (a_in.shape, b_in.shape, out_in.shape) == (first[0].shape, first[1].shape, first[2].shape)
        assert params.keys() == first[3].keys()


def test_a_staged_call_into_a_strided_out_leaves_what_is_around_it(family: dict, gen: Any) -> None:
    b = _rand(128, 64, gen=gen)
    for _ in range(2):  # the second through the recipe
        big = torch.full((64, 100), 7.0, dtype=BF16)
        window = big[:48, 16:80]  # a pitch of 200 bytes: staged and copied back
        x = _rand(48, 128, gen=gen)
        assert ops.matmul(x, b, out=window) is window
        _close(window.contiguous(), _reference(x, b), BF16)
        assert torch.all(big[:, :16] == 7) and torch.all(big[:, 80:] == 7) and torch.all(big[48:] == 7)
    assert isinstance(next(iter(ops_matmul._RECIPES.values())), ops_matmul._StagedRecipe)


# ----------------------------------------------------------------------------- the kernel family
FAMILY_SPECS = [(i, o, b, "k") for i in ("bfloat16", "float16") for o in ("bfloat16", "float16", "float32")
                for b in ("k", "mn")]
FAMILY_SPECS += [("bfloat16", "bfloat16", "k", "mn"), ("float16", "float32", "mn", "mn")]  # an MN-major A (x.T)


@pytest.mark.parametrize("in_dtype,out_dtype,b_major,a_major", FAMILY_SPECS)
def test_every_family_spec_passes_the_rules_and_compiles(in_dtype: str, out_dtype: str, b_major: str,
                                                         a_major: str) -> None:
    spec = ops_matmul.ops_spec(in_dtype, out_dtype, b_major, a_major)
    plan = resolve(spec)  # raises RuleError for a spec that breaks a rule
    assert (plan.kernel.detail.b_major, plan.kernel.detail.a_major) == (b_major, a_major)
    assert plan.kernel.detail.edge_rows == (8 if a_major == "k" else 0)
    if a_major == "k":  # one family, however a call names it
        assert ops_matmul.kernel(in_dtype, out_dtype, b_major) is ops_matmul.kernel(in_dtype, out_dtype, b_major, "k")
    assert [plan.map(r).dtype_name for r in ("a", "b", "c")] == [in_dtype, in_dtype, out_dtype]
    try:
        compiled = nvrtc.compile_plan(plan)
    except nvrtc.NvrtcError as exc:
        if os.environ.get("CI") == "true":
            raise
        pytest.skip(f"no NVRTC: {exc}")
    assert f".text.{plan.kernels[0].symbol}\0".encode() in compiled.data


# ----------------------------------------------------------------------------- PyTorch
def test_fake_implementation_gives_shape_and_dtype() -> None:
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        a = torch.empty(3, 64, 32, device="cuda", dtype=BF16)
        w = torch.empty(48, 32, device="cuda", dtype=BF16)
        y = torch.ops.tmagen.matmul(a, w.T, None, None, 1.0, 0.0, None)
        assert y.shape == (3, 64, 48) and y.dtype == BF16 and y.is_contiguous()
        z = torch.ops.tmagen.matmul(a, torch.empty(5, 1, 32, 8, device="cuda", dtype=BF16), None, None, 1.0, 0.0,
                                    F32)
        assert z.shape == (5, 3, 64, 8) and z.dtype == F32
        # the operators' schemas default what torch.matmul and torch._scaled_mm leave out
        assert torch.ops.tmagen.matmul(a, w.T).shape == (3, 64, 48)
        assert torch.ops.tmagen.matmul(a, w.T, out_dtype=F32).dtype == F32
        a8 = torch.empty(64, 32, device="cuda", dtype=torch.float8_e4m3fn)
        w8 = torch.empty(48, 32, device="cuda", dtype=torch.float8_e4m3fn)
        s = torch.empty((), device="cuda")
        y8 = torch.ops.tmagen.scaled_matmul(a8, w8.t(), s, s)
        assert y8.shape == (64, 48) and y8.dtype == BF16


def test_torch_compile_traces_matmul_into_one_graph() -> None:
    graphs: list[Any] = []

    def backend(gm: Any, example_inputs: Any) -> Any:
        graphs.append(gm)
        return lambda *args: (torch.zeros(1),)

    def f(x: Any, w: Any, bias: Any) -> Any:
        return torch.relu(tmagen.ops.matmul(x, w.T, bias=bias, alpha=0.5, out_dtype=F32))

    x, w, bias = _rand(16, 32), _rand(24, 32), _rand(24)
    torch.compile(f, backend=backend, fullgraph=True)(x, w, bias)
    (gm,) = graphs
    calls = [n for n in gm.graph.nodes if n.op == "call_function" and "tmagen" in str(n.target)]
    assert [str(n.target) for n in calls] == ["tmagen.matmul"]
    assert tuple(calls[0].meta["example_value"].shape) == (16, 24)
    assert calls[0].meta["example_value"].dtype == F32


def _leaves(shapes: tuple, out_dtype: Any, double: bool) -> list[Any]:
    g = torch.Generator().manual_seed(7)
    a_shape, b_shape, bias_shape, c_shape = shapes
    made = [_rand(*a_shape, gen=g), _rand(*b_shape, gen=g),
            None if bias_shape is None else _rand(*bias_shape, dtype=out_dtype, gen=g),
            None if c_shape is None else _rand(*c_shape, dtype=out_dtype, gen=g)]
    return [None if t is None else (t.double() if double else t).requires_grad_() for t in made]


@pytest.mark.parametrize("path", ["ops.matmul", "torch.ops.tmagen.matmul"])
@pytest.mark.parametrize("shapes,out_dtype", [
    (((24, 40), (40, 16), (16,), (24, 16)), BF16), (((3, 24, 40), (40, 16), (24, 1), None), BF16),
    (((24, 40), (2, 40, 16), None, (24, 16)), BF16), (((24, 40), (40, 16), (1, 16), (24, 16)), F32)])
def test_autograd_formulas_against_torch(family: dict, gen: Any, shapes: tuple, out_dtype: Any, path: str) -> None:
    """The backward of tmagen.ops.matmul (eager: its torch.autograd.Function) and of the operator
    torch.ops.tmagen.matmul (what torch.compile traces) against torch's own autograd of the same
    expression, run on the CPU through the stand-in kernel (registered for CPU tensors here)."""
    lib = torch.library.Library("tmagen", "IMPL")  # a CPU kernel for this test only
    lib.impl("matmul", ops_matmul._torch_eager, "CPU")
    try:
        a, b, bias, c = _leaves(shapes, out_dtype, False)
        beta = -1.25 if c is not None else 0
        if path == "ops.matmul":
            y = ops.matmul(a, b, bias=bias, c=c, alpha=0.75, beta=beta, out_dtype=out_dtype)
            assert type(y.grad_fn).__name__ == "TmagenMatmulBackward"
        else:
            y = torch.ops.tmagen.matmul(a, b, bias, c, 0.75, beta, out_dtype)
            assert "tmagen_matmul" in type(y.grad_fn).__name__
        seed = torch.randn(y.shape, generator=gen)
        (y.double() * seed).sum().backward()
        ra, rb, rbias, rc = _leaves(shapes, out_dtype, True)
        ref = 0.75 * (ra @ rb) + (0 if rc is None else -1.25 * rc) + (0 if rbias is None else rbias)
        (ref * seed).sum().backward()
        for mine, theirs in ((a, ra), (b, rb), (bias, rbias), (c, rc)):
            if mine is None:
                continue
            assert mine.grad is not None and mine.grad.shape == mine.shape and mine.grad.dtype == mine.dtype
            scale = theirs.grad.abs().max().item() + 1e-9
            assert (mine.grad.double() - theirs.grad).abs().max().item() <= 2 ** -6 * scale
    finally:
        del lib


@pytest.mark.parametrize("transposed", ["w.T", "x.T", "both"])
def test_autograd_of_transposed_views_hands_each_leaf_the_products_own_output(family: dict, gen: Any,
                                                                             transposed: str) -> None:
    """y = x.T @ w.T and its halves: the gradient of a transposed view is made in its memory's layout
    (the transpose of a product), so that autograd can give the leaf the product's output itself,
    not a transposed copy of it (as torch's own mm does); and it is right."""
    x = _rand(40, 24, gen=gen) if transposed != "w.T" else _rand(24, 40, gen=gen)
    w = _rand(16, 40, gen=gen) if transposed != "x.T" else _rand(40, 16, gen=gen)
    x.requires_grad_(), w.requires_grad_()
    a, b = (x.T if transposed != "w.T" else x), (w.T if transposed != "x.T" else w)
    y = ops.matmul(a, b)
    seed = torch.randn(y.shape, generator=gen).to(BF16)
    y.backward(seed)
    outs = sorted((call[2].shape, call[2].strides) for _, call in _launches(family)[1:])  # the gradient products'
    assert outs == sorted([(tuple(x.shape), (x.shape[1], 1)), (tuple(w.shape), (w.shape[1], 1))]), \
        "each gradient product writes its leaf's own layout"
    assert x.grad.is_contiguous() and w.grad.is_contiguous()
    s = seed.double()
    for leaf, want in ((a, s @ b.double().T), (b, a.double().T @ s)):
        grad = x.grad if leaf is a else w.grad
        got = grad.double().T if leaf.stride(0) == 1 and leaf.stride(1) != 1 else grad.double()
        assert (got - want).abs().max().item() <= 2 ** -7 * want.abs().max().item()


@pytest.mark.parametrize("given", [2, 3, 5])
def test_autograd_of_a_call_that_leaves_arguments_out(family: dict, gen: Any, given: int) -> None:
    """torch.ops.tmagen.matmul(x, w.T) (the schema's defaults for the rest, as a user writes it):
    its backward gives a gradient per argument given. Before, it indexed past them (IndexError)."""
    lib = torch.library.Library("tmagen", "IMPL")
    lib.impl("matmul", ops_matmul._torch_eager, "CPU")
    try:
        x, w, bias = _rand(24, 40, gen=gen), _rand(16, 40, gen=gen), _rand(16, gen=gen)
        leaves = [t.requires_grad_() for t in (x, w, bias)]
        args = [x, w.T, bias, None, 0.5][:given]
        y = torch.ops.tmagen.matmul(*args)
        y.backward(torch.ones_like(y))
        alpha = 0.5 if given == 5 else 1.0
        assert torch.allclose(x.grad.double(), alpha * w.double().sum(0).expand(24, 40), rtol=2 ** -7)
        assert torch.allclose(w.grad.double(), alpha * x.double().sum(0).expand(16, 40), rtol=2 ** -7)
        assert (bias.grad is None) == (given < 3)
        if given >= 3:
            assert torch.equal(bias.grad, torch.full((16,), 24.0, dtype=BF16))
        del leaves
    finally:
        del lib


def _plain_launches(monkeypatch: pytest.MonkeyPatch, k: Any) -> None:
    """``k``'s family launched with cuLaunchKernel, which the tests below stub: on the GPU its kernels
    are programmatic dependent launches (cuLaunchKernelEx), whose stubs these tests would not see
    (the real driver then took their stand-in pointers)."""
    import dataclasses

    view = dataclasses.replace(k.view, dependent_launch=False,
                               variants=tuple(dataclasses.replace(v, dependent_launch=False) for v in k.view.variants))
    monkeypatch.setattr(k, "view", view)


def test_a_loaded_kernel_hands_keyword_parameters_to_its_launcher(monkeypatch: pytest.MonkeyPatch) -> None:
    """Kernel(...)(a, b, out=, **params): numbers as they are, arrays read as ArrayViews, each new
    pointer or value a new launch (the matmul family's epilogue travels this way)."""
    from tmagen import kernels, runtime
    from tmagen.kinds.base import Call

    class Raw:
        def __init__(self, shape: tuple, ptr: int, typestr: str = "<f4") -> None:
            self.__cuda_array_interface__ = {"shape": shape, "typestr": typestr, "data": (ptr, False),
                                             "strides": None, "version": 3}

    k = tmagen.load(ops_matmul.ops_spec("float16", "float32", "mn"))
    bound: list[dict] = []

    def bind(plan: Any, inputs: Any, out: Any, multiprocessors: int, workspace: Any = None, **params: Any) -> Call:
        bound.append(params)
        return Call((), skip=True)

    monkeypatch.setattr(k, "launcher", type("L", (), {"bind": staticmethod(bind), "inputs": ("a", "b"),
                                                      "parameters": k.launcher.parameters,
                                                      "problems": k.launcher.problems,
                                                      "output_shape": k.launcher.output_shape})())
    monkeypatch.setattr(runtime, "pointer_device", lambda ptr: 0)
    monkeypatch.setattr(kernels, "multiprocessors", lambda device: 132)
    a, b, out = Raw((64, 32), 1 << 40, "<f2"), Raw((32, 48), 2 << 40, "<f2"), Raw((64, 48), 3 << 40)
    for c_ptr in (4 << 40, 4 << 40, 5 << 40):
        k(a, b, out=out, c=Raw((64, 48), c_ptr), alpha=2.0, beta=0.5, bias=None)
    assert len(bound) == 2, "the second call of the same pointers and values reused its launch"
    params = bound[0]
    assert params["alpha"] == 2.0 and params["beta"] == 0.5 and params["bias"] is None
    assert params["c"].ptr == 4 << 40 and params["c"].shape == (64, 48) and bound[1]["c"].ptr == 5 << 40


def test_a_call_repeated_into_a_new_output_encodes_only_the_output_map(monkeypatch: pytest.MonkeyPatch) -> None:
    """A new output each call (what ``c = ops.matmul(a, b)`` makes) costs one driver encode, C's: A's
    and B's maps and everything else of the launch are reused; a new input is a new launch."""
    from tmagen import kernels, runtime

    class Raw:
        def __init__(self, shape: tuple, ptr: int, typestr: str = "<f2") -> None:
            self.__cuda_array_interface__ = {"shape": shape, "typestr": typestr, "data": (ptr, False),
                                             "strides": None, "version": 3}

    encoded: list[int] = []  # the global address of each cuTensorMapEncodeTiled call
    launched: list[int] = []  # the parameter array of each cuLaunchKernel call

    def driver_encode(into: int, dtype: int, rank: int, address: int, *rest: Any) -> int:
        encoded.append(address)
        return 0

    monkeypatch.setattr(runtime, "_encode_function", lambda: driver_encode)
    monkeypatch.setattr(runtime, "primary_context", lambda ordinal: 1)
    monkeypatch.setattr(runtime, "current_context", lambda: 1)
    monkeypatch.setattr(runtime, "pointer_device", lambda ptr: 0)
    monkeypatch.setattr(kernels, "multiprocessors", lambda device: 132)
    monkeypatch.setattr(kernels, "launch_function", lambda: lambda *args: launched.append(args[9]) or 0)
    k = tmagen.load(ops_matmul.ops_spec("float16", "float16", "k"))
    _plain_launches(monkeypatch, k)
    monkeypatch.setattr(k, "_load", lambda device, stream: k._loaded.setdefault(
        device, kernels._Loaded(1, tuple(range(len(k.view.family))), None)))  # type: ignore[arg-type]
    monkeypatch.setattr(k, "_workspace", lambda device, stream, counters, partials: (1 << 20, 2 << 20))
    a, w = Raw((64, 128), 1 << 40), Raw((96, 128), 2 << 40)
    outs = [Raw((64, 96), (3 + i) << 40) for i in range(3)]

    def addresses() -> list[int]:
        return list((ctypes.c_void_p * 3).from_address(launched[-1]))

    k(a, w, out=outs[0])
    assert sorted(encoded) == [1 << 40, 2 << 40, 3 << 40] and k.encodes == 3
    first = addresses()
    for i, out in enumerate(outs[1:], 1):
        encoded.clear()
        k(a, w, out=out)
        assert encoded == [(3 + i) << 40], "a new output: C's map alone encoded, at the new address"
        assert addresses()[:2] == first[:2] and addresses()[2] != first[2], "A's and B's maps are reused"
    encoded.clear()
    k(a, w, out=outs[0])
    k(a, w, out=outs[1])
    assert encoded == [] and addresses()[:2] == first[:2], "outputs seen before: nothing encoded"
    k(a, w, out=outs[0], alpha=2.0)  # another epilogue: a launch of its own
    assert len(encoded) == 3
    encoded.clear()
    k(Raw((64, 128), 9 << 40), w, out=outs[0])  # another A: a launch of its own, every map encoded
    assert sorted(encoded) == [2 << 40, 3 << 40, 9 << 40]
    assert k.encodes == 3 + 2 + 3 + 3


def test_the_fast_path_launches_again_what_it_launched(monkeypatch: pytest.MonkeyPatch, gen: Any) -> None:
    """ops.matmul on PyTorch tensors of a layout seen before: the same pointers launch the same
    parameters again without Kernel.launch; a new output (the caching allocator's next block) goes
    through Kernel.launch, which encodes C's map alone. The driver is stubbed: CPU tensors stand in."""
    from tmagen import kernels, runtime

    encoded: list[int] = []
    launched: list[tuple] = []
    monkeypatch.setattr(runtime, "_encode_function", lambda: lambda *args: encoded.append(args[3]) or 0)
    monkeypatch.setattr(runtime, "primary_context", lambda ordinal: 1)
    monkeypatch.setattr(runtime, "current_context", lambda: 1)
    monkeypatch.setattr(kernels, "multiprocessors", lambda device: 132)
    monkeypatch.setattr(kernels, "launch_function", lambda: lambda *args: launched.append(args) or 0)
    # a replay's launch: every argument a ctypes value of its C type (kernels.launch_again), read back as numbers
    monkeypatch.setattr(kernels, "_RAW_LAUNCH", lambda *args: launched.append(tuple(
        a if a is None else a.value for a in args)) or 0)
    monkeypatch.setattr(kernels, "current_stream", lambda view: 7)
    monkeypatch.setattr(ops_matmul, "_STREAM", lambda device: 7)
    monkeypatch.setattr(ops_matmul, "_RECIPES", {})

    def on_gpu(x: Any, name: str) -> Any:  # CPU tensors read as if on device 0
        v = arrays._read_torch(x, name)
        v.device = 0
        return v

    monkeypatch.setitem(arrays._READERS, torch.Tensor, on_gpu)
    monkeypatch.setattr(arrays, "empty", lambda like, shape, name="out", dtype=None: like.obj.new_empty(
        tuple(shape), dtype=getattr(torch, dtype) if dtype else None))
    k = ops_matmul.kernel("bfloat16", "bfloat16", "k")
    _plain_launches(monkeypatch, k)
    monkeypatch.setattr(k, "_load", lambda device, stream: k._loaded.setdefault(
        device, kernels._Loaded(1, tuple(range(len(k.view.family))), None)))  # type: ignore[arg-type]
    monkeypatch.setattr(k, "_workspace", lambda device, stream, counters, partials: (1 << 20, 2 << 20))
    through_kernel: list[int] = []
    launch = k.launch
    monkeypatch.setattr(k, "launch", lambda *args, **kw: through_kernel.append(1) or launch(*args, **kw))
    a, w = _rand(64, 128, gen=gen), _rand(96, 128, gen=gen)
    outs = [torch.empty(64, 96, dtype=BF16) for _ in range(3)]
    for _ in range(2):  # the first call decides (its recipe), the second keeps its launch
        ops.matmul(a, w.T, out=outs[0])
    assert through_kernel == [1, 1] and len(encoded) == 3 and len(launched) == 2
    ops.matmul(a, w.T, out=outs[0])
    assert through_kernel == [1, 1] and len(encoded) == 3, "the same pointers: launched again, nothing encoded"
    assert launched[2] == launched[1] and launched[2][8] == 7, "the same function, grid and parameters, on the stream"
    for out in outs[1:]:
        encoded.clear()
        ops.matmul(a, w.T, out=out)
        assert encoded == [out.data_ptr()], "a new output: C's map alone encoded"
    assert len(through_kernel) == 4 and len(launched) == 5
    ops.matmul(a, w.T, out=outs[1])
    assert len(through_kernel) == 4 and len(launched) == 6, "an output seen before: launched again"
    encoded.clear()
    for _ in range(3):  # alpha other than 1: a recipe and a launch of its own
        ops.matmul(a, w.T, out=outs[2], alpha=0.5)
    assert len(through_kernel) == 6 and len(launched) == 9 and launched[8] == launched[7] != launched[5]
    monkeypatch.setattr(kernels, "_RAW_LAUNCH", lambda *args: 201)  # refused (CUDA_ERROR_INVALID_CONTEXT)
    ops.matmul(a, w.T, out=outs[0])
    assert len(through_kernel) == 7, "a replay the driver refuses: the general path launches instead"
