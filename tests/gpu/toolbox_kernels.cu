// Kernels of a user's own on the header of a spec without a kernel ("toolbox", in
// tests/gpu/toolbox_probe.py), one per TMA primitive beyond the plain load and store: multicast to
// the CTAs of a cluster, reductions into global memory, L2 prefetches, cache-hint copies, and a
// programmatic dependent launch's wait. They
// are written as a user would write them, through toolbox::tma and the box structs, and report
// through `status` instead of hanging where an mbarrier never completes.
#include "toolbox.cuh"

namespace tma = toolbox::tma;

namespace {

constexpr uint32_t WAIT_LIMIT = 1u << 22;  // polls of an mbarrier before giving up (well over a millisecond)

// mbarrier_wait with a bound: false where the phase did not complete (a multicast that never came).
__device__ bool bounded_wait(uint64_t* bar, uint32_t phase) {
  for (uint32_t i = 0; i < WAIT_LIMIT; ++i) {
    uint32_t done;
    asm volatile(
        "{\n"
        "  .reg .pred p;\n"
        "  mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
        "  selp.u32 %0, 1, 0, p;\n"
        "}\n" : "=r"(done) : "r"(tma::smem_address(bar)), "r"(phase) : "memory");
    if (done) return true;
  }
  return false;
}

__device__ void copy_out(const uint8_t* from, uint8_t* to, uint32_t bytes) {
  for (uint32_t i = threadIdx.x; i < bytes; i += blockDim.x) to[i] = from[i];
}

// ----------------------------------------------------------------------------- multicast
// Cluster c of N CTAs (blocks c*N .. c*N+N-1) shares the box at row c * box rows of `map`: rank 0
// loads it once and multicasts it to the CTAs of `mask`. Every CTA then copies its buffer's
// footprint (poison where nothing landed) to out[block], and all tell rank 0 through
// mbarrier_arrive_cluster that they are done with it; rank 0 checks that all N arrived.
// status[block]: 1 its box arrived (or it was left out), 0 its wait gave up; status[grid + c]:
// 1 rank 0 heard all N.
template <uint32_t N>
__device__ void multicast_whole(const CUtensorMap* map, uint16_t mask, uint8_t poison, uint8_t* out,
                                uint32_t* status) {
  using box = toolbox::tile_box;
  extern __shared__ uint8_t smem_raw[];
  __shared__ alignas(8) uint64_t full, done;
  uint8_t* buffer = toolbox::align_to_pattern(smem_raw) + box::smem_offset;
  const uint32_t rank = tma::cluster_ctarank(), cluster = blockIdx.x / N;
  const bool mine = (mask >> rank) & 1u;
  for (uint32_t i = threadIdx.x; i < box::footprint; i += blockDim.x) buffer[i] = poison;
  if (threadIdx.x == 0) {
    tma::mbarrier_init(&full, 1);
    tma::mbarrier_init(&done, N);
    tma::fence_mbarrier_init();
  }
  tma::fence_proxy_async_shared();  // the poison is down before any copy engine writes here
  tma::cluster_sync();              // every CTA's barriers are initialized before the multicast signals them
  if (threadIdx.x == 0) {
    if (mine) tma::mbarrier_arrive_expect_tx(&full, box::tx_bytes);
    if (rank == 0) {
      tma::load_2d_multicast(buffer, map, &full, mask, 0, static_cast<int32_t>(cluster * box::dim(0)));
    }
  }
  bool ok = !mine || bounded_wait(&full, 0);
  copy_out(buffer, out + blockIdx.x * box::footprint, box::footprint);
  __syncthreads();
  if (threadIdx.x == 0) {
    status[blockIdx.x] = ok;
    tma::mbarrier_arrive_cluster(&done, 0);  // rank 0's barrier: this CTA is done with the box
    if (rank == 0) status[gridDim.x + cluster] = bounded_wait(&done, 0);
  }
  tma::cluster_sync();  // no CTA leaves while another may still signal its barriers
}

// Cluster c's tile is N boxes stacked along rows (box b at rows (c*N + b) * box rows): CTA r loads
// box r and multicasts it to every CTA of the cluster, at buffer r, so that each CTA ends up with
// the whole tile (each CTA expects N boxes on its barrier): two CTAs sharing an operand, each
// loading its half. out[block] holds the N buffers of each CTA.
template <uint32_t N>
__device__ void multicast_slices(const CUtensorMap* map, uint8_t poison, uint8_t* out, uint32_t* status) {
  using box = toolbox::tile_box;
  extern __shared__ uint8_t smem_raw[];
  __shared__ alignas(8) uint64_t full;
  uint8_t* buffers = toolbox::align_to_pattern(smem_raw) + box::smem_offset;
  const uint32_t rank = tma::cluster_ctarank(), cluster = blockIdx.x / N;
  for (uint32_t i = threadIdx.x; i < N * box::buffer_stride; i += blockDim.x) buffers[i] = poison;
  if (threadIdx.x == 0) {
    tma::mbarrier_init(&full, 1);
    tma::fence_mbarrier_init();
  }
  tma::fence_proxy_async_shared();
  tma::cluster_sync();
  if (threadIdx.x == 0) {
    tma::mbarrier_arrive_expect_tx(&full, N * box::tx_bytes);
    tma::load_2d_multicast(buffers + rank * box::buffer_stride, map, &full, static_cast<uint16_t>((1u << N) - 1u), 0,
                           static_cast<int32_t>((cluster * N + rank) * box::dim(0)));
  }
  const bool ok = bounded_wait(&full, 0);
  copy_out(buffers, out + blockIdx.x * N * box::buffer_stride, N * box::buffer_stride);
  if (threadIdx.x == 0) status[blockIdx.x] = ok;
  tma::cluster_sync();
}

// ----------------------------------------------------------------------------- reductions
// Block b reduces box b of `src` into the same box of `dst` (tiles_x boxes per row of boxes):
// dst = dst op src, the box loaded with TMA first. status[b] = 1 once the load arrived.
template <class Box>
__device__ void reduce_tile(const CUtensorMap* src, const CUtensorMap* dst, uint32_t op, uint32_t tiles_x,
                            uint32_t* status) {
  extern __shared__ uint8_t smem_raw[];
  __shared__ alignas(8) uint64_t full;
  if (threadIdx.x != 0) return;
  uint8_t* buffer = toolbox::align_to_pattern(smem_raw) + Box::smem_offset;
  const int32_t c0 = static_cast<int32_t>(blockIdx.x % tiles_x * Box::dim(1));
  const int32_t c1 = static_cast<int32_t>(blockIdx.x / tiles_x * Box::dim(0));
  tma::mbarrier_init(&full, 1);
  tma::fence_mbarrier_init();
  tma::mbarrier_arrive_expect_tx(&full, Box::tx_bytes);
  tma::load_2d(buffer, src, &full, c0, c1);
  status[blockIdx.x] = bounded_wait(&full, 0);
  using tma::reduce_op;
  switch (static_cast<reduce_op>(op)) {
    case reduce_op::add: tma::reduce_2d<reduce_op::add>(dst, buffer, c0, c1); break;
    case reduce_op::min: tma::reduce_2d<reduce_op::min>(dst, buffer, c0, c1); break;
    case reduce_op::max: tma::reduce_2d<reduce_op::max>(dst, buffer, c0, c1); break;
    case reduce_op::inc: tma::reduce_2d<reduce_op::inc>(dst, buffer, c0, c1); break;
    case reduce_op::dec: tma::reduce_2d<reduce_op::dec>(dst, buffer, c0, c1); break;
    case reduce_op::bit_and: tma::reduce_2d<reduce_op::bit_and>(dst, buffer, c0, c1); break;
    case reduce_op::bit_or: tma::reduce_2d<reduce_op::bit_or>(dst, buffer, c0, c1); break;
    case reduce_op::bit_xor: tma::reduce_2d<reduce_op::bit_xor>(dst, buffer, c0, c1); break;
  }
  tma::commit_group();
  tma::wait_group<0>();  // the reduction is done before the block's shared memory goes
}

// ----------------------------------------------------------------------------- prefetch and hints
// Block b copies box b of `src` to `dst` (tiles_x boxes per row of boxes) through shared memory,
// with `policy_kind` 0: plain load and store; 1, 2, 3: the *_hint copies with policy_evict_first,
// _last, _normal; 4: the tile's own l2_hint (tile_box::l2_hint through tma::policy). With `prefetch`,
// the block first prefetches the tensor map and its box into L2.
__device__ void hinted_copy(const CUtensorMap* src, const CUtensorMap* dst, uint32_t policy_kind, uint32_t prefetch,
                            uint32_t tiles_x, uint32_t* status) {
  using box = toolbox::tile_box;
  extern __shared__ uint8_t smem_raw[];
  __shared__ alignas(8) uint64_t full;
  if (threadIdx.x != 0) return;
  uint8_t* buffer = toolbox::align_to_pattern(smem_raw) + box::smem_offset;
  const int32_t c0 = static_cast<int32_t>(blockIdx.x % tiles_x * box::dim(1));
  const int32_t c1 = static_cast<int32_t>(blockIdx.x / tiles_x * box::dim(0));
  if (prefetch) {
    tma::prefetch_tensormap(src);
    tma::prefetch_tensormap(dst);
    tma::prefetch_2d(src, c0, c1);
  }
  tma::mbarrier_init(&full, 1);
  tma::fence_mbarrier_init();
  tma::mbarrier_arrive_expect_tx(&full, box::tx_bytes);
  const uint64_t policy = policy_kind == 1 ? tma::policy_evict_first()
                        : policy_kind == 2 ? tma::policy_evict_last()
                        : policy_kind == 3 ? tma::policy_evict_normal()
                                           : tma::policy(box::l2_hint);
  if (policy_kind == 0) {
    tma::load_2d(buffer, src, &full, c0, c1);
  } else {
    tma::load_2d_hint(buffer, src, &full, c0, c1, policy);
  }
  status[blockIdx.x] = bounded_wait(&full, 0);
  if (policy_kind == 0) {
    tma::store_2d(dst, buffer, c0, c1);
  } else {
    tma::store_2d_hint(dst, buffer, c0, c1, policy);
  }
  tma::commit_group();
  tma::wait_group<0>();
}

}  // namespace

