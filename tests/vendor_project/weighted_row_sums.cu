// A kernel of the user's own on a folder that tmagen generated from a spec without a kernel
// (specs/maps_only_bf16_f32.json): products[r, c] = scale * x[r, c] * w[r, c] and their row sums
// sums[r], x bfloat16 and w float32 of one shape, the arithmetic in float. It uses only what the folder gives: the encode API on the host, and on the
// device the TMA primitives, the box layouts and the typed accessors, which read __nv_bfloat16 and
// float where they are swizzled in shared memory.
#include "maps_only_bf16_f32.cuh"
#include "maps_only_bf16_f32.h"

#include <cuda_runtime.h>

#include <stdio.h>

namespace {

namespace gen = maps_only_bf16_f32;
namespace tma = maps_only_bf16_f32::tma;
using x_box = gen::x_box;
using w_box = gen::w_box;

constexpr uint32_t tile_rows = x_box::dim(0), tile_cols = x_box::dim(1);
static_assert(w_box::dim(0) == tile_rows && w_box::dim(1) == tile_cols, "one box of each tensor covers one tile");

// Dynamic shared memory: slack to reach a 1024-byte boundary, x's box from it (at its smem_offset),
// then w's box from the next boundary after x's (at its own smem_offset).
constexpr uint32_t smem_bytes = 1024 + x_box::buffer_stride + w_box::smem_offset + w_box::footprint;

char last_error[512];

// One block of 32 threads per tile row band; thread r sums row r, tile after tile along the row.
__global__ void __launch_bounds__(32) weighted_row_sums(const __grid_constant__ CUtensorMap x_map,
                                                        const __grid_constant__ CUtensorMap w_map, uint32_t rows,
                                                        uint32_t cols, float scale, float* products, float* sums) {
  extern __shared__ uint8_t smem[];
  __shared__ alignas(8) uint64_t loaded;
  uint8_t* pattern = gen::align_to_pattern(smem);
  uint8_t* x_tile = pattern + x_box::smem_offset;
  uint8_t* w_tile = pattern + x_box::buffer_stride + w_box::smem_offset;
  const uint32_t r = threadIdx.x, row = blockIdx.x * tile_rows + r;
  const int32_t row0 = static_cast<int32_t>(blockIdx.x * tile_rows);

  if (r == 0) {
    tma::mbarrier_init(&loaded, 1);
    tma::fence_mbarrier_init();
  }
  __syncthreads();

  float sum = 0.0f;
  uint32_t phase = 0;
  for (uint32_t col0 = 0; col0 < cols; col0 += tile_cols) {
    if (r == 0) {
      tma::mbarrier_arrive_expect_tx(&loaded, x_box::tx_bytes + w_box::tx_bytes);
      tma::load_2d(x_tile, &x_map, &loaded, static_cast<int32_t>(col0), row0);  // innermost first
      tma::load_2d(w_tile, &w_map, &loaded, static_cast<int32_t>(col0), row0);
    }
    tma::mbarrier_wait(&loaded, phase);
    phase ^= 1u;
    // Columns past the edge were filled with zeros by TMA: they add nothing.
    for (uint32_t c = 0; c < tile_cols; ++c) {
      const float x = x_box::at(x_tile, r, c);  // __nv_bfloat16, converted to float
      const float w = w_box::at(w_tile, r, c);  // float
      const float p = scale * x * w;
      sum += p;
      if (row < rows && col0 + c < cols) products[static_cast<uint64_t>(row) * cols + col0 + c] = p;
    }
    __syncthreads();  // every row is read before the next loads overwrite the tiles
  }
  if (row < rows) sums[row] = sum;
}

}  // namespace

// x: rows x cols bfloat16, w: rows x cols float32, both contiguous and 16-byte aligned; products:
// rows x cols floats, sums: rows floats. Returns 0, or non-zero with the reason in weighted_row_sums_error().
extern "C" int weighted_row_sums_launch(const void* x, const void* w, uint64_t rows, uint64_t cols, float scale,
                                        float* products, float* sums, void* stream) {
  const uint64_t shape[2] = {rows, cols};
  maps_only_bf16_f32_tensor_map x_map, w_map;
  if (maps_only_bf16_f32_encode_x(&x_map, x, shape, nullptr) != maps_only_bf16_f32_ok ||
      maps_only_bf16_f32_encode_w(&w_map, w, shape, nullptr) != maps_only_bf16_f32_ok) {
    snprintf(last_error, sizeof(last_error), "encode: %s", maps_only_bf16_f32_last_error());
    return 1;
  }
  cudaError_t err = cudaFuncSetAttribute(weighted_row_sums, cudaFuncAttributeMaxDynamicSharedMemorySize, smem_bytes);
  if (err == cudaSuccess) {
    const uint32_t blocks = static_cast<uint32_t>((rows + tile_rows - 1) / tile_rows);
    weighted_row_sums<<<blocks, 32, smem_bytes, static_cast<cudaStream_t>(stream)>>>(
        *reinterpret_cast<const CUtensorMap*>(&x_map), *reinterpret_cast<const CUtensorMap*>(&w_map),
        static_cast<uint32_t>(rows), static_cast<uint32_t>(cols), scale, products, sums);
    err = cudaGetLastError();
  }
  if (err != cudaSuccess) {
    snprintf(last_error, sizeof(last_error), "launch: %s", cudaGetErrorString(err));
    return 2;
  }
  last_error[0] = '\0';
  return 0;
}

extern "C" const char* weighted_row_sums_error(void) { return last_error; }
