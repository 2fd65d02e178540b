"""The spec section of a matmul kernel."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from tmagen.form import Section
from tmagen.limits import MAX_SPLITS


class MatmulKernel(Section):
    """C = A x B^T on the tensor cores (wgmma): A [M, K] (K-major) or [K, M] (MN-major), B [N, K]
    (K-major) or [K, N] (MN-major), bfloat16 or float16 in (or fp8, K-major, with scales), fp32
    accumulation, C [M, N] bfloat16, float16 or float32 out. TMA feeds a ring of stages from one
    producer warpgroup; consumer warpgroups multiply; a persistent grid walks the tiles of C, and
    the epilogue stores through shared memory with TMA."""

    kind: Literal["matmul"]
    a: str = Field("a", description="The tensor holding A: [M, K] with a_major k, [K, M] with a_major mn.")
    b: str = Field("b", description="The tensor holding B: [N, K] with b_major k, [K, N] with b_major mn.")
    c: str = Field("c", description="The tensor receiving C [M, N].")
    a_major: Literal["k", "mn"] = Field("k", description="k: A is [M, K] (K contiguous); mn: A is [K, M] (M "
                                        "contiguous: C = A^T B, as a weight gradient x^T dy reads x), 16-bit types "
                                        "only (the wgmma transposes it as it reads shared memory).")
    b_major: Literal["k", "mn"] = Field("k", description="k: B is [N, K] (C = A B^T, both operands K-major); "
                                        "mn: B is [K, N] (C = A B).")
    tile: list[Annotated[int, Field(ge=8)]] = Field(
        [128, 256, 64], min_length=3, max_length=3,
        description="The tile of C a block computes and the K it takes per stage: [BM, BN, BK].")
    consumers: int = Field(2, ge=1, le=4, description="Consumer warpgroups; each multiplies BM / consumers rows "
                           "(a multiple of 64) of the tile.")
    stages: int = Field(4, ge=2, le=8, description="Stages of A and B tiles in flight per block.")
    dispatch: Literal["per_shape", "single"] = Field(
        "per_shape", description="per_shape: the spec's tile and the smaller tiles of the family its boxes allow, "
        "each launch picking one (and a split of K) for its M, N and K by a model measured on the GPU (one table per "
        "GPU, the nearest taken); single: the spec's tile only, never split.")
    max_splits: int = Field(MAX_SPLITS, ge=1, le=MAX_SPLITS, description="The most ways a launch may split K "
                            "(1: never). A split launch sums the splits' fp32 partials in a workspace, in a fixed "
                            "order.")
    promote_every: int | None = Field(
        None, ge=0, description="fp8 only: K elements between promotions of the tensor core's partial sums into "
        "fp32 registers (its fp8 accumulator keeps fewer bits than fp32: docs/fp8-accuracy.md). A multiple of "
        "tile[2]; 0: never (the fastest, least accurate). Default: 128 for fp8 (as DeepSeek-V3's recipe).")
    block_scales: bool = Field(
        False, description="fp8 only: scale_a holds one fp32 factor per 1 x 128 block of A [M, K] and scale_b one "
        "per 128 x 128 block of B [N, K] (DeepSeek-V3's and DeepGEMM's blocks), applied at each promotion "
        "(promote_every 128). Otherwise each is one value for the tensor, or one per row of A / per column of C, "
        "applied in the epilogue.")
    cluster: int | None = Field(
        None, ge=1, le=2, description="CTAs per cluster: 2 pairs tiles that lie one above the other (along M) and "
        "loads each stage's B once for both, multicast to the pair (half the B traffic through L2): each CTA "
        "its half in one copy where B's boxes are 128-byte swizzled lines of K, else the CTAs take B's boxes in "
        "turns (three boxes are two and one); an odd last row of tiles goes in pairs side by side, each CTA "
        "loading its own A and B; a stage of one B box cannot be shared (rule matmul-cluster); 1: "
        "no clusters. Default: 2 for 16-bit tiles of 128 rows or more whose B boxes per stage are "
        "even in number, 1 for the others (fp8 tiles among them), each of which (in a family) also gets a "
        "twin in pairs that launches take where A's or B's rows straddle 32-byte sectors, and elsewhere "
        "where the GPU's dispatch table offers it (README, Twins in pairs).")
    raster_group: int = Field(8, ge=1, le=64, description="Tile rows walked together, column by column, so that "
                              "the blocks running at once share A and B in L2.")