extern "C" __global__ void __cluster_dims__(2, 1, 1) __launch_bounds__(128)
    toolbox_multicast_2(const __grid_constant__ CUtensorMap map, uint16_t mask, uint8_t poison, uint8_t* out,
                        uint32_t* status) {
  multicast_whole<2>(&map, mask, poison, out, status);
}

extern "C" __global__ void __cluster_dims__(4, 1, 1) __launch_bounds__(128)
    toolbox_multicast_4(const __grid_constant__ CUtensorMap map, uint16_t mask, uint8_t poison, uint8_t* out,
                        uint32_t* status) {
  multicast_whole<4>(&map, mask, poison, out, status);
}

extern "C" __global__ void __cluster_dims__(2, 1, 1) __launch_bounds__(128)
    toolbox_multicast_slices_2(const __grid_constant__ CUtensorMap map, uint8_t poison, uint8_t* out,
                               uint32_t* status) {
  multicast_slices<2>(&map, poison, out, status);
}

extern "C" __global__ void __cluster_dims__(4, 1, 1) __launch_bounds__(128)
    toolbox_multicast_slices_4(const __grid_constant__ CUtensorMap map, uint8_t poison, uint8_t* out,
                               uint32_t* status) {
  multicast_slices<4>(&map, poison, out, status);
}

