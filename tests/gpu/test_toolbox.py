"""TMA's toolbox on the GPU: user kernels (tests/gpu/toolbox_kernels.cu) on the header of a spec
without a kernel (tests/gpu/toolbox_probe.py), one per primitive, each checked byte for byte.

- multicast (clusters of 2 and 4, two clusters per launch): every CTA in the mask holds the box
  exactly where the layout model puts it, a CTA left out keeps its poison, and the issuing CTA
  hears every CTA's remote arrival (mbarrier_arrive_cluster); and the split form, each CTA loading
  one box of its cluster's tile and multicasting it to all;
- every reduction on every element type rule reduce-op-for-type allows (the PTX ISA's table less
  and, or, xor on int64), against numpy, on a ragged tensor (partial boxes at both edges: what falls
  outside is dropped, and a guard after the tensor keeps its poison); and, last, in a child process,
  that and on int64 still faults as recorded (tests/data/hw_h200/reduce_ops.json);
- cache hints (each policy maker, and the box's own l2_hint) on loads and stores, with and without
  prefetching the tensor map and the box into L2 first: the copy must still be exact;
- a programmatic dependent launch: the second kernel starts before the first is done, and
  wait_for_previous_grid() is what orders its read after the first's write.

A prefetch is only a hint: these tests prove that it runs without fault and leaves every copy
right, not that the bytes were in L2. Cheap: one compile and about 50 launches of a few blocks.
"""

from __future__ import annotations

import ctypes
import os
import subprocess
import sys

import numpy as np
import pytest

from tmagen import runtime
from tmagen.launch import array_args, encode
from tmagen.toolbox import REDUCE_TYPES

from conftest import REPO, pythonpath_with_repo

sys.path.insert(0, str(REPO / "tests" / "gpu"))
import toolbox_probe  # noqa: E402  (the spec, the compile and the reductions' model)

pytestmark = pytest.mark.gpu

SMEM_POISON = 0x5A  # shared memory before a multicast: what TMA does not write keeps it
OUT_POISON = 0xA5  # output buffers before a launch
GUARD = 256  # bytes after a tensor that no reduction or store may touch


@pytest.fixture(scope="module")
def toolbox(device):
    p, cubin = toolbox_probe.compile_kernels()
    module = runtime.Module(cubin.read_bytes())
    yield p, module
    module.unload()


def _ptr(buf: runtime.Buffer) -> ctypes.c_uint64:
    return ctypes.c_uint64(buf.ptr)


# ----------------------------------------------------------------------------- multicast
@pytest.mark.parametrize("n, mask", [(2, 0b11), (2, 0b01), (2, 0b10), (4, 0b1111), (4, 0b0111), (4, 0b1110),
                                     (4, 0b0101)])
def test_multicast_lands_in_every_cta_of_the_mask_and_nowhere_else(device, toolbox, n: int, mask: int) -> None:
    p, module = toolbox
    tile = p.map("tile")
    layout = tile.layout
    rows, cols = tile.box
    clusters = 2
    grid = clusters * n
    rng = np.random.default_rng(n * 100 + mask)
    host = rng.integers(0, 2**32, size=(clusters * rows, 2 * cols), dtype=np.uint32)  # float32 maps move bits
    with runtime.Buffer.from_array(host) as src, runtime.Buffer(grid * layout.footprint) as out, \
            runtime.Buffer(4 * (grid + clusters)) as status:
        out.fill(OUT_POISON)
        status.fill(0xFF)
        tmap = encode(array_args(tile, src.ptr, host.shape))
        kernel = module.function(f"toolbox_multicast_{n}", 1024 + layout.footprint)
        kernel.launch(grid, 128, [tmap, ctypes.c_uint16(mask), ctypes.c_uint8(SMEM_POISON), _ptr(out), _ptr(status)])
        device.synchronize()
        got = out.download().reshape(grid, layout.footprint)
        flags = status.download(np.uint32)
    assert list(flags[:grid]) == [1] * grid, f"a CTA's barrier never completed: {list(flags[:grid])}"
    assert list(flags[grid:]) == [1] * clusters, "rank 0 did not hear every CTA's mbarrier_arrive_cluster"
    for block in range(grid):
        cluster, rank = divmod(block, n)
        if (mask >> rank) & 1:
            expected = layout.place(host[cluster * rows:(cluster + 1) * rows, :cols], fill=SMEM_POISON)
        else:
            expected = np.full(layout.footprint, SMEM_POISON, dtype=np.uint8)
        bad = np.nonzero(got[block] != expected)[0]
        assert bad.size == 0, (f"cluster {cluster}, rank {rank} (mask {mask:#b}): {bad.size} bytes differ, first at "
                               f"{bad[0]}: got {got[block][bad[0]]:#04x}, expected {expected[bad[0]]:#04x}")


