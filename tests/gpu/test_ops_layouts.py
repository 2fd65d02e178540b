"""tmagen.ops on every dtype and view class PyTorch makes, against PyTorch bit for bit, on poisoned
outputs: the shapes issue 19 found refused, views TMA cannot address (the strided kernels), permutes
of ranks 2 to 5, zero-size, 0-d and 1-d tensors, the permute custom op; compute-sanitizer on the
strided kernels; host time per call on a 64 x 64 tensor beside PyTorch's own. Cheap: small tensors.

    python -m pytest -q tests/gpu/test_ops_layouts.py
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from typing import Any

import pytest

import tmagen.ops
from tmagen import ops

from conftest import REPO

pytestmark = pytest.mark.gpu

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("PyTorch sees no CUDA device", allow_module_level=True)

POISON = 0xA5
DTYPES = [torch.bool, torch.uint8, torch.int8, torch.float8_e4m3fn, torch.float16, torch.bfloat16, torch.int16,
          torch.float32, torch.int32, torch.complex64, torch.float64, torch.int64, torch.complex128]


def bits(t: Any) -> Any:
    t = t.contiguous()
    if t.is_complex():
        t = torch.view_as_real(t)
    return t.reshape(-1).view(torch.uint8) if t.numel() else t.reshape(-1)


def random(shape: tuple, dtype: Any, gen: Any) -> Any:
    if dtype == torch.bool:
        return torch.randint(0, 2, shape, device="cuda", generator=gen).bool()
    size = torch.empty((), dtype=dtype).element_size()
    raw = torch.randint(0, 256, (max(1, int(torch.tensor(shape).prod())) * size,), dtype=torch.uint8,
                        device="cuda", generator=gen)
    return raw[: int(torch.tensor(shape).prod()) * size].view(dtype).reshape(shape)


def poisoned(shape: tuple, dtype: Any) -> Any:
    out = torch.empty(shape, dtype=dtype, device="cuda")
    if out.numel():
        out.view(torch.uint8).fill_(POISON) if out.dim() else out.reshape(1).view(torch.uint8).fill_(POISON)
    return out


@pytest.fixture()
def gen() -> Any:
    return torch.Generator(device="cuda").manual_seed(19)


def _check(got: Any, want: Any, what: str) -> None:
    assert got.shape == want.shape and got.dtype == want.dtype, what
    assert torch.equal(bits(got), bits(want)), what


def _views(base: Any) -> dict[str, Any]:
    return {"contiguous": base, "sliced": base[:, 3:37, 5:69], "batch step": base[::2],
            "column step": base[:, :, ::3], "transposed": base.transpose(1, 2), "batch swapped": base.transpose(0, 1),
            "flipped": base.flip(1) if base.dtype != torch.bool else base[:, 1:],  # a copy, contiguous
            "expanded": base[:1, :1].expand(4, 40, 72), "offset by one": base.reshape(-1)[1:1 + 39 * 71].view(39, 71),
            "1-d": base[1, 2], "1-d step": base[1, :, 5], "0-d": base[1, 2, 3], "empty": base[:, :0]}


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_every_dtype_and_view_class(dtype: Any, gen: Any) -> None:
    base = random((6, 40, 72), dtype, gen)
    for name, v in _views(base).items():
        out = poisoned(tuple(v.shape), dtype)
        assert tmagen.ops.copy(v, out=out) is out
        _check(out, v.contiguous(), f"copy {name}")
        _check(tmagen.ops.copy(v), v.contiguous(), f"copy {name}, allocated")
        if v.dim() >= 2:
            _check(tmagen.ops.transpose(v), v.transpose(-2, -1).contiguous(), f"transpose {name}")
            out = poisoned((*v.shape[:-2], v.shape[-1], v.shape[-2]), dtype)
            tmagen.ops.transpose(v, out=out)
            _check(out, v.transpose(-2, -1).contiguous(), f"transpose {name} into out")


@pytest.mark.parametrize("shape,dtype", [((777, 1032), torch.float16), ((1, 4), torch.float32),
                                         ((16385, 8), torch.bfloat16), ((1000, 1000), torch.float32),
                                         ((8, 512, 512), torch.bfloat16), ((3, 5), torch.int8),
                                         ((129, 65), torch.complex128)], ids=str)
def test_the_shapes_issue_19_found_refused(shape: tuple, dtype: Any, gen: Any) -> None:
    x = random(shape, dtype, gen)
    _check(tmagen.ops.transpose(x), x.transpose(-2, -1).contiguous(), "transpose")
    _check(tmagen.ops.copy(x), x.clone(), "copy")


PERMUTES = [((2, 32, 16, 48), (0, 2, 3, 1)), ((2, 16, 48, 32), (0, 3, 1, 2)),  # NCHW <-> NHWC
            ((2, 40, 4, 64), (0, 2, 1, 3)), ((2, 4, 40, 64), (0, 2, 1, 3)),  # [B,S,H,D] <-> [B,H,S,D]
            ((24, 40), (1, 0)), ((3, 20, 36), (2, 0, 1)), ((3, 4, 5, 6, 7), (4, 2, 0, 3, 1)),
            ((2, 3, 4, 32, 48), (1, 0, 2, 4, 3)), ((5, 3, 4, 2, 3), (3, 1, 4, 0, 2)), ((7, 9, 11), (1, 2, 0))]


@pytest.mark.parametrize("dtype", [torch.uint8, torch.bfloat16, torch.float32, torch.float64, torch.complex128],
                         ids=str)
def test_permutes_of_ranks_2_to_5(dtype: Any, gen: Any) -> None:
    for shape, dims in PERMUTES:
        x = random(shape, dtype, gen)
        for v in (x, x[..., 1:]):
            _check(tmagen.ops.permute(v, dims), v.permute(dims).contiguous(), f"permute {shape} {dims}")
            _check(torch.ops.tmagen.permute(v, list(dims)), v.permute(dims).contiguous(), "custom op")


def test_permute_autograd_and_compile(gen: Any) -> None:
    """The gradient of a permute is the inverse permute of any gradient, and the compiled op is the
    permute. Compared by bits: random bits hold NaNs, and torch.equal is False on any NaN."""
    x = random((2, 8, 16, 32), torch.float32, gen).requires_grad_()
    y = tmagen.ops.permute(x, (0, 2, 3, 1))
    _check(y.detach(), x.detach().permute(0, 2, 3, 1).contiguous(), "forward")
    g = random(tuple(y.shape), torch.float32, gen)
    y.backward(g)
    _check(x.grad, g.permute(0, 3, 1, 2).contiguous(), "gradient")
    z = random((2, 8, 16, 32), torch.float32, gen)
    f = torch.compile(lambda t: tmagen.ops.permute(t, (0, 2, 3, 1)), fullgraph=True)
    _check(f(z), z.permute(0, 2, 3, 1).contiguous(), "compiled")
    w = torch.randn((2, 8, 16, 32), device="cuda", generator=gen)  # finite values: * 2 is exact
    h = torch.compile(lambda t: tmagen.ops.permute(t, (0, 2, 3, 1)) * 2, fullgraph=True)
    assert torch.equal(h(w), w.permute(0, 2, 3, 1) * 2)


# (batch, R, C): each way the plane kernel shapes its tile - 32 x 32 units, narrow along C (few
# source columns: NHWC -> NCHW of 8 channels), narrow along R (NCHW -> NHWC), both small - with
# extents that are and are not multiples of the packed unit
PLANES = [(2, 67, 130), (3, 2100, 8), (2, 8, 2100), (1, 5, 3), (4, 33, 1), (2, 1, 70), (1, 4096, 12),
          (1, 301, 97)]  # several tiles along R and C, every row of odd bytes


@pytest.mark.parametrize("dtype", [torch.uint8, torch.bfloat16, torch.float32, torch.float64, torch.complex128],
                         ids=str)
def test_the_plane_kernel_in_every_tile_shape_packed_and_not(dtype: Any, gen: Any) -> None:
    """The plane kernel called directly: out [B, C, R] from x [B, R, C], in each tile shape, with 1- and
    2-byte elements in units of 4-byte words, each unit row loaded as a word where its address allows
    and from the two words it straddles where not, and stored as a word or element by element: pointers
    one element off, source rows of odd bytes (padding), output rows of odd bytes (R of 67, 301 or 5:
    some rows are whole words, some not)."""
    from tmagen import strided
    from tmagen.kinds.strided import plan as sp

    size = torch.empty((), dtype=dtype).element_size()
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    stream = torch.cuda.current_stream().cuda_stream
    seen = set()
    for b, r, c in PLANES:
        for pad, offset in ((0, 0), (0, 1), (1, 0), (4, 0)):  # row padding (elements), pointer offset
            base = random((b * r * (c + pad) + offset,), dtype, gen)
            x = base[offset:].view(b, r, c + pad)[:, :, :c]
            out_base = poisoned((b * c * r + offset,), dtype)
            out = out_base[offset:].view(b, c, r)
            call = sp.plane((b,), r, c, x.stride(), (c * r, 1, r), size, sms, src_align=x.data_ptr() % 16)
            assert call.packed == (size < 4), (b, r, c, pad, offset)
            assert call.src_words == (size < 4 and offset * size % 4 == 0 and (c + pad) * size % 4 == 0)
            seen.add(("untested loads", call.src_words))
            seen.add((call.packed, call.tile_cw))
            strided.run(strided.prepare(call, x.data_ptr(), out.data_ptr(), 0, stream), stream)
            _check(out, x.transpose(1, 2).contiguous(), f"plane {(b, r, c)} pad {pad} offset {offset} {call}")
    assert size >= 4 or {("untested loads", True), ("untested loads", False)} <= seen, seen
    seen = {s for s in seen if s[0] != "untested loads"}
    assert len({cw for _, cw in seen}) >= 5 and 1 in {cw for _, cw in seen}, seen
    assert size >= 4 or any(packed for packed, _ in seen)


# (batch, R, C): planes of short contiguous rows, tiles of a few rows to many, a last tile of 1 to 3 rows
NARROWS = [(1, 101, 3), (2, 16385, 8), (3, 7, 5), (1, 4099, 31), (2, 1000, 64), (1, 1, 1), (4, 33, 2), (1, 5000, 1),
           (2, 3001, 128), (1, 50, 100), (3, 500, 24)]


@pytest.mark.parametrize("dtype", [torch.uint8, torch.bfloat16, torch.float32, torch.float64, torch.complex128],
                         ids=str)
def test_the_narrow_kernel_in_every_tile_size_and_alignment(dtype: Any, gen: Any) -> None:
    """The narrow kernel called directly, in bytes and in words: out [B, C, R] from x [B, R, C] whose
    rows follow one another, each tile one span of the source: in bytes loaded in whole words from the
    word its first byte is in (pointers one element off: the span starting mid-word); in words (rows of
    whole words on words) in 16-byte vectors from its first aligned word, rows padded in shared memory.
    R of odd counts (output rows of odd bytes, stored element by element), tiles from 4 rows to the
    largest, rows of up to each kernel's limit."""
    from tmagen import strided
    from tmagen.kinds.strided import plan as sp

    size = torch.empty((), dtype=dtype).element_size()
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    stream = torch.cuda.current_stream().cuda_stream
    tried = {False: 0, True: 0}
    for b, r, c in NARROWS:
        for offset, tile in ((0, "planned"), (1, "planned"), (0, "smallest"), (3, "largest")):
            base = random((b * r * c + offset,), dtype, gen)
            x = base[offset:].view(b, r, c)
            for words in (False, True):
                fits = (sp.narrow_words_fit(c, x.stride(), size, x.data_ptr() % 16) if words
                        else sp.narrow_fits(r, c, x.stride(), size))
                if not fits:
                    continue
                out_base = poisoned((b * c * r + offset,), dtype)
                out = out_base[offset:].view(b, c, r)
                limits = ((sp.NARROW_WORDS_MIN_TILE_BYTES, sp.NARROW_WORDS_TILE_BYTES) if words
                          else (sp.NARROW_MIN_TILE_BYTES, sp.NARROW_TILE_BYTES))
                tile_bytes = {"planned": None, "smallest": limits[0], "largest": limits[1]}[tile]
                call = sp.narrow((b,), r, c, x.stride(), (c * r, 1, r), size, sms, tile_bytes=tile_bytes,
                                 src_align=x.data_ptr() % 16, words=words)
                assert call.tile_rows % 4 == 0 and call.tiles_r * call.tile_rows >= r
                strided.run(strided.prepare(call, x.data_ptr(), out.data_ptr(), 0, stream), stream)
                _check(out, x.transpose(1, 2).contiguous(), f"narrow {(b, r, c)} offset {offset} {call}")
                assert torch.equal(bits(out_base[:offset]), bits(poisoned((offset,), dtype))), "wrote before the output"
                tried[words] += 1
    assert tried[False] >= 16 and tried[True] >= 8, tried


