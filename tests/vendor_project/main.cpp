// Calls the generated C API from plain C++ (it includes no CUDA header). Exits 0 when the
// run-time checks refuse a NULL map and a misaligned pointer with their statuses and
// messages, and a valid call either encodes (a GPU is present) or reports no driver.
#include "copy_f32_3d.h"

#include <cstdio>
#include <cstring>

int main() {
  const uint64_t shape[3] = {6, 1000, 1000};
  copy_f32_3d_tensor_map map;
  int failures = 0;

  copy_f32_3d_status s = copy_f32_3d_encode_src(nullptr, reinterpret_cast<void*>(0x1000), shape, nullptr);
  std::printf("NULL map: %d %s\n", s, copy_f32_3d_last_error());
  failures += s != copy_f32_3d_bad_argument;

  s = copy_f32_3d_encode_src(&map, reinterpret_cast<void*>(0x1008), shape, nullptr);
  std::printf("misaligned: %d %s\n", s, copy_f32_3d_last_error());
  failures += s != copy_f32_3d_misaligned || std::strstr(copy_f32_3d_last_error(), "16-byte") == nullptr;

  s = copy_f32_3d_encode_src(&map, reinterpret_cast<void*>(0x1000), shape, nullptr);
  std::printf("valid: %d %s\n", s, copy_f32_3d_last_error());
  failures += s != copy_f32_3d_ok && s != copy_f32_3d_no_driver;
  return failures;
}
