// The host time of a generated matmul C API per launch (issue 18: "the C API's host time per launch
// with repeated pointers <= 3 us"), and whether a repeat launch encodes its tensor maps again.
// lab/capi_host_time.py renders a spec, then builds this file with nvcc:
//
//   nvcc -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a -I FOLDER -DTMAGEN_API=NAME
//        -DTMAGEN_SOURCE='"NAME.cu"' -o capi_host_time FOLDER/capi_host_time.cu
//
// The generated host file is included into this one, behind a hook: its calls to
// cudaGetDriverEntryPointByVersion reach `capi_hook::lookup`, which counts them and hands out, for
// cuTensorMapEncodeTiled, a function that counts its calls before calling the driver's. The counts
// are what the generated code really asked of the driver, without a line of it changed.
//
//   capi_host_time time M N K ITERS BATCHES   JSON on stdout: microseconds per launch of each mode
//   capi_host_time choice ITERS BATCHES       JSON: microseconds per NAME_matmul_choice (no GPU needed)
//   capi_host_time check                      JSON: encodes and driver lookups after each step of a
//                                             sequence of launches (tests/gpu/test_capi_caches_gpu.py)
#include <cuda_runtime.h>
#include <cudaTypedefs.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace capi_hook {

std::atomic<long> encodes{0};  // calls of cuTensorMapEncodeTiled
std::atomic<long> lookups{0};  // calls of cudaGetDriverEntryPointByVersion, any symbol
PFN_cuTensorMapEncodeTiled_v12000 driver_encode = nullptr;

CUresult CUDAAPI counting_encode(CUtensorMap* map, CUtensorMapDataType type, cuuint32_t rank, void* address,
                                 const cuuint64_t* dims, const cuuint64_t* strides, const cuuint32_t* box,
                                 const cuuint32_t* element_strides, CUtensorMapInterleave interleave,
                                 CUtensorMapSwizzle swizzle, CUtensorMapL2promotion promotion,
                                 CUtensorMapFloatOOBfill fill) {
  encodes.fetch_add(1, std::memory_order_relaxed);
  return driver_encode(map, type, rank, address, dims, strides, box, element_strides, interleave, swizzle, promotion,
                       fill);
}

cudaError_t lookup(const char* symbol, void** fn, unsigned int version, unsigned long long flags,
                   cudaDriverEntryPointQueryResult* found) {
  lookups.fetch_add(1, std::memory_order_relaxed);
  const cudaError_t err = cudaGetDriverEntryPointByVersion(symbol, fn, version, flags, found);
  if (err == cudaSuccess && *fn != nullptr && strcmp(symbol, "cuTensorMapEncodeTiled") == 0) {
    driver_encode = reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(*fn);
    *fn = reinterpret_cast<void*>(&counting_encode);
  }
  return err;
}

}  // namespace capi_hook

#define cudaGetDriverEntryPointByVersion capi_hook::lookup
#include TMAGEN_SOURCE
#undef cudaGetDriverEntryPointByVersion

#define CAPI_CAT2(a, b) a##_##b
#define CAPI_CAT(a, b) CAPI_CAT2(a, b)
#define API(fn) CAPI_CAT(TMAGEN_API, fn)
#define CAPI_STR2(a) #a
#define CAPI_STR(a) CAPI_STR2(a)

namespace {

using clock_type = std::chrono::steady_clock;

void check_cuda(cudaError_t err, const char* what) {
  if (err != cudaSuccess) {
    fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(err));
    exit(1);
  }
}

void check_api(int status, const char* what) {
  if (status != 0) {
    fprintf(stderr, "%s: status %d: %s\n", what, status, API(last_error)());
    exit(1);
  }
}

// Microseconds per call of `call(i)`, i = 0 .. iters - 1: the time until the last call returns, over
// `iters`, best and median of `batches` batches. Nothing waits for the GPU inside a batch; the GPU
// drains between batches, so a batch never meets a full launch queue.
struct timing {
  double best_us, median_us;
};