@pytest.mark.parametrize("n", [2, 4])
def test_multicast_slices_give_every_cta_the_whole_tile(device, toolbox, n: int) -> None:
    """Each CTA loads one box of its cluster's tile and multicasts it to all: every CTA ends up with
    all n boxes, as two CTAs sharing a matmul operand would."""
    p, module = toolbox
    tile = p.map("tile")
    layout, stride = tile.layout, tile.buffer_stride
    rows, cols = tile.box
    clusters = 2
    grid = clusters * n
    rng = np.random.default_rng(7 + n)
    host = rng.integers(0, 2**32, size=(clusters * n * rows, cols), dtype=np.uint32)
    with runtime.Buffer.from_array(host) as src, runtime.Buffer(grid * n * stride) as out, \
            runtime.Buffer(4 * grid) as status:
        out.fill(OUT_POISON)
        status.fill(0xFF)
        tmap = encode(array_args(tile, src.ptr, host.shape))
        kernel = module.function(f"toolbox_multicast_slices_{n}", 1024 + n * stride)
        kernel.launch(grid, 128, [tmap, ctypes.c_uint8(SMEM_POISON), _ptr(out), _ptr(status)])
        device.synchronize()
        got = out.download().reshape(grid, n * stride)
        flags = status.download(np.uint32)
    assert list(flags) == [1] * grid, f"a CTA's barrier never completed: {list(flags)}"
    for block in range(grid):
        cluster = block // n
        expected = np.full(n * stride, SMEM_POISON, dtype=np.uint8)
        for b in range(n):
            first = (cluster * n + b) * rows
            placed = layout.place(host[first:first + rows], fill=SMEM_POISON)
            expected[b * stride:b * stride + layout.footprint] = placed
        bad = np.nonzero(got[block] != expected)[0]
        assert bad.size == 0, f"block {block}: {bad.size} bytes differ, first at {bad[0]}"


# ----------------------------------------------------------------------------- reductions
# Every op/type pair rule reduce-op-for-type allows: the PTX ISA's table less what faulted on the
# H200 (and, or, xor on int64, tests/data/hw_h200/reduce_ops.json), which is never launched here: a
# fault is sticky and would poison this process's context for every test after it.
CASES = [(dtype, op) for dtype in toolbox_probe.REDUCE_MAPS for op in toolbox_probe.REDUCE_OP_CODES
         if dtype in REDUCE_TYPES[op]]


