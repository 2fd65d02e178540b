// Probe kernel: one TMA load of a box into shared memory at a chosen offset from a
// 1024-byte boundary, then the raw shared memory (poisoned beforehand) copied out.
// Used to learn, on the GPU, where TMA really puts each byte.
#include <cuda.h>
#include <stdint.h>

__device__ __forceinline__ void tma_load(int rank, uint32_t dst, const CUtensorMap* map,
                                         const int* c, uint32_t bar) {
  uint64_t m = reinterpret_cast<uint64_t>(map);
  switch (rank) {
    case 1: asm volatile("cp.async.bulk.tensor.1d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2}], [%3];"
                         :: "r"(dst), "l"(m), "r"(c[0]), "r"(bar) : "memory"); break;
    case 2: asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];"
                         :: "r"(dst), "l"(m), "r"(c[0]), "r"(c[1]), "r"(bar) : "memory"); break;
    case 3: asm volatile("cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4}], [%5];"
                         :: "r"(dst), "l"(m), "r"(c[0]), "r"(c[1]), "r"(c[2]), "r"(bar) : "memory"); break;
    case 4: asm volatile("cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4, %5}], [%6];"
                         :: "r"(dst), "l"(m), "r"(c[0]), "r"(c[1]), "r"(c[2]), "r"(c[3]), "r"(bar) : "memory"); break;
    default: asm volatile("cp.async.bulk.tensor.5d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4, %5, %6}], [%7];"
                         :: "r"(dst), "l"(m), "r"(c[0]), "r"(c[1]), "r"(c[2]), "r"(c[3]), "r"(c[4]), "r"(bar) : "memory"); break;
  }
}

extern "C" __global__ void inspect_probe(const __grid_constant__ CUtensorMap map, int rank,
                                         int c0, int c1, int c2, int c3, int c4,
                                         unsigned dst_offset, unsigned dump_words,
                                         unsigned tx_bytes, unsigned poison, unsigned* out) {
  extern __shared__ unsigned char raw[];
  __shared__ alignas(8) unsigned long long bar;
  const uint32_t raw_addr = static_cast<uint32_t>(__cvta_generic_to_shared(raw));
  const uint32_t base = (raw_addr + 1023u) & ~1023u;
  unsigned* base_ptr = reinterpret_cast<unsigned*>(raw + (base - raw_addr));
  for (unsigned i = threadIdx.x; i < dump_words; i += blockDim.x) base_ptr[i] = poison;
  const uint32_t bar_addr = static_cast<uint32_t>(__cvta_generic_to_shared(&bar));
  if (threadIdx.x == 0) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" :: "r"(bar_addr) : "memory");
  }
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
  __syncthreads();
  if (threadIdx.x == 0) {
    const int c[5] = {c0, c1, c2, c3, c4};
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"(bar_addr), "r"(tx_bytes) : "memory");
    tma_load(rank, base + dst_offset, &map, c, bar_addr);
  }
  asm volatile(
      "{\n .reg .pred p;\n WAIT_%=:\n"
      " mbarrier.try_wait.parity.shared::cta.b64 p, [%0], 0;\n"
      " @!p bra WAIT_%=;\n}\n" :: "r"(bar_addr) : "memory");
  __syncthreads();
  for (unsigned i = threadIdx.x; i < dump_words; i += blockDim.x) out[i] = base_ptr[i];
}