template <typename Call>
timing per_call_us(Call call, int iters, int batches) {
  for (int i = 0; i < iters; ++i) call(i);  // warm: first-call work (context, attributes, caches)
  check_cuda(cudaDeviceSynchronize(), "warm-up");
  std::vector<double> us;
  for (int b = 0; b < batches; ++b) {
    const auto t0 = clock_type::now();
    for (int i = 0; i < iters; ++i) call(i);
    const auto t1 = clock_type::now();
    check_cuda(cudaDeviceSynchronize(), "a batch");
    us.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count() / iters);
  }
  std::sort(us.begin(), us.end());
  return {us.front(), us[us.size() / 2]};
}

template <typename Call>
timing host_only_us(Call call, int iters, int batches) {
  for (int i = 0; i < iters; ++i) call(i);
  std::vector<double> us;
  for (int b = 0; b < batches; ++b) {
    const auto t0 = clock_type::now();
    for (int i = 0; i < iters; ++i) call(i);
    const auto t1 = clock_type::now();
    us.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count() / iters);
  }
  std::sort(us.begin(), us.end());
  return {us.front(), us[us.size() / 2]};
}

__global__ void empty_kernel() {}

// The matmul kernels' parameters (three tensor maps, M, N, K, the epilogue and the split): the same
// bytes for the launch to copy, no work.
__global__ void empty_with_matmul_parameters(const __grid_constant__ CUtensorMap a, const __grid_constant__ CUtensorMap b,
                                             const __grid_constant__ CUtensorMap c, uint32_t m, uint32_t n, uint32_t k,
                                             const TMAGEN_API::matmul_epilogue epilogue,
                                             const TMAGEN_API::matmul_split split) {}

struct operands {
  void* a = nullptr;
  void* b = nullptr;
  void* c = nullptr;
};

operands allocate(uint64_t m, uint64_t n, uint64_t k) {
  operands o;  // 4 bytes an element: enough for every input and output type
  check_cuda(cudaMalloc(&o.a, m * k * 4), "cudaMalloc A");
  check_cuda(cudaMalloc(&o.b, n * k * 4), "cudaMalloc B");
  check_cuda(cudaMalloc(&o.c, m * n * 4), "cudaMalloc C");
  check_cuda(cudaMemset(o.a, 0, m * k * 4), "cudaMemset A");
  check_cuda(cudaMemset(o.b, 0, n * k * 4), "cudaMemset B");
  return o;
}

void print_timing(const char* key, timing t, const char* tail) {
  printf("    \"%s\": {\"best_us\": %.4f, \"median_us\": %.4f}%s\n", key, t.best_us, t.median_us, tail);
}

