"""A matmul spec's family of kernels on the GPU (issue 18): every kernel of the family at every
split of K it may be asked for, against a float64 product; the epilogue (alpha, beta with C_in,
a bias along either dimension, K = 0 with an epilogue, C_in being the output); and the C API:
its per-shape choice equal to Python's for the same M, N, K, a split launch through its own
workspace, and its cache of tensor maps keyed by pointer (new pointers of the same shape give the
new product)."""

from __future__ import annotations

import ctypes
import json

import numpy as np
import pytest

import tmagen
from tmagen import toolchain
from tmagen.plan import resolve
from tmagen.render import render
from tmagen.spec import parse_spec
from tmagen.verify import matmul_tolerance

from conftest import REPO

pytestmark = pytest.mark.gpu
torch = pytest.importorskip("torch")

# B [N, K] bf16 -> bf16; B [K, N] f16 -> f32; A [K, M] and B [K, N] (a weight gradient) bf16 -> f32
SPECS = ["matmul_bf16_tn", "matmul_f16_nn_f32", "matmul_bf16_wgrad_f32"]
TORCH = {"bfloat16": torch.bfloat16, "float16": torch.float16, "float32": torch.float32}


def _spec(name: str):
    return parse_spec(json.loads((REPO / "specs" / f"{name}.json").read_text()), f"specs/{name}.json")