# (batch, R, C) around the tile kernel's sides (16 to 64 elements): whole tiles, ragged edges on
# either side, planes narrower than one tile, one row, one column
TILES = [(2, 64, 64), (1, 67, 130), (3, 5, 33), (2, 33, 1), (1, 1, 70), (2, 100, 17), (1, 16, 16)]


@pytest.mark.parametrize("dtype", [torch.uint8, torch.bfloat16, torch.float32, torch.float64], ids=str)
def test_the_tile_kernel_in_every_word_size(dtype: Any, gen: Any) -> None:
    """The tile kernel called directly: out [B, C, R] from x [B, R, C] (and into a strided output),
    with pointers and row pitches that allow each word size on each side (16 bytes, 4, the element),
    ragged edges and planes narrower than a tile, against PyTorch bit for bit on poisoned outputs."""
    from tmagen import strided
    from tmagen.kinds.strided import plan as sp

    size = torch.empty((), dtype=dtype).element_size()
    stream = torch.cuda.current_stream().cuda_stream
    words, sides = set(), set()
    for b, r, c in TILES:
        # (source row padding, source offset, output row padding, output offset), in elements
        for pad, offset, out_pad, out_offset in ((0, 0, 0, 0), (16, 0, 16, 0), (1, 0, 0, 1), (4 // size, 0, 0, 0),
                                                 (0, 1, 1, 0), (0, 4 // size, 4 // size, 0), (0, 0, 0, 1)):
            base = random((b * r * (c + pad) + offset,), dtype, gen)
            x = base[offset:].view(b, r, c + pad)[:, :, :c]
            out_base = poisoned((b * c * (r + out_pad) + out_offset,), dtype)
            out = out_base[out_offset:].view(b, c, r + out_pad)[:, :, :r]
            dst = (out.stride(0), 1, out.stride(1))
            for sms in (132, 1):  # the larger side too, where the size has one (at least one tile per "SM")
                call = sp.tile((b,), r, c, x.stride(), dst, size, x.data_ptr() % 16, out.data_ptr() % 16, sms)
                if call.load_bytes < sp.TILE_MIN_LOAD_BYTES:  # no kernel loads so: tile_fits refuses it
                    assert not sp.tile_fits(call)
                    continue
                words.add((call.load_bytes, call.store_bytes))
                sides.add(call.side)
                out_base.view(torch.uint8).fill_(POISON)
                strided.run(strided.prepare(call, x.data_ptr(), out.data_ptr(), 0, stream), stream)
                _check(out, x.transpose(1, 2), f"tile {(b, r, c)} pads {pad}/{out_pad} offsets {offset}/{out_offset} "
                                               f"{call.symbol}")
                assert torch.equal(bits(out_base[out_offset:].view(b, c, r + out_pad)[:, :, r:]),
                                   bits(poisoned((b, c, out_pad), dtype))), "the tile kernel wrote past a row's end"
    assert {load for load, _ in words} == {w for w in sp.tile_words(size) if w >= sp.TILE_MIN_LOAD_BYTES}, words
    assert {store for _, store in words} == set(sp.tile_words(size)), words
    assert sides == {sp.TILE_SIDE[size], sp.TILE_SIDE_LARGE.get(size, sp.TILE_SIDE[size])}, sides


# Shapes around the small tiles' boxes (32 and 64 rows, 128 and 1024 bytes), batched too: the route the
# table picks on each, and each tile forced.
SMALL = [(64, 64), (100, 36), (3, 72, 200), (1, 33, 130), (257, 48), (2, 64, 256)]


@pytest.mark.parametrize("dtype", [torch.uint8, torch.bfloat16, torch.float32, torch.float64, torch.complex128],
                         ids=str)
def test_every_small_tile_of_the_tma_kernels(dtype: Any, gen: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """The TMA transpose and copy in each tile of ops.SMALL_TILES (and the tuned one), forced on
    every move, against PyTorch bit for bit on poisoned outputs, ragged extents and batches."""
    base = ops.table()
    by_layout = {cls: {**c, "gather_max_bytes": 0, "gather_max_bytes_transposed": 0, "tma_min_plane": 1,
                       "tma_min_row_bytes": 16, "tile_max_bytes": 0} for cls, c in base["classes"].items()}
    monkeypatch.setattr(ops, "table", lambda: {**base, "classes": by_layout})
    tiles = {kind: [None, *ops.SMALL_TILES[kind]] for kind in ops.SMALL_TILES}
    taken = set()
    for kind in ("transpose", "copy"):
        for tile in tiles[kind]:
            # rank 1 (a flat copy's single row) has the tuned tile only
            monkeypatch.setattr(ops, "tile_for", lambda kind, shape, *a, tile=tile: tile if len(shape) >= 2 else None)
            ops._MOVES.clear()
            ops._forget_replays()
            rows = random((2, 70, 320), dtype, gen)[:, 3:, 32:288]  # rows of whole 16 bytes, strided: the TMA copy
            for x in [random(shape, dtype, gen) for shape in SMALL] + [rows]:
                want = x.transpose(-2, -1).contiguous() if kind == "transpose" else x.clone()
                out = poisoned(tuple(want.shape), dtype)
                getattr(tmagen.ops, kind)(x, out=out)
                _check(out, want, f"{kind} {tuple(x.shape)} {x.stride()} in tiles {tile}")
                taken |= {(m.how, m.tile) for m in ops._MOVES.values()}
    if torch.empty((), dtype=dtype).element_size() <= 8:  # 16-byte elements transpose by the plane kernel
        assert {("transpose", t) for t in tiles["transpose"]} <= taken, taken
    assert {("copy", t) for t in tiles["copy"]} <= taken, taken


@pytest.mark.parametrize("dtype", [torch.uint8, torch.bfloat16, torch.float32, torch.float64, torch.complex128],
                         ids=str)
def test_the_gather_kernel_on_two_contiguous_runs(dtype: Any, gen: Any) -> None:
    """The gather kernel's path for a contiguous source and output (whole 16-byte vectors, four in
    flight, then the elements past the last one), on counts around the vector and the grid, with
    pointers on and off 16 bytes."""
    from tmagen import strided
    from tmagen.kinds.strided import plan as sp

    size = torch.empty((), dtype=dtype).element_size()
    stream = torch.cuda.current_stream().cuda_stream
    for count in (1, 15, 16, 17, 4 * 256 * 3 + 5, 1_000_003):
        for offset in (0, 1):
            x = random((count + offset,), dtype, gen)[offset:]
            out = poisoned((count + offset,), dtype)[offset:]
            call = sp.gather((count,), (1,), (1,), size, 2)  # 2 multiprocessors: several vectors per thread
            assert call.src_linear and call.dst_linear
            strided.run(strided.prepare(call, x.data_ptr(), out.data_ptr(), 0, stream), stream)
            _check(out, x, f"gather of {count} elements, offset {offset}")


# op -> (input shape, the op with out=, PyTorch's result, involutive: whether ping-pong buffers fit)
CHAINS = {
    "transpose 64x64": ((64, 64), lambda t, o: tmagen.ops.transpose(t, out=o), lambda t: t.mT.contiguous(), True),
    "transpose 4096x4096": ((4096, 4096), lambda t, o: tmagen.ops.transpose(t, out=o), lambda t: t.mT.contiguous(),
                            True),
    "copy 4096x4096": ((4096, 4096), lambda t, o: tmagen.ops.copy(t, out=o), lambda t: t.clone(), True),
    "permute (0, 2, 1)": ((64, 96, 64), lambda t, o: tmagen.ops.permute(t, (0, 2, 1), out=o),
                          lambda t: t.permute(0, 2, 1).contiguous(), True),
    "copy of x[:, 1:]": ((1000, 1010), lambda t, o: tmagen.ops.copy(t[:, 1:], out=o),  # a strided kernel
                         lambda t: t[:, 1:].contiguous(), False),
}


@pytest.mark.parametrize("op", list(CHAINS))
def test_back_to_back_ops_wait_for_each_other(op: str) -> None:
    """Copy, transpose and strided kernels are launched as programmatic dependent launches: each
    may start while the one before it in the stream finishes. Chained through outputs poisoned
    with NaN (read after write) and, where the op undoes itself, through two buffers in turn (write
    after read), against PyTorch bit for bit."""
    shape, run, want_of, involutive = CHAINS[op]
    x = torch.randn(*shape, device="cuda", generator=torch.Generator(device="cuda").manual_seed(19))
    run(x, torch.empty(want_of(x).shape, device="cuda"))  # compiled and loaded before the chain
    outs, current = [], x
    for _ in range(8):
        current = want_of(current)
        outs.append(torch.full(current.shape, float("nan"), device="cuda"))
    torch.cuda.synchronize()
    source = x
    for o in outs:
        run(source, o)
        source = o
    if involutive:
        ping, pong = x.clone(), torch.full(want_of(x).shape, float("nan"), device="cuda")
        for _ in range(8):
            run(ping, pong)
            ping, pong = pong, ping
    torch.cuda.synchronize()
    want = x
    for o in outs:
        want = want_of(want)
        assert torch.equal(bits(o), bits(want))
    if involutive:
        assert torch.equal(bits(ping), bits(want))


def test_large_strided_gather_uses_64_bit_indices(gen: Any) -> None:
    """A view of more than 2^31 elements through the strided kernels (uint8, stepped columns: 2.1 GB read)."""
    base = torch.empty((1 << 16, (1 << 15) + 2), dtype=torch.uint8, device="cuda")
    base.random_(generator=gen)
    v = base[:, 1:-1]
    out = tmagen.ops.copy(v)
    assert torch.equal(out, v)


# ----------------------------------------------------------------------------- sanitizer
EDGE = """
import torch, tmagen.ops
g = torch.Generator(device="cuda").manual_seed(3)
for dtype in (torch.uint8, torch.float16, torch.float32, torch.float64, torch.complex128):
    x = torch.randint(0, 100, (37, 300), device="cuda", generator=g).to(dtype)
    tmagen.ops.copy(x[:, 1:])                     # gather, misaligned rows
    tmagen.ops.transpose(x)                       # plane (odd output rows) or TMA
    tmagen.ops.copy(x[:, ::3])                    # gather, stepped
    tmagen.ops.permute(x.view(37, 4, 75)[:, :, 1:], (2, 0, 1))   # plane with a batch
    tmagen.ops.copy(x.reshape(-1)[1:])            # 1-d, odd pointer
    y = torch.randint(0, 100, (3, 1030, 6), device="cuda", generator=g).to(dtype)
    tmagen.ops.permute(y, (0, 2, 1))              # narrow: short rows one after the other, with a batch
    tmagen.ops.permute(y[:, :, :5], (0, 2, 1))    # plane narrow along C (packed for 1 and 2 bytes)
    tmagen.ops.permute(y.transpose(1, 2).contiguous(), (0, 2, 1))   # narrow along R
    z = torch.randint(0, 100, (101 * 3 + 1,), device="cuda", generator=g).to(dtype)
    tmagen.ops.transpose(z[:-1].view(101, 3))     # narrow: its span's last word past the tensor's bytes
    tmagen.ops.transpose(z[1:].view(101, 3))      # narrow: its span's first word before them
w = torch.randint(0, 100, (300001 * 20 + 3,), device="cuda", generator=g).to(torch.uint8)
tmagen.ops.transpose(w[:-3].view(300001, 20))     # narrow in words at any size: its last tile's span ends mid-vector
tmagen.ops.transpose(w[4:4 + 300000 * 20].view(300000, 20))   # and from a pointer a word past 16 bytes
tmagen.ops.transpose(torch.randn(300000, 20, device="cuda", generator=g))   # TMA in tiles fitted to its rows
torch.cuda.synchronize()
print("done")
"""


# compute-sanitizer's flags for a Python process: --report-api-errors no, because cuda-bindings
# loads its driver table through cuGetProcAddress and the driver answers CUDA_ERROR_INVALID_VALUE
# for entry points it lacks (34 such host API errors were reported on the H200 with 0 kernel
# errors); a failed call of tmagen's own raises in Python and ends the script non-zero, which the
# test sees. PyTorch's caching allocator is off, so that every tensor is its own allocation and an
# access past a tensor is past an allocation, which memcheck reports.
SANITIZER_FLAGS = ["--report-api-errors", "no", "--error-exitcode", "99"]
SANITIZER_ENV = {"PYTORCH_NO_CUDA_MEMORY_CACHING": "1"}


def _sanitize(tool: str, script: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, **SANITIZER_ENV,
           "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run(["compute-sanitizer", "--tool", tool, *SANITIZER_FLAGS, sys.executable, "-c", script],
                          capture_output=True, text=True, env=env, cwd=REPO, timeout=600)


@pytest.mark.skipif(shutil.which("compute-sanitizer") is None, reason="no compute-sanitizer on PATH")
@pytest.mark.parametrize("tool", ["memcheck", "racecheck", "synccheck"])
def test_sanitizer_on_the_strided_kernels(tool: str, report: Any) -> None:
    run = _sanitize(tool, EDGE)
    summary = [line for line in run.stdout.splitlines() if "ERROR SUMMARY" in line or "RACECHECK SUMMARY" in line]
    report(f"ops_edge_sanitizer_{tool}", {"returncode": run.returncode, "summary": summary,
                                          "tail": run.stdout[-1500:] + run.stderr[-1500:]})
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert "done" in run.stdout, run.stdout[-3000:] + run.stderr[-3000:]
    assert summary and all(" 0 error" in line or " 0 hazard" in line for line in summary), summary


# A strided gather told that a 64-byte allocation is a 37 x 299 float32 output: it writes past it.
OUT_OF_BOUNDS = """
import torch, tmagen.ops
from tmagen import runtime
x = torch.arange(37 * 300, device="cuda", dtype=torch.float32).view(37, 300)
small = runtime.Buffer(64)
class Lying:
    __cuda_array_interface__ = {"shape": (37, 299), "typestr": "<f4", "data": (small.ptr, False),
                                "strides": None, "version": 3, "stream": None}
tmagen.ops.copy(x[:, 1:], out=Lying())
torch.cuda.synchronize()
print("done")
"""


@pytest.mark.skipif(shutil.which("compute-sanitizer") is None, reason="no compute-sanitizer on PATH")
def test_memcheck_with_these_flags_still_finds_a_kernel_writing_out_of_bounds(report: Any) -> None:
    """The flags above hide host API errors only: a strided kernel's write past its allocation is
    still an error, and the run fails."""
    run = _sanitize("memcheck", OUT_OF_BOUNDS)
    report("ops_edge_sanitizer_out_of_bounds", {"returncode": run.returncode, "tail": run.stdout[-1500:]})
    assert run.returncode == 99, run.stdout[-3000:] + run.stderr[-3000:]
    assert "Invalid __global__ write" in run.stdout, run.stdout[-3000:]


# ----------------------------------------------------------------------------- host time
def _per_call_us(fn: Any, calls: int = 2000) -> float:
    for _ in range(50):
        fn()
    torch.cuda.synchronize()
    best = float("inf")
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        best = min(best, (time.perf_counter() - start) / calls * 1e6)
        torch.cuda.synchronize()
    return best


def test_host_time_per_call_on_a_small_tensor(report: Any) -> None:
    """Issue 19, item 4: tmagen.ops.transpose of a 64 x 64 tensor costs the host no more than
    PyTorch's own x.transpose(-2, -1).contiguous() (best of 5 runs of 2000 calls each)."""
    x = torch.randn(64, 64, device="cuda")
    times = {"torch": _per_call_us(lambda: x.transpose(-2, -1).contiguous()),
             "tmagen": _per_call_us(lambda: ops.transpose(x)),
             "tmagen_copy": _per_call_us(lambda: ops.copy(x)),
             "torch_clone": _per_call_us(lambda: x.clone())}
    report("ops_host_time_64x64_us", times)
    assert times["tmagen"] <= times["torch"], times