int time_launches(uint64_t m, uint64_t n, uint64_t k, int iters, int batches) {
  const operands sets[2] = {allocate(m, n, k), allocate(m, n, k)};
  float* scales = nullptr;
  check_cuda(cudaMalloc(&scales, 2 * sizeof(float)), "cudaMalloc scales");
  const float ones[2] = {1.0f, 1.0f};
  check_cuda(cudaMemcpy(scales, ones, sizeof(ones), cudaMemcpyHostToDevice), "scales");
  cudaStream_t stream = nullptr;
  check_cuda(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
  int bad = 0;

  const timing empty = per_call_us([&](int) { empty_kernel<<<1, 1, 0, stream>>>(); }, iters, batches);
  check_cuda(cudaGetLastError(), "empty_kernel");

  TMAGEN_API::matmul_epilogue epilogue = {};
  epilogue.alpha = 1.0f;
  epilogue.plain = 1;
  const TMAGEN_API::matmul_split split = {nullptr, nullptr, 1, 0};
  alignas(128) CUtensorMap maps[3];
  memset(maps, 0, sizeof(maps));
  const timing with_parameters = per_call_us([&](int) {
    empty_with_matmul_parameters<<<1, 1, 0, stream>>>(maps[0], maps[1], maps[2], 64, 64, 64, epilogue, split);
  }, iters, batches);
  check_cuda(cudaGetLastError(), "empty_with_matmul_parameters");

  // cuLaunchKernel itself (the driver's, through the runtime's entry point: no -lcuda), on the empty kernel
  PFN_cuLaunchKernel_v4000 launch_kernel = nullptr;
  cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
  check_cuda(cudaGetDriverEntryPointByVersion("cuLaunchKernel", reinterpret_cast<void**>(&launch_kernel), 12000,
                                              cudaEnableDefault, &found), "cuLaunchKernel entry point");
  cudaFunction_t function = nullptr;
  check_cuda(cudaGetFuncBySymbol(&function, reinterpret_cast<const void*>(&empty_kernel)), "cudaGetFuncBySymbol");
  const timing driver = per_call_us([&](int) {
    bad |= launch_kernel(reinterpret_cast<CUfunction>(function), 1, 1, 1, 1, 1, 1, 0, stream, nullptr, nullptr);
  }, iters, batches);

  // Counted from the steady state on: a first launch on set 0 fills the caches, so every repeat hits;
  // the alternating run starts from set 1 (primed below), so every one of its launches misses.
  bad |= API(matmul_launch)(sets[0].a, sets[0].b, sets[0].c, m, n, k, 0, 0, 0, stream);
  const long encodes0 = capi_hook::encodes.load(), lookups0 = capi_hook::lookups.load();
  const timing repeat = per_call_us([&](int) {
    bad |= API(matmul_launch)(sets[0].a, sets[0].b, sets[0].c, m, n, k, 0, 0, 0, stream);
  }, iters, batches);
  const long runs = static_cast<long>(iters) * (batches + 1);
  const double repeat_encodes = double(capi_hook::encodes.load() - encodes0) / runs;
  const double repeat_lookups = double(capi_hook::lookups.load() - lookups0) / runs;
  check_api(bad, "matmul_launch, repeated pointers");

  bad |= API(matmul_launch)(sets[1].a, sets[1].b, sets[1].c, m, n, k, 0, 0, 0, stream);
  const long encodes1 = capi_hook::encodes.load(), lookups1 = capi_hook::lookups.load();
  const timing alternate = per_call_us([&](int i) {
    const operands& o = sets[i & 1];
    bad |= API(matmul_launch)(o.a, o.b, o.c, m, n, k, 0, 0, 0, stream);
  }, iters, batches);
  const double alternate_encodes = double(capi_hook::encodes.load() - encodes1) / runs;
  const double alternate_lookups = double(capi_hook::lookups.load() - lookups1) / runs;
  check_api(bad, "matmul_launch, alternating pointers");

  const timing scaled = per_call_us([&](int) {
    bad |= API(matmul_launch_scaled)(sets[0].a, sets[0].b, sets[0].c, m, n, k, 0, 0, 0, 1.0f, 0.0f, nullptr, 0,
                                     nullptr, 0, scales, 0, 0, scales + 1, 0, 0, stream);
  }, iters, batches);
  check_api(bad, "matmul_launch_scaled, per-tensor scales");

  // One encode through the C API into a caller's map (its checks, the driver lookup, the driver's encode).
  alignas(128) static CAPI_CAT(TMAGEN_API, tensor_map) map;
  const uint64_t a_shape[2] = {m, k};
  const int64_t a_strides[2] = {static_cast<int64_t>(k), 1};
  const timing encode = host_only_us([&](int) { bad |= API(encode_a)(&map, sets[0].a, a_shape, a_strides); },
                                     iters, batches);
  check_api(bad, "encode_a");
  // Its two driver calls alone: the entry point's lookup, and the driver's encode of a 2-D byte map.
  const timing lookup = host_only_us([&](int) {
    void* fn = nullptr;
    cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSymbolNotFound;
    bad |= cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault, &q);
  }, iters, batches);
  check_api(bad, "cudaGetDriverEntryPointByVersion");
  const cuuint64_t dims[2] = {k, m}, byte_strides[1] = {k};
  const cuuint32_t box[2] = {64, 64}, element_strides[2] = {1, 1};
  alignas(128) static CUtensorMap raw;
  const timing driver_encode = host_only_us([&](int) {
    bad |= capi_hook::driver_encode(&raw, CU_TENSOR_MAP_DATA_TYPE_UINT8, 2, sets[0].a, dims, byte_strides, box,
                                    element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                                    CU_TENSOR_MAP_L2_PROMOTION_NONE, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  }, iters, batches);
  check_api(bad, "cuTensorMapEncodeTiled");

  check_cuda(cudaStreamSynchronize(stream), "the launches");
  int device = 0, sms = 0;
  cudaDeviceProp prop = {};
  check_cuda(cudaGetDevice(&device), "cudaGetDevice");
  check_cuda(cudaGetDeviceProperties(&prop, device), "cudaGetDeviceProperties");
  sms = prop.multiProcessorCount;
  int driver_version = 0, runtime_version = 0;
  cudaDriverGetVersion(&driver_version);
  cudaRuntimeGetVersion(&runtime_version);
  uint32_t kernel = 0, splits = 0, split_from = 0;
  API(matmul_choice)(m, n, k, static_cast<uint32_t>(sms), &kernel, &splits, &split_from);
  printf("{\n  \"api\": \"%s\",\n  \"gpu\": \"%s\",\n  \"sms\": %d,\n  \"driver_version\": %d,\n  \"runtime_version\": %d,\n",
         CAPI_STR(TMAGEN_API), prop.name, sms, driver_version, runtime_version);
  printf("  \"shape\": [%llu, %llu, %llu],\n  \"iters\": %d,\n  \"batches\": %d,\n", (unsigned long long)m,
         (unsigned long long)n, (unsigned long long)k, iters, batches);
  printf("  \"choice\": {\"kernel\": %u, \"splits\": %u, \"split_from\": %u},\n", kernel, splits, split_from);
  printf("  \"encodes_per_launch\": {\"repeat\": %.4f, \"alternate\": %.4f},\n", repeat_encodes, alternate_encodes);
  printf("  \"lookups_per_launch\": {\"repeat\": %.4f, \"alternate\": %.4f},\n", repeat_lookups, alternate_lookups);
  printf("  \"us\": {\n");
  print_timing("empty_kernel", empty, ",");
  print_timing("empty_with_matmul_parameters", with_parameters, ",");
  print_timing("cuLaunchKernel_empty", driver, ",");
  print_timing("matmul_launch_repeat", repeat, ",");
  print_timing("matmul_launch_alternate", alternate, ",");
  print_timing("matmul_launch_scaled_repeat", scaled, ",");
  print_timing("encode_a", encode, ",");
  print_timing("driver_lookup", lookup, ",");
  print_timing("driver_encode", driver_encode, "");
  printf("  }\n}\n");
  return 0;
}

// NAME_matmul_choice alone: the dispatch's arithmetic, on the host, for shapes from tiny to large K.
int time_choice(int iters, int batches) {
  const uint64_t shapes[][3] = {{64, 64, 64},       {1, 4096, 4096},     {128, 4096, 4096},    {4096, 4096, 4096},
                                {8192, 8192, 8192}, {4096, 14336, 4096}, {16384, 4096, 14336}};
  printf("{\n  \"api\": \"%s\",\n  \"sms\": 132,\n  \"choice_us\": [\n", CAPI_STR(TMAGEN_API));
  const size_t count = sizeof(shapes) / sizeof(shapes[0]);
  for (size_t s = 0; s < count; ++s) {
    uint32_t kernel = 0, splits = 0, split_from = 0;
    const uint64_t* shape = shapes[s];
    volatile uint64_t opaque[3] = {shape[0], shape[1], shape[2]};  // read each call: nothing hoisted from the loop
    volatile uint32_t sink = 0;
    const timing t = host_only_us([&](int) {
      API(matmul_choice)(opaque[0], opaque[1], opaque[2], 132, &kernel, &splits, &split_from);
      sink = sink + kernel + splits;
    }, iters, batches);
    printf("    {\"shape\": [%llu, %llu, %llu], \"kernel\": %u, \"splits\": %u, \"best_us\": %.4f, \"median_us\": %.4f}%s\n",
           (unsigned long long)shape[0], (unsigned long long)shape[1], (unsigned long long)shape[2], kernel, splits,
           t.best_us, t.median_us, s + 1 < count ? "," : "");
  }
  printf("  ]\n}\n");
  return 0;
}

// Encodes and driver lookups after each step of a sequence of launches on 64 x 64 x 64 (two sets of
// pointers, then changes of one operand, of K, of ldc, and another thread). The expectations are the
// test's (tests/gpu/test_capi_caches_gpu.py), not this file's.
int check_sequence() {
  const uint64_t m = 64, n = 64, k = 64;
  const operands sets[2] = {allocate(m, n, k), allocate(m, n, k)};
  float* scales = nullptr;
  check_cuda(cudaMalloc(&scales, 2 * sizeof(float)), "cudaMalloc scales");
  const float ones[2] = {1.0f, 1.0f};
  check_cuda(cudaMemcpy(scales, ones, sizeof(ones), cudaMemcpyHostToDevice), "scales");
  std::vector<std::string> rows;
  auto step = [&](const char* name, auto launch) {
    const long e0 = capi_hook::encodes.load(), l0 = capi_hook::lookups.load();
    const int status = launch();
    const long e1 = capi_hook::encodes.load(), l1 = capi_hook::lookups.load();
    char row[256];
    snprintf(row, sizeof(row), "    {\"step\": \"%s\", \"status\": %d, \"encodes\": %ld, \"lookups\": %ld}", name, status,
             e1 - e0, l1 - l0);
    rows.push_back(row);
  };
  const operands& s0 = sets[0];
  const operands& s1 = sets[1];
  step("first", [&] { return API(matmul_launch)(s0.a, s0.b, s0.c, m, n, k, 0, 0, 0, nullptr); });
  step("repeat", [&] { return API(matmul_launch)(s0.a, s0.b, s0.c, m, n, k, 0, 0, 0, nullptr); });
  step("repeat_scaled", [&] {
    return API(matmul_launch_scaled)(s0.a, s0.b, s0.c, m, n, k, 0, 0, 0, 1.0f, 0.0f, nullptr, 0, nullptr, 0, scales, 0,
                                     0, scales + 1, 0, 0, nullptr);
  });
  step("other_pointers", [&] { return API(matmul_launch)(s1.a, s1.b, s1.c, m, n, k, 0, 0, 0, nullptr); });
  step("first_pointers_again", [&] { return API(matmul_launch)(s0.a, s0.b, s0.c, m, n, k, 0, 0, 0, nullptr); });
  step("new_a", [&] { return API(matmul_launch)(s1.a, s0.b, s0.c, m, n, k, 0, 0, 0, nullptr); });
  step("new_k", [&] { return API(matmul_launch)(s1.a, s0.b, s0.c, m, n, k / 2, 0, 0, 0, nullptr); });
  step("new_ldc", [&] { return API(matmul_launch)(s1.a, s0.b, s0.c, m, n, k / 2, 0, 0, n + 8, nullptr); });
  step("repeat_after_changes", [&] { return API(matmul_launch)(s1.a, s0.b, s0.c, m, n, k / 2, 0, 0, n + 8, nullptr); });
  std::thread other([&] {
    step("other_thread_first", [&] { return API(matmul_launch)(s1.a, s0.b, s0.c, m, n, k / 2, 0, 0, n + 8, nullptr); });
    step("other_thread_repeat", [&] { return API(matmul_launch)(s1.a, s0.b, s0.c, m, n, k / 2, 0, 0, n + 8, nullptr); });
  });
  other.join();
  step("this_thread_after_other", [&] { return API(matmul_launch)(s1.a, s0.b, s0.c, m, n, k / 2, 0, 0, n + 8, nullptr); });
  const cudaError_t synced = cudaDeviceSynchronize();
  printf("{\n  \"api\": \"%s\",\n  \"synchronize\": \"%s\",\n  \"steps\": [\n", CAPI_STR(TMAGEN_API),
         cudaGetErrorString(synced));
  for (size_t i = 0; i < rows.size(); ++i) printf("%s%s\n", rows[i].c_str(), i + 1 < rows.size() ? "," : "");
  printf("  ]\n}\n");
  return synced == cudaSuccess ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "time" && argc == 7) {
    return time_launches(strtoull(argv[2], nullptr, 10), strtoull(argv[3], nullptr, 10), strtoull(argv[4], nullptr, 10),
                         atoi(argv[5]), atoi(argv[6]));
  }
  if (mode == "choice" && argc == 4) return time_choice(atoi(argv[2]), atoi(argv[3]));
  if (mode == "check" && argc == 2) return check_sequence();
  fprintf(stderr, "usage: %s time M N K ITERS BATCHES | choice ITERS BATCHES | check\n", argv[0]);
  return 2;
}