def _operands(spec, m: int, n: int, k: int, seed: int):
    """The plan, A [M, K] and B [N, K] (the product's), and A and B as the spec's kernel takes them (an
    MN-major A [K, M] in rows padded to whole 16 bytes, as TMA reads them, whatever M)."""
    plan = resolve(spec)
    dt = TORCH[plan.map("a").dtype_name]
    g = torch.Generator(device="cuda").manual_seed(seed)
    a = torch.randn(m, k, device="cuda", generator=g).to(dt)
    b_nk = torch.randn(n, k, device="cuda", generator=g).to(dt)
    family = plan.kernel.detail
    a_in = a
    if family.a_major == "mn":
        a_in = torch.zeros(k, -(-m // 8) * 8, device="cuda", dtype=dt)[:, :m]
        a_in.copy_(a.T)
    return plan, a, b_nk, a_in, b_nk if family.b_major == "k" else b_nk.T.contiguous()


def _check(got, a, b_nk, out_dtype: str, alpha: float = 1.0, plus=None) -> None:
    """Each element within verify's bound of alpha times the float64 product, plus ``plus`` (the
    epilogue's other terms, in float64)."""
    a64, b64 = a.double(), b_nk.double()
    ref = alpha * (a64 @ b64.T)
    bound = abs(alpha) * (a64.abs() @ b64.abs().T)
    if plus is not None:
        ref, bound = ref + plus, bound + plus.abs()
    tol, rule = matmul_tolerance(bound.cpu().numpy(), ref.cpu().numpy(), a.shape[1], out_dtype)
    err = np.abs(got.double().cpu().numpy() - ref.cpu().numpy())
    bad = int(np.count_nonzero(~(err <= tol)))
    assert bad == 0, f"{bad} of {err.size} elements outside {rule}"


SHAPES = [(1, 72, 520), (129, 264, 1000), (300, 520, 456), (64, 128, 64), (700, 1000, 200)]


@pytest.mark.parametrize("name", SPECS)
def test_every_kernel_at_every_split_matches(device, name: str) -> None:
    spec = _spec(name)
    kernel = tmagen.load(spec)
    family = resolve(spec).kernel.detail
    out_dtype = resolve(spec).map("c").dtype_name
    cases = 0
    for i, (m, n, k) in enumerate(SHAPES):
        plan, a, b_nk, a_in, b = _operands(spec, m, n, k, seed=i)
        for variant in range(len(family.kernels)):
            groups = family.groups(variant, m, n)  # a cluster's tiles: stacked, then an odd last row side by side
            for splits, split_from in ((1, 0), (2, 0), (3, 0), (7, 0), (2, groups // 2), (3, groups - 1)):
                if splits > -(-k // family.kernels[0].bk):
                    continue
                out = torch.full((m, n), float("nan"), device="cuda", dtype=TORCH[out_dtype])
                kernel(a_in, b, out=out, choice=(variant, splits, split_from))  # every tile split, or the tail
                torch.cuda.synchronize()
                _check(out, a, b_nk, out_dtype)
                cases += 1
    assert cases >= len(SHAPES) * len(family.kernels) * 3


@pytest.mark.parametrize("name", SPECS[:2])  # (an MN-major A has no 8-row boxes: M runs along its rows)
def test_tiles_at_the_edge_of_m_read_every_row_above_it(device, name: str) -> None:
    """A tile at M's edge loads A's boxes wholly above M, then its last rows in boxes of 8 (the a_rows
    map), and leaves the rest of its stages as they were. A product whose A is all NaN first fills
    every SM's stages with NaN; then every kernel, unsplit and split, at M of each count of 8-row
    boxes and rows past the last one, must give the product: a row above M that no box brought
    would come out NaN, and one put in the wrong place a wrong value."""
    spec = _spec(name)
    kernel = tmagen.load(spec)
    family = resolve(spec).kernel.detail
    assert family.edge_rows == 8
    out_dtype = resolve(spec).map("c").dtype_name
    plan, _, _, poison_a, poison_b = _operands(spec, 2048, 2048, 136, seed=0)
    poison_a.fill_(float("nan"))
    poison_out = torch.empty((2048, 2048), device="cuda", dtype=TORCH[out_dtype])
    cases = 0
    for m in (1, 7, 8, 9, 17, 63, 64, 65, 100, 129, 200):
        plan, a, b_nk, _, b = _operands(spec, m, 264, 1000, seed=m)
        for variant in range(len(family.kernels)):
            for splits in (1, 3):
                kernel(poison_a, poison_b, out=poison_out, choice=(variant, 1, 0))
                out = torch.full((m, 264), float("nan"), device="cuda", dtype=TORCH[out_dtype])
                kernel(a, b, out=out, choice=(variant, splits, 0))
                torch.cuda.synchronize()
                _check(out, a, b_nk, out_dtype)
                cases += 1
    assert torch.isnan(poison_out.float()).all(), "the poisoning product ran"
    assert cases == 11 * len(family.kernels) * 2


def test_pairs_in_clusters_give_the_bits_of_the_kernels_alone(device) -> None:
    """The 128-row kernels run in clusters of two CTAs, one above the other, each loading its share of
    the B boxes for both (multicast: half of them, or two and one of three for the twins in pairs of
    128 x 192 and 192 x 192; the twins of the 64-row tiles too); with ``cluster: 1`` each CTA loads
    its own. Both sum the same products
    in the same order, so C must be equal bit for bit: on even numbers of tile rows, odd ones (the
    last row in pairs side by side, each CTA loading its own A and B, and where the tile columns are
    odd too a CTA past N that loads nothing), a single row, rows not whole 128 bytes, every split.
    The last group alone split (the groups side by side come last in the walk) sums its tiles in
    another order than any launch alone does: it is checked against the float64 product."""
    raw = json.loads((REPO / "specs" / "matmul_bf16_tn.json").read_text())
    alone_raw = {**raw, "name": "matmul_bf16_tn_alone", "kernel": {**raw["kernel"], "cluster": 1}}
    paired, alone = tmagen.load(parse_spec(raw)), tmagen.load(parse_spec(alone_raw))
    family = resolve(parse_spec(raw)).kernel.detail
    assert [p.cluster for p in family.kernels] == [2, 1, 2, 1, 1, 1, 1, 2, 2, 2, 2], "alone, and twins in pairs"
    alone_family = resolve(parse_spec(alone_raw)).kernel.detail
    assert all(p.cluster == 1 for p in alone_family.kernels) and len(alone_family.kernels) == 7
    alone_of = {(p.bm, p.bn): p.variant for p in alone_family.kernels}
    compared = 0
    for m, n, k in ((1, 72, 520), (129, 264, 1000), (300, 520, 456), (640, 1032, 2056), (1000, 2056, 136)):
        plan, a, b_nk, _, b = _operands(parse_spec(raw), m, n, k, seed=m)
        for variant in (v for v, p in enumerate(family.kernels) if p.cluster == 2):
            groups = family.groups(variant, m, n)
            for splits, split_from, bits in ((1, 0, True), (3, 0, True), (2, groups - 1, False)):
                got = torch.full((m, n), float("nan"), device="cuda", dtype=torch.bfloat16)
                want = torch.full((m, n), float("nan"), device="cuda", dtype=torch.bfloat16)
                paired(a, b, out=got, choice=(variant, splits, split_from))
                if not bits:
                    torch.cuda.synchronize()
                    _check(got, a, b_nk, "bfloat16")
                    continue
                p = family.kernels[variant]
                alone(a, b, out=want, choice=(alone_of[p.bm, p.bn], splits, 0))
                torch.cuda.synchronize()
                assert torch.equal(got, want), (m, n, k, variant, splits)
                compared += 1
        _check(got, a, b_nk, "bfloat16")
    assert compared == 60


@pytest.mark.parametrize("name", SPECS)
def test_the_epilogue(device, name: str) -> None:
    spec = _spec(name)
    kernel = tmagen.load(spec)
    out_dtype = resolve(spec).map("c").dtype_name
    odt = TORCH[out_dtype]
    # the dispatch's own choice, and every kernel whole and split: each epilogue mode (bias alone, C_in
    # alone, both) stages C through the kernel's own buffers (192 x 192 has one per consumer, each piece
    # of C waiting for the last to leave shared memory)
    kernels = len(resolve(spec).kernel.detail.kernels)
    forced = [((200, 264, 640), (variant, splits)) for variant in range(kernels) for splits in (1, 3)]
    for (m, n, k), choice in [((77, 136, 200), None), ((64, 4096, 4096), None), *forced]:
        plan, a, b_nk, a_in, b = _operands(spec, m, n, k, seed=m)
        c_in = torch.randn(m, n, device="cuda").to(odt)
        bias_n = torch.randn(n, device="cuda").to(odt)
        bias_m = torch.randn(m, device="cuda").to(odt)
        extra = {} if choice is None else {"choice": choice}
        out = kernel(a_in, b, c=c_in, alpha=0.5, beta=-2.0, bias=bias_n, bias_along="n", **extra)
        torch.cuda.synchronize()
        _check(out, a, b_nk, out_dtype, 0.5, -2.0 * c_in.double() + bias_n.double())
        out = kernel(a_in, b, bias=bias_m, bias_along="m", **extra)
        torch.cuda.synchronize()
        _check(out, a, b_nk, out_dtype, plus=bias_m.double()[:, None].expand(m, n))
        # C_in is the output: C = A B + C
        acc = c_in.clone()
        kernel(a_in, b, out=acc, c=acc, beta=1.0, **extra)
        torch.cuda.synchronize()
        _check(acc, a, b_nk, out_dtype, plus=c_in.double())
    # K = 0: no product, the epilogue alone
    a0 = torch.empty((50, 0) if resolve(spec).kernel.detail.a_major == "k" else (0, 50), device="cuda",
                     dtype=TORCH[resolve(spec).map("a").dtype_name])
    b0 = torch.empty((72, 0) if resolve(spec).kernel.detail.b_major == "k" else (0, 72), device="cuda", dtype=a0.dtype)
    c_in = torch.randn(50, 72, device="cuda").to(odt)
    bias = torch.randn(72, device="cuda").to(odt)
    out = kernel(a0, b0, c=c_in, beta=3.0, bias=bias, bias_along="n")
    torch.cuda.synchronize()
    want = (3.0 * c_in.double() + bias.double()).to(odt)
    assert torch.allclose(out.double(), want.double(), rtol=2 ** -7, atol=0), "K = 0: beta C_in + bias"


def _library(name: str):
    spec = _spec(name)
    plan = resolve(spec)
    result = toolchain.compile_folder(plan, render(plan, f"specs/{name}.json"))
    lib = ctypes.CDLL(str(result.shared_library))
    getattr(lib, f"{name}_last_error").restype = ctypes.c_char_p
    choice = getattr(lib, f"{name}_matmul_choice")
    choice.argtypes = [ctypes.c_uint64] * 3 + [ctypes.c_uint32] + [ctypes.POINTER(ctypes.c_uint32)] * 3
    launch = getattr(lib, f"{name}_matmul_launch_epilogue")
    launch.argtypes = ([ctypes.c_void_p] * 3 + [ctypes.c_uint64] * 3 + [ctypes.c_int64] * 3
                       + [ctypes.c_float, ctypes.c_float, ctypes.c_void_p, ctypes.c_int64, ctypes.c_void_p,
                          ctypes.c_uint32, ctypes.c_void_p])
    return lib, choice, launch, plan


def test_the_c_api_chooses_as_python_does_and_splits_through_its_workspace(device) -> None:
    name = "matmul_bf16_tn"
    lib, choice, launch, plan = _library(name)
    family = plan.kernel.detail
    rng = np.random.default_rng(18)
    shapes = [(1, 4096, 4096), (64, 4096, 14336), (128, 14336, 4096), (8192, 8192, 8192), (16384, 4096, 4096)]
    shapes += [(int(rng.integers(1, 20000)), 8 * int(rng.integers(1, 2500)), int(rng.integers(1, 20000)))
               for _ in range(400)]  # N whole 16 bytes of bfloat16: C's rows as TMA stores them
    variant, splits, split_from = ctypes.c_uint32(), ctypes.c_uint32(), ctypes.c_uint32()
    # the C API takes the current device's table, by its DRAM peak, as the Python launcher does; a GPU
    # that a table was fitted on takes that one
    table = family.table_for(device.multiprocessors, device.memory_bytes_per_us)
    fitted_here = [i for i, d in enumerate(family.dispatches) if d.gpu == device.name]
    assert table in fitted_here or not fitted_here, (device.name, device.memory_bytes_per_us)
    split_shapes = []
    for sms in (132, 114, 7):
        for m, n, k in shapes:
            assert choice(m, n, k, sms, ctypes.byref(variant), ctypes.byref(splits), ctypes.byref(split_from)) == 0
            want = family.choose(m, n, k, sms, table=table)
            assert (variant.value, splits.value, split_from.value) == (want.variant, want.splits, want.split_from), \
                (m, n, k, sms)
            if sms == device.multiprocessors and want.splits > 1 and m * n * k < 2 ** 34:
                split_shapes.append((m, n, k))
    assert split_shapes, "some shape splits K"
    last_error = getattr(lib, f"{name}_last_error")
    for m, n, k in split_shapes[:3] + [(300, 264, 200)]:
        n8, k8 = -(-n // 8) * 8, -(-k // 8) * 8  # rows of whole 16 bytes
        for seed in (1, 2):  # the same shape twice, at new pointers: the cached maps must not be reused
            a = torch.randn(m, k8, device="cuda", generator=torch.Generator(device="cuda").manual_seed(seed))
            a = a.to(torch.bfloat16)
            b = torch.randn(n, k8, device="cuda").to(torch.bfloat16)
            c = torch.full((m, n8), float("nan"), device="cuda", dtype=torch.bfloat16)
            for _ in range(2):  # and twice at the same pointers: the cached maps are reused
                assert launch(a.data_ptr(), b.data_ptr(), c.data_ptr(), m, n, k, k8, k8, n8, 1.0, 0.0, None, 0, None,
                              0, None) == 0, last_error()
            torch.cuda.synchronize()
            _check(c[:, :n], a[:, :k], b[:, :k], "bfloat16")


def test_the_c_api_of_a_weight_gradient_spec(device) -> None:
    """The generated C API of a spec whose A and B are MN-major (matmul_bf16_wgrad_f32: A [K, M] and
    B [K, N], as x and dy lie): its choice equals Python's with dense rows M and N elements apart;
    launches with lda and ldb of 0 (dense) and padded, M and N ragged, a split of K among them, give
    the product; K = 0 with an epilogue gives beta C_in + bias."""
    name = "matmul_bf16_wgrad_f32"
    lib, choice, launch, plan = _library(name)
    family = plan.kernel.detail
    assert (family.a_major, family.b_major) == ("mn", "mn")
    table = family.table_for(device.multiprocessors, device.memory_bytes_per_us)
    variant, splits, split_from = ctypes.c_uint32(), ctypes.c_uint32(), ctypes.c_uint32()
    rng = np.random.default_rng(21)
    shapes = [(8 * int(rng.integers(1, 2000)), 8 * int(rng.integers(1, 2000)), int(rng.integers(1, 30000)))
              for _ in range(300)] + [(1000, 776, 2048), (4104, 4096, 4096), (4096, 4096, 4096)]
    for m, n, k in shapes:
        assert choice(m, n, k, 132, ctypes.byref(variant), ctypes.byref(splits), ctypes.byref(split_from)) == 0
        want = family.choose(m, n, k, 132, table=table)
        got = (variant.value, splits.value, split_from.value)
        assert got == (want.variant, want.splits, want.split_from), (m, n, k)
    last_error = getattr(lib, f"{name}_last_error")
    split = next((m, n, k) for m, n, k in shapes if m * n * k < 2 ** 32 and family.choose(
        m, n, k, device.multiprocessors, table=table).splits > 1)
    for (m, n, k), pad in [((1000, 776, 2048), 0), ((1000, 776, 2048), 8), ((264, 136, 72), 16), (split, 0)]:
        x = torch.randn(k, m + pad, device="cuda").to(torch.bfloat16)  # A as it lies: [K, M], rows m + pad apart
        dy = torch.randn(k, n + pad, device="cuda").to(torch.bfloat16)
        c = torch.full((m, n), float("nan"), device="cuda")
        lda, ldb = (m + pad, n + pad) if pad else (0, 0)
        assert launch(x.data_ptr(), dy.data_ptr(), c.data_ptr(), m, n, k, lda, ldb, 0, 1.0, 0.0, None, 0, None, 0,
                      None) == 0, last_error()
        torch.cuda.synchronize()
        _check(c, x[:, :m].T, dy[:, :n].T, "float32")
    # K = 0: no product, the epilogue alone (A's map of one row that nothing loads, M not whole 16 bytes)
    m, n = 50, 72
    c_in, bias = torch.randn(m, n, device="cuda"), torch.randn(n, device="cuda")
    out = torch.full((m, n), float("nan"), device="cuda")
    scratch = torch.zeros(64, device="cuda", dtype=torch.bfloat16)
    assert launch(scratch.data_ptr(), scratch.data_ptr(), out.data_ptr(), m, n, 0, 0, 0, 0, 1.0, 3.0, c_in.data_ptr(),
                  0, bias.data_ptr(), 1, None) == 0, last_error()
    torch.cuda.synchronize()
    assert torch.allclose(out, 3.0 * c_in + bias, rtol=1e-6, atol=1e-6), "K = 0: beta C_in + bias"
