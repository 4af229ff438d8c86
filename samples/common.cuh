// Shared by the samples: device check, checked CUDA calls, random input.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include <cuda_runtime.h>

/// Exits with a message naming the failed call.
#define SAMPLE_CHECK(call)                                                                       \
  do {                                                                                           \
    const cudaError_t status_ = (call);                                                          \
    if (status_ != cudaSuccess) {                                                                \
      std::fprintf(stderr, "%s failed: %s\n", #call, cudaGetErrorName(status_));                 \
      std::exit(1);                                                                              \
    }                                                                                            \
  } while (0)

namespace sample {

/// Exit code ctest maps to SKIP.
constexpr int skipped = 77;

/// True when a CUDA device is present; otherwise says so.
inline bool have_device() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    std::printf("SKIPPED: no CUDA device\n");
    return false;
  }
  return true;
}

inline std::vector<float> random_floats(std::size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

}  // namespace sample
