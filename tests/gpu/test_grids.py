"""The grids and walks of the copy and transpose kernels, on the GPU: per-block grids of one to
several tiles (a single stage too, which once left warp 0 divergent at a barrier), persistent
grids, raster groups, and the flat view of odd-stride contiguous copies, through the Python launch
path and the generated C API. Every byte is checked against numpy on random data with poisoned
outputs."""

from __future__ import annotations

import ctypes

import numpy as np
import pytest

from tmagen import runtime, toolchain
from tmagen.kinds.copy.plan import flat_copy_shape
from tmagen.plan import resolve
from tmagen.render import render
from tmagen.spec import parse_spec
from tmagen.verify import Verifier

pytestmark = pytest.mark.gpu

BOXES = {"float32": [32, 32], "bfloat16": [32, 64], "uint8": [64, 64]}
ES = {"float32": 4, "bfloat16": 2, "uint8": 1}
# (stages, tiles_per_block, raster_group, tiles_per_stage): per-block grids of 1, 2 and 3 tiles with
# one stage and several, a persistent grid walked both ways, and two tiles per stage
GRIDS = [(1, 1, 1024, 1), (1, 2, 1024, 1), (2, 3, 1, 1), (3, None, 1024, 1), (1, None, 3, 1), (2, 4, 5, 2)]


def transpose_spec(dtype: str, grid: tuple) -> dict:
    stages, per_block, raster, per_stage = grid
    return {"name": f"grid_t_{dtype}_s{stages}_t{per_block or 0}_r{raster}_g{per_stage}", "tensors": [{
        "name": "m", "dtype": dtype, "shape": [256, 256], "box": BOXES[dtype], "swizzle": {"mode": "none"}}],
        "kernel": {"kind": "transpose", "stages": stages, "tiles_per_block": per_block, "raster_group": raster,
                   "tiles_per_stage": per_stage, "blocks_per_sm": 2}}


def test_transpose_grids_and_walks(device, compiler, report) -> None:
    compiled = compiler([transpose_spec(d, g) for d in BOXES for g in GRIDS])
    outcomes = []
    for _name, (spec, cubin) in sorted(compiled.items()):
        es = spec.tensors[0].dt.nbytes
        checker = Verifier(resolve(spec), cubin, device, seed=5)
        try:
            # rows of 16-byte multiples both ways
            for shape in ([64, 128], [3 * 64 + 16, 5 * 64 + 32 // es], [1008, 1008 // es * 4]):
                outcomes.append(checker.transpose(shape=shape))
        finally:
            checker.close()
    report("grids", [o.__dict__ for o in outcomes])
    assert len(outcomes) == 3 * len(BOXES) * len(GRIDS)
    assert [o for o in outcomes if not o.ok] == []


def copy_spec(dtype: str, rank: int, per_block: int | None) -> dict:
    box = [1] * (rank - 2) + [16, min(256, 512 // ES[dtype])]  # float32: 512-byte rows; uint8: 256, narrow
    return {"name": f"grid_c_{dtype}_r{rank}_t{per_block or 0}", "tensors": [{
        "name": "d", "dtype": dtype, "shape": [8] * (rank - 2) + [64, 128], "box": box, "swizzle": {"mode": "none"}}],
        "kernel": {"kind": "copy", "stages": 2, "tiles_per_block": per_block}}


def test_copy_flat_view_and_grids(device, compiler, report) -> None:
    """Odd-stride contiguous tensors go flat (rows of whole 16-byte chunks, not of 128 bytes), and
    so do aligned ones under narrow boxes; strided ones never do; every byte lands where numpy says."""
    raw = [copy_spec(d, r, t) for d in ("float32", "uint8") for r in (2, 3) for t in (2, None, 5)]
    compiled = compiler(raw)
    outcomes = []
    for _name, (spec, cubin) in sorted(compiled.items()):
        t = spec.tensors[0]
        es = t.dt.nbytes
        lead = [3] * (t.rank - 2)
        odd = lead + [256, 16 * 37 // es]  # rows of 592 bytes: not whole lines; 37 x 256 x 16 bytes in all
        aligned = lead + [64, 128 * 3 // es]
        flat = flat_copy_shape(odd, t.box, es, True)
        assert flat is not None and (flat[-1] * es) % 128 == 0 and flat[-2] * flat[-1] == int(np.prod(odd))
        narrow = t.box[-1] * es < 512  # narrow box rows go flat over aligned rows too
        assert (flat_copy_shape(aligned, t.box, es, True) is not None) == narrow
        checker = Verifier(resolve(spec), cubin, device, seed=9)
        try:
            outcomes.append(checker.copy(shape=odd))
            outcomes.append(checker.copy(shape=aligned))
            strides = [0] * t.rank
            run = 1
            for d in range(t.rank - 1, -1, -1):  # rows padded by 16 bytes: not contiguous, so not flat
                strides[d] = run
                run *= odd[d] + (16 // es if d == t.rank - 1 else 0)
            outcomes.append(checker.copy(shape=odd, strides=strides))
        finally:
            checker.close()
    report("flat copies", [o.__dict__ for o in outcomes])
    assert len(outcomes) == 3 * len(raw)
    assert [o for o in outcomes if not o.ok] == []


def test_c_api_copies_odd_rows_flat(device) -> None:
    """The generated copy launcher takes the same flat view: an odd-stride contiguous tensor
    (rows of 16 x 37 bytes) is copied byte for byte, and the bytes after it are not touched."""
    spec = parse_spec(copy_spec("float32", 2, 2))
    lib = ctypes.CDLL(str(toolchain.compile_folder(resolve(spec), render(resolve(spec), "x.json")).shared_library))
    getattr(lib, f"{spec.name}_last_error").restype = ctypes.c_char_p
    shape = [256, 148]  # rows of 592 bytes; 37888 floats in all: 296 rows of the box's 128
    assert flat_copy_shape(shape, spec.tensors[0].box, 4, True) == [256 * 148 // 128, 128]
    host = np.random.default_rng(3).integers(0, 256, size=256 * 148 * 4, dtype=np.uint8)
    with runtime.Buffer(host.nbytes + 256) as src, runtime.Buffer(host.nbytes + 256) as dst:
        src.upload(np.concatenate([host, np.zeros(256, np.uint8)]))
        dst.fill(0xA5)
        status = getattr(lib, f"{spec.name}_copy_launch")(ctypes.c_void_p(src.ptr), ctypes.c_void_p(dst.ptr),
                                                          (ctypes.c_uint64 * 2)(*shape), None, None)
        device.synchronize()
        assert status == 0, getattr(lib, f"{spec.name}_last_error")()
        out = dst.download()
    assert np.array_equal(out[: host.nbytes], host)
    assert np.all(out[host.nbytes:] == 0xA5)


def test_python_path_copies_odd_rows_flat(device) -> None:
    """tmagen.ops.copy takes the same flat view as the C API on odd-stride contiguous tensors."""
    torch = pytest.importorskip("torch")
    from tmagen import ops

    x = torch.randint(0, 256, (3, 304, 592), dtype=torch.uint8, device="cuda")
    y = torch.randn(304, 148, device="cuda")
    for a in (x, y, y[:, :144]):  # the last one strided: not flat
        out = ops.copy(a)
        torch.cuda.synchronize()
        assert torch.equal(out, a)