#define TOOLBOX_REDUCE_KERNEL(MAP)                                                                        \
  extern "C" __global__ void __launch_bounds__(32) toolbox_reduce_##MAP(                                 \
      const __grid_constant__ CUtensorMap src, const __grid_constant__ CUtensorMap dst, uint32_t op,     \
      uint32_t tiles_x, uint32_t* status) {                                                               \
    reduce_tile<toolbox::MAP##_box>(&src, &dst, op, tiles_x, status);                                     \
  }
TOOLBOX_REDUCE_KERNEL(r_u32)
TOOLBOX_REDUCE_KERNEL(r_s32)
TOOLBOX_REDUCE_KERNEL(r_u64)
TOOLBOX_REDUCE_KERNEL(r_s64)
TOOLBOX_REDUCE_KERNEL(r_f32)
TOOLBOX_REDUCE_KERNEL(r_f16)
TOOLBOX_REDUCE_KERNEL(r_bf16)

extern "C" __global__ void __launch_bounds__(32) toolbox_hinted_copy(
    const __grid_constant__ CUtensorMap src, const __grid_constant__ CUtensorMap dst, uint32_t policy_kind,
    uint32_t prefetch, uint32_t tiles_x, uint32_t* status) {
  hinted_copy(&src, &dst, policy_kind, prefetch, tiles_x, status);
}

// Programmatic dependent launch. The first kernel lets the next one launch at once, then spins for
// `spin_ns` before it writes `value`; the second, launched as a dependent launch, records when it
// started, waits for the first (or not, where `wait` is 0) and reads what is there.
__device__ uint64_t global_ns() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

extern "C" __global__ void __launch_bounds__(32) toolbox_pdl_first(uint32_t* cell, uint64_t* times, uint32_t value,
                                                                 uint64_t spin_ns) {
  tma::allow_next_grid();
  const uint64_t start = global_ns();
  while (global_ns() - start < spin_ns) {
  }
  if (threadIdx.x == 0) {
    *cell = value;
    times[0] = global_ns();
  }
}

extern "C" __global__ void __launch_bounds__(32) toolbox_pdl_second(const uint32_t* cell, uint32_t* seen,
                                                                  uint64_t* times, uint32_t wait) {
  if (threadIdx.x == 0) times[1] = global_ns();
  if (wait) tma::wait_for_previous_grid();
  if (threadIdx.x == 0) *seen = *static_cast<const volatile uint32_t*>(cell);
}

// The spec's reduce of r_f32 is a constant of its box (static_assert: what the header says).
static_assert(toolbox::r_f32_box::reduce == tma::reduce_op::add, "the spec's reduce");
static_assert(toolbox::tile_box::l2_hint == tma::l2_hint::evict_first, "the spec's l2_hint");
