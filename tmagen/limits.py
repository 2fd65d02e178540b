"""Every numeric limit tmagen checks, with its unit and its source, and the targets."""

from __future__ import annotations

from dataclasses import dataclass

# cuTensorMapEncodeTiled (CUDA Driver API, cuda.h 13.0)
MAX_RANK = 5
MIN_INTERLEAVED_RANK = 3
MAX_GLOBAL_DIM = 1 << 32  # elements, inclusive
STRIDE_LIMIT_BYTES = 1 << 40  # exclusive
MAX_BOX_DIM = 256  # elements, inclusive
MAX_ELEMENT_STRIDE = 8
GLOBAL_ALIGN_BYTES = 16  # address and strides
GLOBAL_ALIGN_BYTES_WIDE = 32  # with INTERLEAVE_32B or the ALIGN16B packed types
BOX_INNER_MULTIPLE_BYTES = 16
PACKED_ALIGN16_BOX_INNER = 128  # elements
PACKED_ALIGN16_DIM_MULTIPLE = 128  # elements
PACKED_ALIGN8_DIM_MULTIPLE = 2  # elements

# Shared memory (CUDA Programming Guide, compute capability tables; PTX ISA 5.5.7)
SMEM_LINE_BYTES = 128  # a shared-memory line: 32 banks of 4 bytes
SMEM_PATTERN_BYTES = 1024  # the longest swizzle period; a spec's smem_offset lies inside it
TMA_SMEM_ALIGN_BYTES = 128  # a TMA shared-memory address off a 128-byte boundary faults (measured on an H200)
CHUNK_BYTES = 16  # TMA moves, and the swizzle permutes, whole 16-byte chunks; a TMA store writes them whole
MAX_THREADS_PER_BLOCK = 1024  # CUDA Programming Guide, compute capability tables: every target
TENSOR_MAP_ALIGN_BYTES = 128  # alignas of CUtensorMap in the CUDA 13 headers (64 before)
MBARRIER_ALIGN_BYTES = 8

# The tiled kernels (copy, transpose: templates/shared/tiles.cuh.j2) walk a tensor's tiles with uint32
# tile indices and address each with TMA's signed 32-bit coordinates (PTX ISA, cp.async.bulk.tensor:
# tensorCoords are .s32). The launchers (tmagen.kinds.tile_launch, the generated C API's tiles_of)
# refuse a tensor past either limit instead of letting the arithmetic wrap.
MAX_TILES = 1 << 31  # tiles of one launch, inclusive: an index plus a ring of stages x the grid stays below 2^32
MAX_TILE_COORDINATE = (1 << 31) - 1  # elements, inclusive: the end of the last tile along a dimension (INT32_MAX)


@dataclass(frozen=True)
class Target:
    """A GPU architecture tmagen compiles for."""

    name: str
    gencode: str  # nvcc -gencode value
    smem_per_block_optin: int  # bytes a block may use after cudaFuncSetAttribute
    driver_box_limit: int  # bytes: the driver refuses boxes over this (see rules)
    atom_swizzles: bool  # the 128B atom modes
    packed_types: bool  # the sub-byte 16U4/16U6 element types
    runs_here: bool  # a Hopper GPU, as the lent machines have, can run it
    driver_limit_measured: bool


TARGETS: dict[str, Target] = {
    t.name: t
    for t in (
        # 227 KB per block, 228 KB per SM on compute capability 9.0 (CUDA Programming Guide,
        # "Technical Specifications per Compute Capability"); driver limit measured on an H200.
        Target("sm_90a", "arch=compute_90a,code=sm_90a", 232448, 233472, False, False, True, True),
        # Same shared memory on 10.0; the driver limit is assumed equal (not measured: no sm_100 GPU).
        Target("sm_100a", "arch=compute_100a,code=sm_100a", 232448, 233472, True, True, False, False),
    )
}
DEFAULT_TARGET = "sm_90a"

# Inputs tmagen reads (tmagen.jsonio, tmagen.spec): bounds far above any real spec, so that a
# runaway input is refused with a message instead of rendering hundreds of megabytes.
# tensors: the matmul uses 3, tests/gpu/test_model_vs_silicon.py 184 (every layout in one module); about 5 KB
# of generated code each
MAX_TENSORS_PER_SPEC = 1024
MAX_JSON_INPUT_CHARS = 4 << 20  # characters of one JSON input (a spec of 1024 tensors is about 330,000)
MAX_JSON_DEPTH = 32  # levels of nesting (a spec has 4, a benchmark run fewer than 10), whatever Python's own limit
MAX_JSON_INTEGER_DIGITS = 100  # digits of one JSON integer (no TMA value needs more than 20: 2^64)

# A matmul launch splits K at most this many ways: the partials' traffic grows with the split, and
# beyond it no split paid in the dispatch model's measurements (tmagen/kinds/matmul/dispatch.json).
MAX_SPLITS = 16
