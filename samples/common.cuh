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

/// A device copy of `host`, with 16 bytes of slack after it (kernels may read whole 16-byte
/// chunks at the end). The caller frees it with cudaFree.
template <class T>
T* device_copy(const std::vector<T>& host) {
  T* p = nullptr;
  SAMPLE_CHECK(cudaMalloc(&p, host.size() * sizeof(T) + 16));
  SAMPLE_CHECK(cudaMemcpy(p, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice));
  return p;
}

inline std::vector<float> random_floats(std::size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

}  // namespace sample