def _bits(a: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(a).view(np.dtype(f"u{a.itemsize}"))


def reduce_case(p, module: runtime.Module, device, dtype: str, op: str, seed: int) -> None:
    """Reduces a ragged tensor by ``op`` through a ``dtype`` map and asserts numpy's result, with
    nothing written past the tensor. Raises GpuError if the kernel faults."""
    m = p.map(toolbox_probe.REDUCE_MAPS[dtype])
    box_rows, box_cols = m.box
    es = m.elem_bytes
    rows, cols = 2 * box_rows + 3, 2 * box_cols + 16 // es  # partial boxes on both axes, rows of whole 16 bytes
    tiles_x, tiles_y = -(-cols // box_cols), -(-rows // box_rows)
    rng = np.random.default_rng(seed)
    dst0, src = toolbox_probe.operands(rng, op, dtype, (rows, cols))
    expected = toolbox_probe.reduce_model(op, dtype, dst0, src)
    guard = np.full(GUARD, OUT_POISON, dtype=np.uint8)
    with runtime.Buffer.from_array(src) as dsrc, runtime.Buffer(dst0.nbytes + GUARD) as ddst, \
            runtime.Buffer(4 * tiles_x * tiles_y) as status:
        ddst.upload(np.concatenate([_bits(dst0).view(np.uint8).reshape(-1), guard]))
        status.fill(0xFF)
        src_map = encode(array_args(m, dsrc.ptr, (rows, cols)))
        dst_map = encode(array_args(m, ddst.ptr, (rows, cols)))
        kernel = module.function(f"toolbox_reduce_{m.name}", 1024 + m.smem_offset + m.footprint)
        kernel.launch(tiles_x * tiles_y, 32, [src_map, dst_map, ctypes.c_uint32(toolbox_probe.REDUCE_OP_CODES[op]),
                                              ctypes.c_uint32(tiles_x), _ptr(status)])
        device.synchronize()
        memory = ddst.download()
        flags = status.download(np.uint32)
    assert np.all(flags == 1), "a box's load never arrived"
    got = memory[:dst0.nbytes].view(_bits(dst0).dtype).reshape(rows, cols)
    assert np.all(memory[dst0.nbytes:] == OUT_POISON), "the reduction wrote past the tensor"
    want = _bits(expected)
    differ = np.argwhere(got != want)
    assert differ.size == 0, (f"{len(differ)} of {rows * cols} elements differ, first at {tuple(differ[0])}: dst "
                              f"{_bits(dst0)[tuple(differ[0])]:#x} {op} src {_bits(src)[tuple(differ[0])]:#x} gave "
                              f"{got[tuple(differ[0])]:#x}, expected {want[tuple(differ[0])]:#x}")


@pytest.mark.parametrize("dtype, op", CASES, ids=[f"{op}-{dtype}" for dtype, op in CASES])
def test_reduce_matches_numpy(device, toolbox, dtype: str, op: str) -> None:
    p, module = toolbox
    reduce_case(p, module, device, dtype, op, CASES.index((dtype, op)))


# ----------------------------------------------------------------------------- prefetch and cache hints
POLICIES = {0: "plain", 1: "evict_first", 2: "evict_last", 3: "evict_normal", 4: "the box's l2_hint"}


@pytest.mark.parametrize("prefetch", [0, 1])
@pytest.mark.parametrize("policy", list(POLICIES), ids=list(POLICIES.values()))
def test_hinted_and_prefetched_copies_are_exact(device, toolbox, policy: int, prefetch: int) -> None:
    p, module = toolbox
    tile = p.map("tile")
    box_rows, box_cols = tile.box
    rows, cols = 3 * box_rows + 5, 2 * box_cols + 4  # float32 rows of 288 bytes: partial boxes on both axes
    tiles_x, tiles_y = -(-cols // box_cols), -(-rows // box_rows)
    rng = np.random.default_rng(policy * 2 + prefetch)
    host = rng.integers(0, 2**32, size=(rows, cols), dtype=np.uint32)
    with runtime.Buffer.from_array(host) as src, runtime.Buffer(host.nbytes + GUARD) as dst, \
            runtime.Buffer(4 * tiles_x * tiles_y) as status:
        dst.fill(OUT_POISON)
        status.fill(0xFF)
        src_map = encode(array_args(tile, src.ptr, host.shape))
        dst_map = encode(array_args(tile, dst.ptr, host.shape))
        kernel = module.function("toolbox_hinted_copy", 1024 + tile.footprint)
        kernel.launch(tiles_x * tiles_y, 32, [src_map, dst_map, ctypes.c_uint32(policy), ctypes.c_uint32(prefetch),
                                              ctypes.c_uint32(tiles_x), _ptr(status)])
        device.synchronize()
        memory = dst.download()
        flags = status.download(np.uint32)
    assert np.all(flags == 1)
    assert np.array_equal(memory[:host.nbytes].view(np.uint32).reshape(rows, cols), host)
    assert np.all(memory[host.nbytes:] == OUT_POISON)


# ----------------------------------------------------------------------------- programmatic dependent launch
@pytest.mark.parametrize("wait", [1, 0])
def test_a_dependent_launch_starts_early_and_its_wait_orders_it(device, toolbox, wait: int) -> None:
    """The second kernel, launched as tmagen launches its matmuls (runtime.launch_dependent), starts
    while the first still spins (it began before the first wrote), and wait_for_previous_grid() is
    what makes it see the first's write: without the wait it reads the old value."""
    _, module = toolbox
    with runtime.Buffer(4) as cell, runtime.Buffer(4) as seen, runtime.Buffer(16) as times:
        cell.upload(np.array([7], dtype=np.uint32))
        seen.fill(0)
        first = module.function("toolbox_pdl_first")
        second = module.function("toolbox_pdl_second")
        first.launch(1, 32, [_ptr(cell), _ptr(times), ctypes.c_uint32(1234), ctypes.c_uint64(200_000)])
        second.launch(1, 32, [_ptr(cell), _ptr(seen), _ptr(times), ctypes.c_uint32(wait)], dependent=True)
        device.synchronize()
        written, started = times.download(np.uint64)
        got = int(seen.download(np.uint32)[0])
    assert started < written  # the launches overlapped: the second is a dependent launch
    assert got == (1234 if wait else 7)


# ----------------------------------------------------------------------------- what the rule refuses
# Last in the file, and in a child process of its own: the fault it expects is sticky and kills the
# child's context only, never this one's.
_FAULT_PROBE = """
import sys
sys.path[:0] = sys.argv[1:3]
from tmagen import runtime
from tmagen.errors import GpuError
import test_toolbox, toolbox_probe
device = runtime.Device.open()
p, cubin = toolbox_probe.compile_kernels()
module = runtime.Module(cubin.read_bytes())
try:
    test_toolbox.reduce_case(p, module, device, "int64", "and", 0)
except GpuError as exc:
    print("FAULT", exc)
    sys.exit(0)
except AssertionError as exc:
    print("WRONG", exc)
    sys.exit(0)
print("EXACT")
"""


def test_and_on_int64_still_faults(device) -> None:
    """Rule reduce-op-for-type refuses and, or, xor on int64 because the H200 faulted on them
    (tests/data/hw_h200/reduce_ops.json). This GPU and driver must still fault on and-int64; the day
    they reduce it, the rule is to be lifted."""
    run = subprocess.run([sys.executable, "-c", _FAULT_PROBE, str(REPO / "tests"), str(REPO / "tests" / "gpu")],
                         capture_output=True, text=True, timeout=300, cwd=REPO,
                         env={**os.environ, "PYTHONPATH": pythonpath_with_repo()})
    out = run.stdout.strip().splitlines()
    verdict = out[-1] if out else ""
    assert run.returncode == 0 and verdict.startswith(("FAULT", "WRONG", "EXACT")), \
        f"the probe did not report (exit {run.returncode}): {run.stderr[-2000:]}"
    assert not verdict.startswith("EXACT"), (
        f"and on int64 reduced exactly on {device.name}: lift the rule (tmagen.toolbox.HW_REDUCE_FAULTS, "
        "reduce-op-for-type) for and, or, xor on int64, after checking or and xor too, and record this GPU and driver "
        "in tests/data/hw_h200/reduce_ops.json")
    assert verdict.startswith("FAULT") and "CUDA_ERROR_ILLEGAL_INSTRUCTION" in verdict, (
        f"and on int64 neither faulted as recorded nor reduced exactly: {verdict}")
